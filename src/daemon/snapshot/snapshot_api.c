/* POST /v1/sandboxes/{id}/pause, /resume and /fork: memory snapshots of v2 sandboxes; and
 * POST /v1/sandboxes/{id}/snapshot: a v1 sandbox's workspace (docs/snapshots.md). The
 * first three suspend the request until the runtime has done its part; the operation goes
 * on if the client leaves, and is audited either way. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../routes.h"
#include "../sbxd.h"
#include "snapshot.h"

struct snap_req {
    struct sbxd *d;
    struct http_req *req; /* NULL once the client went away */
    struct sandbox *sb;   /* resume: the sandbox waited on */
    struct auth_identity who;
    char request_id[HTTP_REQUEST_ID_LEN + 1];
    long long t0;
};

static struct snap_req *snap_req_new(struct sbxd *d, struct http_req *req)
{
    struct snap_req *x = sbx_xcalloc(1, sizeof(*x));
    x->d = d;
    x->req = req;
    x->who = *http_req_identity(req);
    snprintf(x->request_id, sizeof(x->request_id), "%s", http_req_id(req));
    x->t0 = sbx_now_ms();
    return x;
}

static void on_gone(struct http_req *req, void *data)
{
    struct snap_req *x = data;
    x->req = NULL;
}

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

static void on_paused(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct snap_req *x = data;
    json_t *details = json_pack("{s:I}", "ms", (json_int_t)(sbx_now_ms() - x->t0));
    if (!err)
        json_object_set_new(details, "snapshot_bytes", json_integer(sandbox_snapshot_bytes(sb)));
    audit_record(x->d->store, &x->who, NULL, x->request_id, "sandbox.pause", sb->rec.id,
                 err ? err->code : "ok", details);
    if (x->req) {
        if (err) {
            http_respond_error(x->req, err);
        } else {
            json_t *j = sandbox_to_json(sb);
            json_object_set_new(j, "pause_ms", json_integer(sbx_now_ms() - x->t0));
            http_respond_json(x->req, 200, j);
        }
    }
    free(x);
}

static void api_sandbox_pause(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    if (target(d, req, &sb, NULL) < 0)
        return;
    struct snap_req *x = snap_req_new(d, req);
    if (snapshot_pause(d->mgr, sb, on_paused, x, &err) < 0) {
        free(x);
        http_respond_error(req, &err);
        return;
    }
    http_req_suspend(req, on_gone, x);
}

static void on_resumed(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct snap_req *x = data;
    audit_record(x->d->store, &x->who, NULL, x->request_id, "sandbox.resume", sb->rec.id,
                 err ? err->code : "ok",
                 err ? NULL
                     : json_pack("{s:b,s:I}", "restored", sb->restored, "ready_ms",
                                 (json_int_t)sb->ready_ms));
    if (err) {
        http_respond_error(x->req, err);
    } else {
        json_t *j = sandbox_to_json(sb);
        json_object_set_new(j, "restored", json_boolean(sb->restored));
        json_object_set_new(j, "ready_ms", json_integer(sb->ready_ms));
        http_respond_json(x->req, 200, j);
    }
    free(x);
}

static void on_resume_abort(struct http_req *req, void *data)
{
    struct snap_req *x = data;
    sandbox_drop_waiter(x->sb, x); /* the resume itself goes on */
    free(x);
}

static void api_sandbox_resume(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    if (target(d, req, &sb, NULL) < 0)
        return;
    struct snap_req *x = snap_req_new(d, req);
    x->sb = sb;
    /* Suspended first: the ready callback only ever runs on a later loop turn. */
    http_req_suspend(req, on_resume_abort, x);
    if (snapshot_resume(d->mgr, sb, on_resumed, x, &err) < 0) {
        free(x);
        http_respond_error(req, &err);
    }
}

static void on_forked(const char *parent_id, const struct fork_child *kids, int n,
                      const struct sbx_err *err, void *data)
{
    struct snap_req *x = data;
    json_t *list = json_array();
    json_t *ids = json_array();
    for (int i = 0; !err && i < n; i++) {
        const struct fork_child *k = &kids[i];
        json_t *c = json_pack("{s:s?,s:b,s:I}", "id", k->id[0] ? k->id : NULL, "restored",
                              k->restored, "ready_ms", (json_int_t)k->ready_ms);
        if (!k->ok)
            json_object_set_new(c, "error",
                                json_pack("{s:s,s:s}", "code", k->err.code, "message", k->err.msg));
        else
            json_array_append_new(ids, json_string(k->id));
        json_array_append_new(list, c);
    }
    audit_record(x->d->store, &x->who, NULL, x->request_id, "sandbox.fork", parent_id,
                 err ? err->code : "ok",
                 json_pack("{s:i,s:o,s:I}", "count", n, "ids", ids, "ms",
                           (json_int_t)(sbx_now_ms() - x->t0)));
    if (x->req) {
        if (err)
            http_respond_error(x->req, err);
        else
            http_respond_json(
                x->req, 200,
                json_pack("{s:s,s:s,s:O}", "object", "list", "parent_id", parent_id, "data", list));
    }
    json_decref(list);
    free(x);
}

static void api_sandbox_fork(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct sandbox *sb;
    json_t *body = NULL;
    if (target(d, req, &sb, &body) < 0)
        return;
    json_t *v = json_object_get(body, "count");
    long long count = 1;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > SANDBOX_FORK_MAX) {
            json_decref(body);
            http_respond_errorf(req, "invalid_count", "count must be an integer from 1 to %d",
                                SANDBOX_FORK_MAX);
            return;
        }
        count = json_integer_value(v);
    }
    long long ttl = 0;
    v = json_object_get(body, "ttl_seconds");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > SANDBOX_TTL_MAX) {
            json_decref(body);
            http_respond_errorf(req, "invalid_ttl", "ttl_seconds must be an integer from 1 to %d",
                                SANDBOX_TTL_MAX);
            return;
        }
        ttl = json_integer_value(v);
    }
    json_decref(body);
    struct snap_req *x = snap_req_new(d, req);
    if (snapshot_fork(d->mgr, sb, &x->who, (int)count, ttl, on_forked, x, &err) < 0) {
        free(x);
        http_respond_error(req, &err);
        return;
    }
    http_req_suspend(req, on_gone, x);
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
