/* Import circle with e2b_process.c (allowed inside a folder, docs/architecture.md#layering):
 * that file hands PTY Starts and Connects here, and this one uses its end and keepalive
 * events; both are one service, envd's process.Process. */
/* envd's PTYs (a process.Start with "pty", Connect to its pid, SendInput's "pty" bytes,
 * Update's size) on the agent's PTY records (src/agent/pty.c, docs/terminals.md): the
 * Start is a pty_open of kind "exec" (Connect-Timeout-Ms its lifetime, as for every
 * Start), whose output a pty_attach stream carries as envd's `data.pty` events; the agent
 * reads the terminal all the time into its ring, so nothing printed between the open and
 * the attach is lost, and a client that leaves only detaches. A Connect attaches for live
 * output. One client is attached at a time: a second Connect takes the output over. */
#include <errno.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../sandbox/agentcall.h"
#include "../sandbox/lifecycle.h"
#include "../sandbox/manager.h"
#include "../sbxd.h"
#include "e2b_connect.h"
#include "envd.h"

/* The agent's bounds of a terminal's size (PTY_DIM_MAX in src/agent/pty.h). */
#define E2B_PTY_DIM_MAX 1000

int e2b_pty_size(json_t *size, json_t *op, struct sbx_err *err)
{
    static const char *const dims[] = {"cols", "rows"};
    if (!size || json_is_null(size))
        return 0;
    if (!json_is_object(size))
        return sbx_err_set(err, EINVAL, "invalid_request", "pty.size must be {cols, rows}");
    for (size_t i = 0; i < SBX_ARRAY_SIZE(dims); i++) {
        json_t *v = json_object_get(size, dims[i]);
        /* proto3's JSON leaves a zero out: the agent's default (or the current size). */
        if (!v || json_is_null(v) || (json_is_integer(v) && json_integer_value(v) == 0))
            continue;
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > E2B_PTY_DIM_MAX)
            return sbx_err_set(err, EINVAL, "invalid_pty_size",
                               "pty.size.%s must be an integer in 1..%d", dims[i], E2B_PTY_DIM_MAX);
        json_object_set(op, dims[i], v);
    }
    return 0;
}

struct pty_stream {
    struct sbxd *d;
    struct sandbox *sb;
    struct http_req *req;
    struct rpc_stream *out; /* once begun */
    struct agentcall *call;
    char ref[24]; /* the agent's pty_N, or the pid a Connect named */
    bool tail;    /* Connect: live output only */
    /* Start: the audit entry, written when the agent answers the open. */
    struct auth_identity who;
    char request_id[64];
    json_t *details;
};

static void pty_stream_free(struct pty_stream *s)
{
    json_decref(s->details);
    free(s);
}

/* The stream's error before any event: it travels in the end-stream message. */
static void fail(struct pty_stream *s, const struct sbx_err *err)
{
    if (!s->out)
        s->out = rpc_stream_begin(s->req, s->d->loop, false, e2b_keepalive_msg(), NULL, NULL);
    rpc_stream_end(s->out, rpc_code(err), err->msg[0] ? err->msg : err->code);
    pty_stream_free(s);
}

/* The client left: the PTY runs on, detached (envd keeps its processes too). */
static void on_gone(void *data)
{
    struct pty_stream *s = data;
    agentcall_cancel(s->call, true);
    pty_stream_free(s);
}

static void on_req_gone(struct http_req *req, void *data)
{
    struct pty_stream *s = data;
    agentcall_cancel(s->call, false);
    if (s->details) /* the open was sent: it may have happened */
        audit_record(s->d->store, &s->who, NULL, s->request_id, "process.start", s->sb->rec.id,
                     "client_gone", TAKE_PTR(s->details));
    pty_stream_free(s);
}

static void on_data(unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct pty_stream *s = data;
    if (ch != PROTO_CH_STDOUT)
        return;
    _cleanup_free_ char *b64 = sbx_base64_encode(buf, len);
    rpc_stream_send(s->out, json_pack("{s:{s:{s:s}}}", "event", "data", "pty", b64));
}

static void attach_done(json_t *result, const struct sbx_err *err, void *data)
{
    struct pty_stream *s = data;
    s->call = NULL;
    if (err) {
        rpc_stream_end(s->out, rpc_code(err), err->msg);
    } else if (json_is_true(json_object_get(result, "detached"))) {
        rpc_stream_end(s->out, "aborted", "another client connected to this PTY");
    } else {
        rpc_stream_send(s->out, e2b_end_event(result));
        rpc_stream_end(s->out, NULL, NULL);
    }
    pty_stream_free(s);
}

static const struct agentcall_ops attach_ops = {.on_data = on_data, .on_done = attach_done};

/* The PTY exists: the start event, then its output until its command ends. */
static void follow(struct pty_stream *s, json_t *pid)
{
    struct sbx_err err = {0};
    s->out = rpc_stream_begin(s->req, s->d->loop, false, e2b_keepalive_msg(), on_gone, s);
    rpc_stream_send(s->out, json_pack("{s:{s:{s:O}}}", "event", "start", "pid", pid));
    json_t *op = json_pack("{s:s,s:s,s:b}", "op", "pty_attach", "id", s->ref, "tail", s->tail);
    if (agentcall_start(s->sb, op, &attach_ops, s, &s->call, &err) < 0)
        fail(s, &err);
}

static void opened(json_t *result, const struct sbx_err *err, void *data)
{
    struct pty_stream *s = data;
    s->call = NULL;
    if (s->details) {
        json_t *d = TAKE_PTR(s->details);
        if (!err)
            json_object_set(d, "pid", json_object_get(result, "pid"));
        audit_record(s->d->store, &s->who, NULL, s->request_id, "process.start", s->sb->rec.id,
                     err ? err->code : "started", d);
    }
    if (err) {
        fail(s, err);
        return;
    }
    snprintf(s->ref, sizeof(s->ref), "%s", json_string_value(json_object_get(result, "id")) ?: "");
    follow(s, json_object_get(result, "pid"));
}

static const struct agentcall_ops open_ops = {.on_done = opened};

static struct pty_stream *pty_stream_new(struct sbxd *d, struct sandbox *sb, struct http_req *req)
{
    struct pty_stream *s = sbx_xcalloc(1, sizeof(*s));
    s->d = d;
    s->sb = sb;
    s->req = req;
    return s;
}

/* A machine made for each op (v1) keeps no PTY past the op that opened it. */
static int check_keeps(struct sandbox *sb, struct sbx_err *err)
{
    if (!sandbox_keeps_ptys(sb))
        return sbx_err_set(err, ENOTSUP, "unimplemented",
                           "PTYs need a sandbox whose machine keeps running (a v2 sandbox)");
    return 0;
}

void envd_pty_start(const struct envd_ctx *c, json_t *op)
{
    struct sbx_err err = {0};
    struct pty_stream *s = pty_stream_new(c->d, c->sb, c->req);
    if (check_keeps(c->sb, &err) < 0) {
        json_decref(op);
        fail(s, &err);
        return;
    }
    s->who = c->who;
    snprintf(s->request_id, sizeof(s->request_id), "%s", http_req_id(c->req) ?: "");
    _cleanup_free_ char *command = e2b_argv_text(json_object_get(op, "argv"));
    s->details = audit_command_details(json_pack("{s:s,s:{s:O,s:O}}", "via", "e2b", "pty", "cols",
                                                 json_object_get(op, "cols"), "rows",
                                                 json_object_get(op, "rows")),
                                       command, strlen(command));
    if (agentcall_start(c->sb, op, &open_ops, s, &s->call, &err) < 0) {
        audit_record(c->d->store, &c->who, NULL, s->request_id, "process.start", c->sb->rec.id,
                     err.code, TAKE_PTR(s->details));
        fail(s, &err);
        return;
    }
    http_req_suspend(c->req, on_req_gone, s);
}

/* ---- Connect: look the PTY up (so a missing one is a plain not_found), then attach ---- */

static void found(json_t *result, const struct sbx_err *err, void *data)
{
    struct pty_stream *s = data;
    s->call = NULL;
    if (err) {
        /* Neither a background process nor a PTY has that pid. */
        struct sbx_err e = *err;
        if (!strcmp(e.code, "pty_not_found"))
            sbx_err_set(&e, ENOENT, "process_not_found", "process with pid %s not found", s->ref);
        fail(s, &e);
        return;
    }
    json_t *pid = json_integer(strtoll(s->ref, NULL, 10));
    follow(s, pid);
    json_decref(pid);
}

static const struct agentcall_ops find_ops = {.on_done = found};

void envd_pty_connect(struct sbxd *d, struct sandbox *sb, struct http_req *req, const char *pid)
{
    struct sbx_err err = {0};
    struct pty_stream *s = pty_stream_new(d, sb, req);
    s->tail = true;
    snprintf(s->ref, sizeof(s->ref), "%s", pid);
    /* A resize without a size changes nothing and answers whether the PTY exists. */
    if (agentcall_start(sb, json_pack("{s:s,s:s}", "op", "pty_resize", "id", pid), &find_ops, s,
                        &s->call, &err) < 0) {
        fail(s, &err);
        return;
    }
    http_req_suspend(req, on_req_gone, s);
}
