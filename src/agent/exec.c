#include "exec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/util.h"
#include "../proto/proto.h"
#include "agent.h"
#include "chan.h"
#include "stream.h"

extern char **environ;

static const char *const exec_base_env[] = {
    "PATH=" EXEC_BASE_PATH,
    "HOME=/tmp",
    "LANG=C.UTF-8",
    "TERM=dumb",
};

struct exec_req {
    const char **argv; /* NULL-terminated; strings owned by the JSON request */
    const char **envp; /* NULL-terminated */
    const char *cwd;   /* NULL: the agent's own */
    long long timeout_ms;
    bool want_stdin;
};

struct exec_stream {
    struct stream base;
    pid_t pgid;
    long long start_ms, exit_ms;
    int status;
    bool exited, timed_out, has_stdin;
    struct loop_timer *timeout_t, *drain_t;
    struct chan_out out[2]; /* channels 1 and 2 */
    struct chan_in in;      /* channel 0, when has_stdin */
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

    json_t *env = json_object_get(req, "env");
    if (env && !json_is_null(env) && !json_is_array(env))
        return sbx_err_set(err, EINVAL, "bad_request", "env must be an array of \"K=V\" strings");
    size_t nenv = json_is_array(env) ? json_array_size(env) : 0;
    size_t nbase = SBX_ARRAY_SIZE(exec_base_env);
    r->envp = sbx_xcalloc(nbase + nenv + 1, sizeof(*r->envp));
    size_t n = 0;
    for (size_t i = 0; i < nbase; i++)
        r->envp[n++] = exec_base_env[i];
    for (size_t i = 0; i < nenv; i++) {
        json_t *v = json_array_get(env, i);
        const char *kv = json_cstring(v) ? json_string_value(v) : NULL;
        const char *eq = kv ? strchr(kv, '=') : NULL;
        if (!eq || eq == kv)
            return sbx_err_set(err, EINVAL, "bad_request", "env[%zu] is not a \"K=V\" string", i);
        size_t klen = (size_t)(eq - kv) + 1; /* key and '=' */
        size_t j = 0;
        while (j < n && strncmp(r->envp[j], kv, klen) != 0)
            j++;
        r->envp[j] = kv; /* replace an earlier entry with the same key, or append */
        if (j == n)
            n++;
    }

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

    json_t *in = json_object_get(req, "stdin");
    if (in && !json_is_null(in)) {
        if (!json_is_boolean(in))
            return sbx_err_set(err, EINVAL, "bad_request", "stdin must be a boolean");
        r->want_stdin = json_is_true(in);
    }
    return 0;
}

/* ---- spawning ---- */

enum { STAGE_SETUP = 1, STAGE_CHDIR = 2, STAGE_EXEC = 3 };

struct spawn_report {
    int stage;
    int err;
};

static _Noreturn void child_fail(int fd, int stage, int e)
{
    struct spawn_report rep = {stage, e};
    (void)!write(fd, &rep, sizeof(rep));
    _exit(127);
}

static void close_from(int lowfd)
{
    if (close_range((unsigned)lowfd, ~0u, 0) == 0)
        return;
    /* Without close_range (old kernels; possibly the sandbox kernel): list /proc/self/fd
     * rather than trying every possible fd, which costs a syscall each. We are the only
     * thread of a fresh child, so opendir's allocation is fine here. */
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        int self = dirfd(d);
        int again;
        do {
            again = 0;
            struct dirent *de;
            while ((de = readdir(d))) {
                char *end;
                long fd = strtol(de->d_name, &end, 10);
                if (*end || end == de->d_name || fd < lowfd || fd == self)
                    continue;
                (void)close((int)fd);
                again = 1;
            }
            rewinddir(d); /* closing while listing: go round until nothing is left */
        } while (again);
        closedir(d);
        return;
    }
    struct rlimit rl;
    long max = 65536;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)max)
        max = (long)rl.rlim_cur;
    for (long fd = lowfd; fd < max; fd++)
        (void)close((int)fd);
}

/* In the child, between fork and exec. The agent is single threaded, so the
 * usual post-fork restrictions don't bite, but keep it simple anyway. All agent
 * fds are O_CLOEXEC; we still close everything above 3 in case one is not. */
static _Noreturn void exec_child(const struct exec_req *r, int in_fd, int out_fd, int err_fd,
                                 int rep_fd)
{
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            (void)signal(sig, SIG_DFL);
    if (setsid() < 0)
        child_fail(rep_fd, STAGE_SETUP, errno);
    /* The agent keeps 0, 1 and 2 open, so these fds are all >= 3. */
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
        child_fail(rep_fd, STAGE_SETUP, errno);
    if (rep_fd != 3) {
        if (dup3(rep_fd, 3, O_CLOEXEC) < 0)
            child_fail(rep_fd, STAGE_SETUP, errno);
        rep_fd = 3;
    }
    close_from(4);
    if (r->cwd && chdir(r->cwd) < 0)
        child_fail(rep_fd, STAGE_CHDIR, errno);
    environ = (char **)r->envp; /* execvp searches the PATH of this environment */
    execvp(r->argv[0], (char *const *)r->argv);
    child_fail(rep_fd, STAGE_EXEC, errno);
}

struct spawn_fds {
    int in_w; /* -1 without stdin */
    int out_r, err_r;
};

static int exec_spawn(const struct exec_req *r, pid_t *pid_out, struct spawn_fds *fds,
                      struct sbx_err *err)
{
    _cleanup_close_ int in_r = -1, in_w = -1, out_r = -1, out_w = -1, err_r = -1, err_w = -1;
    _cleanup_close_ int rep_r = -1, rep_w = -1;
    int p[2];

    if (r->want_stdin) {
        if (pipe2(p, O_CLOEXEC) < 0)
            return sbx_err_set(err, errno, "spawn_failed", "pipe: %s", strerror(errno));
        in_r = p[0];
        in_w = p[1];
    } else {
        in_r = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in_r < 0)
            return sbx_err_set(err, errno, "spawn_failed", "/dev/null: %s", strerror(errno));
    }
    if (pipe2(p, O_CLOEXEC) < 0)
        return sbx_err_set(err, errno, "spawn_failed", "pipe: %s", strerror(errno));
    out_r = p[0];
    out_w = p[1];
    if (pipe2(p, O_CLOEXEC) < 0)
        return sbx_err_set(err, errno, "spawn_failed", "pipe: %s", strerror(errno));
    err_r = p[0];
    err_w = p[1];
    if (pipe2(p, O_CLOEXEC) < 0)
        return sbx_err_set(err, errno, "spawn_failed", "pipe: %s", strerror(errno));
    rep_r = p[0];
    rep_w = p[1];

    pid_t pid = fork();
    if (pid < 0)
        return sbx_err_set(err, errno, "spawn_failed", "fork: %s", strerror(errno));
    if (pid == 0)
        exec_child(r, in_r, out_w, err_w, rep_w);

    sbx_closep(&rep_w);
    rep_w = -1;
    /* Synchronous, like posix_spawn: the report pipe reaches EOF at the exec. */
    struct spawn_report rep;
    ssize_t n;
    do
        n = read(rep_r, &rep, sizeof(rep));
    while (n < 0 && errno == EINTR);
    if (n != 0) {
        /* The child exits 127; the reaper collects it as an unowned child. */
        if (n != (ssize_t)sizeof(rep))
            return sbx_err_set(err, EIO, "spawn_failed", "%s: lost the spawn report", r->argv[0]);
        if (rep.stage == STAGE_CHDIR)
            return sbx_err_set(err, rep.err, "invalid_cwd", "cannot change directory to %s: %s",
                               r->cwd, strerror(rep.err));
        if (rep.stage == STAGE_EXEC)
            return sbx_err_set(err, rep.err, "spawn_failed", "cannot execute %s: %s", r->argv[0],
                               strerror(rep.err));
        return sbx_err_set(err, rep.err, "spawn_failed", "setting up %s: %s", r->argv[0],
                           strerror(rep.err));
    }
    if ((in_w >= 0 && sbx_set_nonblock(in_w) < 0) || sbx_set_nonblock(out_r) < 0 ||
        sbx_set_nonblock(err_r) < 0) {
        int e = errno;
        (void)kill(-pid, SIGKILL);
        return sbx_err_set(err, e, "spawn_failed", "fcntl: %s", strerror(e));
    }
    *pid_out = pid;
    fds->in_w = TAKE_FD(in_w);
    fds->out_r = TAKE_FD(out_r);
    fds->err_r = TAKE_FD(err_r);
    return 0;
}

/* ---- the stream ---- */

static void exec_free(struct exec_stream *x)
{
    struct agent *a = x->base.agent;
    stream_unregister(a, &x->base);
    if (x->timeout_t)
        loop_timer_cancel(a->loop, x->timeout_t);
    if (x->drain_t)
        loop_timer_cancel(a->loop, x->drain_t);
    chan_out_close(&x->out[0], false);
    chan_out_close(&x->out[1], false);
    chan_in_close(&x->in);
    free(x);
}

static void exec_finish(struct exec_stream *x)
{
    struct agent *a = x->base.agent;
    /* Pipes still open here are held by something outside the main child (see exec.h). */
    chan_out_close(&x->out[0], true);
    chan_out_close(&x->out[1], true);
    int code = 0, sig = 0;
    if (WIFEXITED(x->status)) {
        code = WEXITSTATUS(x->status);
    } else if (WIFSIGNALED(x->status)) {
        sig = WTERMSIG(x->status);
        code = 128 + sig;
    }
    conn_send_json(a, x->base.id, PROTO_EXIT,
                   json_pack("{s:i, s:i, s:b, s:I}", "exit_code", code, "signal", sig, "timed_out",
                             x->timed_out, "duration_ms", (json_int_t)(x->exit_ms - x->start_ms)));
    exec_free(x);
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
    (void)kill(-x->pgid, SIGKILL);
}

static void exec_child_exit(struct stream *s, pid_t pid, int status)
{
    struct exec_stream *x = to_exec(s);
    struct agent *a = s->agent;
    s->pid = 0;
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

static void exec_data(struct stream *s, uint8_t ch, const uint8_t *p, uint32_t len)
{
    struct exec_stream *x = to_exec(s);
    if (ch != PROTO_CH_STDIN || !x->has_stdin)
        return; /* nothing reads it */
    if (chan_in_data(&x->in, p, len) < 0) {
        (void)kill(-x->pgid, SIGKILL);
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
    (void)kill(-to_exec(s)->pgid, sig);
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
    (void)kill(-x->pgid, SIGKILL);
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
    pid_t pid = 0;
    int ret = exec_parse(req, &r, err);
    if (ret < 0)
        goto out;
    long long start = sbx_now_ms();
    ret = exec_spawn(&r, &pid, &fds, err);
    if (ret < 0)
        goto out;

    struct exec_stream *x = sbx_xcalloc(1, sizeof(*x));
    x->base = (struct stream){.agent = a, .id = id, .pid = pid, .ops = &exec_ops};
    x->pgid = pid; /* setsid made the child a group leader */
    x->start_ms = start;
    x->has_stdin = r.want_stdin;
    ret = stream_register(a, &x->base);
    if (ret < 0) {
        /* The caller checked capacity and id, so this is a bug; don't leak the child. */
        (void)kill(-pid, SIGKILL);
        close(fds.out_r);
        close(fds.err_r);
        if (fds.in_w >= 0)
            close(fds.in_w);
        free(x);
        ret = sbx_err_set(err, -ret, "internal", "registering stream %u failed", id);
        goto out;
    }
    chan_out_init(&x->out[0], a, id, PROTO_CH_STDOUT, fds.out_r, exec_out_closed, x);
    chan_out_init(&x->out[1], a, id, PROTO_CH_STDERR, fds.err_r, exec_out_closed, x);
    chan_in_init(&x->in, a, id, PROTO_CH_STDIN, fds.in_w);
    if (r.timeout_ms > 0)
        x->timeout_t = loop_timer_add(a->loop, r.timeout_ms, exec_timeout_cb, x);
out:
    free(r.argv);
    free(r.envp);
    return ret;
}
