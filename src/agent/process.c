#include "process.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/text.h"
#include "../common/util.h"
#include "../proto/proto.h"
#include "agent.h"
#include "fatal.h"
#include "conn.h"
#include "env.h"
#include "exec.h"
#include "oomwatch.h"
#include "pidguard.h"
#include "ring.h"
#include "session.h"
#include "spawn.h"
#include "stream.h"

#define PROCESS_ID_MAX 24

enum logs_mode {
    LOGS_SNAPSHOT, /* what is kept now, then EXIT */
    LOGS_FOLLOW,   /* what is kept, then live output until the logs end, then EXIT */
    LOGS_WAIT,     /* nothing; EXIT once the process has exited (wait) */
    LOGS_KILL,     /* nothing; EXIT once the process and every member of its group are gone */
};

struct log_stream;

struct process {
    struct agent *agent;
    char id[PROCESS_ID_MAX];
    pid_t pid;
    bool running;
    /* The leader is reaped and its group was seen empty: pid may name someone else's group
     * now, so -pid is never signalled again (process_group_alive). */
    bool group_gone;
    int status;
    char *command; /* as shown */
    char session[SESSION_ID_MAX + 1]; /* "" when started outside a session */
    char *cwd;
    long long started_at, ended_at; /* unix ms */
    struct ring log[2];             /* stdout, stderr */
    int fd[2];                      /* -1 once at EOF */
    struct loop_watch *w[2];
    long long start_ms, exit_ms, last_read_ms; /* sbx_now_ms */
    bool oom;  /* the memory watcher killed one of its group */
    bool pids; /* the process guard killed its session at the sandbox's process limit */
    struct loop_timer *drain_t;
    /* process_start's lossless: until the first lossless follower attaches (or
     * PROCESS_LOSSLESS_WAIT_MS pass) the ring keeps everything, as if one followed from 0. */
    struct loop_timer *await_t;
    /* Since when reading is held back for a lossless follower (process_room), or 0: that
     * time counts neither as quiet nor toward the drain's bound. */
    long long held_since_ms;
    bool logs_done; /* both pipes closed: no more output */
    struct log_stream *streams;
    int in_fd;                     /* the write end of its stdin pipe, -1 without or closed */
    /* Input accepted but not yet taken by the pipe (a busy reader): written when the pipe
     * has room, so an accepted process_input is never cut short (PROCESS_INPUT_PENDING_MAX). */
    char *in_pending;
    size_t in_len;
    bool in_close;                 /* close stdin once in_pending is written */
    struct loop_watch *in_w;
    char *label;                   /* the starter's own description of it, or NULL */
    struct loop_timer *deadline_t; /* kills it at its timeout_ms, if it has one */
};

struct log_stream {
    struct stream base;
    struct process *proc;
    enum logs_mode mode;
    uint64_t off[2], end[2]; /* end: UINT64_MAX while following */
    uint64_t window[2];
    uint64_t dropped[2]; /* bytes the ring lost before we could send them */
    bool lossless;       /* the pipe waits for this follower instead of the ring forgetting */
    struct loop_timer *group_t; /* LOGS_KILL: looks again whether the group is gone */
    long long group_deadline_ms;  /* LOGS_KILL: sbx_now_ms after which it answers anyway */
    struct log_stream *next;
};

/* ---- records ---- */

static const char *status_name(const struct process *p)
{
    if (p->running)
        return "running";
    if (WIFSIGNALED(p->status))
        return "killed";
    return WEXITSTATUS(p->status) == 0 ? "completed" : "failed";
}

static json_t *process_json(const struct process *p)
{
    json_t *o = json_pack("{s:s,s:i,s:s,s:s,s:s,s:I,s:I,s:I}", "id", p->id, "pid", (int)p->pid,
                          "command", p->command, "cwd", p->cwd, "status", status_name(p),
                          "started_at", (json_int_t)(p->started_at / 1000), "stdout_bytes",
                          (json_int_t)p->log[0].total, "stderr_bytes",
                          (json_int_t)p->log[1].total);
    json_object_set_new(o, "session_id", p->session[0] ? json_string(p->session) : json_null());
    json_object_set_new(o, "stdin_open", json_boolean(p->in_fd >= 0));
    if (p->label)
        json_object_set_new(o, "label", json_string(p->label));
    if (p->running) {
        json_object_set_new(o, "exit_code", json_null());
        json_object_set_new(o, "signal", json_null());
        json_object_set_new(o, "ended_at", json_null());
    } else {
        int sig = WIFSIGNALED(p->status) ? WTERMSIG(p->status) : 0;
        json_object_set_new(o, "exit_code",
                            json_integer(sig ? 128 + sig : WEXITSTATUS(p->status)));
        json_object_set_new(o, "signal", sig ? json_integer(sig) : json_null());
        json_object_set_new(o, "ended_at", json_integer(p->ended_at / 1000));
        json_object_set_new(o, "oom_killed", json_boolean(p->oom));
        json_object_set_new(o, "process_limit_killed", json_boolean(p->pids));
    }
    return o;
}

static void process_close_pipe(struct process *p, int ch)
{
    if (p->fd[ch] < 0)
        return;
    loop_watch_del(p->agent->loop, p->w[ch]);
    p->w[ch] = NULL;
    close(p->fd[ch]);
    p->fd[ch] = -1;
}

static void process_close_stdin(struct process *p)
{
    if (p->in_w)
        loop_watch_del(p->agent->loop, p->in_w);
    p->in_w = NULL;
    if (p->in_fd >= 0)
        close(p->in_fd);
    p->in_fd = -1;
    free(p->in_pending);
    p->in_pending = NULL;
    p->in_len = 0;
}

/* Write what the pipe takes of in_pending: 0, or -errno when the reader is gone. */
static int process_flush_stdin(struct process *p)
{
    size_t off = 0;
    while (off < p->in_len) {
        ssize_t w = write(p->in_fd, p->in_pending + off, p->in_len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            break;
        if (w < 0)
            return -errno;
        off += (size_t)w;
    }
    memmove(p->in_pending, p->in_pending + off, p->in_len - off);
    p->in_len -= off;
    return 0;
}

static void process_stdin_writable(struct loop *l, int fd, uint32_t events, void *data)
{
    struct process *p = data;
    if (process_flush_stdin(p) < 0 || (p->in_len == 0 && p->in_close)) {
        process_close_stdin(p);
        return;
    }
    if (p->in_len == 0) {
        loop_watch_del(l, p->in_w);
        p->in_w = NULL;
    }
}

static void process_free(struct process *p)
{
    process_close_pipe(p, 0);
    process_close_pipe(p, 1);
    process_close_stdin(p);
    if (p->drain_t)
        loop_timer_cancel(p->agent->loop, p->drain_t);
    if (p->await_t)
        loop_timer_cancel(p->agent->loop, p->await_t);
    if (p->deadline_t)
        loop_timer_cancel(p->agent->loop, p->deadline_t);
    free(p->label);
    ring_free(&p->log[0]);
    ring_free(&p->log[1]);
    free(p->command);
    free(p->cwd);
    free(p);
}

static void process_remove(struct agent *a, unsigned i)
{
    process_free(a->procs[i]);
    memmove(&a->procs[i], &a->procs[i + 1], (a->nprocs - i - 1) * sizeof(a->procs[0]));
    a->nprocs--;
}

/* Room for one more record: reuse the oldest finished one nobody is reading. */
static int process_make_room(struct agent *a, struct sbx_err *err)
{
    if (a->nprocs < AGENT_MAX_PROCESSES)
        return 0;
    for (unsigned i = 0; i < a->nprocs; i++) {
        struct process *p = a->procs[i];
        if (!p->running && p->logs_done && !p->streams) {
            process_remove(a, i);
            return 0;
        }
    }
    return sbx_err_set(err, ENOSPC, "too_many_processes",
                       "at most %d background processes per sandbox are kept, and all are running",
                       AGENT_MAX_PROCESSES);
}

/* By id ("proc_3") or by pid ("1234"). */
static int process_lookup(struct agent *a, json_t *req, struct process **out, struct sbx_err *err)
{
    json_t *v = json_object_get(req, "id");
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 64)
        return sbx_err_set(err, EINVAL, "bad_request", "id must be a process id or pid");
    const char *id = json_string_value(v);
    char *end;
    long pid = strtol(id, &end, 10);
    bool by_pid = id[0] >= '0' && id[0] <= '9' && *end == '\0';
    /* Newest first: a pid may have been reused by a later process. */
    for (unsigned i = a->nprocs; i-- > 0;) {
        struct process *p = a->procs[i];
        if (by_pid ? p->pid == pid : !strcmp(p->id, id)) {
            *out = p;
            return 0;
        }
    }
    return sbx_err_set(err, ENOENT, "process_not_found", "no process %.64s", id);
}

/* ---- reading the pipes ---- */

static void process_readable(struct loop *l, int fd, uint32_t events, void *data);

/* Bytes channel ch may still take from its pipe without the ring forgetting one that a
 * lossless follower (or the start's wait for one) has not sent yet; SIZE_MAX when no one
 * holds it. At 0 the pipe is not read: the process blocks on a full pipe. */
static size_t process_room(const struct process *p, int ch)
{
    uint64_t pin = p->await_t ? 0 : UINT64_MAX;
    for (const struct log_stream *ls = p->streams; ls; ls = ls->next)
        if (ls->lossless && ls->off[ch] < pin)
            pin = ls->off[ch];
    if (pin == UINT64_MAX)
        return SIZE_MAX;
    uint64_t unsent = p->log[ch].total - pin;
    return unsent >= PROCESS_LOG_MAX ? 0 : (size_t)(PROCESS_LOG_MAX - unsent);
}

/* Watch each open pipe exactly while it has room (a watch with its events cleared would
 * still report EPOLLHUP), and keep the drain's clocks still while one is held back. */
static void process_update_watches(struct process *p)
{
    struct agent *a = p->agent;
    bool held = false;
    for (int ch = 0; ch < 2; ch++) {
        bool want = p->fd[ch] >= 0 && process_room(p, ch) > 0;
        if (want && !p->w[ch]) {
            int r = loop_watch_add(a->loop, p->fd[ch], EPOLLIN, process_readable, p, &p->w[ch]);
            if (r < 0)
                agent_die(a, 1, "watching a pipe: %s", strerror(-r));
        } else if (!want && p->w[ch]) {
            loop_watch_del(a->loop, p->w[ch]);
            p->w[ch] = NULL;
        }
        held |= p->fd[ch] >= 0 && !want;
    }
    long long now = sbx_now_ms();
    if (held && !p->held_since_ms) {
        p->held_since_ms = now;
    } else if (!held && p->held_since_ms) {
        /* Reading is possible again: the drain rule starts over from here. */
        if (!p->running)
            p->exit_ms += now - (p->held_since_ms > p->exit_ms ? p->held_since_ms : p->exit_ms);
        p->last_read_ms = now;
        p->held_since_ms = 0;
    }
}

static void process_await_cb(struct loop *l, void *data)
{
    struct process *p = data;
    p->await_t = NULL; /* nobody came: the ring forgets again rather than hold it for ever */
    process_update_watches(p);
}

/* ---- log streams ---- */

static void logs_unlink(struct log_stream *ls)
{
    for (struct log_stream **pp = &ls->proc->streams; *pp; pp = &(*pp)->next) {
        if (*pp == ls) {
            *pp = ls->next;
            break;
        }
    }
}

static void logs_free(struct log_stream *ls)
{
    struct process *p = ls->proc;
    if (ls->group_t)
        loop_timer_cancel(ls->base.agent->loop, ls->group_t);
    stream_unregister(ls->base.agent, &ls->base);
    logs_unlink(ls);
    bool lossless = ls->lossless;
    free(ls);
    if (lossless)
        process_update_watches(p); /* its hold is gone */
}

static void logs_pump(struct log_stream *ls);

/* May -p->pid still be signalled as this process's group? While the leader runs, yes. Once
 * it is reaped its pid number is free, but Linux (and gVisor) allocate no pid that is still
 * some group's or session's id: while a member of the group is left (a zombie counts) the
 * number cannot have been reused, so the group is still ours. It empties only when its last
 * member is reaped. Members are the leader's descendants; an orphan is reparented to the
 * agent, which reaps it on this loop and then looks again (process_groups_check), so the
 * group is marked gone before the loop runs anything that could signal it. The one way past
 * that is a member whose parent sits in another group of the same session (a setpgid back
 * into the group by a job-control child), reaped by that parent: the number would then
 * also have to come round the whole pid space before our next look. Once seen empty the
 * group is never probed again: a later probe could find a stranger's group under the
 * reused number. */
static bool process_group_alive(struct process *p)
{
    if (p->running)
        return true;
    if (!p->group_gone && kill(-p->pid, 0) < 0 && errno == ESRCH)
        p->group_gone = true;
    return !p->group_gone;
}

void process_groups_check(struct agent *a)
{
    for (unsigned i = 0; i < a->nprocs; i++)
        (void)process_group_alive(a->procs[i]);
}

static void logs_group_cb(struct loop *l, void *data)
{
    struct log_stream *ls = data;
    ls->group_t = NULL;
    logs_pump(ls);
}

/* LOGS_KILL: true once no process of the leader's group is left, zombies included (the agent
 * reaps those reparented to it on this loop), or once the wait's bound has passed; until
 * then a timer looks again. */
static bool logs_group_gone(struct log_stream *ls)
{
    struct process *p = ls->proc;
    if (!process_group_alive(p))
        return true;
    if (sbx_now_ms() >= ls->group_deadline_ms)
        return true; /* a member stuck in the kernel: the answer says the leader's end */
    if (!ls->group_t)
        ls->group_t = loop_timer_add(ls->base.agent->loop, PROCESS_KILL_GROUP_POLL_MS,
                                     logs_group_cb, ls);
    return false;
}

/* Send what the window allows; end the stream when its mode is satisfied. */
static void logs_pump(struct log_stream *ls)
{
    struct process *p = ls->proc;
    struct agent *a = ls->base.agent;
    bool all_sent = true;
    for (int ch = 0; ch < 2; ch++) {
        const struct ring *rg = &p->log[ch];
        uint64_t end = ls->end[ch] < rg->total ? ls->end[ch] : rg->total;
        if (ls->mode == LOGS_WAIT || ls->mode == LOGS_KILL)
            continue;
        if (ls->off[ch] < ring_start(rg)) {
            ls->dropped[ch] += ring_start(rg) - ls->off[ch];
            ls->off[ch] = ring_start(rg);
        }
        while (ls->off[ch] < end && ls->window[ch] > 0 && !conn_paused(a)) {
            size_t want = AGENT_READ_CHUNK;
            if (want > ls->window[ch])
                want = (size_t)ls->window[ch];
            if (want > end - ls->off[ch])
                want = (size_t)(end - ls->off[ch]);
            const uint8_t *buf;
            size_t n = ring_peek(rg, ls->off[ch], &buf, want);
            conn_send(a, ls->base.id, PROTO_DATA, (uint8_t)(PROTO_CH_STDOUT + ch), buf,
                      (uint32_t)n);
            ls->off[ch] += n;
            ls->window[ch] -= n;
        }
        if (ls->off[ch] < end || (ls->mode == LOGS_FOLLOW && !p->logs_done))
            all_sent = false;
    }
    if (ls->lossless)
        process_update_watches(p); /* what was sent made room */
    bool done = ls->mode == LOGS_WAIT   ? !p->running
                : ls->mode == LOGS_KILL ? !p->running && logs_group_gone(ls)
                                        : all_sent;
    if (!done)
        return;
    json_t *res = process_json(p);
    if (ls->mode != LOGS_WAIT && ls->mode != LOGS_KILL) {
        json_object_set_new(res, "stdout_dropped", json_integer((json_int_t)ls->dropped[0]));
        json_object_set_new(res, "stderr_dropped", json_integer((json_int_t)ls->dropped[1]));
    }
    conn_send_json(a, ls->base.id, PROTO_EXIT, res);
    logs_free(ls);
}

static void process_pump_streams(struct process *p)
{
    struct log_stream *ls = p->streams;
    while (ls) {
        struct log_stream *next = ls->next; /* pumping may end ls */
        logs_pump(ls);
        ls = next;
    }
}

static struct log_stream *to_logs(struct stream *s)
{
    return (struct log_stream *)s; /* base is the first member */
}

static void logs_window(struct stream *s, uint8_t ch, uint32_t credit)
{
    struct log_stream *ls = to_logs(s);
    if (ch != PROTO_CH_STDOUT && ch != PROTO_CH_STDERR)
        return;
    ls->window[ch - 1] += credit;
    logs_pump(ls);
}

static void logs_resume(struct stream *s)
{
    logs_pump(to_logs(s));
}

/* The daemon's reader went away: end now (the process is not signalled). */
static void logs_signal(struct stream *s, int sig)
{
    struct log_stream *ls = to_logs(s);
    conn_send_json(s->agent, s->id, PROTO_EXIT, process_json(ls->proc));
    logs_free(ls);
}

static void logs_abort(struct stream *s)
{
    logs_free(to_logs(s)); /* the process is not the stream's: it runs on */
}

static const struct stream_ops logs_ops = {
    .window = logs_window,
    .signal = logs_signal,
    .resume = logs_resume,
    .abort = logs_abort,
};

static int logs_attach(struct agent *a, uint32_t id, struct process *p, enum logs_mode mode,
                       bool tail, bool lossless, struct sbx_err *err)
{
    struct log_stream *ls = sbx_xcalloc(1, sizeof(*ls));
    ls->base = (struct stream){.agent = a, .id = id, .ops = &logs_ops};
    ls->proc = p;
    ls->mode = mode;
    ls->lossless = lossless;
    ls->group_deadline_ms = sbx_now_ms() + PROCESS_KILL_GROUP_WAIT_MS;
    for (int ch = 0; ch < 2; ch++) {
        ls->off[ch] = tail ? p->log[ch].total : ring_start(&p->log[ch]);
        ls->dropped[ch] = tail ? 0 : ls->off[ch]; /* what the ring forgot before we came */
        ls->end[ch] = mode == LOGS_SNAPSHOT ? p->log[ch].total : UINT64_MAX;
        ls->window[ch] = PROTO_WINDOW_INIT;
    }
    int r = stream_register(a, &ls->base);
    if (r < 0) {
        free(ls);
        return sbx_err_set(err, -r, "internal", "registering stream %u failed", id);
    }
    ls->next = p->streams;
    p->streams = ls;
    if (lossless && p->await_t) {
        /* The follower the start waited for: its own offsets hold the ring from now on. */
        loop_timer_cancel(a->loop, p->await_t);
        p->await_t = NULL;
    }
    logs_pump(ls);
    return 0;
}

/* ---- output and exit ---- */

static void process_logs_maybe_done(struct process *p)
{
    if (p->logs_done || p->fd[0] >= 0 || p->fd[1] >= 0 || p->running)
        return;
    p->logs_done = true;
    if (p->drain_t) {
        loop_timer_cancel(p->agent->loop, p->drain_t);
        p->drain_t = NULL;
    }
    process_pump_streams(p);
}

static void process_readable(struct loop *l, int fd, uint32_t events, void *data)
{
    struct process *p = data;
    int ch = fd == p->fd[0] ? 0 : 1;
    struct agent *a = p->agent;
    /* With nobody lossless behind, never held back: the ring forgets the oldest output
     * instead. Otherwise no more than the ring can keep for them (process_room). */
    size_t room = process_room(p, ch);
    if (room == 0) {
        process_update_watches(p);
        return;
    }
    ssize_t n = read(fd, a->iobuf, room < sizeof(a->iobuf) ? room : sizeof(a->iobuf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        process_close_pipe(p, ch);
        process_logs_maybe_done(p);
        return;
    }
    ring_write(&p->log[ch], a->iobuf, (size_t)n);
    p->last_read_ms = sbx_now_ms();
    process_pump_streams(p);
    process_update_watches(p);
}

/* The same drain rule as exec (exec.h): a grandchild holding the pipes cannot keep
 * the logs open for ever. */
static void process_drain_cb(struct loop *l, void *data)
{
    struct process *p = data;
    p->drain_t = NULL;
    if (p->held_since_ms) {
        /* Held back for a lossless follower: not quiet, and not the grandchild this rule
         * is for; the clocks start over once reading is possible. */
        p->drain_t = loop_timer_add(l, EXEC_DRAIN_QUIET_MS, process_drain_cb, p);
        return;
    }
    long long now = sbx_now_ms();
    long long quiet = now - (p->last_read_ms > p->exit_ms ? p->last_read_ms : p->exit_ms);
    if (now - p->exit_ms >= EXEC_DRAIN_MAX_MS || quiet >= EXEC_DRAIN_QUIET_MS) {
        process_close_pipe(p, 0);
        process_close_pipe(p, 1);
        process_logs_maybe_done(p);
        return;
    }
    p->drain_t = loop_timer_add(l, EXEC_DRAIN_QUIET_MS - quiet, process_drain_cb, p);
}

bool process_child_exit(struct agent *a, pid_t pid, int status)
{
    for (unsigned i = 0; i < a->nprocs; i++) {
        struct process *p = a->procs[i];
        if (!p->running || p->pid != pid)
            continue;
        p->running = false;
        p->status = status;
        process_close_stdin(p);
        if (p->deadline_t) {
            loop_timer_cancel(a->loop, p->deadline_t);
            p->deadline_t = NULL;
        }
        p->ended_at = sbx_wall_ms();
        p->exit_ms = sbx_now_ms();
        p->oom = oomwatch_claim(a, p->pid, 0, p->start_ms); /* it leads its own group */
        p->pids = pidguard_claim(a, p->pid, p->start_ms, &p->status); /* its own session */
        process_logs_maybe_done(p);
        if (!p->logs_done)
            p->drain_t = loop_timer_add(a->loop, EXEC_DRAIN_QUIET_MS, process_drain_cb, p);
        process_pump_streams(p);
        return true;
    }
    return false;
}

void process_kill_all(struct agent *a)
{
    for (unsigned i = 0; i < a->nprocs; i++)
        if (process_group_alive(a->procs[i]))
            (void)kill(-a->procs[i]->pid, SIGKILL);
}

/* ---- ops ---- */

static char *shown_command(const char *const *argv)
{
    bool shell = argv[1] && argv[2] && !argv[3] && !strcmp(argv[0], "/bin/bash") &&
                 !strcmp(argv[1], "-c");
    const char *c = shell ? argv[2] : argv[0];
    size_t n = strlen(c);
    if (n > PROCESS_COMMAND_SHOWN)
        n = sbx_utf8_prefix(c, PROCESS_COMMAND_SHOWN);
    char *s = sbx_xmalloc(n + 1);
    memcpy(s, c, n);
    s[n] = '\0';
    return s;
}

static void process_deadline_cb(struct loop *l, void *data)
{
    struct process *p = data;
    p->deadline_t = NULL;
    (void)kill(-p->pid, SIGKILL);
}

int process_start_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    json_t *jargv = json_object_get(req, "argv");
    if (!json_is_array(jargv) || json_array_size(jargv) == 0)
        return sbx_err_set(err, EINVAL, "bad_request", "argv must be a non-empty array of strings");
    size_t argc = json_array_size(jargv);
    _cleanup_free_ const char **argv = sbx_xcalloc(argc + 1, sizeof(*argv));
    for (size_t i = 0; i < argc; i++) {
        json_t *v = json_array_get(jargv, i);
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
            !json_string_length(v))
            return sbx_err_set(err, EINVAL, "bad_request", "argv[%zu] is not a string", i);
        argv[i] = json_string_value(v);
    }
    const char *cwd = NULL;
    json_t *v = json_object_get(req, "cwd");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v) || !json_string_length(v) ||
            strlen(json_string_value(v)) != json_string_length(v))
            return sbx_err_set(err, EINVAL, "bad_request", "cwd must be a non-empty string");
        cwd = json_string_value(v);
    }
    json_t *jstdin = json_object_get(req, "stdin");
    json_t *jtimeout = json_object_get(req, "timeout_ms");
    json_t *jlabel = json_object_get(req, "label");
    json_t *jlossless = json_object_get(req, "lossless");
    if ((jstdin && !json_is_boolean(jstdin)) || (jlossless && !json_is_boolean(jlossless)) ||
        (jtimeout && (!json_is_integer(jtimeout) || json_integer_value(jtimeout) < 0)) ||
        (jlabel && (!json_is_string(jlabel) || json_string_length(jlabel) > PROCESS_LABEL_MAX ||
                    strlen(json_string_value(jlabel)) != json_string_length(jlabel))))
        return sbx_err_set(err, EINVAL, "bad_request",
                           "stdin and lossless must be booleans, timeout_ms a count, label a "
                           "short string");
    bool root;
    int r = spawn_user_parse(req, &root, err);
    if (r < 0 || (r = process_make_room(a, err)) < 0)
        return r;
    struct session *sess;
    bool created;
    r = session_resolve(a, req, &sess, &created, err);
    if (r < 0)
        return r;
    struct envv env;
    if (sess)
        envv_copy(&env, &sess->env);
    else
        envv_init_base(&env);
    r = envv_set_json(&env, json_object_get(req, "env"), "env", err);
    if (r < 0) {
        envv_free(&env);
        return r;
    }
    if (!cwd)
        cwd = sess ? session_cwd(sess) : SESSION_CWD_DEFAULT;
    struct spawn_req sr = {.argv = argv,
                           .envp = env.v,
                           .cwd = cwd,
                           .extra = {-1, -1},
                           .want_stdin = json_is_true(jstdin),
                           .root = json_object_get(req, "user") || !sess ? root : sess->root};
    struct spawn_fds fds;
    pid_t pid;
    r = spawn_command(&sr, &pid, &fds, err);
    envv_free(&env);
    if (r < 0)
        return r;

    struct process *p = sbx_xcalloc(1, sizeof(*p));
    p->agent = a;
    p->in_fd = -1;
    snprintf(p->id, sizeof(p->id), "proc_%llu", ++a->proc_seq);
    p->pid = pid;
    p->running = true;
    p->command = shown_command(argv);
    if (sess)
        snprintf(p->session, sizeof(p->session), "%s", sess->id);
    p->cwd = sbx_xstrdup(cwd);
    p->started_at = sbx_wall_ms();
    p->start_ms = sbx_now_ms();
    p->fd[0] = fds.out_r;
    p->fd[1] = fds.err_r;
    p->in_fd = fds.in_w;
    if (jlabel)
        p->label = sbx_xstrdup(json_string_value(jlabel));
    if (jtimeout && json_integer_value(jtimeout) > 0)
        p->deadline_t = loop_timer_add(a->loop, (long long)json_integer_value(jtimeout),
                                       process_deadline_cb, p);
    if (json_is_true(jlossless))
        p->await_t = loop_timer_add(a->loop, PROCESS_LOSSLESS_WAIT_MS, process_await_cb, p);
    for (int ch = 0; ch < 2; ch++)
        ring_init(&p->log[ch], PROCESS_LOG_MAX);
    process_update_watches(p);
    a->procs[a->nprocs++] = p;
    json_t *res = process_json(p);
    json_object_set_new(res, "session_created", json_boolean(created));
    conn_send_json(a, id, PROTO_EXIT, res);
    return 0;
}

int process_list_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    json_t *list = json_array();
    for (unsigned i = 0; i < a->nprocs; i++)
        json_array_append_new(list, process_json(a->procs[i]));
    conn_send_json(a, id, PROTO_EXIT, json_pack("{s:o}", "processes", list));
    return 0;
}

int process_get_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    struct process *p;
    int r = process_lookup(a, req, &p, err);
    if (r < 0)
        return r;
    conn_send_json(a, id, PROTO_EXIT, process_json(p));
    return 0;
}

int process_signal_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    struct process *p;
    int r = process_lookup(a, req, &p, err);
    if (r < 0)
        return r;
    json_t *sig = json_object_get(req, "signal");
    if (!json_is_integer(sig) || json_integer_value(sig) < 1 || json_integer_value(sig) >= NSIG)
        return sbx_err_set(err, EINVAL, "bad_request", "signal must be an integer from 1 to %d",
                           NSIG - 1);
    if (!p->running)
        return sbx_err_set(err, ESRCH, "process_not_running", "process %s has already exited",
                           p->id);
    (void)kill(-p->pid, (int)json_integer_value(sig));
    conn_send_json(a, id, PROTO_EXIT, process_json(p));
    return 0;
}

int process_kill_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    struct process *p;
    int r = process_lookup(a, req, &p, err);
    if (r < 0)
        return r;
    /* The whole group: members may outlive an exited leader (but a group seen empty may
     * be a stranger's by now: process_group_alive). */
    if (process_group_alive(p))
        (void)kill(-p->pid, SIGKILL);
    return logs_attach(a, id, p, LOGS_KILL, false, false, err);
}

int process_logs_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    struct process *p;
    int r = process_lookup(a, req, &p, err);
    if (r < 0)
        return r;
    json_t *f = json_object_get(req, "follow");
    if (f && !json_is_null(f) && !json_is_boolean(f))
        return sbx_err_set(err, EINVAL, "bad_request", "follow must be a boolean");
    json_t *tail = json_object_get(req, "tail");
    if (tail && !json_is_boolean(tail))
        return sbx_err_set(err, EINVAL, "bad_request", "tail must be a boolean");
    json_t *wait = json_object_get(req, "wait");
    if (wait && !json_is_boolean(wait))
        return sbx_err_set(err, EINVAL, "bad_request", "wait must be a boolean");
    json_t *lossless = json_object_get(req, "lossless");
    if (lossless && (!json_is_boolean(lossless) ||
                     (json_is_true(lossless) && (!json_is_true(f) || json_is_true(wait)))))
        return sbx_err_set(err, EINVAL, "bad_request", "lossless is a boolean, for follow only");
    /* wait: no output, only the EXIT once it has ended (how sbxd meters it). */
    enum logs_mode mode = json_is_true(wait) ? LOGS_WAIT
                          : json_is_true(f)  ? LOGS_FOLLOW
                                             : LOGS_SNAPSHOT;
    return logs_attach(a, id, p, mode, json_is_true(tail), json_is_true(lossless), err);
}

int process_input_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    struct process *p;
    int r = process_lookup(a, req, &p, err);
    if (r < 0)
        return r;
    json_t *data = json_object_get(req, "data");
    json_t *close_it = json_object_get(req, "close");
    if ((data && (!json_is_string(data) || json_string_length(data) > PROCESS_INPUT_MAX)) ||
        (close_it && !json_is_boolean(close_it)))
        return sbx_err_set(err, EINVAL, "bad_request",
                           "data must be base64 of at most %u characters, close a boolean",
                           PROCESS_INPUT_MAX);
    if (p->in_fd < 0)
        return sbx_err_set(err, EPIPE, "process_stdin_closed", "process %s has no open stdin",
                           p->id);
    if (data) {
        size_t n;
        _cleanup_free_ unsigned char *buf = sbx_xmalloc(json_string_length(data) / 4 * 3 + 3);
        if (sbx_base64_decode(json_string_value(data), json_string_length(data), buf, &n) < 0)
            return sbx_err_set(err, EINVAL, "bad_request", "data is not base64");
        /* All or nothing: what the pipe does not take now waits in in_pending, and input
         * past PROCESS_INPUT_PENDING_MAX waiting is refused whole, so a caller that retries
         * process_stdin_full never sends a byte twice. */
        if (p->in_len + n > PROCESS_INPUT_PENDING_MAX)
            return sbx_err_set(err, EAGAIN, "process_stdin_full",
                               "the stdin of %s is full (%zu bytes not read yet)", p->id,
                               p->in_len);
        p->in_pending = sbx_xrealloc(p->in_pending, p->in_len + n);
        memcpy(p->in_pending + p->in_len, buf, n);
        p->in_len += n;
        int fr = process_flush_stdin(p);
        if (fr < 0) {
            int e = -fr;
            process_close_stdin(p);
            return sbx_err_set(err, e, "process_stdin_closed", "writing to the stdin of %s: %s",
                               p->id, strerror(e));
        }
        if (p->in_len && !p->in_w &&
            loop_watch_add(a->loop, p->in_fd, EPOLLOUT, process_stdin_writable, p, &p->in_w) < 0)
            return sbx_err_set(err, ENOMEM, "internal", "watching the stdin of %s", p->id);
    }
    if (json_is_true(close_it)) {
        if (p->in_len)
            p->in_close = true; /* once the waiting input is written */
        else
            process_close_stdin(p);
    }
    conn_send_json(a, id, PROTO_EXIT, process_json(p));
    return 0;
}
