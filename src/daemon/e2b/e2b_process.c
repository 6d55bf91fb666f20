/* Import circle with e2b_pty.c (allowed inside a folder, docs/architecture.md#layering): a
 * Start with "pty" and a Connect to a PTY's pid go there, and its streams use this file's
 * end and keepalive events; both are one service, envd's process.Process. */
/* envd's process.Process service on the agent's background processes (src/agent/process.c)
 * and, for a Start with "pty", on the agent's PTYs (e2b_pty.c):
 * each Start is a process_start (with a stdin pipe unless stdin:false, Connect-Timeout-Ms
 * as its lifetime, and its E2B config kept as the process's label), followed by
 * process_logs; so several commands run at once, each with its own stdin, signals and
 * exit status, and none of them takes the sandbox's one-exec-at-a-time lock. A pid
 * selects the process (the agent looks processes up by pid too). */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../audit/audit.h"
#include "../audit/input_window.h"
#include "../exec/procmeter.h"
#include "../exec/session.h"
#include "../files/workspace.h"
#include "../http/server.h"
#include "../sandbox/agentcall.h"
#include "../sandbox/manager.h"
#include "../sandbox/params.h"
#include "../sandbox/runas.h"
#include "../sbxd.h"
#include "e2b.h"
#include "e2b_connect.h"
#include "envd.h"

#define PROC_CMD_MAX (256u * 1024u)

/* ---- unary calls: one agent op, one answer ---- */

typedef json_t *(*unary_answer_fn)(json_t *result);

struct unary {
    struct http_req *req; /* NULL once the client went away */
    struct agentcall *call;
    unary_answer_fn answer;
    /* What changes a process (input, stdin closed, a signal) is audited as the REST
     * routes audit it, naming the sandbox owner's key; NULL for lookups. */
    const char *action;
    json_t *details;
    /* Sent instead when the agent has no such background process: the same pid may be a
     * PTY's (SendSignal), whose op this is. */
    json_t *fallback;
    struct sandbox *sb;
    struct auth_identity who;
    char request_id[64];
};

static const struct agentcall_ops unary_ops;

static void unary_done(json_t *result, const struct sbx_err *err, void *data)
{
    struct unary *u = data;
    struct sbx_err ferr = {0};
    if (err && u->fallback && !strcmp(err->code, "process_not_found")) {
        u->call = NULL;
        if (agentcall_start(u->sb, TAKE_PTR(u->fallback), &unary_ops, u, &u->call, &ferr) == 0)
            return;
        err = &ferr;
    }
    json_decref(u->fallback);
    if (u->action)
        audit_record(manager_store(u->sb->mgr), &u->who, NULL, u->request_id, u->action,
                     u->sb->rec.id, err ? err->code : "ok", TAKE_PTR(u->details));
    if (u->req) {
        if (err)
            rpc_reply_sbx_error(u->req, err);
        else
            rpc_reply(u->req, u->answer ? u->answer(result) : json_object());
    }
    free(u);
}

static const struct agentcall_ops unary_ops = {.on_done = unary_done};

static void unary_gone(struct http_req *req, void *data)
{
    struct unary *u = data;
    agentcall_cancel(u->call, false);
    if (u->action) /* sent to the agent all the same: it may have happened */
        audit_record(manager_store(u->sb->mgr), &u->who, NULL, u->request_id, u->action,
                     u->sb->rec.id, "client_gone", TAKE_PTR(u->details));
    json_decref(u->details);
    json_decref(u->fallback);
    free(u);
}

/* One agent op (then fallback, taken, if the pid is no background process's); action
 * (with details, taken) names the audit entry of a change. */
static void unary_audited(const struct envd_ctx *c, json_t *op, json_t *fallback,
                          unary_answer_fn answer, const char *action, json_t *details)
{
    struct sbx_err err = {0};
    struct unary *u = sbx_xcalloc(1, sizeof(*u));
    u->fallback = fallback;
    u->req = c->req;
    u->answer = answer;
    u->action = action;
    u->details = details;
    u->sb = c->sb;
    u->who = c->who;
    snprintf(u->request_id, sizeof(u->request_id), "%s", http_req_id(c->req) ?: "");
    if (agentcall_start(c->sb, op, &unary_ops, u, &u->call, &err) < 0) {
        if (action)
            audit_record(manager_store(c->sb->mgr), &c->who, NULL, u->request_id, action,
                         c->sb->rec.id, err.code, TAKE_PTR(u->details));
        json_decref(u->details);
        json_decref(u->fallback);
        free(u);
        rpc_reply_sbx_error(c->req, &err);
        return;
    }
    http_req_suspend(c->req, unary_gone, u);
}

static void unary(const struct envd_ctx *c, json_t *op, unary_answer_fn answer)
{
    unary_audited(c, op, NULL, answer, NULL, NULL);
}

/* The audit details of a change to process ref: {process, via}, and what was typed. */
static json_t *input_details(const char *ref, json_t *b64)
{
    json_t *d = json_pack("{s:s,s:s}", "process", ref, "via", "e2b");
    if (!b64)
        return d;
    size_t len = json_string_length(b64), n = 0;
    _cleanup_free_ unsigned char *raw = sbx_xmalloc(len / 4 * 3 + 3);
    if (sbx_base64_decode(json_string_value(b64), len, raw, &n) < 0)
        n = 0;
    return audit_command_details(d, (const char *)raw, n);
}

/* Binary stdin (a program feeding another, e.g. sbx's agent as a provider's process fed
 * its frames) is audited once per window, not per call (audit/input_window.h): true when
 * this call was summed into its process's open window. */
static bool summed_input(const struct envd_ctx *c, const char *ref, json_t *b64)
{
    size_t len = json_string_length(b64), n = 0;
    _cleanup_free_ unsigned char *raw = sbx_xmalloc(len / 4 * 3 + 3);
    if (sbx_base64_decode(json_string_value(b64), len, raw, &n) < 0 ||
        !audit_input_binary((const char *)raw, n))
        return false;
    return !audit_window_take(c->d->input_windows, &c->who, http_req_id(c->req),
                              "process.input", c->sb->rec.id, ref, "e2b", n);
}

/* The pid of {"process": {"pid": n}} as the agent's process reference. */
static int selector(json_t *msg, char ref[24], struct sbx_err *err)
{
    json_t *sel = json_object_get(msg, "process");
    json_t *pid = json_object_get(sel, "pid");
    if (json_is_string(pid)) {
        char *end;
        long v = strtol(json_string_value(pid), &end, 10);
        if (*end || v <= 0)
            pid = NULL;
        else
            snprintf(ref, 24, "%ld", v);
    } else if (json_is_integer(pid) && json_integer_value(pid) > 0 &&
               json_integer_value(pid) <= 0x7fffffff) {
        snprintf(ref, 24, "%lld", (long long)json_integer_value(pid));
    } else {
        pid = NULL;
    }
    if (!pid)
        return sbx_err_set(err, EINVAL,
                           json_object_get(sel, "tag") ? "unimplemented" : "invalid_request",
                           "select the process by pid");
    return 0;
}

/* ---- List ---- */

static json_t *list_answer(json_t *result)
{
    json_t *out = json_array();
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(result, "processes"), i, p)
    {
        if (strcmp(json_string_value(json_object_get(p, "status")) ?: "", "running"))
            continue;
        json_t *label = json_loads(json_string_value(json_object_get(p, "label")) ?: "", 0, NULL);
        json_t *config = json_object_get(label, "config");
        json_t *info =
            json_pack("{s:O,s:o}", "pid", json_object_get(p, "pid"), "config",
                      json_is_object(config)
                          ? json_incref(config)
                          : json_pack("{s:O,s:[],s:{},s:O}", "cmd", json_object_get(p, "command"),
                                      "args", "envs", "cwd", json_object_get(p, "cwd")));
        json_t *tag = json_object_get(label, "tag");
        if (json_is_string(tag))
            json_object_set(info, "tag", tag);
        json_decref(label);
        json_array_append_new(out, info);
    }
    return json_pack("{s:o}", "processes", out);
}

/* ---- Start and Connect: a stream of events ---- */

struct proc_stream {
    struct sbxd *d;
    struct sandbox *sb;
    struct http_req *req;
    struct rpc_stream *out; /* once begun */
    struct agentcall *call;
    struct procmeter *meter; /* Start, until the agent answers */
    bool tail;               /* Connect: live output only */
    char ref[32];
    /* Output relayed but not yet credited to the agent, per channel: given back only once
     * the client's queue is down to HTTP_STREAM_LOW, so a slow reader holds the agent's
     * window closed, then the process (a lossless follower: src/agent/process.h), instead
     * of the queue overflowing and dropping messages. */
    size_t owed[PROTO_CH_STDERR + 1];
    bool waiting; /* for the queue to drain */
};

json_t *e2b_keepalive_msg(void)
{
    return json_pack("{s:{s:{}}}", "event", "keepalive");
}

char *e2b_argv_text(json_t *argv)
{
    size_t i, n = 1;
    json_t *a;
    json_array_foreach(argv, i, a) n += json_string_length(a) + 1;
    char *text = sbx_xcalloc(1, n);
    size_t off = 0;
    json_array_foreach(argv, i, a)
    {
        if (i)
            text[off++] = ' ';
        memcpy(text + off, json_string_value(a), json_string_length(a));
        off += json_string_length(a);
    }
    return text;
}

static void ps_free(struct proc_stream *s)
{
    free(s);
}

/* The client left: the process runs on (envd does the same). */
static void ps_gone(void *data)
{
    struct proc_stream *s = data;
    agentcall_cancel(s->call, true);
    ps_free(s);
}

static void ps_req_gone(struct http_req *req, void *data)
{
    struct proc_stream *s = data;
    if (s->meter)
        procmeter_detach(s->meter);
    else
        agentcall_cancel(s->call, false);
    ps_free(s);
}

static void ps_settle(struct proc_stream *s);

static void ps_drained(void *data)
{
    struct proc_stream *s = data;
    s->waiting = false;
    ps_settle(s);
}

/* Give the agent its window back for what was relayed, unless the client lags. */
static void ps_settle(struct proc_stream *s)
{
    if (!s->call)
        return;
    if (rpc_stream_queued(s->out) > HTTP_STREAM_LOW) {
        if (!s->waiting)
            rpc_stream_on_drain(s->out, ps_drained, s);
        s->waiting = true;
        return;
    }
    for (unsigned ch = PROTO_CH_STDOUT; ch <= PROTO_CH_STDERR; ch++) {
        agentcall_credit(s->call, ch, s->owed[ch]);
        s->owed[ch] = 0;
    }
}

static void ps_data(unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct proc_stream *s = data;
    if (ch != PROTO_CH_STDOUT && ch != PROTO_CH_STDERR) {
        agentcall_credit(s->call, ch, len);
        return;
    }
    _cleanup_free_ char *b64 = sbx_base64_encode(buf, len);
    rpc_stream_send(s->out, json_pack("{s:{s:{s:s}}}", "event", "data",
                                      ch == PROTO_CH_STDOUT ? "stdout" : "stderr", b64));
    s->owed[ch] += len;
    ps_settle(s);
}

static const char *signal_text(int sig)
{
    switch (sig) {
    case SIGKILL:
        return "killed";
    case SIGTERM:
        return "terminated";
    case SIGINT:
        return "interrupt";
    case SIGHUP:
        return "hangup";
    case SIGPIPE:
        return "broken pipe";
    default:
        return strsignal(sig);
    }
}

/* envd's EndEvent from the agent's process record: Go's ProcessState strings. */
json_t *e2b_end_event(json_t *proc)
{
    json_t *sig = json_object_get(proc, "signal");
    char status[96];
    if (json_is_integer(sig) && json_integer_value(sig) > 0) {
        snprintf(status, sizeof(status), "signal: %s", signal_text((int)json_integer_value(sig)));
        return json_pack("{s:{s:{s:i,s:b,s:s,s:s}}}", "event", "end", "exitCode", -1, "exited", 0,
                         "status", status, "error", status);
    }
    int code = (int)json_integer_value(json_object_get(proc, "exit_code"));
    snprintf(status, sizeof(status), "exit status %d", code);
    json_t *ev = json_pack("{s:i,s:b,s:s}", "exitCode", code, "exited", 1, "status", status);
    if (code)
        json_object_set_new(ev, "error", json_string(status));
    return json_pack("{s:{s:o}}", "event", "end", ev);
}

static void ps_logs_done(json_t *result, const struct sbx_err *err, void *data)
{
    struct proc_stream *s = data;
    s->call = NULL;
    if (err) {
        rpc_stream_end(s->out, rpc_code(err), err->msg);
    } else {
        rpc_stream_send(s->out, e2b_end_event(result));
        rpc_stream_end(s->out, NULL, NULL);
    }
    ps_free(s);
}

static const struct agentcall_ops logs_ops = {
    .on_data = ps_data, .on_done = ps_logs_done, .manual_credit = true};

/* The process exists (result: its record): start event, then its output until it ends. */
static void ps_follow(struct proc_stream *s, json_t *result)
{
    struct sbx_err err = {0};
    s->out = rpc_stream_begin(s->req, s->d->loop, false, e2b_keepalive_msg(), ps_gone, s);
    rpc_stream_send(s->out, json_pack("{s:{s:{s:O}}}", "event", "start", "pid",
                                      json_object_get(result, "pid")));
    snprintf(s->ref, sizeof(s->ref), "%s", json_string_value(json_object_get(result, "id")) ?: "");
    if (s->tail && strcmp(json_string_value(json_object_get(result, "status")) ?: "", "running")) {
        rpc_stream_send(s->out, e2b_end_event(result));
        rpc_stream_end(s->out, NULL, NULL);
        ps_free(s);
        return;
    }
    /* Lossless: the agent holds the process rather than forget what this client has not
     * read yet (envd's pipe semantics). */
    json_t *op = json_pack("{s:s,s:s,s:b,s:b,s:b}", "op", "process_logs", "id", s->ref, "follow",
                           1, "tail", s->tail, "lossless", 1);
    if (agentcall_start(s->sb, op, &logs_ops, s, &s->call, &err) < 0) {
        rpc_stream_end(s->out, rpc_code(&err), err.msg);
        ps_free(s);
    }
}

static void ps_started(json_t *result, const struct sbx_err *err, void *data)
{
    struct proc_stream *s = data;
    s->call = NULL;
    s->meter = NULL;
    if (err && s->tail && !strcmp(err->code, "process_not_found")) {
        /* Not a background process: the pid may be a PTY's. */
        envd_pty_connect(s->d, s->sb, s->req, s->ref);
        ps_free(s);
        return;
    }
    if (err) {
        /* Errors of a stream call travel in its end-stream message. */
        s->out = rpc_stream_begin(s->req, s->d->loop, false, e2b_keepalive_msg(), NULL, NULL);
        rpc_stream_end(s->out, rpc_code(err), err->msg);
        ps_free(s);
        return;
    }
    ps_follow(s, result);
}

static const struct agentcall_ops start_ops = {.on_done = ps_started};

static struct proc_stream *ps_new(const struct envd_ctx *c)
{
    struct proc_stream *s = sbx_xcalloc(1, sizeof(*s));
    s->d = c->d;
    s->sb = c->sb;
    s->req = c->req;
    return s;
}

/* A Start (metered, as the sandbox owner's) or a Connect's lookup. */
static void ps_run(struct proc_stream *s, const struct auth_identity *who, json_t *op)
{
    struct sbx_err err = {0};
    /* What ran, for the audit entry. */
    _cleanup_free_ char *command = who ? e2b_argv_text(json_object_get(op, "argv")) : NULL;
    struct procmeter_origin o = {
        .who = who, .request_id = http_req_id(s->req), .action = "process.start",
        .command = command};
    if ((who ? procmeter_start(s->sb, &o, op, ps_started, s, &s->meter, &err)
             : agentcall_start(s->sb, op, &start_ops, s, &s->call, &err)) < 0) {
        s->out = rpc_stream_begin(s->req, s->d->loop, false, e2b_keepalive_msg(), NULL, NULL);
        rpc_stream_end(s->out, rpc_code(&err), err.msg);
        ps_free(s);
        return;
    }
    http_req_suspend(s->req, ps_req_gone, s);
}

static void stream_error(const struct envd_ctx *c, const struct sbx_err *err)
{
    struct rpc_stream *out =
        rpc_stream_begin(c->req, c->d->loop, false, e2b_keepalive_msg(), NULL, NULL);
    rpc_stream_end(out, rpc_code(err), err->msg);
}

/* argv, env and cwd of a StartRequest as the agent's process_start. */
static int start_op(const struct envd_ctx *c, json_t *msg, long long timeout_ms, json_t **out,
                    struct sbx_err *err)
{
    json_t *proc = json_object_get(msg, "process");
    json_t *cmd = json_object_get(proc, "cmd");
    json_t *args = json_object_get(proc, "args");
    json_t *envs = json_object_get(proc, "envs");
    json_t *cwd = json_object_get(proc, "cwd");
    json_t *tag = json_object_get(msg, "tag");
    json_t *in = json_object_get(msg, "stdin");
    json_t *pty = json_object_get(msg, "pty");
    if (json_is_null(pty))
        pty = NULL;
    if (pty && !json_is_object(pty))
        return sbx_err_set(err, EINVAL, "invalid_request", "pty must be an object");
    if (!json_is_string(cmd) || !json_string_length(cmd) || json_string_length(cmd) > PROC_CMD_MAX)
        return sbx_err_set(err, EINVAL, "invalid_request", "process.cmd must be a command");
    if (args && !json_is_array(args))
        return sbx_err_set(err, EINVAL, "invalid_request", "process.args must be strings");
    if (envs && json_is_null(envs))
        envs = NULL;
    if (sandbox_env_validate(envs, "process.envs", err) < 0)
        return -EINVAL;
    char rel[WS_PATH_MAX + 1];
    if (cwd && !json_is_null(cwd)) {
        if (!json_is_string(cwd) ||
            e2b_path_to_ws(json_string_value(cwd), rel, sizeof(rel), err) < 0)
            return sbx_err_set(err, EINVAL, "invalid_request", "cwd '%.200s' is not in %s",
                               json_string_value(cwd) ?: "", E2B_HOME);
    } else {
        rel[0] = '\0';
    }
    json_t *argv = json_pack("[O]", cmd);
    size_t i;
    json_t *a;
    json_array_foreach(args, i, a)
    {
        if (!json_is_string(a) || strlen(json_string_value(a)) != json_string_length(a)) {
            json_decref(argv);
            return sbx_err_set(err, EINVAL, "invalid_request", "process.args must be strings");
        }
        json_array_append(argv, a);
    }
    const char *user;
    if (e2b_user(c->req, c->sb, &user, err) < 0) {
        json_decref(argv);
        return sbx_err_ret(err);
    }
    bool root = user && !strcmp(user, RUNAS_ROOT);
    json_t *env = json_pack("{s:s,s:s}", "HOME", root ? "/root" : E2B_HOME, "USER",
                            root ? RUNAS_ROOT : RUNAS_USER);
    if (envs)
        json_object_update(env, envs);
    _cleanup_free_ char *dir = e2b_ws_to_path(rel);
    json_t *config =
        json_pack("{s:O,s:o,s:o,s:s}", "cmd", cmd, "args", args ? json_incref(args) : json_array(),
                  "envs", envs ? json_incref(envs) : json_object(), "cwd", dir);
    json_t *label =
        json_pack("{s:o,s:O?}", "config", config, "tag", json_is_string(tag) ? tag : NULL);
    char *text = json_dumps(label, JSON_COMPACT);
    json_decref(label);
    if (strlen(text) > E2B_LABEL_MAX) {
        /* A huge command line: List shows the command only. */
        free(text);
        text = NULL;
    }
    /* lossless: nothing is forgotten before the Start's own follower attaches (ps_follow). */
    json_t *op = json_pack("{s:s,s:o,s:o,s:s,s:b,s:I,s:b}", "op", "process_start", "argv", argv,
                           "env", session_env_list(c->sb, env), "cwd", dir, "stdin",
                           !json_is_false(in), "timeout_ms", (json_int_t)timeout_ms, "lossless", 1);
    json_decref(env);
    if (text)
        json_object_set_new(op, "label", json_string(text));
    free(text);
    runas_put(op, user);
    if (pty) {
        /* The same command, on a PTY of the agent (e2b_pty.c) instead of pipes. */
        json_object_set_new(op, "op", json_string("pty_open"));
        json_object_set_new(op, "kind", json_string("exec"));
        json_object_del(op, "stdin");
        json_object_del(op, "label");
        json_object_del(op, "lossless"); /* a terminal keeps its ring (docs/terminals.md) */
        if (e2b_pty_size(json_object_get(pty, "size"), op, err) < 0) {
            json_decref(op);
            return -EINVAL;
        }
    }
    *out = op;
    return 0;
}

static void do_start(const struct envd_ctx *c, json_t *msg)
{
    struct sbx_err err = {0};
    json_t *op = NULL;
    if (start_op(c, msg, rpc_timeout_ms(c->req), &op, &err) < 0) {
        stream_error(c, &err);
        return;
    }
    if (!strcmp(json_string_value(json_object_get(op, "op")), "pty_open"))
        envd_pty_start(c, op);
    else
        ps_run(ps_new(c), &c->who, op);
}

static void do_connect(const struct envd_ctx *c, json_t *msg)
{
    struct sbx_err err = {0};
    char ref[24];
    if (selector(msg, ref, &err) < 0) {
        stream_error(c, &err);
        return;
    }
    struct proc_stream *s = ps_new(c);
    s->tail = true;
    snprintf(s->ref, sizeof(s->ref), "%s", ref);
    ps_run(s, NULL, json_pack("{s:s,s:s}", "op", "process_get", "id", ref));
}

/* ---- SendInput, CloseStdin, SendSignal ---- */

static int signal_of(json_t *v)
{
    if (json_is_integer(v))
        return (int)json_integer_value(v);
    const char *s = json_string_value(v);
    if (s && !strcmp(s, "SIGNAL_SIGKILL"))
        return SIGKILL;
    if (s && !strcmp(s, "SIGNAL_SIGTERM"))
        return SIGTERM;
    return 0;
}

void envd_process(const struct envd_ctx *c, const char *method)
{
    struct sbx_err err = {0};
    bool streaming = !strcmp(method, "Start") || !strcmp(method, "Connect");
    json_t *msg = NULL;
    char ref[24];
    if (rpc_read(c->req, streaming, &msg, &err) < 0) {
        if (streaming)
            stream_error(c, &err);
        else
            rpc_reply_sbx_error(c->req, &err);
        return;
    }
    if (!strcmp(method, "Start")) {
        do_start(c, msg);
    } else if (!strcmp(method, "Connect")) {
        do_connect(c, msg);
    } else if (!strcmp(method, "List")) {
        unary(c, json_pack("{s:s}", "op", "process_list"), list_answer);
    } else if (selector(msg, ref, &err) < 0) {
        rpc_reply_sbx_error(c->req, &err);
    } else if (!strcmp(method, "Update")) {
        json_t *op = json_pack("{s:s,s:s}", "op", "pty_resize", "id", ref);
        if (e2b_pty_size(json_object_get(json_object_get(msg, "pty"), "size"), op, &err) < 0) {
            json_decref(op);
            rpc_reply_sbx_error(c->req, &err);
        } else {
            unary_audited(c, op, NULL, NULL, "process.resize", input_details(ref, NULL));
        }
    } else if (!strcmp(method, "SendInput")) {
        json_t *input = json_object_get(msg, "input");
        json_t *in = json_object_get(input, "stdin");
        json_t *pty = json_object_get(input, "pty");
        if (json_is_string(pty))
            unary_audited(c, json_pack("{s:s,s:s,s:O}", "op", "pty_input", "id", ref, "data", pty),
                          NULL, NULL, "process.input", input_details(ref, pty));
        else if (!json_is_string(in))
            rpc_reply_error(c->req, "invalid_argument",
                            "input.stdin or input.pty must be base64 bytes");
        else if (summed_input(c, ref, in))
            unary(c, json_pack("{s:s,s:s,s:O}", "op", "process_input", "id", ref, "data", in),
                  NULL);
        else
            unary_audited(c,
                          json_pack("{s:s,s:s,s:O}", "op", "process_input", "id", ref, "data", in),
                          NULL, NULL, "process.input", input_details(ref, in));
    } else if (!strcmp(method, "CloseStdin")) {
        unary_audited(c, json_pack("{s:s,s:s,s:b}", "op", "process_input", "id", ref, "close", 1),
                      NULL, NULL, "process.close_stdin", input_details(ref, NULL));
    } else if (!strcmp(method, "SendSignal")) {
        int sig = signal_of(json_object_get(msg, "signal"));
        json_t *details = input_details(ref, NULL);
        json_object_set_new(details, "signal", json_integer(sig));
        if (sig <= 0 || sig >= 65) {
            json_decref(details);
            rpc_reply_error(c->req, "invalid_argument", "signal must be SIGKILL or SIGTERM");
        } else {
            unary_audited(
                c, json_pack("{s:s,s:s,s:i}", "op", "process_signal", "id", ref, "signal", sig),
                json_pack("{s:s,s:s,s:i}", "op", "pty_kill", "id", ref, "signal", sig), NULL,
                "process.signal", details);
        }
    } else {
        rpc_reply_error(c->req, "unimplemented", "no such method of process.Process");
    }
    json_decref(msg);
}
