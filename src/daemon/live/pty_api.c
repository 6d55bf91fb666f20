/* exec_command and write_stdin as HTTP routes (docs/terminals.md):
 *   POST   /v1/sandboxes/{id}/pty                     {command, rows, cols, grace_seconds}
 *   POST   /v1/sandboxes/{id}/pty/{session_id}/input  {input, since, wait_seconds}
 *   GET    /v1/sandboxes/{id}/pty/{session_id}        ?since=&wait_seconds=
 *   DELETE /v1/sandboxes/{id}/pty/{session_id}
 * The PTY, its output ring and the waiting live in the agent (ops pty_*); these
 * routes translate. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../exec/exec.h"
#include "../http/server.h"
#include "../routes.h"
#include "../sandbox/agentcall.h"
#include "../sbxd.h"

#define PTY_GRACE_DEFAULT_MS 1000
#define PTY_WAIT_DEFAULT_MS 1000
/* Longest a request may hold the connection waiting for output. */
#define PTY_WAIT_MAX_S 60
#define PTY_INPUT_BODY_MAX (64u * 1024u)
#define PTY_SESSION_ID_MAX 32
/* One read answers at most the agent's ring (PTY_RING_MAX, 256 KiB); keep a margin. */
#define PTY_OUTPUT_MAX (512u * 1024u)

enum pty_call {
    CALL_OPEN,  /* pty_open, then the first read */
    CALL_READ,  /* a read: answer the output */
    CALL_PLAIN, /* answer the agent's object */
};

struct pty_req {
    struct http_req *req;
    struct sandbox *sb;
    struct agentcall *call;
    enum pty_call kind;
    long long wait_ms;
    struct exec_output out;
};

static void pty_req_free(struct pty_req *x)
{
    free(x->out.buf);
    free(x);
}

static void on_abort(struct http_req *req, void *data)
{
    struct pty_req *x = data;
    agentcall_cancel(x->call, false);
    pty_req_free(x);
}

static void on_data(unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct pty_req *x = data;
    if (ch != PROTO_CH_STDOUT)
        return;
    size_t keep = len;
    if (x->out.len + keep > PTY_OUTPUT_MAX)
        keep = PTY_OUTPUT_MAX - x->out.len;
    if (keep) {
        x->out.buf = sbx_xrealloc(x->out.buf, x->out.len + keep);
        memcpy(x->out.buf + x->out.len, buf, keep);
        x->out.len += keep;
    }
    x->out.dropped += len - keep;
}

static void start_call(struct pty_req *x, json_t *op);

static json_t *read_json(struct pty_req *x, json_t *res)
{
    bool alive = json_is_true(json_object_get(res, "alive"));
    json_t *o =
        json_pack("{s:s,s:O,s:O,s:b,s:O,s:O}", "object", "pty", "pid", json_object_get(res, "pid"),
                  "cursor", json_object_get(res, "cursor"), "alive", alive, "status",
                  json_object_get(res, "status"), "exit_code", json_object_get(res, "exit_code"));
    /* A command that is over has no session to come back to (it was released). */
    if (alive || x->kind != CALL_OPEN)
        json_object_set(o, "session_id", json_object_get(res, "id"));
    x->out.dropped += (unsigned long long)json_integer_value(json_object_get(res, "dropped"));
    exec_output_put(o, "stdout", &x->out);
    return o;
}

static void on_done(json_t *result, const struct sbx_err *err, void *data)
{
    struct pty_req *x = data;
    x->call = NULL;
    if (err) {
        http_respond_error(x->req, err);
        pty_req_free(x);
        return;
    }
    if (x->kind == CALL_OPEN && json_object_get(result, "cols")) {
        /* Started: wait up to the grace period for it to finish. */
        start_call(x, json_pack("{s:s,s:O,s:i,s:I,s:b,s:b}", "op", "pty_read", "id",
                                json_object_get(result, "id"), "since", 0, "wait_ms",
                                (json_int_t)x->wait_ms, "until_exit", 1, "release", 1));
        return;
    }
    json_t *o;
    if (x->kind == CALL_PLAIN) {
        o = json_pack("{s:s,s:O,s:b}", "object", "pty", "session_id", json_object_get(result, "id"),
                      "deleted", 1);
    } else {
        o = read_json(x, result);
    }
    http_respond_json(x->req, 200, o);
    pty_req_free(x);
}

static const struct agentcall_ops call_ops = {.on_data = on_data, .on_done = on_done};

static void start_call(struct pty_req *x, json_t *op)
{
    struct sbx_err err = {0};
    if (agentcall_start(x->sb, op, &call_ops, x, &x->call, &err) == 0)
        return;
    http_respond_error(x->req, &err);
    pty_req_free(x);
}

/* A duration in seconds (a JSON number, or a query string) within 0..max, as ms. */
static int seconds_parse(json_t *v, const char *name, long long def_ms, long long *out,
                         struct sbx_err *err)
{
    if (!v || json_is_null(v)) {
        *out = def_ms;
        return 0;
    }
    double s = json_number_value(v);
    if (!json_is_number(v) || !isfinite(s) || s < 0 || s > PTY_WAIT_MAX_S)
        return sbx_err_set(err, EINVAL, "invalid_wait", "%s must be a number of seconds in 0..%d",
                           name, PTY_WAIT_MAX_S);
    *out = (long long)(s * 1000.0);
    return 0;
}

static int cursor_parse(json_t *v, json_t *op, struct sbx_err *err)
{
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return sbx_err_set(err, EINVAL, "invalid_cursor",
                           "since must be a cursor from an earlier answer (an integer >= 0)");
    json_object_set(op, "since", v);
    return 0;
}

static int dim_parse(json_t *body, const char *name, json_int_t def, json_t *op,
                     struct sbx_err *err)
{
    json_t *v = json_object_get(body, name);
    if (!v || json_is_null(v)) {
        json_object_set_new(op, name, json_integer(def));
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 1000)
        return sbx_err_set(err, EINVAL, "invalid_pty_size", "%s must be an integer in 1..1000",
                           name);
    json_object_set(op, name, v);
    return 0;
}

/* The sandbox, and the {session_id} segment when with_session. */
static int lookup(struct sbxd *d, struct http_req *req, struct pty_req *x, bool with_session,
                  json_t *op, struct sbx_err *err)
{
    int r = manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &x->sb, err);
    if (r < 0 || !with_session)
        return r;
    const char *sid = http_req_param(req, 1);
    size_t n = strlen(sid);
    bool ok = n > 0 && n <= PTY_SESSION_ID_MAX;
    for (const char *c = sid; ok && *c; c++)
        ok = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
    if (!ok)
        return sbx_err_set(err, ENOENT, "pty_not_found", "no pty session %.64s", sid);
    json_object_set_new(op, "id", json_string(sid));
    return 0;
}

static void run(struct http_req *req, struct pty_req *x, json_t *op)
{
    http_req_suspend(req, on_abort, x);
    start_call(x, op);
}

static void api_pty_create(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    struct pty_req *x = sbx_xcalloc(1, sizeof(*x));
    x->req = req;
    x->kind = CALL_OPEN;
    json_t *op = json_pack("{s:s,s:s}", "op", "pty_open", "kind", "exec");
    if (http_req_json(req, &body, &err) < 0)
        goto fail;
    json_t *cmd = json_object_get(body, "command");
    if (!json_is_string(cmd) || json_string_length(cmd) == 0 ||
        json_string_length(cmd) > EXEC_CODE_MAX ||
        strlen(json_string_value(cmd)) != json_string_length(cmd)) {
        sbx_err_set(&err, EINVAL, "invalid_request",
                    "command must be a non-empty string of at most %u bytes", EXEC_CODE_MAX);
        goto fail;
    }
    json_object_set_new(op, "argv", json_pack("[s,s,O]", "/bin/bash", "-c", cmd));
    if (dim_parse(body, "rows", 24, op, &err) < 0 || dim_parse(body, "cols", 80, op, &err) < 0 ||
        seconds_parse(json_object_get(body, "grace_seconds"), "grace_seconds", PTY_GRACE_DEFAULT_MS,
                      &x->wait_ms, &err) < 0 ||
        lookup(d, req, x, false, op, &err) < 0)
        goto fail;
    json_decref(body);
    run(req, x, op);
    return;
fail:
    json_decref(body);
    json_decref(op);
    pty_req_free(x);
    http_respond_error(req, &err);
}

static void api_pty_input(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    struct pty_req *x = sbx_xcalloc(1, sizeof(*x));
    x->req = req;
    x->kind = CALL_READ;
    json_t *op = json_pack("{s:s}", "op", "pty_read");
    long long wait_ms;
    if (http_req_json(req, &body, &err) < 0)
        goto fail;
    json_t *in = json_object_get(body, "input");
    if (!json_is_string(in) || json_string_length(in) > PTY_INPUT_BODY_MAX) {
        sbx_err_set(&err, EINVAL, "invalid_request", "input must be a string of at most %u bytes",
                    PTY_INPUT_BODY_MAX);
        goto fail;
    }
    json_object_set(op, "input", in);
    if (cursor_parse(json_object_get(body, "since"), op, &err) < 0 ||
        seconds_parse(json_object_get(body, "wait_seconds"), "wait_seconds", PTY_WAIT_DEFAULT_MS,
                      &wait_ms, &err) < 0 ||
        lookup(d, req, x, true, op, &err) < 0)
        goto fail;
    json_object_set_new(op, "wait_ms", json_integer(wait_ms));
    json_decref(body);
    run(req, x, op);
    return;
fail:
    json_decref(body);
    json_decref(op);
    pty_req_free(x);
    http_respond_error(req, &err);
}

/* A query parameter as a JSON number, NULL when absent, json null when malformed. */
static json_t *query_number(struct http_req *req, const char *name)
{
    const char *v = http_req_query(req, name);
    if (!v)
        return NULL;
    char *end;
    errno = 0;
    double n = strtod(v, &end);
    if (!*v || *end || errno)
        return json_string(v); /* the parsers refuse anything but a number */
    if (n == (double)(json_int_t)n && !strchr(v, '.') && !strchr(v, 'e') && !strchr(v, 'E'))
        return json_integer((json_int_t)n);
    return json_real(n);
}

static void api_pty_read(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct pty_req *x = sbx_xcalloc(1, sizeof(*x));
    x->req = req;
    x->kind = CALL_READ;
    json_t *op = json_pack("{s:s}", "op", "pty_read");
    json_t *since = query_number(req, "since"), *wait = query_number(req, "wait_seconds");
    long long wait_ms;
    int r = cursor_parse(since, op, &err);
    if (r == 0)
        r = seconds_parse(wait, "wait_seconds", 0, &wait_ms, &err);
    if (r == 0)
        r = lookup(d, req, x, true, op, &err);
    json_decref(since);
    json_decref(wait);
    if (r < 0) {
        json_decref(op);
        pty_req_free(x);
        http_respond_error(req, &err);
        return;
    }
    json_object_set_new(op, "wait_ms", json_integer(wait_ms));
    run(req, x, op);
}

static void api_pty_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct pty_req *x = sbx_xcalloc(1, sizeof(*x));
    x->req = req;
    x->kind = CALL_PLAIN;
    json_t *op = json_pack("{s:s}", "op", "pty_kill");
    if (lookup(d, req, x, true, op, &err) < 0) {
        json_decref(op);
        pty_req_free(x);
        http_respond_error(req, &err);
        return;
    }
    run(req, x, op);
}

static const struct route routes[] = {
    {"POST", "/v1/sandboxes/{}/pty", AUTH_SANDBOX, api_pty_create, 0},
    {"GET", "/v1/sandboxes/{}/pty/{}", AUTH_SANDBOX, api_pty_read, 0},
    {"DELETE", "/v1/sandboxes/{}/pty/{}", AUTH_SANDBOX, api_pty_delete, 0},
    {"POST", "/v1/sandboxes/{}/pty/{}/input", AUTH_SANDBOX, api_pty_input, 0},
};

const struct route_table pty_routes = ROUTE_TABLE(routes);
