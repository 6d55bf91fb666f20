/* POST /v1/sandboxes/{id}/preview {port, ttl_seconds?, wait_seconds?} -> {object, port,
 * url, expires_at}: a signed link to a port inside the sandbox, served by the preview
 * listener (docs/preview.md). With wait_seconds the answer waits until the port accepts
 * connections, or is a 504 preview_port_timeout at the end. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "portwait.h"
#include "preview.h"

struct wait_req {
    struct http_req *req;
    struct portwait *pw;
    json_t *answer;
};

static void wait_abort(struct http_req *req, void *data)
{
    struct wait_req *w = data;
    portwait_cancel(w->pw);
    json_decref(w->answer);
    free(w);
}

static void on_port(const struct sbx_err *err, void *data)
{
    struct wait_req *w = data;
    if (err) {
        http_respond_error(w->req, err);
        json_decref(w->answer);
    } else {
        http_respond_json(w->req, 200, w->answer);
    }
    free(w);
}

static void api_preview_create(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    json_t *body = NULL, *answer = NULL;
    long long wait = 0;
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0 ||
        http_req_json(req, &body, &err) < 0 ||
        preview_grant(d->previews, d->store, http_req_identity(req), http_req_id(req), sb, body,
                      &wait, &answer, &err) < 0) {
        json_decref(body);
        http_respond_error(req, &err);
        return;
    }
    json_decref(body);
    if (!wait) {
        http_respond_json(req, 200, answer);
        return;
    }
    struct wait_req *w = sbx_xcalloc(1, sizeof(*w));
    w->req = req;
    w->answer = answer;
    http_req_suspend(req, wait_abort, w);
    w->pw = portwait_start(d->mgr, http_req_identity(req), sb->rec.id,
                           (unsigned)json_integer_value(json_object_get(answer, "port")),
                           wait * 1000, on_port, w);
}

static const struct route routes[] = {
    {"POST", "/v1/sandboxes/{}/preview", AUTH_SANDBOX, api_preview_create, 0},
};

const struct route_table preview_routes = ROUTE_TABLE(routes);
