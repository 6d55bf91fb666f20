/* POST /v1/sandboxes/{id}/preview {port, ttl_seconds?} -> {object, port, url, expires_at}:
 * a signed link to a port inside the sandbox, served by the preview listener
 * (docs/preview.md). */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../http/server.h"
#include "../routes.h"
#include "../sbxd.h"
#include "preview.h"

static void api_preview_create(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    json_t *body = NULL, *answer = NULL;
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0 ||
        http_req_json(req, &body, &err) < 0 ||
        preview_grant(d->previews, d->store, http_req_identity(req), http_req_id(req), sb, body,
                      &answer, &err) < 0) {
        json_decref(body);
        http_respond_error(req, &err);
        return;
    }
    json_decref(body);
    http_respond_json(req, 200, answer);
}
static const struct route routes[] = {
    {"POST", "/v1/sandboxes/{}/preview", AUTH_SANDBOX, api_preview_create, 0},
};

const struct route_table preview_routes = ROUTE_TABLE(routes);
