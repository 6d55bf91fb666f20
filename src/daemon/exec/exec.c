#include "exec.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>


#include "../../common/log.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../../proto/proto.h"
#include "../audit/audit.h"
#include "../billing/billing.h"
#include "../sandbox/channel.h"
#include "../sandbox/manager.h"
#include "../sandbox/runas.h"
#include "../store/store.h"
#include "receipt.h"
#include "session.h"

/* The agent enforces the timeout; this is our guard against an agent that never answers. */
#define EXEC_GRACE_MS 15000
/* A finish the store refused (a full disk) is written again this often, for this long;
 * past it the record says running until a restart marks it interrupted. */
#define EXEC_FINISH_RETRY_MS 1000
#define EXEC_FINISH_RETRIES 900

struct exec_run {
    struct sandbox *sb;
    struct chan_stream *stream;
    struct loop_timer *guard;
    const struct exec_observer *obs;
    void *data;
    char id[EXEC_ID_LEN + 1];
    char sandbox_id[STORE_ID_MAX + 1];
    char user[AUTH_USER_MAX + 1];
    char key_id[AUTH_KEY_ID_LEN + 1];
    char request_id[64];
    char action[16];
    long long started_ms;
    struct receipt_probe *probe;
    /* A workspace not on this host: the request waits for the probe (receipt.h), and the
     * receipt is built after the exit, through the agent, before the exec ends. */
    json_t *req;
    long long guard_ms;
    bool killed; /* exec_kill before the command started */
    json_t *what; /* the audit entry's command_sha256 and command (audit_command_details) */
    struct exec_result res;
    struct billing_exec billing;
};

int exec_params_parse(json_t *body, long long timeout_max, struct exec_params *out,
                      struct sbx_err *err)
{
    json_t *shell = json_object_get(body, "shell");
    json_t *lang = json_object_get(body, "language");
    json_t *code = json_object_get(body, "code");
    if (shell && json_is_null(shell))
        shell = NULL;
    if (code && json_is_null(code))
        code = NULL;
    if (lang && json_is_null(lang))
        lang = NULL;
    if (!!shell == !!code)
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "give either shell, or language and code");
    json_t *argv;
    const char *lang_name = NULL;
    if (shell) {
        if (!json_is_string(shell) || json_string_length(shell) == 0 ||
            json_string_length(shell) > EXEC_CODE_MAX)
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "shell must be a non-empty string of at most %u bytes",
                               EXEC_CODE_MAX);
        if (lang)
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "language goes with code, not with shell");
        argv = json_pack("[s,s,O]", "/bin/bash", "-c", shell);
        lang_name = "shell";
    } else {
        if (!json_is_string(code) || json_string_length(code) > EXEC_CODE_MAX)
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "code must be a string of at most %u bytes", EXEC_CODE_MAX);
        const char *l = lang ? json_string_value(lang) : NULL;
        if (!l)
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "language must be \"python\", \"bash\" or \"node\"");
        if (!strcmp(l, "python"))
            argv = json_pack("[s,s,O]", "python3", "-c", code);
        else if (!strcmp(l, "bash"))
            argv = json_pack("[s,s,O]", "/bin/bash", "-c", code);
        else if (!strcmp(l, "node"))
            argv = json_pack("[s,s,O]", "node", "-e", code);
        else
            argv = NULL;
        lang_name = argv ? (l[0] == 'p' ? "python" : l[0] == 'b' ? "bash" : "node") : NULL;
        if (!argv)
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "language must be \"python\", \"bash\" or \"node\"");
    }
    if (memchr(json_string_value(shell ? shell : code), '\0',
               json_string_length(shell ? shell : code))) {
        json_decref(argv);
        return sbx_err_set(err, EINVAL, "invalid_request", "the command contains a NUL byte");
    }

    struct exec_params p = {.argv = argv,
                            .cwd = "/workspace",
                            .timeout_s = EXEC_TIMEOUT_DEFAULT,
                            .command = json_string_value(shell ? shell : code),
                            .language = lang_name};
    json_t *v;
    int r = 0;
    if ((v = json_object_get(body, "timeout_seconds")) && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > timeout_max) {
            r = sbx_err_set(err, EINVAL, "invalid_timeout",
                            "timeout_seconds must be an integer from 1 to %lld", timeout_max);
            goto fail;
        }
        p.timeout_s = json_integer_value(v);
        p.timeout_given = true;
    }
    if ((v = json_object_get(body, "cwd")) && !json_is_null(v)) {
        const char *c = json_string_value(v);
        if (!c || !*c || json_string_length(v) > EXEC_CWD_MAX ||
            memchr(c, '\0', json_string_length(v))) {
            r = sbx_err_set(err, EINVAL, "invalid_cwd", "cwd must be a non-empty path string");
            goto fail;
        }
        p.cwd = c;
        p.cwd_given = true;
    }
    if ((r = session_id_parse(body, &p.session_id, err)) < 0 ||
        (r = runas_parse(json_object_get(body, "user"), &p.user, err)) < 0)
        goto fail;
    v = json_object_get(body, "env");
    if (v && !json_is_null(v)) {
        if ((r = sandbox_env_validate(v, "env", err)) < 0)
            goto fail;
        p.env = v;
    }
    *out = p;
    return 0;
fail:
    json_decref(argv);
    return r;
}

void exec_params_clear(struct exec_params *p)
{
    json_decref(p->argv);
    memset(p, 0, sizeof(*p));
}

static void run_free(struct exec_run *run)
{
    for (int i = 0; i < 2; i++)
        free(run->res.out[i].buf);
    json_decref(run->res.receipt);
    json_decref(run->res.session);
    receipt_probe_free(run->probe);
    json_decref(run->req);
    json_decref(run->what);
    free(run);
}

static const char *outcome_of(const struct exec_result *res, const struct sbx_err *err, char *buf,
                              size_t cap)
{
    if (err)
        snprintf(buf, cap, "error:%s", err->code);
    else if (res->timed_out)
        snprintf(buf, cap, "timed_out");
    else if (res->oom_killed)
        snprintf(buf, cap, "oom_killed");
    else if (res->pids_killed)
        snprintf(buf, cap, "process_limit_killed");
    else
        snprintf(buf, cap, "exit_code=%d", res->exit_code);
    return buf;
}

/* The end of a command the store could not record: its result is kept and written
 * again, so that GET /execs/{id} tells how it ended once there is room. */
struct finish_retry {
    struct store *st;
    char id[EXEC_ID_LEN + 1];
    const char *status; /* one of the EXEC_ constants */
    char *text;
    long long ended_ms;
    int left;
};

static void finish_retry_cb(struct loop *l, void *data)
{
    struct finish_retry *f = data;
    struct sbx_err err = {0};
    if (store_exec_finish(f->st, f->id, f->status, f->text, f->ended_ms, &err) == 0)
        log_info("exec %s: its end is recorded", f->id);
    else if (--f->left > 0) {
        (void)loop_timer_add(l, EXEC_FINISH_RETRY_MS, finish_retry_cb, f);
        return;
    } else
        log_error("exec %s: its end could not be recorded: %s", f->id, err.msg);
    free(f->text);
    free(f);
}

static void finish_later(struct loop *l, struct store *st, const char *id, const char *status,
                         char *text, long long ended_ms)
{
    struct finish_retry *f = sbx_xcalloc(1, sizeof(*f));
    f->st = st;
    snprintf(f->id, sizeof(f->id), "%s", id);
    f->status = status;
    f->text = text;
    f->ended_ms = ended_ms;
    f->left = EXEC_FINISH_RETRIES;
    (void)loop_timer_add(l, EXEC_FINISH_RETRY_MS, finish_retry_cb, f);
}

static void run_finish(struct exec_run *run, const struct sbx_err *err);

static void receipt_built(json_t *receipt, void *data)
{
    struct exec_run *run = data;
    run->res.receipt = receipt;
    run_finish(run, NULL);
}

/* Record the end (store, audit), then tell whoever still follows. */
static void run_finish(struct exec_run *run, const struct sbx_err *err)
{
    struct manager *m = run->sb->mgr;
    struct store *st = manager_store(m);
    billing_meter_exec(&run->billing);
    if (run->guard)
        loop_timer_cancel(manager_loop(m), run->guard);
    run->guard = NULL;
    if (!err && !run->res.receipt && sandbox_workspace_remote(run->sb)) {
        /* The sandbox stays busy while the walk reads the workspace the command left. */
        receipt_build_start(run->probe, run->id, receipt_built, run);
        return;
    }
    run->sb->exec_busy = false;
    if (!err) {
        if (!run->res.receipt)
            run->res.receipt = receipt_build(run->probe, run->sb, run->id);
        if (run->res.oom_killed)
            json_object_set_new(run->res.receipt, "oom_killed", json_true());
        if (run->res.pids_killed)
            json_object_set_new(run->res.receipt, "process_limit_killed", json_true());
        struct statvfs vfs;
        run->res.workspace_full =
            statvfs(run->sb->workspace, &vfs) == 0 &&
            ((unsigned long long)vfs.f_bavail * vfs.f_frsize < EXEC_WORKSPACE_FULL_BYTES ||
             vfs.f_favail == 0);
    }

    struct sbx_err serr = {0};
    const char *status = EXEC_EXITED;
    json_t *doc;
    if (err) {
        status = !strcmp(err->code, "sandbox_not_running") ? EXEC_INTERRUPTED : EXEC_FAILED;
        doc = json_pack("{s:{s:s,s:s}}", "error", "code", err->code, "message", err->msg);
    } else {
        status = run->res.timed_out ? EXEC_TIMED_OUT : EXEC_EXITED;
        doc = exec_result_to_json(&run->res);
    }
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    long long ended_ms = sbx_wall_ms();
    if (store_exec_finish(st, run->id, status, text, ended_ms, &serr) < 0) {
        log_error("exec %s: %s (written again when the store takes it)", run->id, serr.msg);
        finish_later(manager_loop(run->sb->mgr), st, run->id, status, text, ended_ms);
        text = NULL;
    }
    free(text);

    struct auth_identity who = {.authenticated = true};
    snprintf(who.user, sizeof(who.user), "%s", run->user);
    snprintf(who.key_id, sizeof(who.key_id), "%s", run->key_id);
    char outcome[80];
    json_t *details = json_pack("{s:s,s:s,s:I}", "exec_id", run->id, "status", status,
                                "duration_ms", (json_int_t)run->res.duration_ms);
    json_object_update(details, run->what);
    audit_record(st, &who, NULL, run->request_id, run->action, run->sandbox_id,
                 outcome_of(&run->res, err, outcome, sizeof(outcome)), details);

    if (run->obs && run->obs->on_done)
        run->obs->on_done(err ? NULL : &run->res, err, run->data);
    run_free(run);
}

static void on_data(struct chan_stream *st, unsigned ch, const uint8_t *buf, size_t len, void *data)
{
    struct exec_run *run = data;
    if (ch != PROTO_CH_STDOUT && ch != PROTO_CH_STDERR)
        return;
    struct exec_output *o = &run->res.out[ch - 1];
    size_t keep = len;
    if (o->len + keep > EXEC_OUTPUT_MAX)
        keep = EXEC_OUTPUT_MAX - o->len;
    if (keep) {
        o->buf = sbx_xrealloc(o->buf, o->len + keep);
        memcpy(o->buf + o->len, buf, keep);
        o->len += keep;
        if (run->obs && run->obs->on_output)
            run->obs->on_output(ch, buf, keep, run->data);
    }
    if (len > keep) {
        /* Past the limit the command runs on; its bytes are counted, not kept. */
        if (o->dropped == 0 && run->obs && run->obs->on_truncated)
            run->obs->on_truncated(ch, run->data);
        o->dropped += len - keep;
    }
}

static void on_exit_frame(struct chan_stream *st, json_t *result, void *data)
{
    struct exec_run *run = data;
    run->stream = NULL; /* it ends with this frame */
    run->res.exit_code = (int)json_integer_value(json_object_get(result, "exit_code"));
    run->res.signal = (int)json_integer_value(json_object_get(result, "signal"));
    run->res.timed_out = json_is_true(json_object_get(result, "timed_out"));
    run->res.oom_killed = json_is_true(json_object_get(result, "oom_killed"));
    run->res.pids_killed = json_is_true(json_object_get(result, "process_limit_killed"));
    run->res.duration_ms = json_integer_value(json_object_get(result, "duration_ms"));
    run->res.session = json_incref(json_object_get(result, "session"));
    run_finish(run, NULL);
}

static void on_error_frame(struct chan_stream *st, const struct sbx_err *err, void *data)
{
    struct exec_run *run = data;
    struct sbx_err e = *err;
    /* The agent's codes that are the caller's fault keep their meaning; the rest are ours. */
    if (!strcmp(e.code, "invalid_cwd") || !strcmp(e.code, "too_many_sessions") ||
        !strcmp(e.code, "process_limit"))
        ;
    else if (!strcmp(e.code, "channel_closed") || !strcmp(e.code, "sandbox_not_running")) {
        snprintf(e.code, sizeof(e.code), "sandbox_not_running");
        if (strcmp(run->sb->rec.backend, "v1"))
            snprintf(e.msg, sizeof(e.msg),
                     "sandbox %s stopped while the command ran (%.200s): it is kept as failed "
                     "with its files, and the next exec or POST /v1/sandboxes/%s/restart "
                     "starts it again",
                     run->sandbox_id, err->msg, run->sandbox_id);
    } else
        snprintf(e.code, sizeof(e.code), "internal");
    run_finish(run, &e);
}

static const struct chan_stream_ops exec_ops = {
    .on_data = on_data,
    .on_exit = on_exit_frame,
    .on_error = on_error_frame,
};

static void on_guard(struct loop *l, void *data)
{
    struct exec_run *run = data;
    run->guard = NULL;
    channel_detach(run->stream);
    struct sbx_err e = {0};
    sbx_err_set(&e, ETIMEDOUT, "internal", "the sandbox's agent did not answer in time");
    run_finish(run, &e);
}

/* Make an exec request (built for a command outside any session) run in the session
 * p names or the default one: the sandbox's env becomes where a new session starts,
 * and the cwd and timeout are left to the session unless p gave them. */
static void session_exec_request(const struct sandbox *sb, const struct exec_params *p, json_t *req)
{
    const char *sid = session_for(sb, p->session_id);
    if (!sid)
        return;
    json_object_set_new(req, "session", json_string(sid));
    json_object_set_new(req, "session_env", session_env_list(sb, NULL));
    json_object_set_new(req, "env", sandbox_env_list(NULL, p->env));
    if (!p->cwd_given)
        json_object_del(req, "cwd");
    if (!p->timeout_given)
        json_object_set_new(req, "session_timeout", json_true());
}

static void new_exec_id(char out[EXEC_ID_LEN + 1])
{
    sbx_random_id("ex_", 10, out, EXEC_ID_LEN + 1);
}

/* Send the command to the agent. */
static int run_launch(struct exec_run *run, struct sbx_err *err)
{
    struct sandbox *sb = run->sb;
    if (!sb->chan || sb->ended)
        return sbx_err_set(err, ECONNRESET, "sandbox_not_running", "sandbox %s is not running",
                           sb->rec.id);
    int r = channel_open(sb->chan, run->req, &exec_ops, run, &run->stream, err);
    json_decref(run->req);
    run->req = NULL;
    if (r < 0)
        return r;
    sb->exec_busy = true;
    billing_exec_begin(run->user, run->key_id, sb->rec.id, sb->rec.backend, &run->billing);
    run->guard = loop_timer_add(manager_loop(sb->mgr), run->guard_ms + EXEC_GRACE_MS, on_guard,
                                run);
    return 0;
}

/* The probe of a remote workspace is done: the command starts (or ends unstarted). */
static void probe_ready(const struct sbx_err *gone, void *data)
{
    struct exec_run *run = data;
    struct sbx_err err = {0};
    if (gone)
        err = *gone;
    else if (run->killed)
        sbx_err_set(&err, ECANCELED, "cancelled", "the command was cancelled before it started");
    else if (run_launch(run, &err) == 0)
        return;
    run_finish(run, &err);
}

int exec_start(struct sandbox *sb, const struct exec_params *p, const struct exec_origin *o,
               const struct exec_observer *obs, void *data, struct exec_run **out,
               struct sbx_err *err)
{
    if (sb->exec_busy)
        return sbx_err_set(err, EBUSY, "sandbox_busy", "sandbox %s is already running a command",
                           sb->rec.id);
    if (!sb->chan || sb->ended)
        return sbx_err_set(err, ECONNRESET, "sandbox_not_running", "sandbox %s is not running",
                           sb->rec.id);
    if (billing_admit(o->who->user, err) < 0 || runas_check(sb, p->user, err) < 0)
        return sbx_err_ret(err);
    manager_before_exec(sb);
    struct exec_run *run = sbx_xcalloc(1, sizeof(*run));
    run->sb = sb;
    run->obs = obs;
    run->data = data;
    new_exec_id(run->id);
    snprintf(run->sandbox_id, sizeof(run->sandbox_id), "%s", sb->rec.id);
    snprintf(run->user, sizeof(run->user), "%s", o->who->user);
    snprintf(run->key_id, sizeof(run->key_id), "%s", o->who->key_id);
    snprintf(run->request_id, sizeof(run->request_id), "%s", o->request_id ? o->request_id : "");
    snprintf(run->action, sizeof(run->action), "%s", o->action);
    run->res.id = run->id;
    run->res.sandbox_id = run->sandbox_id;
    run->started_ms = sbx_wall_ms();
    /* Unless the caller chose, a command gets its configuration's default_timeout_sec
     * (spec 002), else the built-in one; a session's own timeout still comes first. */
    long long timeout_s =
        p->timeout_given || !sb->command_timeout_sec ? p->timeout_s : sb->command_timeout_sec;
    run->what = audit_command_details(NULL, p->command, p->command ? strlen(p->command) : 0);
    json_object_set_new(run->what, "timeout_seconds", json_integer(timeout_s));

    bool remote = sandbox_workspace_remote(sb);
    int r = remote ? receipt_probe_start(sb, p->command, p->language, probe_ready, run,
                                         &run->probe, err)
                   : receipt_probe_new(sb, p->command, p->language, &run->probe, err);
    if (r < 0 || (r = store_exec_insert(manager_store(sb->mgr), run->id, sb->rec.id, o->who->user,
                                        run->started_ms, err)) < 0) {
        run_free(run);
        return r;
    }
    json_t *senv = sandbox_env_object(sb);
    run->req = json_pack("{s:s,s:O,s:o,s:s,s:I,s:b}", "op", "exec", "argv", p->argv, "env",
                         sandbox_env_list(senv, p->env), "cwd", p->cwd, "timeout_ms",
                         (json_int_t)(timeout_s * 1000), "stdin", 0);
    json_decref(senv);
    session_exec_request(sb, p, run->req);
    runas_put(run->req, p->user);
    /* A session's own timeout (at most SESSION_TIMEOUT_MS_MAX) may replace ours. */
    run->guard_ms = timeout_s * 1000;
    if (!p->timeout_given && run->guard_ms < SESSION_TIMEOUT_MS_MAX)
        run->guard_ms = SESSION_TIMEOUT_MS_MAX;
    if (remote) {
        /* Busy from now: the probe's walk must see the workspace no other command changes. */
        sb->exec_busy = true;
    } else if ((r = run_launch(run, err)) < 0) {
        struct sbx_err e2 = {0};
        (void)store_exec_finish(manager_store(sb->mgr), run->id, EXEC_FAILED, NULL, sbx_wall_ms(),
                                &e2);
        run_free(run);
        return r;
    }
    if (out)
        *out = run;
    return 0;
}

const char *exec_run_id(const struct exec_run *run)
{
    return run->id;
}

void exec_abandon(struct exec_run *run)
{
    run->obs = NULL;
    run->data = NULL;
}

void exec_kill(struct exec_run *run)
{
    run->killed = true;
    if (run->stream)
        (void)channel_signal(run->stream, SIGKILL, NULL);
}

void exec_output_put(json_t *o, const char *name, const struct exec_output *out)
{
    size_t n = out->len;
    char key[32];
    if (sbx_utf8_valid(out->buf ? out->buf : "", n)) {
        json_object_set_new(o, name, json_stringn(out->buf ? out->buf : "", n));
    } else {
        /* Bytes that are not UTF-8 arrive intact as base64, never mangled. */
        char *b64 = sbx_base64_encode(out->buf ? out->buf : "", n);
        json_object_set_new(o, name, json_string(b64));
        free(b64);
        snprintf(key, sizeof(key), "%s_encoding", name);
        json_object_set_new(o, key, json_string("base64"));
    }
    snprintf(key, sizeof(key), "%s_truncated", name);
    json_object_set_new(o, key, json_boolean(out->dropped > 0));
    snprintf(key, sizeof(key), "%s_dropped_bytes", name);
    json_object_set_new(o, key, json_integer((json_int_t)out->dropped));
}

json_t *exec_result_to_json(const struct exec_result *res)
{
    json_t *o = json_pack("{s:s,s:s,s:s,s:i,s:I,s:b,s:b,s:b}", "object", "exec", "id", res->id,
                          "sandbox_id", res->sandbox_id, "exit_code", res->exit_code, "duration_ms",
                          (json_int_t)res->duration_ms, "timed_out", res->timed_out, "oom_killed",
                          res->oom_killed, "process_limit_killed", res->pids_killed);
    exec_output_put(o, "stdout", &res->out[0]);
    exec_output_put(o, "stderr", &res->out[1]);
    if (res->receipt)
        json_object_set(o, "receipt", res->receipt);
    if (res->oom_killed)
        json_object_set_new(o, "error",
                            json_pack("{s:s,s:s}", "code", "out_of_memory", "message",
                                      "the command used more memory than the sandbox has: its "
                                      "largest process was killed (SIGKILL); the sandbox and its "
                                      "files are intact"));
    else if (res->pids_killed)
        json_object_set_new(o, "error",
                            json_pack("{s:s,s:s}", "code", "process_limit", "message",
                                      "the command's processes reached the sandbox's process "
                                      "limit: its session was killed (SIGKILL), as a fork bomb "
                                      "is; the sandbox and its files are intact"));
    else if (res->workspace_full)
        json_object_set_new(o, "error",
                            json_pack("{s:s,s:s}", "code", "workspace_too_large", "message",
                                      "the workspace quota is used up: writes failed with "
                                      "ENOSPC; remove files to make room"));
    if (res->session)
        json_object_set(o, "session", res->session);
    return o;
}

int exec_record_json(struct store *st, const char *sandbox_id, const char *exec_id,
                     const char *user, json_t **out, struct sbx_err *err)
{
    struct store_exec e;
    if (store_exec_get(st, sandbox_id, exec_id, user, &e, err) < 0)
        return sbx_err_ret(err);
    json_t *o = e.result_json ? json_loads(e.result_json, 0, NULL) : NULL;
    if (!o)
        o = json_object();
    json_object_set_new(o, "object", json_string("exec"));
    json_object_set_new(o, "id", json_string(e.id));
    json_object_set_new(o, "sandbox_id", json_string(e.sandbox_id));
    json_object_set_new(o, "status", json_string(e.status));
    json_object_set_new(o, "started_at_ms", json_integer(e.started_at_ms));
    if (e.ended_at_ms)
        json_object_set_new(o, "ended_at_ms", json_integer(e.ended_at_ms));
    store_exec_clear(&e);
    *out = o;
    return 0;
}
