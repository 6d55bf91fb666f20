/* Background processes (docs/sessions.md):
 *   POST   /v1/sandboxes/{id}/processes               start one
 *   GET    /v1/sandboxes/{id}/processes               all of them, from every session
 *   GET    /v1/sandboxes/{id}/processes/{pid_or_id}   one
 *   GET    /v1/sandboxes/{id}/processes/{id}/logs     output so far, or followed (SSE)
 *   POST   /v1/sandboxes/{id}/processes/{id}/signal   {signal}
 *   DELETE /v1/sandboxes/{id}/processes/{id}          SIGKILL its group
 * The processes and their logs live in the agent; these routes ask it. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <strings.h>

#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sandbox/agentcall.h"
#include "../sandbox/runas.h"
#include "../sbxd.h"
#include "exec.h"
#include "procmeter.h"
#include "session.h"
#include "textchunk.h"

/* What one logs answer holds per stream; the agent keeps less (PROCESS_LOG_MAX). */
#define PROCESS_LOGS_MAX (1024u * 1024u)
#define PROCESS_REF_MAX 32

enum proc_call {
    CALL_PLAIN, /* answer the agent's object */
    CALL_START, /* the same, for a process_start metered as the caller's (procmeter.c) */
    CALL_LOGS,  /* answer the collected output */
    CALL_CHECK, /* the process exists: start following it */
    CALL_FOLLOW,
};

struct proc_req {
    struct http_req *req;
    struct sandbox *sb;
    struct agentcall *call;
    struct procmeter *meter; /* CALL_START until the agent answers */
    enum proc_call kind;
    unsigned status;
    char ref[PROCESS_REF_MAX + 1];
    struct exec_output out[2];
    struct utf8_carry carry[2];
    char *command; /* CALL_START: what the audit entry names */
    const char *action; /* CALL_PLAIN changes (signal, kill): audited once answered */
    json_t *audit_details;
};

static void proc_req_free(struct proc_req *x)
{
    for (int i = 0; i < 2; i++)
        free(x->out[i].buf);
    free(x->command);
    json_decref(x->audit_details);
    free(x);
}

static void decorate(json_t *p)
{
    json_object_set_new(p, "object", json_string("process"));
}

static const char *stream_name(unsigned ch)
{
    return ch == PROTO_CH_STDOUT ? "stdout" : "stderr";
}

static void start_call(struct proc_req *x, json_t *op);

static void on_abort(struct http_req *req, void *data)
{
    struct proc_req *x = data;
    if (x->meter)
        procmeter_detach(x->meter);
    else
        agentcall_cancel(x->call, x->kind == CALL_FOLLOW);
    proc_req_free(x);
}

static void on_data(unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct proc_req *x = data;
    if (ch != PROTO_CH_STDOUT && ch != PROTO_CH_STDERR)
        return;
    if (x->kind == CALL_FOLLOW) {
        json_t *ev = textchunk_event(&x->carry[ch - 1], stream_name(ch), buf, len, false);
        if (ev)
            (void)http_sse_event(x->req, ev);
        return;
    }
    struct exec_output *o = &x->out[ch - 1];
    size_t keep = len;
    if (o->len + keep > PROCESS_LOGS_MAX)
        keep = PROCESS_LOGS_MAX - o->len;
    if (keep) {
        o->buf = sbx_xrealloc(o->buf, o->len + keep);
        memcpy(o->buf + o->len, buf, keep);
        o->len += keep;
    }
    o->dropped += len - keep;
}

/* {stdout, stderr} of a snapshot: text, or base64 with "<name>_encoding". */
static json_t *logs_json(struct proc_req *x, json_t *proc)
{
    json_t *o = json_pack("{s:s,s:O,s:O,s:O}", "object", "process_logs", "id",
                          json_object_get(proc, "id"), "status", json_object_get(proc, "status"),
                          "exit_code", json_object_get(proc, "exit_code"));
    for (unsigned ch = PROTO_CH_STDOUT; ch <= PROTO_CH_STDERR; ch++) {
        const char *name = stream_name(ch);
        struct exec_output *out = &x->out[ch - 1];
        struct utf8_carry none = {0};
        json_t *ev = textchunk_event(&none, name, (const uint8_t *)out->buf, out->len, true);
        json_object_set_new(o, name,
                            ev ? json_incref(json_object_get(ev, "data")) : json_string(""));
        char key[32];
        if (ev && json_object_get(ev, "encoding")) {
            snprintf(key, sizeof(key), "%s_encoding", name);
            json_object_set_new(o, key, json_string("base64"));
        }
        json_decref(ev);
        /* Older output the agent's ring no longer holds, or past our own bound. */
        snprintf(key, sizeof(key), "%s_dropped", name);
        json_int_t lost = json_integer_value(json_object_get(proc, key)) + (json_int_t)out->dropped;
        snprintf(key, sizeof(key), "%s_truncated", name);
        json_object_set_new(o, key, json_boolean(lost > 0));
    }
    return o;
}

static void on_done(json_t *result, const struct sbx_err *err, void *data)
{
    struct proc_req *x = data;
    x->call = NULL;
    x->meter = NULL;
    if (x->kind == CALL_FOLLOW) {
        for (unsigned ch = PROTO_CH_STDOUT; ch <= PROTO_CH_STDERR; ch++) {
            json_t *ev = textchunk_event(&x->carry[ch - 1], stream_name(ch), NULL, 0, true);
            if (ev)
                (void)http_sse_event(x->req, ev);
        }
        json_t *ev;
        if (err) {
            ev =
                json_pack("{s:s,s:s,s:s}", "type", "error", "code", err->code, "message", err->msg);
        } else {
            ev = json_deep_copy(result);
            json_object_set_new(ev, "type", json_string("exit"));
        }
        (void)http_sse_event(x->req, ev);
        http_sse_end(x->req);
        proc_req_free(x);
        return;
    }
    if (x->action) {
        json_object_set_new(x->audit_details, "process", json_string(x->ref));
        audit_record(manager_store(x->sb->mgr), http_req_identity(x->req), NULL,
                     http_req_id(x->req), x->action, x->sb->rec.id, err ? err->code : "ok",
                     json_incref(x->audit_details));
    }
    if (err) {
        http_respond_error(x->req, err);
        proc_req_free(x);
        return;
    }
    if (x->kind == CALL_CHECK) {
        /* It exists: answer with events from here on. */
        x->kind = CALL_FOLLOW;
        http_sse_begin(x->req, on_abort, x);
        json_t *ev = json_deep_copy(result);
        decorate(ev);
        json_object_set_new(ev, "type", json_string("start"));
        (void)http_sse_event(x->req, ev);
        start_call(x, json_pack("{s:s,s:s,s:b}", "op", "process_logs", "id", x->ref, "follow", 1));
        return;
    }
    json_t *o;
    if (x->kind == CALL_LOGS) {
        o = logs_json(x, result);
    } else if (json_object_get(result, "processes")) {
        json_t *list = json_object_get(result, "processes");
        size_t i;
        json_t *p;
        json_array_foreach(list, i, p) decorate(p);
        o = json_pack("{s:s,s:O}", "object", "list", "data", list);
    } else {
        o = json_deep_copy(result);
        decorate(o);
    }
    http_respond_json(x->req, x->status, o);
    proc_req_free(x);
}

static const struct agentcall_ops call_ops = {.on_data = on_data, .on_done = on_done};

static void start_call(struct proc_req *x, json_t *op)
{
    struct sbx_err err = {0};
    struct procmeter_origin o = {.who = http_req_identity(x->req),
                                 .request_id = http_req_id(x->req),
                                 .action = "process.start",
                                 .command = x->command};
    if ((x->kind == CALL_START ? procmeter_start(x->sb, &o, op, on_done, x, &x->meter, &err)
             : agentcall_start(x->sb, op, &call_ops, x, &x->call, &err)) == 0)
        return;
    if (x->kind == CALL_FOLLOW) {
        (void)http_sse_event(x->req, json_pack("{s:s,s:s,s:s}", "type", "error", "code", err.code,
                                               "message", err.msg));
        http_sse_end(x->req);
    } else {
        http_respond_error(x->req, &err);
    }
    proc_req_free(x);
}

/* Look up the sandbox (and the {pid_or_id} segment when with_ref), then run op. */
static void run(struct sbxd *d, struct http_req *req, bool with_ref, enum proc_call kind,
                unsigned status, json_t *op)
{
    struct sbx_err err = {0};
    struct proc_req *x = sbx_xcalloc(1, sizeof(*x));
    x->req = req;
    const char *name = json_string_value(json_object_get(op, "op"));
    if (!strcmp(name, "process_signal") || !strcmp(name, "process_kill")) {
        x->action = !strcmp(name, "process_signal") ? "process.signal" : "process.kill";
        x->audit_details = json_object();
        if (json_object_get(op, "signal"))
            json_object_set(x->audit_details, "signal", json_object_get(op, "signal"));
    }
    if (kind == CALL_START) /* argv is /bin/bash -c <command> */
        x->command = sbx_xstrdup(
            json_string_value(json_array_get(json_object_get(op, "argv"), 2)) ?: "");
    x->kind = kind;
    x->status = status;
    if (manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &x->sb, &err) < 0)
        goto fail;
    if (with_ref) {
        const char *ref = http_req_param(req, 1);
        size_t n = strlen(ref);
        bool ok = n > 0 && n <= PROCESS_REF_MAX;
        for (const char *c = ref; ok && *c; c++)
            ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                 *c == '_';
        if (!ok) {
            sbx_err_set(&err, ENOENT, "process_not_found", "no process %.64s", ref);
            goto fail;
        }
        snprintf(x->ref, sizeof(x->ref), "%s", ref);
        json_object_set_new(op, "id", json_string(ref));
    }
    http_req_suspend(req, on_abort, x);
    start_call(x, op);
    return;
fail:
    json_decref(op);
    proc_req_free(x);
    http_respond_error(req, &err);
}

static void api_processes_start(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    struct sandbox *sb;
    const char *session;
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
    if (session_id_parse(body, &session, &err) < 0)
        goto fail;
    json_t *env = json_object_get(body, "env");
    if (json_is_null(env))
        env = NULL;
    if (sandbox_env_validate(env, "env", &err) < 0)
        goto fail;
    json_t *cwd = json_object_get(body, "cwd");
    if (json_is_null(cwd))
        cwd = NULL;
    if (cwd && (!json_is_string(cwd) || json_string_length(cwd) == 0 ||
                json_string_length(cwd) > EXEC_CWD_MAX ||
                strlen(json_string_value(cwd)) != json_string_length(cwd))) {
        sbx_err_set(&err, EINVAL, "invalid_cwd", "cwd must be a non-empty path string");
        goto fail;
    }
    const char *user;
    if (runas_parse(json_object_get(body, "user"), &user, &err) < 0 ||
        manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, &err) < 0 ||
        runas_check(sb, user, &err) < 0)
        goto fail;
    session = session_for(sb, session);
    json_t *op =
        json_pack("{s:s,s:[s,s,O]}", "op", "process_start", "argv", "/bin/bash", "-c", cmd);
    if (session) {
        /* The sandbox's env is where a new session starts; the request's is this command's. */
        json_object_set_new(op, "session", json_string(session));
        json_object_set_new(op, "session_env", session_env_list(sb, NULL));
        json_object_set_new(op, "env", sandbox_env_list(NULL, env));
    } else {
        json_object_set_new(op, "env", session_env_list(sb, env));
    }
    if (cwd)
        json_object_set(op, "cwd", cwd);
    runas_put(op, user);
    json_decref(body);
    run(d, req, false, CALL_START, 201, op);
    return;
fail:
    json_decref(body);
    http_respond_error(req, &err);
}

static void api_processes_list(struct sbxd *d, struct http_req *req)
{
    run(d, req, false, CALL_PLAIN, 200, json_pack("{s:s}", "op", "process_list"));
}

static void api_processes_get(struct sbxd *d, struct http_req *req)
{
    run(d, req, true, CALL_PLAIN, 200, json_pack("{s:s}", "op", "process_get"));
}

static void api_processes_logs(struct sbxd *d, struct http_req *req)
{
    if (http_req_wants_sse(req))
        run(d, req, true, CALL_CHECK, 200, json_pack("{s:s}", "op", "process_get"));
    else
        run(d, req, true, CALL_LOGS, 200,
            json_pack("{s:s,s:b}", "op", "process_logs", "follow", 0));
}

static const struct {
    const char *name;
    int signo;
} signal_names[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT},
    {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"ALRM", SIGALRM}, {"WINCH", SIGWINCH},
};

/* An integer from 1 to 64, or a name with or without "SIG". */
static int parse_signal(json_t *v, struct sbx_err *err)
{
    if (json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= 64)
        return (int)json_integer_value(v);
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!strncasecmp(s, "SIG", 3))
            s += 3;
        for (size_t i = 0; i < SBX_ARRAY_SIZE(signal_names); i++)
            if (!strcasecmp(s, signal_names[i].name))
                return signal_names[i].signo;
    }
    return sbx_err_set(err, EINVAL, "invalid_signal",
                       "signal must be an integer from 1 to 64 or a name such as \"SIGTERM\"");
}

static void api_processes_signal(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    int signo;
    if (http_req_json(req, &body, &err) < 0 ||
        (signo = parse_signal(json_object_get(body, "signal"), &err)) < 0) {
        json_decref(body);
        http_respond_error(req, &err);
        return;
    }
    json_decref(body);
    run(d, req, true, CALL_PLAIN, 200,
        json_pack("{s:s,s:i}", "op", "process_signal", "signal", signo));
}

static void api_processes_kill(struct sbxd *d, struct http_req *req)
{
    run(d, req, true, CALL_PLAIN, 200, json_pack("{s:s}", "op", "process_kill"));
}

static const struct route routes[] = {
    {"POST", "/v1/sandboxes/{}/processes", AUTH_SANDBOX, api_processes_start, 0},
    {"GET", "/v1/sandboxes/{}/processes", AUTH_SANDBOX, api_processes_list, 0},
    {"GET", "/v1/sandboxes/{}/processes/{}", AUTH_SANDBOX, api_processes_get, 0},
    {"DELETE", "/v1/sandboxes/{}/processes/{}", AUTH_SANDBOX, api_processes_kill, 0},
    {"GET", "/v1/sandboxes/{}/processes/{}/logs", AUTH_SANDBOX, api_processes_logs, 0},
    {"POST", "/v1/sandboxes/{}/processes/{}/signal", AUTH_SANDBOX, api_processes_signal, 0},
};

const struct route_table process_routes = ROUTE_TABLE(routes);
