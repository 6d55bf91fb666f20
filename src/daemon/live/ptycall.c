#include "ptycall.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../audit/audit.h"
#include "../auth/auth.h"
#include "../exec/exec.h"
#include "../sandbox/agentcall.h"
#include "../sandbox/manager.h"
#include "../sandbox/runas.h"

#define PTY_GRACE_DEFAULT_MS 1000
#define PTY_WAIT_DEFAULT_MS 1000
/* One read answers at most the agent's ring (PTY_RING_MAX, 256 KiB); keep a margin. */
#define PTY_OUTPUT_MAX (512u * 1024u)

enum pty_kind {
    CALL_OPEN,  /* pty_open, then the first read */
    CALL_READ,  /* a read: answer the output */
    CALL_PLAIN, /* answer the agent's object */
};

struct pty_call {
    pty_done_fn cb;
    void *data;
    char owner[AUTH_KEY_ID_LEN + 1]; /* CALL_OPEN: the key the session is kept for */
    struct sandbox *sb;
    struct agentcall *call;
    enum pty_kind kind;
    long long wait_ms;
    struct exec_output out;
};

static void pty_call_free(struct pty_call *x)
{
    free(x->out.buf);
    free(x);
}

void pty_call_cancel(struct pty_call *x)
{
    agentcall_cancel(x->call, false);
    pty_call_free(x);
}

static void on_data(unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct pty_call *x = data;
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

static void start_call(struct pty_call *x, json_t *op);

static json_t *read_json(struct pty_call *x, json_t *res)
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
    struct pty_call *x = data;
    x->call = NULL;
    if (err) {
        x->cb(NULL, err, x->data);
        pty_call_free(x);
        return;
    }
    if (x->kind == CALL_OPEN && json_object_get(result, "cols")) {
        const char *sid = json_string_value(json_object_get(result, "id"));
        if (sid && x->owner[0]) {
            if (!x->sb->pty_owners)
                x->sb->pty_owners = json_object();
            json_object_set_new(x->sb->pty_owners, sid, json_string(x->owner));
        }
        /* Started: wait up to the grace period for it to finish. */
        start_call(x, json_pack("{s:s,s:O,s:i,s:I,s:b,s:b}", "op", "pty_read", "id",
                                json_object_get(result, "id"), "since", 0, "wait_ms",
                                (json_int_t)x->wait_ms, "until_exit", 1, "release", 1));
        return;
    }
    json_t *o;
    const char *sid = json_string_value(json_object_get(result, "id"));
    if (x->kind == CALL_PLAIN) {
        o = json_pack("{s:s,s:O,s:b}", "object", "pty", "session_id", json_object_get(result, "id"),
                      "deleted", 1);
    } else {
        o = read_json(x, result);
    }
    /* A session that is over (or deleted) has nothing left to end on revocation. */
    if (sid && x->sb->pty_owners &&
        (x->kind == CALL_PLAIN || !json_is_true(json_object_get(result, "alive"))))
        json_object_del(x->sb->pty_owners, sid);
    x->cb(o, NULL, x->data);
    json_decref(o);
    pty_call_free(x);
}

static const struct agentcall_ops call_ops = {.on_data = on_data, .on_done = on_done};

static void start_call(struct pty_call *x, json_t *op)
{
    struct sbx_err err = {0};
    if (agentcall_start(x->sb, op, &call_ops, x, &x->call, &err) == 0)
        return;
    x->cb(NULL, &err, x->data);
    pty_call_free(x);
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

static int session_parse(const char *sid, json_t *op, struct sbx_err *err)
{
    size_t n = sid ? strlen(sid) : 0;
    bool ok = n > 0 && n <= PTY_SESSION_ID_MAX;
    for (const char *c = sid; ok && *c; c++)
        ok = (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
    if (!ok)
        return sbx_err_set(err, ENOENT, "pty_not_found", "no pty session %.64s", sid ? sid : "");
    json_object_set_new(op, "id", json_string(sid));
    return 0;
}

static struct pty_call *call_new(struct sandbox *sb, enum pty_kind kind, pty_done_fn cb, void *data)
{
    struct pty_call *x = sbx_xcalloc(1, sizeof(*x));
    x->sb = sb;
    x->kind = kind;
    x->cb = cb;
    x->data = data;
    return x;
}

/* Start op (stolen), or fail with nothing reported later. */
static int go(struct pty_call *x, json_t *op, struct pty_call **out, struct sbx_err *err)
{
    if (agentcall_start(x->sb, op, &call_ops, x, &x->call, err) < 0) {
        pty_call_free(x);
        return sbx_err_ret(err);
    }
    *out = x;
    return 0;
}

/* The op reached the agent: what was typed or started is on the record. */
static void audit_pty(struct sandbox *sb, const struct pty_origin *o, const char *action,
                      const char *sid, json_t *text)
{
    json_t *details = json_pack("{s:s}", "via", o->via ? o->via : "rest");
    if (sid)
        json_object_set_new(details, "session_id", json_string(sid));
    audit_record(manager_store(sb->mgr), o->who, NULL, o->request_id, action, sb->rec.id,
                 "ok", audit_command_details(details, json_string_value(text),
                                             json_string_length(text)));
}

int pty_exec_command(struct sandbox *sb, const struct pty_origin *o, json_t *body,
                     pty_done_fn cb, void *data, struct pty_call **out, struct sbx_err *err)
{
    json_t *cmd = json_object_get(body, "command");
    if (!json_is_string(cmd) || json_string_length(cmd) == 0 ||
        json_string_length(cmd) > EXEC_CODE_MAX ||
        strlen(json_string_value(cmd)) != json_string_length(cmd))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "command must be a non-empty string of at most %u bytes", EXEC_CODE_MAX);
    struct pty_call *x = call_new(sb, CALL_OPEN, cb, data);
    if (o->who)
        snprintf(x->owner, sizeof(x->owner), "%s", o->who->key_id);
    json_t *op = json_pack("{s:s,s:s,s:[s,s,O]}", "op", "pty_open", "kind", "exec", "argv",
                           "/bin/bash", "-c", cmd);
    if (runas_apply(sb, body, op, err) < 0 || dim_parse(body, "rows", 24, op, err) < 0 ||
        dim_parse(body, "cols", 80, op, err) < 0 ||
        seconds_parse(json_object_get(body, "grace_seconds"), "grace_seconds", PTY_GRACE_DEFAULT_MS,
                      &x->wait_ms, err) < 0) {
        json_decref(op);
        pty_call_free(x);
        return sbx_err_ret(err);
    }
    if (go(x, op, out, err) < 0)
        return sbx_err_ret(err);
    audit_pty(sb, o, "pty.exec_command", NULL, cmd);
    return 0;
}

int pty_write_stdin(struct sandbox *sb, const struct pty_origin *o, const char *sid,
                    json_t *body, pty_done_fn cb, void *data, struct pty_call **out,
                    struct sbx_err *err)
{
    json_t *in = json_object_get(body, "input");
    long long wait_ms;
    if (!json_is_string(in) || json_string_length(in) > PTY_INPUT_BODY_MAX)
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "input must be a string of at most %u bytes", PTY_INPUT_BODY_MAX);
    json_t *op = json_pack("{s:s,s:O}", "op", "pty_read", "input", in);
    if (cursor_parse(json_object_get(body, "since"), op, err) < 0 ||
        seconds_parse(json_object_get(body, "wait_seconds"), "wait_seconds", PTY_WAIT_DEFAULT_MS,
                      &wait_ms, err) < 0 ||
        session_parse(sid, op, err) < 0) {
        json_decref(op);
        return sbx_err_ret(err);
    }
    json_object_set_new(op, "wait_ms", json_integer(wait_ms));
    if (go(call_new(sb, CALL_READ, cb, data), op, out, err) < 0)
        return sbx_err_ret(err);
    if (json_string_length(in))
        audit_pty(sb, o, "pty.write_stdin", sid, in);
    return 0;
}

int pty_read(struct sandbox *sb, const char *sid, json_t *since, json_t *wait, pty_done_fn cb,
             void *data, struct pty_call **out, struct sbx_err *err)
{
    long long wait_ms;
    json_t *op = json_pack("{s:s}", "op", "pty_read");
    if (cursor_parse(since, op, err) < 0 ||
        seconds_parse(wait, "wait_seconds", 0, &wait_ms, err) < 0 ||
        session_parse(sid, op, err) < 0) {
        json_decref(op);
        return sbx_err_ret(err);
    }
    json_object_set_new(op, "wait_ms", json_integer(wait_ms));
    return go(call_new(sb, CALL_READ, cb, data), op, out, err);
}

int pty_kill(struct sandbox *sb, const char *sid, pty_done_fn cb, void *data, struct pty_call **out,
             struct sbx_err *err)
{
    json_t *op = json_pack("{s:s}", "op", "pty_kill");
    if (session_parse(sid, op, err) < 0) {
        json_decref(op);
        return sbx_err_ret(err);
    }
    return go(call_new(sb, CALL_PLAIN, cb, data), op, out, err);
}

static void kill_done(json_t *result, const struct sbx_err *err, void *data)
{
    (void)result, (void)err, (void)data; /* a session that is gone already is fine */
}

void pty_revoke_key(struct sandbox *sb, const char *key_id)
{
    const char *sid;
    json_t *owner, *tmp;
    json_object_foreach_safe(sb->pty_owners, tmp, sid, owner)
    {
        if (strcmp(json_string_value(owner) ?: "", key_id))
            continue;
        /* Fire and forget: the session ends, whoever follows it sees it exit. */
        static const struct agentcall_ops kill_ops = {.on_done = kill_done};
        (void)agentcall_start(sb, json_pack("{s:s,s:s}", "op", "pty_kill", "id", sid), &kill_ops,
                              NULL, NULL, NULL);
        json_object_del(sb->pty_owners, sid);
    }
}
