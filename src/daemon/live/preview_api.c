/* POST /v1/sandboxes/{id}/preview {port, ttl_seconds?, wait_seconds?} -> {object, port,
 * url, expires_at}: a signed link to a port inside the sandbox, served by the preview
 * listener (docs/preview.md). With wait_seconds the answer waits until the port accepts
 * connections, or is a 504 preview_port_timeout at the end. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../routes.h"
#include "../sbxd.h"
#include "portwait.h"
#include "preview.h"

static int parse_body(json_t *body, long long *port, long long *ttl, long long *wait,
                      struct sbx_err *err)
{
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        if (strcmp(k, "port") && strcmp(k, "ttl_seconds") && strcmp(k, "wait_seconds"))
            return sbx_err_set(err, EINVAL, "invalid_request", "unknown field \"%.64s\"", k);
    }
    json_t *p = json_object_get(body, "port");
    if (!json_is_integer(p))
        return sbx_err_set(err, EINVAL, "invalid_port", "port must be an integer %d..%d",
                           PREVIEW_PORT_MIN, PREVIEW_PORT_MAX);
    *port = json_integer_value(p);
    json_t *t = json_object_get(body, "ttl_seconds");
    if (t && !json_is_integer(t))
        return sbx_err_set(err, EINVAL, "invalid_ttl", "ttl_seconds must be an integer %d..%d",
                           PREVIEW_TTL_MIN, PREVIEW_TTL_MAX);
    *ttl = t ? json_integer_value(t) : PREVIEW_TTL_DEFAULT;
    json_t *w = json_object_get(body, "wait_seconds");
    if (w && (!json_is_integer(w) || json_integer_value(w) < 0 ||
              json_integer_value(w) > PORTWAIT_MAX_SECONDS))
        return sbx_err_set(err, EINVAL, "invalid_request", "wait_seconds must be an integer 0..%d",
                           PORTWAIT_MAX_SECONDS);
    *wait = w ? json_integer_value(w) : 0;
    return 0;
}

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

/* A v1 sandbox has no machine between commands, so nothing could stay listening. */
static int v2_only(const struct sandbox *sb, struct sbx_err *err)
{
    if (strcmp(sb->rec.backend, "v2"))
        return sbx_err_set(err, ENOTSUP, "not_supported_on_v1",
                           "preview URLs need a v2 sandbox; %s runs on v1", sb->rec.id);
    return 0;
}

static void api_preview_create(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    json_t *body = NULL;
    long long port = 0, ttl = 0, wait = 0, expires_at = 0;
    char url[PREVIEW_URL_MAX];
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0 ||
        v2_only(sb, &err) < 0 || http_req_json(req, &body, &err) < 0 ||
        parse_body(body, &port, &ttl, &wait, &err) < 0 ||
        preview_link(d->previews, sb, port, ttl, url, &expires_at, &err) < 0) {
        json_decref(body);
        http_respond_error(req, &err);
        return;
    }
    json_decref(body);
    /* The audit entry names the port and lifetime, never the link: it is a credential. */
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "sandbox.preview",
                 sb->rec.id, "ok",
                 json_pack("{s:I,s:I,s:I}", "port", (json_int_t)port, "ttl_seconds",
                           (json_int_t)ttl, "expires_at", (json_int_t)expires_at));
    json_t *answer =
        json_pack("{s:s,s:s,s:I,s:s,s:I}", "object", "preview", "sandbox_id", sb->rec.id, "port",
                  (json_int_t)port, "url", url, "expires_at", (json_int_t)expires_at);
    if (!wait) {
        http_respond_json(req, 200, answer);
        return;
    }
    struct wait_req *w = sbx_xcalloc(1, sizeof(*w));
    w->req = req;
    w->answer = answer;
    http_req_suspend(req, wait_abort, w);
    w->pw = portwait_start(d->mgr, http_req_identity(req), sb->rec.id, (unsigned)port, wait * 1000,
                           on_port, w);
}

static const struct route routes[] = {
    {"POST", "/v1/sandboxes/{}/preview", AUTH_SANDBOX, api_preview_create, 0},
};

const struct route_table preview_routes = ROUTE_TABLE(routes);
