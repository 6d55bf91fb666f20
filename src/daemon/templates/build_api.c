/* Custom templates: POST /v1/templates (a build, streamed as SSE when asked), GET
 * /v1/templates/{name}/build and .../build-events (the last build and its events, live),
 * DELETE /v1/templates/{name}. docs/templates.md. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "build.h"

/* One HTTP request following a build as server-sent events. */
struct follower {
    struct http_req *req;
    struct template_build *tb;
};

static void follow_event(json_t *ev, void *data)
{
    struct follower *f = data;
    /* A build's log is capped (TEMPLATE_BUILD_LOG_MAX) well below what the SSE queue holds. */
    (void)http_sse_event(f->req, ev);
}

static void follow_end(void *data)
{
    struct follower *f = data;
    http_sse_end(f->req);
    free(f);
}

static void follow_abort(struct http_req *req, void *data)
{
    struct follower *f = data;
    template_build_unwatch(f->tb, f);
    free(f);
}

static const struct template_watch_ops follow_ops = {.on_event = follow_event,
                                                     .on_end = follow_end};

static void follow(struct http_req *req, struct template_build *tb)
{
    struct follower *f = sbx_xcalloc(1, sizeof(*f));
    f->req = req;
    f->tb = tb;
    http_req_suspend(req, follow_abort, f);
    http_sse_begin(req, follow_abort, f);
    if (template_build_watch(tb, &follow_ops, f) < 0) {
        (void)http_sse_event(req, json_pack("{s:s,s:s,s:s}", "type", "error", "code",
                                            "too_many_watchers", "message",
                                            "this build has as many followers as it takes"));
        http_sse_end(req);
        free(f);
    }
}

static void api_templates_create(struct sbxd *d, struct http_req *req)
{
    json_t *body;
    struct sbx_err err = {0};
    if (http_req_json(req, &body, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    struct template_build *tb;
    bool cached;
    int r = template_build_start(d->builds, http_req_identity(req), body, &tb, &cached, &err);
    /* A build runs the recipe's commands as root in a throw-away root filesystem. */
    json_t *built = r == 0 ? template_build_json(tb) : NULL;
    json_t *name = json_object_get(built ? built : body, "name");
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "template.build", NULL,
                 r < 0 ? err.code : cached ? "cached" : "started",
                 json_pack("{s:O?}", "name", json_is_string(name) ? name : NULL));
    json_decref(built);
    json_decref(body);
    if (r < 0) {
        http_respond_error(req, &err);
        return;
    }
    if (http_req_wants_sse(req)) {
        follow(req, tb);
        return;
    }
    json_t *j = template_build_json(tb);
    json_object_set_new(j, "cached", json_boolean(cached));
    if (!cached) {
        _cleanup_free_ char *loc =
            sbx_xasprintf("/v1/templates/%s/build", json_string_value(json_object_get(j, "name")));
        http_req_add_header(req, "Location", loc);
    }
    http_respond_json(req, cached ? 200 : 202, j);
}

static struct template_build *build_of(struct sbxd *d, struct http_req *req)
{
    const char *name = http_req_param(req, 0);
    struct template_build *tb = template_build_find(d->builds, name, http_req_identity(req)->user);
    if (!tb) {
        struct sbx_err err = {0};
        sbx_err_set(&err, ENOENT, "template_build_not_found",
                    "no build of a template named %.64s is known here (builds are forgotten when "
                    "sbxd restarts)",
                    name);
        http_respond_error(req, &err);
    }
    return tb;
}

static void api_template_build(struct sbxd *d, struct http_req *req)
{
    struct template_build *tb = build_of(d, req);
    if (tb)
        http_respond_json(req, 200, template_build_json(tb));
}

static void api_template_build_events(struct sbxd *d, struct http_req *req)
{
    struct template_build *tb = build_of(d, req);
    if (tb)
        follow(req, tb);
}

static void api_templates_delete(struct sbxd *d, struct http_req *req)
{
    const char *name = http_req_param(req, 0);
    struct sbx_err err = {0};
    int r = template_delete(d->builds, http_req_identity(req), name, &err);
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "template.delete",
                 NULL, r < 0 ? err.code : "ok", json_pack("{s:s}", "name", name));
    if (r < 0) {
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200,
                      json_pack("{s:s,s:s,s:b}", "name", name, "object", "template", "deleted", 1));
}

static const struct route routes[] = {
    {"POST", "/v1/templates", AUTH_SANDBOX, api_templates_create, 0},
    {"GET", "/v1/templates/{}/build", AUTH_SANDBOX, api_template_build, 0},
    {"GET", "/v1/templates/{}/build-events", AUTH_SANDBOX, api_template_build_events, 0},
    {"DELETE", "/v1/templates/{}", AUTH_SANDBOX, api_templates_delete, 0},
};

const struct route_table template_build_routes = ROUTE_TABLE(routes);
