#include "exec.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/util.h"
#include "../proto/proto.h"
#include "agent.h"
#include "chan.h"
#include "env.h"
#include "oomwatch.h"
#include "pidguard.h"
#include "session.h"
#include "spare.h"
#include "spawn.h"
#include "stream.h"

struct exec_req {
    const char **argv; /* NULL-terminated; strings owned by the JSON request */
    json_t *env;       /* the request's "K=V" list, borrowed */
    const char *cwd;   /* NULL: the agent's own, or the session's */
    long long timeout_ms;
    bool session_timeout; /* the session's command timeout, if it has one, replaces timeout_ms */
    bool want_stdin;
    bool root, user_given; /* without "user", a session's own applies */
};

struct exec_stream {
    struct stream base;
    pid_t pgid;
    long long start_ms, exit_ms;
    int status;
    bool exited, timed_out, has_stdin;
    bool oom_checked, oom; /* the memory watcher killed a process of its group */
    struct loop_timer *timeout_t, *drain_t, *settle_t;
    struct chan_out out[2];      /* channels 1 and 2 */
    struct chan_in in;           /* channel 0, when has_stdin */
    struct session_run *session; /* NULL outside a session */
    struct spare *resident;      /* the session's resident shell runs it (spare.h) */
    bool group_idle; /* the resident shell is done with it: its group is no longer ours */
};

static struct exec_stream *to_exec(struct stream *s)
{
    return (struct exec_stream *)s; /* base is the first member */
}

/* ---- request ---- */

static bool json_cstring(json_t *v)
{
    /* jansson rejects \u0000 on load by default; be explicit anyway. */
    return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

static int exec_parse(json_t *req, struct exec_req *r, struct sbx_err *err)
{
    json_t *argv = json_object_get(req, "argv");
    if (!json_is_array(argv) || json_array_size(argv) == 0)
        return sbx_err_set(err, EINVAL, "bad_request", "argv must be a non-empty array of strings");
    size_t argc = json_array_size(argv);
    r->argv = sbx_xcalloc(argc + 1, sizeof(*r->argv));
    for (size_t i = 0; i < argc; i++) {
        json_t *v = json_array_get(argv, i);
        if (!json_cstring(v))
            return sbx_err_set(err, EINVAL, "bad_request", "argv[%zu] is not a string", i);
        r->argv[i] = json_string_value(v);
    }
    if (r->argv[0][0] == '\0')
        return sbx_err_set(err, EINVAL, "bad_request", "argv[0] is empty");

    r->env = json_object_get(req, "env");

    json_t *cwd = json_object_get(req, "cwd");
    if (cwd && !json_is_null(cwd)) {
        if (!json_cstring(cwd) || json_string_length(cwd) == 0)
            return sbx_err_set(err, EINVAL, "bad_request", "cwd must be a non-empty string");
        r->cwd = json_string_value(cwd);
    }

    json_t *t = json_object_get(req, "timeout_ms");
    if (t && !json_is_null(t)) {
        if (!json_is_integer(t) || json_integer_value(t) < 0)
            return sbx_err_set(err, EINVAL, "bad_request",
                               "timeout_ms must be a non-negative integer");
        r->timeout_ms = json_integer_value(t);
    }
    r->session_timeout = json_is_true(json_object_get(req, "session_timeout"));
    r->user_given = json_object_get(req, "user") != NULL;
    int ret = spawn_user_parse(req, &r->root, err);
    if (ret < 0)
        return ret;

    json_t *in = json_object_get(req, "stdin");
    if (in && !json_is_null(in)) {
        if (!json_is_boolean(in))
            return sbx_err_set(err, EINVAL, "bad_request", "stdin must be a boolean");
        r->want_stdin = json_is_true(in);
    }
    return 0;
}

/* A session command whose state is saved: exactly `bash -c S`. */
static bool is_shell_command(const struct exec_req *r)
{
    return r->argv[0] && r->argv[1] && r->argv[2] && !r->argv[3] &&
           !strcmp(r->argv[0], "/bin/bash") && !strcmp(r->argv[1], "-c");
}

/* ---- the stream ---- */

/* Signal the command's group, while it is the command's. */
static void exec_kill(struct exec_stream *x, int sig)
{
    if (!x->group_idle)
        (void)kill(-x->pgid, sig);
}

static void exec_free(struct exec_stream *x)
{
    struct agent *a = x->base.agent;
    stream_unregister(a, &x->base);
    if (x->resident)
        spare_release(a, x->resident, !x->group_idle);
    if (x->timeout_t)
        loop_timer_cancel(a->loop, x->timeout_t);
    if (x->drain_t)
        loop_timer_cancel(a->loop, x->drain_t);
    if (x->settle_t)
        loop_timer_cancel(a->loop, x->settle_t);
    chan_out_close(&x->out[0], false);
    chan_out_close(&x->out[1], false);
    chan_in_close(&x->in);
    session_run_free(x->session);
    free(x);
}

static void exec_finish(struct exec_stream *x);

static void exec_settle_cb(struct loop *l, void *data)
{
    struct exec_stream *x = data;
    x->settle_t = NULL;
    exec_finish(x);
}

static void exec_finish(struct exec_stream *x)
{
    struct agent *a = x->base.agent;
    if (x->settle_t)
        return; /* its timer finishes it */
    if (!x->oom_checked) {
        x->oom_checked = true;
        x->oom = oomwatch_claim(a, x->pgid, 0, x->start_ms);
        /* The answer waits while gVisor gives the victim's memory back to the host (it
         * does so lazily), so that a caller repeating the command at once does not find
         * the host's cgroup still charged with the last one. */
        if (x->oom) {
            x->settle_t = loop_timer_add(a->loop, OOMWATCH_SETTLE_MS, exec_settle_cb, x);
            return;
        }
    }
    /* Pipes still open here are held by something outside the main child (see exec.h). */
    chan_out_close(&x->out[0], true);
    chan_out_close(&x->out[1], true);
    bool limit = pidguard_claim(a, x->pgid, x->start_ms, &x->status);
    int code = 0, sig = 0;
    if (WIFEXITED(x->status)) {
        code = WEXITSTATUS(x->status);
    } else if (WIFSIGNALED(x->status)) {
        sig = WTERMSIG(x->status);
        code = 128 + sig;
    }
    json_t *res = json_pack(
        "{s:i, s:i, s:b, s:I, s:b, s:b}", "exit_code", code, "signal", sig, "timed_out",
        x->timed_out, "duration_ms", (json_int_t)(x->exit_ms - x->start_ms), "oom_killed", x->oom,
        "process_limit_killed", limit);
    if (x->session)
        json_object_set_new(res, "session", session_run_end(TAKE_PTR(x->session)));
    conn_send_json(a, x->base.id, PROTO_EXIT, res);
    exec_free(x);
    spare_refill(a); /* once the answer is on its way */
}

static bool exec_maybe_finish(struct exec_stream *x)
{
    if (!x->exited || chan_out_open(&x->out[0]) || chan_out_open(&x->out[1]))
        return false;
    exec_finish(x);
    return true;
}

static void exec_out_closed(void *owner)
{
    exec_maybe_finish(owner);
}

static void exec_drain_cb(struct loop *l, void *data)
{
    struct exec_stream *x = data;
    x->drain_t = NULL;
    long long now = sbx_now_ms();
    long long since_exit = now - x->exit_ms;
    if (since_exit >= EXEC_DRAIN_MAX_MS) {
        exec_finish(x);
        return;
    }
    bool blocked = false;
    long long active = 0;
    for (int i = 0; i < 2; i++) {
        if (!chan_out_open(&x->out[i]))
            continue;
        blocked |= chan_out_blocked(&x->out[i]);
        if (x->out[i].last_active_ms > active)
            active = x->out[i].last_active_ms;
    }
    long long quiet = now - active;
    if (!blocked && quiet >= EXEC_DRAIN_QUIET_MS) {
        exec_finish(x);
        return;
    }
    long long next = blocked ? EXEC_DRAIN_QUIET_MS : EXEC_DRAIN_QUIET_MS - quiet;
    if (next > EXEC_DRAIN_MAX_MS - since_exit)
        next = EXEC_DRAIN_MAX_MS - since_exit;
    x->drain_t = loop_timer_add(l, next, exec_drain_cb, x);
}

static void exec_timeout_cb(struct loop *l, void *data)
{
    struct exec_stream *x = data;
    x->timeout_t = NULL;
    x->timed_out = true;
    exec_kill(x, SIGKILL);
}

/* The main child exited, or the resident shell finished the command. */
static void exec_exited(struct exec_stream *x, int status)
{
    struct agent *a = x->base.agent;
    x->exited = true;
    x->status = status;
    x->exit_ms = sbx_now_ms();
    if (x->timeout_t) {
        loop_timer_cancel(a->loop, x->timeout_t);
        x->timeout_t = NULL;
    }
    if (exec_maybe_finish(x))
        return;
    x->drain_t = loop_timer_add(a->loop, EXEC_DRAIN_QUIET_MS, exec_drain_cb, x);
}

static void exec_child_exit(struct stream *s, pid_t pid, int status)
{
    struct exec_stream *x = to_exec(s);
    s->pid = 0;
    if (x->resident)
        spare_exited(x->resident);
    exec_exited(x, status);
}

static void exec_resident_done(void *data, int status)
{
    struct exec_stream *x = data;
    x->base.pid = 0; /* the shell goes on, the session's again */
    x->group_idle = true;
    exec_exited(x, status);
}

static void exec_data(struct stream *s, uint8_t ch, const uint8_t *p, uint32_t len)
{
    struct exec_stream *x = to_exec(s);
    if (ch != PROTO_CH_STDIN || !x->has_stdin)
        return; /* nothing reads it */
    if (chan_in_data(&x->in, p, len) < 0) {
        exec_kill(x, SIGKILL);
        conn_send_error(s->agent, s->id, "window_exceeded",
                        "the daemon sent more stdin than its window allowed");
        exec_free(x);
    }
}

static void exec_eof(struct stream *s, uint8_t ch)
{
    struct exec_stream *x = to_exec(s);
    if (ch == PROTO_CH_STDIN && x->has_stdin)
        chan_in_eof(&x->in);
}

static void exec_window(struct stream *s, uint8_t ch, uint32_t credit)
{
    struct exec_stream *x = to_exec(s);
    if (ch == PROTO_CH_STDOUT || ch == PROTO_CH_STDERR)
        chan_out_credit(&x->out[ch - 1], credit);
}

static void exec_signal(struct stream *s, int sig)
{
    /* The group outlives the main child while background members run. */
    exec_kill(to_exec(s), sig);
}

static void exec_resume(struct stream *s)
{
    struct exec_stream *x = to_exec(s);
    chan_out_update(&x->out[0]);
    chan_out_update(&x->out[1]);
}

static void exec_abort(struct stream *s)
{
    struct exec_stream *x = to_exec(s);
    exec_kill(x, SIGKILL);
    exec_free(x); /* the main child, if alive, is reaped as an unowned child */
}

static const struct stream_ops exec_ops = {
    .data = exec_data,
    .eof = exec_eof,
    .window = exec_window,
    .signal = exec_signal,
    .child_exit = exec_child_exit,
    .resume = exec_resume,
    .abort = exec_abort,
};

int exec_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    struct exec_req r = {0};
    struct spawn_fds fds = {-1, -1, -1};
    struct envv env = {0};
    struct session_run *run = NULL;
    struct spare *resident = NULL;
    pid_t pid = 0;
    int ret = exec_parse(req, &r, err);
    if (ret < 0)
        goto out;
    struct session *sess;
    bool created;
    ret = session_resolve(a, req, &sess, &created, err);
    if (ret < 0)
        goto out;
    if (sess)
        envv_copy(&env, &sess->env);
    else
        envv_init_base(&env);
    ret = envv_set_json(&env, r.env, "env", err);
    if (ret < 0)
        goto out;
    struct spawn_req sr = {.argv = r.argv,
                           .cwd = r.cwd,
                           .want_stdin = r.want_stdin,
                           .extra = {-1, -1},
                           .root = r.user_given || !sess ? r.root : sess->root};
    if (sess && r.session_timeout && sess->timeout_ms)
        r.timeout_ms = sess->timeout_ms;
    long long start = sbx_now_ms();
    /* A command with nothing of its own runs in the session's resident shell, if it fits. */
    bool warm = sess && is_shell_command(&r) && !r.want_stdin && !r.cwd &&
                json_array_size(r.env) == 0 &&
                spare_take(a, sess, sr.root, r.argv[2], &pid, &fds, &run, &resident);
    if (!warm) {
        if (sess) {
            ret = session_run_begin(a, sess, created, is_shell_command(&r), r.env, &env, &sr, &run,
                                    err);
            if (ret < 0)
                goto out;
        }
        sr.envp = env.v;
        start = sbx_now_ms();
        ret = spawn_command(&sr, &pid, &fds, err);
        if (run)
            session_run_spawned(run);
        if (ret < 0)
            goto out;
    }

    struct exec_stream *x = sbx_xcalloc(1, sizeof(*x));
    x->base = (struct stream){.agent = a, .id = id, .pid = pid, .ops = &exec_ops};
    x->pgid = pid; /* setsid made the child a group leader */
    x->start_ms = start;
    x->has_stdin = r.want_stdin;
    x->session = TAKE_PTR(run);
    x->resident = resident;
    ret = stream_register(a, &x->base);
    if (ret < 0) {
        /* The caller checked capacity and id, so this is a bug; don't leak the child. */
        (void)kill(-pid, SIGKILL);
        close(fds.out_r);
        close(fds.err_r);
        if (fds.in_w >= 0)
            close(fds.in_w);
        if (resident)
            spare_release(a, resident, true);
        session_run_free(x->session);
        free(x);
        ret = sbx_err_set(err, -ret, "internal", "registering stream %u failed", id);
        goto out;
    }
    chan_out_init(&x->out[0], a, id, PROTO_CH_STDOUT, fds.out_r, exec_out_closed, x);
    chan_out_init(&x->out[1], a, id, PROTO_CH_STDERR, fds.err_r, exec_out_closed, x);
    chan_in_init(&x->in, a, id, PROTO_CH_STDIN, fds.in_w);
    if (resident)
        spare_bind(resident, exec_resident_done, x);
    if (r.timeout_ms > 0)
        x->timeout_t = loop_timer_add(a->loop, r.timeout_ms, exec_timeout_cb, x);
out:
    session_run_free(run);
    envv_free(&env);
    free(r.argv);
    return ret;
}
