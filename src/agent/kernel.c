#include "kernel.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/util.h"
#include "../proto/proto.h"
#include "agent.h"
#include "fatal.h"
#include "env.h"
#include "kernel_src.h"
#include "oomwatch.h"
#include "pidguard.h"
#include "spawn.h"
#include "stream.h"

/* What a line from the kernel is, decided once per line. */
enum line_kind { LINE_NEW, LINE_DROP, LINE_FORWARD, LINE_DONE, LINE_READY };

struct kcell;
struct kwait;

/* The kernel process and its three fds. Outlives cells; one per agent. */
struct kernel {
    struct agent *agent;
    pid_t pid; /* 0: no kernel; also the process group */
    int ctl;   /* our end of the control socket */
    int out[2];
    struct loop_watch *ctl_w, *out_w[2];
    uint32_t ctl_events;
    bool ready, busy; /* busy: a "run" was sent and its "done" has not come back */
    bool ctl_eof;     /* the kernel closed its end of the socket (or broke the protocol) */
    json_t *env;      /* the sandbox's env list it was started with, for restarts */
    long long started_ms;
    struct kcell *cell; /* the stream of the running cell; NULL when none or abandoned */
    struct kwait *wait; /* a kernel_reset waiting for "ready" */
    struct loop_timer *start_t;
    /* kernel -> agent: lines; the first one may be partly forwarded already. */
    uint8_t *up;
    size_t up_len, line_sent;
    enum line_kind line_kind;
    /* agent -> kernel */
    uint8_t *down;
    size_t down_off, down_len;
};

struct kcell {
    struct stream base;
    struct kernel *k;
    uint64_t window[PROTO_CH_KERNEL + 1]; /* sending windows of channels 1..3 */
    struct loop_timer *timeout_t;
    struct loop_timer *settle_t; /* killed for memory: the answer waits (exec.c's reason) */
    json_t *settle_exit;         /* ... and is this */
};

struct kwait {
    struct stream base;
    struct kernel *k;
};

static void k_update(struct kernel *k);
static void k_process(struct kernel *k);
static void cell_end(struct kcell *c, json_t *exit_payload);
static void cell_lost(struct kcell *c, json_t *extra);

/* ---- the process ---- */

static struct kernel *k_get(struct agent *a)
{
    if (!a->kernel) {
        struct kernel *k = sbx_xcalloc(1, sizeof(*k));
        k->agent = a;
        k->ctl = k->out[0] = k->out[1] = -1;
        a->kernel = k;
    }
    return a->kernel;
}

/* Forget the process (it is being killed or is dead): close its fds, drop its buffers.
 * A still-running cell is ended by the caller first. */
static void k_discard(struct kernel *k)
{
    struct loop *l = k->agent->loop;
    loop_watch_del(l, k->ctl_w);
    k->ctl_w = NULL;
    k->ctl_events = 0;
    if (k->ctl >= 0)
        close(k->ctl);
    k->ctl = -1;
    for (int i = 0; i < 2; i++) {
        loop_watch_del(l, k->out_w[i]);
        k->out_w[i] = NULL;
        if (k->out[i] >= 0)
            close(k->out[i]);
        k->out[i] = -1;
    }
    if (k->start_t)
        loop_timer_cancel(l, k->start_t);
    k->start_t = NULL;
    free(k->up);
    free(k->down);
    k->up = k->down = NULL;
    k->up_len = k->line_sent = k->down_off = k->down_len = 0;
    k->line_kind = LINE_NEW;
    k->pid = 0;
    k->ready = k->busy = k->ctl_eof = false;
}

static void k_kill(struct kernel *k)
{
    if (k->pid > 0)
        (void)kill(-k->pid, SIGKILL); /* its group: background children go too */
    k_discard(k);                     /* the process is reaped as nobody's */
}

static void wait_fail(struct kernel *k, const char *why)
{
    struct kwait *w = k->wait;
    if (!w)
        return;
    k->wait = NULL;
    conn_send_error(k->agent, w->base.id, "kernel_unavailable", "%s", why);
    stream_unregister(k->agent, &w->base);
    free(w);
}

static void on_start_timeout(struct loop *l, void *data)
{
    struct kernel *k = data;
    k->start_t = NULL;
    wait_fail(k, "the kernel did not start in time");
    if (k->cell) {
        /* The cell never ran: kill the kernel and report it like a death. */
        cell_lost(k->cell, json_pack("{s:b,s:s}", "kernel_died", 1, "reason",
                                     "the kernel did not start in time"));
    }
    k_kill(k);
}

/* env: the sandbox's ["K=V", ...], or NULL for the one of the previous start. */
static int k_spawn(struct kernel *k, json_t *env, struct sbx_err *err)
{
    if (env && !json_is_null(env)) {
        json_decref(k->env);
        k->env = json_deep_copy(env);
    }
    env = k->env;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return sbx_err_set(err, errno, "kernel_unavailable", "socketpair: %s", strerror(errno));
    _cleanup_close_ int mine = sv[0], theirs = sv[1];
    struct envv e;
    envv_init_base(&e);
    static const char *const kernel_env[] = {
        /* Agg rendering, and plt.show() turns figures into outputs (kernel/sbx_kernel.py). */
        "MPLBACKEND=module://sbx_inline",
        /* The root filesystem is read-only: matplotlib's font cache goes to /tmp. */
        "MPLCONFIGDIR=/tmp/.sbx-matplotlib",
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(kernel_env); i++)
        (void)envv_set(&e, kernel_env[i], strlen(kernel_env[i]));
    int r = envv_set_json(&e, env, "env", err);
    if (r < 0) {
        envv_free(&e);
        return r;
    }
    char fdarg[16];
    snprintf(fdarg, sizeof(fdarg), "%d", SPAWN_EXTRA_FD_MIN);
    const char *argv[] = {"python3", "-u", "-c", sbx_kernel_src, fdarg, sbx_kernel_js_src, NULL};
    struct spawn_req req = {.argv = argv, .envp = e.v, .cwd = "/", .extra = {theirs, -1}};
    struct spawn_fds fds;
    pid_t pid;
    r = spawn_command(&req, &pid, &fds, err);
    envv_free(&e);
    if (r < 0) {
        if (strcmp(err->code, "process_limit"))
            snprintf(err->code, sizeof(err->code), "kernel_unavailable");
        return r;
    }
    if (sbx_set_nonblock(mine) < 0) {
        r = -errno;
        (void)kill(-pid, SIGKILL);
        close(fds.out_r);
        close(fds.err_r);
        return sbx_err_set(err, -r, "kernel_unavailable", "fcntl: %s", strerror(-r));
    }
    k_discard(k);
    k->pid = pid;
    k->ctl = TAKE_FD(mine);
    k->out[0] = fds.out_r;
    k->out[1] = fds.err_r;
    k->started_ms = sbx_now_ms();
    k->start_t = loop_timer_add(k->agent->loop, KERNEL_START_TIMEOUT_MS, on_start_timeout, k);
    k_update(k);
    return 0;
}

/* ---- watches ---- */

static void ctl_cb(struct loop *l, int fd, uint32_t events, void *data);
static void out_cb(struct loop *l, int fd, uint32_t events, void *data);

/* A watch exists only while we want events: with an empty mask epoll still reports HUP. */
static void set_watch(struct kernel *k, int fd, struct loop_watch **w, uint32_t want, loop_fd_cb cb,
                      void *data, uint32_t *cur)
{
    struct loop *l = k->agent->loop;
    if (fd < 0 || !want) {
        loop_watch_del(l, *w);
        *w = NULL;
    } else if (!*w) {
        if (loop_watch_add(l, fd, want, cb, data, w) < 0)
            agent_die(k->agent, 1, "watching the kernel's fds failed");
    } else if (!cur || *cur != want) {
        (void)loop_watch_mod(l, *w, want);
    }
    if (cur)
        *cur = *w ? want : 0;
}

static bool up_has_line(const struct kernel *k)
{
    return k->up_len && memchr(k->up, '\n', k->up_len);
}

/* Channel ch (1..3) of the running cell can take bytes now. Without a cell, output is
 * read and dropped so that nothing in the sandbox blocks on a full pipe. */
static bool can_send(const struct kernel *k, unsigned ch)
{
    return !k->cell || (k->cell->window[ch] > 0 && !conn_paused(k->agent));
}

static void k_update(struct kernel *k)
{
    uint32_t ev = 0;
    if (!up_has_line(k) && !k->ctl_eof)
        ev |= EPOLLIN;
    if (k->down_off < k->down_len)
        ev |= EPOLLOUT;
    set_watch(k, k->ctl, &k->ctl_w, ev, ctl_cb, k, &k->ctl_events);
    for (unsigned i = 0; i < 2; i++)
        set_watch(k, k->out[i], &k->out_w[i], can_send(k, i + 1) ? EPOLLIN : 0, out_cb, k, NULL);
}

/* ---- stdout / stderr ---- */

enum { PIPE_MORE, PIPE_EMPTY, PIPE_BLOCKED };

/* One read of the kernel's stdout (i=0) or stderr (i=1), forwarded to the cell or dropped. */
static int pipe_read(struct kernel *k, unsigned i)
{
    struct agent *a = k->agent;
    if (k->out[i] < 0)
        return PIPE_EMPTY;
    if (!can_send(k, i + 1))
        return PIPE_BLOCKED;
    size_t want = sizeof(a->iobuf);
    if (k->cell && k->cell->window[i + 1] < want)
        want = (size_t)k->cell->window[i + 1];
    ssize_t n = read(k->out[i], a->iobuf, want);
    if (n < 0 && errno == EINTR)
        return PIPE_MORE;
    if (n < 0 && errno == EAGAIN)
        return PIPE_EMPTY;
    if (n <= 0) {
        /* EOF: the kernel and everything it started closed this pipe; it stays closed. */
        loop_watch_del(a->loop, k->out_w[i]);
        k->out_w[i] = NULL;
        close(k->out[i]);
        k->out[i] = -1;
        return PIPE_EMPTY;
    }
    if (k->cell) {
        k->cell->window[i + 1] -= (uint64_t)n;
        conn_send(a, k->cell->base.id, PROTO_DATA, (uint8_t)(i + 1), a->iobuf, (uint32_t)n);
    }
    return PIPE_MORE;
}

/* Everything the pipes hold right now goes to the cell; false while flow control holds
 * some back. What the kernel printed before its "done" is in the pipes by then. */
static bool pipes_drained(struct kernel *k)
{
    for (unsigned i = 0; i < 2; i++) {
        int r;
        while ((r = pipe_read(k, i)) == PIPE_MORE)
            ;
        if (r == PIPE_BLOCKED)
            return false;
    }
    return true;
}

static void out_cb(struct loop *l, int fd, uint32_t events, void *data)
{
    struct kernel *k = data;
    unsigned i = fd == k->out[0] ? 0 : 1;
    (void)pipe_read(k, i);
    k_update(k);
}

/* ---- cells ---- */

static void cell_free(struct kcell *c)
{
    struct agent *a = c->base.agent;
    if (c->timeout_t)
        loop_timer_cancel(a->loop, c->timeout_t);
    if (c->settle_t)
        loop_timer_cancel(a->loop, c->settle_t);
    json_decref(c->settle_exit);
    if (c->k->cell == c)
        c->k->cell = NULL;
    stream_unregister(a, &c->base);
    free(c);
}

/* End the cell with EXIT (payload stolen). The kernel keeps running unless the caller
 * killed it. */
static void cell_end(struct kcell *c, json_t *exit_payload)
{
    struct kernel *k = c->k;
    conn_send_json(c->base.agent, c->base.id, PROTO_EXIT, exit_payload);
    cell_free(c);
    k_update(k);
}

/* After "done": EXIT once the pipes are drained into the cell. */
static void cell_try_finish(struct kcell *c)
{
    if (c->k->busy || !pipes_drained(c->k))
        return;
    cell_end(c, json_pack("{s:b,s:b}", "timed_out", 0, "kernel_restarted", 0));
}

static json_t *status_json(int status)
{
    if (WIFSIGNALED(status))
        return json_pack("{s:i,s:i}", "exit_code", 128 + WTERMSIG(status), "signal",
                         WTERMSIG(status));
    return json_pack("{s:i,s:i}", "exit_code", WEXITSTATUS(status), "signal", 0);
}

/* The kernel is gone or going: the cell's answer is that its state is lost. */
static void cell_lost(struct kcell *c, json_t *extra)
{
    (void)pipes_drained(c->k); /* best effort: what is there now, within the window */
    json_t *p = json_pack("{s:b,s:b}", "timed_out", 0, "kernel_restarted", 1);
    json_object_update(p, extra);
    json_decref(extra);
    cell_end(c, p);
}

static void cell_timeout_cb(struct loop *l, void *data)
{
    struct kcell *c = data;
    struct kernel *k = c->k;
    c->timeout_t = NULL;
    (void)pipes_drained(k);
    k_kill(k);
    cell_end(c, json_pack("{s:b,s:b}", "timed_out", 1, "kernel_restarted", 1));
    /* Restart now, so the next cell finds a warm kernel; a failure shows on the next run. */
    struct sbx_err err = {0};
    (void)k_spawn(k, NULL, &err);
}

static void cell_data(struct stream *s, uint8_t ch, const uint8_t *p, uint32_t len)
{
    struct kcell *c = (struct kcell *)s;
    struct kernel *k = c->k;
    if (ch != PROTO_CH_STDIN)
        return;
    if (k->ctl < 0) {
        conn_send_window(s->agent, s->id, ch, len); /* nobody will read it */
        return;
    }
    if (k->down_len - k->down_off + len > KERNEL_DOWN_MAX) {
        conn_send_error(s->agent, s->id, "window_exceeded", "more than %u bytes for the kernel",
                        KERNEL_DOWN_MAX);
        cell_free(c);
        return;
    }
    if (k->down_off) {
        memmove(k->down, k->down + k->down_off, k->down_len - k->down_off);
        k->down_len -= k->down_off;
        k->down_off = 0;
    }
    k->down = sbx_xrealloc(k->down, k->down_len + len);
    memcpy(k->down + k->down_len, p, len);
    k->down_len += len;
    /* Bounded by KERNEL_DOWN_MAX rather than by the window, so credit goes back at once. */
    conn_send_window(s->agent, s->id, ch, len);
    k_update(k);
}

static void cell_window(struct stream *s, uint8_t ch, uint32_t credit)
{
    struct kcell *c = (struct kcell *)s;
    if (ch < PROTO_CH_STDOUT || ch > PROTO_CH_KERNEL)
        return;
    c->window[ch] += credit;
    if (c->window[ch] > (uint64_t)1 << 40)
        c->window[ch] = (uint64_t)1 << 40;
    struct kernel *k = c->k;
    k_process(k); /* may end the cell */
    if (k->cell == c)
        cell_try_finish(c);
    k_update(k);
}

static void cell_resume(struct stream *s)
{
    cell_window(s, PROTO_CH_STDOUT, 0);
}

static void cell_abort(struct stream *s)
{
    struct kcell *c = (struct kcell *)s;
    struct kernel *k = c->k;
    /* Nobody can receive the result: interrupt the cell but keep the state. Its "done"
     * still comes and frees the kernel for the next cell. */
    if (k->busy && k->pid > 0)
        (void)kill(-k->pid, SIGINT);
    cell_free(c);
    k_update(k);
}

static const struct stream_ops cell_ops = {
    .data = cell_data,
    .window = cell_window,
    .resume = cell_resume,
    .abort = cell_abort,
};

/* ---- kernel -> agent lines ---- */

static enum line_kind classify(const uint8_t *line, size_t len)
{
    json_t *j = json_loadb((const char *)line, len, 0, NULL);
    const char *t = json_string_value(json_object_get(j, "t"));
    enum line_kind kind = LINE_DROP;
    if (t && !strcmp(t, "done"))
        kind = LINE_DONE;
    else if (t && !strcmp(t, "ready"))
        kind = LINE_READY;
    else if (t && (!strcmp(t, "output") || !strcmp(t, "llm")))
        kind = LINE_FORWARD;
    json_decref(j);
    return kind;
}

static void on_ready(struct kernel *k)
{
    k->ready = true;
    if (k->start_t)
        loop_timer_cancel(k->agent->loop, k->start_t);
    k->start_t = NULL;
    struct kwait *w = k->wait;
    if (!w)
        return;
    k->wait = NULL;
    conn_send_json(k->agent, w->base.id, PROTO_EXIT,
                   json_pack("{s:I,s:I}", "pid", (json_int_t)k->pid, "start_ms",
                             (json_int_t)(sbx_now_ms() - k->started_ms)));
    stream_unregister(k->agent, &w->base);
    free(w);
}

/* Handle whole lines until none is left or the cell's channel 3 is full. */
static void k_process(struct kernel *k)
{
    uint8_t *nl;
    while (k->up_len && (nl = memchr(k->up, '\n', k->up_len))) {
        size_t len = (size_t)(nl - k->up) + 1;
        if (k->line_kind == LINE_NEW)
            k->line_kind = classify(k->up, len - 1);
        struct kcell *c = k->cell;
        if (c && (k->line_kind == LINE_FORWARD || k->line_kind == LINE_DONE)) {
            while (k->line_sent < len) {
                if (!can_send(k, PROTO_CH_KERNEL))
                    return;
                size_t n = len - k->line_sent;
                if (n > AGENT_READ_CHUNK)
                    n = AGENT_READ_CHUNK;
                if (n > c->window[PROTO_CH_KERNEL])
                    n = (size_t)c->window[PROTO_CH_KERNEL];
                conn_send(k->agent, c->base.id, PROTO_DATA, PROTO_CH_KERNEL, k->up + k->line_sent,
                          (uint32_t)n);
                c->window[PROTO_CH_KERNEL] -= n;
                k->line_sent += n;
            }
        }
        enum line_kind kind = k->line_kind;
        memmove(k->up, k->up + len, k->up_len - len);
        k->up_len -= len;
        k->line_sent = 0;
        k->line_kind = LINE_NEW;
        if (kind == LINE_READY) {
            on_ready(k);
        } else if (kind == LINE_DONE) {
            k->busy = false;
            if (c)
                cell_try_finish(c); /* may free c */
        }
    }
}

static void ctl_write(struct kernel *k)
{
    while (k->down_off < k->down_len) {
        ssize_t n = write(k->ctl, k->down + k->down_off, k->down_len - k->down_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n < 0) {
            k->down_off = k->down_len = 0; /* the kernel is going; its death is reaped */
            return;
        }
        k->down_off += (size_t)n;
    }
    k->down_off = k->down_len = 0;
}

static void ctl_cb(struct loop *l, int fd, uint32_t events, void *data)
{
    struct kernel *k = data;
    if (events & EPOLLOUT)
        ctl_write(k);
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !up_has_line(k)) {
        if (k->up_len == KERNEL_LINE_MAX) {
            /* Only a broken (or tampered with) kernel sends such a line. */
            (void)kill(-k->pid, SIGKILL);
            k->ctl_eof = true;
            k_update(k);
            return;
        }
        if (!k->up)
            k->up = sbx_xmalloc(KERNEL_LINE_MAX);
        ssize_t n = read(k->ctl, k->up + k->up_len, KERNEL_LINE_MAX - k->up_len);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            return;
        if (n <= 0) {
            /* The kernel closed its end: it is dead or unusable. Make sure it is dead;
             * kernel_reaped does the rest. */
            (void)kill(-k->pid, SIGKILL);
            k->ctl_eof = true;
            k_update(k);
            return;
        }
        k->up_len += (size_t)n;
        k_process(k);
    }
    if (k->ctl >= 0)
        k_update(k);
}

static void cell_settle_cb(struct loop *l, void *data)
{
    struct kcell *c = data;
    c->settle_t = NULL;
    cell_end(c, TAKE_PTR(c->settle_exit));
}

void kernel_reaped(struct agent *a, pid_t pid, int status)
{
    struct kernel *k = a->kernel;
    if (!k || pid != k->pid)
        return;   /* an orphan, or a kernel we already killed */
    k_process(k); /* lines it managed to send first */
    bool oom = oomwatch_claim(a, k->pid, k->pid, k->started_ms);
    bool limit = pidguard_claim(a, k->pid, k->started_ms, &status);
    json_t *lost = json_pack("{s:b,s:o,s:b,s:b}", "kernel_died", 1, "status", status_json(status),
                             "oom_killed", oom, "process_limit_killed", limit);
    if (k->cell && oom) {
        /* Answered once gVisor has had the time to give the kernel's memory back to the
         * host, so that a cell repeating the hog at once does not stack on it. */
        struct kcell *c = k->cell;
        (void)pipes_drained(k);
        if (c->timeout_t)
            loop_timer_cancel(a->loop, c->timeout_t);
        c->timeout_t = NULL;
        c->settle_exit = json_pack("{s:b,s:b}", "timed_out", 0, "kernel_restarted", 1);
        json_object_update(c->settle_exit, lost);
        json_decref(lost);
        c->settle_t = loop_timer_add(a->loop, OOMWATCH_SETTLE_MS, cell_settle_cb, c);
        k->cell = NULL;
    } else if (k->cell) {
        cell_lost(k->cell, lost);
    } else {
        json_decref(lost);
    }
    k_discard(k);
    wait_fail(k, "the kernel exited during start-up");
}

void kernel_forked(struct agent *a)
{
    struct kernel *k = a->kernel;
    /* Not before "ready": until the kernel installs its handler, SIGUSR2 would kill it. */
    if (k && k->ready && k->pid > 0)
        (void)kill(k->pid, SIGUSR2);
}

/* ---- ops ---- */

static int parse_timeout(json_t *req, long long *out, struct sbx_err *err)
{
    json_t *t = json_object_get(req, "timeout_ms");
    *out = 0;
    if (!t || json_is_null(t))
        return 0;
    if (!json_is_integer(t) || json_integer_value(t) < 0)
        return sbx_err_set(err, EINVAL, "bad_request", "timeout_ms must be a non-negative integer");
    *out = json_integer_value(t);
    return 0;
}

int kernel_run_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    json_t *code = json_object_get(req, "code");
    json_t *env = json_object_get(req, "env");
    json_t *ctx = json_object_get(req, "context");
    json_t *lang = json_object_get(req, "language");
    long long timeout_ms;
    if (!json_is_string(code))
        return sbx_err_set(err, EINVAL, "bad_request", "code must be a string");
    if (lang && (!json_is_string(lang) ||
                 (strcmp(json_string_value(lang), "python") &&
                  strcmp(json_string_value(lang), "js") && strcmp(json_string_value(lang), "ts"))))
        return sbx_err_set(err, EINVAL, "bad_request",
                           "language must be \"python\", \"js\" or \"ts\"");
    if (ctx && (!json_is_string(ctx) || json_string_length(ctx) > KERNEL_CONTEXT_MAX))
        return sbx_err_set(err, EINVAL, "bad_request", "context must be a short string");
    int r = parse_timeout(req, &timeout_ms, err);
    if (r < 0)
        return r;
    struct kernel *k = k_get(a);
    if (k->busy)
        return sbx_err_set(err, EBUSY, "kernel_busy", "the kernel is running another cell");
    if (k->pid == 0 && (r = k_spawn(k, env, err)) < 0)
        return r;
    json_t *msg =
        json_pack("{s:s,s:O,s:O?,s:O?}", "t", "run", "code", code, "ctx", ctx, "lang", lang);
    char *line = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (!line)
        return sbx_err_set(err, ENOMEM, "internal", "encoding the cell");
    size_t n = strlen(line);
    struct kcell *c = sbx_xcalloc(1, sizeof(*c));
    c->base = (struct stream){.agent = a, .id = id, .ops = &cell_ops};
    c->k = k;
    for (int i = PROTO_CH_STDOUT; i <= PROTO_CH_KERNEL; i++)
        c->window[i] = PROTO_WINDOW_INIT;
    r = stream_register(a, &c->base);
    if (r < 0) {
        free(line);
        free(c);
        return sbx_err_set(err, -r, "internal", "registering stream %u failed", id);
    }
    /* Between cells the buffer only ever holds leftovers of llm replies: replace them. */
    free(k->down);
    k->down = (uint8_t *)line;
    k->down[n] = '\n';
    k->down_off = 0;
    k->down_len = n + 1;
    k->busy = true;
    k->cell = c;
    if (timeout_ms > 0)
        c->timeout_t = loop_timer_add(a->loop, timeout_ms, cell_timeout_cb, c);
    k_update(k);
    return 0;
}

static void wait_abort(struct stream *s)
{
    struct kwait *w = (struct kwait *)s;
    if (w->k->wait == w)
        w->k->wait = NULL;
    stream_unregister(s->agent, s);
    free(w);
}

static const struct stream_ops wait_ops = {.abort = wait_abort};

int kernel_reset_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    struct kernel *k = k_get(a);
    if (k->wait)
        return sbx_err_set(err, EBUSY, "kernel_busy", "the kernel is already restarting");
    if (k->cell)
        cell_lost(k->cell, json_pack("{s:b}", "reset", 1));
    k_kill(k);
    int r = k_spawn(k, json_object_get(req, "env"), err);
    if (r < 0)
        return r;
    struct kwait *w = sbx_xcalloc(1, sizeof(*w));
    w->base = (struct stream){.agent = a, .id = id, .ops = &wait_ops};
    w->k = k;
    r = stream_register(a, &w->base);
    if (r < 0) {
        free(w);
        return sbx_err_set(err, -r, "internal", "registering stream %u failed", id);
    }
    k->wait = w;
    return 0;
}

int kernel_interrupt_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    struct kernel *k = a->kernel;
    bool running = k && k->busy && k->pid > 0;
    if (running)
        (void)kill(-k->pid, SIGINT); /* like ^C: the cell and what it started */
    conn_send_json(a, id, PROTO_EXIT, json_pack("{s:b}", "interrupted", running));
    return 0;
}
