/* POST /v1/sandboxes/{id}/pause, /resume and /fork: memory snapshots of v2 sandboxes; and
 * POST /v1/sandboxes/{id}/snapshot: a v1 sandbox's workspace (docs/snapshots.md). The
 * first three suspend the request until the runtime has done its part; the operation goes
 * on if the client leaves, and is audited either way. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "snapcall.h"
#include "snapshot.h"

/* An optional JSON body: absent or empty is {}. */
static int optional_body(struct http_req *req, json_t **out, struct sbx_err *err)
{
    const char *len = http_req_header(req, "Content-Length");
    if (!len || !strcmp(len, "0")) {
        *out = json_object();
        return 0;
    }
    return http_req_json(req, out, err);
}

/* The sandbox named in the path and the optional body, which is parsed even where @body is
 * NULL (the caller takes no options) so that malformed JSON stays an error. On failure the
 * request has been answered. */
static int target(struct sbxd *d, struct http_req *req, struct sandbox **sb, json_t **body)
{
    struct sbx_err err = {0};
    json_t *b = NULL;
    int r = manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), sb, &err);
    if (r >= 0)
        r = optional_body(req, &b, &err);
    if (r < 0) {
        http_respond_error(req, &err);
        return r;
    }
    if (body)
        *body = b;
    else
        json_decref(b);
    return 0;
}

static void on_answer(json_t *answer, const struct sbx_err *err, void *data)
{
    if (err)
        http_respond_error(data, err);
    else
        http_respond_json(data, 200, json_incref(answer));
}

static void on_gone(struct http_req *req, void *data)
{
    snapcall_forget(data);
}

/* Run op on the path's sandbox with its optional body; the request waits for the answer. */
typedef int (*snap_op_fn)(const struct snap_origin *o, struct sandbox *sb, json_t *body,
                          snap_answer_fn cb, void *data, struct snap_call **out,
                          struct sbx_err *err);

static void run_op(struct sbxd *d, struct http_req *req, snap_op_fn op)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    json_t *body = NULL;
    struct snap_call *call = NULL;
    if (target(d, req, &sb, &body) < 0)
        return;
    struct snap_origin o = {.mgr = d->mgr,
                            .jobs = d->jobs,
                            .store = d->store,
                            .who = http_req_identity(req),
                            .request_id = http_req_id(req)};
    int r = op(&o, sb, body, on_answer, req, &call, &err);
    json_decref(body);
    if (r < 0)
        http_respond_error(req, &err);
    else
        http_req_suspend(req, on_gone, call);
}

static int pause_op(const struct snap_origin *o, struct sandbox *sb, json_t *body,
                    snap_answer_fn cb, void *data, struct snap_call **out, struct sbx_err *err)
{
    return snapcall_pause(o, sb, cb, data, out, err);
}

static int resume_op(const struct snap_origin *o, struct sandbox *sb, json_t *body,
                     snap_answer_fn cb, void *data, struct snap_call **out, struct sbx_err *err)
{
    return snapcall_resume(o, sb, cb, data, out, err);
}

static void api_sandbox_pause(struct sbxd *d, struct http_req *req)
{
    run_op(d, req, pause_op);
}

static void api_sandbox_resume(struct sbxd *d, struct http_req *req)
{
    run_op(d, req, resume_op);
}

static void api_sandbox_fork(struct sbxd *d, struct http_req *req)
{
    run_op(d, req, snapcall_fork);
}

static void api_sandbox_snapshot(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    json_t *snap = NULL;
    if (target(d, req, &sb, NULL) < 0)
        return;
    int r = snapshot_workspace(d->mgr, sb, &snap, &err);
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "sandbox.snapshot",
                 sb->rec.id, r < 0 ? err.code : "ok",
                 r < 0 ? NULL
                       : json_pack("{s:O,s:O}", "snapshot_id", json_object_get(snap, "id"),
                                   "size_bytes", json_object_get(snap, "size_bytes")));
    if (r < 0)
        http_respond_error(req, &err);
    else
        http_respond_json(req, 201, snap);
}

static const struct route routes[] = {
    {"POST", "/v1/sandboxes/{}/pause", AUTH_SANDBOX, api_sandbox_pause, 0},
    {"POST", "/v1/sandboxes/{}/resume", AUTH_SANDBOX, api_sandbox_resume, 0},
    {"POST", "/v1/sandboxes/{}/fork", AUTH_SANDBOX, api_sandbox_fork, 0},
    {"POST", "/v1/sandboxes/{}/snapshot", AUTH_SANDBOX, api_sandbox_snapshot, 0},
};

const struct route_table snapshot_routes = ROUTE_TABLE(routes);
