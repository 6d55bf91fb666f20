#include "pty.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "../common/text.h"
#include "../common/util.h"
#include "../proto/proto.h"
#include "agent.h"
#include "env.h"
#include "fatal.h"
#include "ring.h"
#include "spawn.h"
#include "stream.h"

enum pty_kind { PTY_TERMINAL, PTY_EXEC };

struct pty_attach;
struct pty_reader;

struct pty {
    struct agent *agent;
    char id[24];
    enum pty_kind kind;
    pid_t pgid;     /* the command's process group (it is a session leader) */
    bool exited;    /* reaped */
    bool done;      /* exited and its output drained: nothing more will come */
    bool deleted;   /* killed by pty_kill: invisible, freed once done and unused */
    int status;
    long long started_at, ended_at; /* unix seconds */
    int master;     /* -1 once done */
    bool master_eof;
    struct loop_watch *rw, *ww;
    struct ring out;
    long long last_out_ms;
    uint8_t *in; /* input waiting for the terminal */
    size_t in_off, in_len;
    unsigned cols, rows;
    long long grace_ms;
    struct loop_timer *grace_t, *drain_t;
    struct loop_timer *deadline_t; /* timeout_ms: the command's lifetime */
    uint64_t read_cursor; /* where the last pty_read ended: the next one's default */
    struct pty_attach *att;
    struct pty_reader *readers;
};

struct pty_attach {
    struct stream base;
    struct pty *p;
    uint64_t window;    /* output bytes we may still send */
    uint64_t in_window; /* input bytes the daemon may still send */
    uint64_t owed;      /* input credit held back while the input queue is full */
};

struct pty_reader {
    struct stream base;
    struct pty *p;
    uint64_t since;
    bool until_exit, release, pending;
    long long deadline_ms;
    struct loop_timer *t;
    struct pty_reader *next;
};

static long long wall_s(void)
{
    return (long long)time(NULL);
}

/* ---- the record table ---- */

/* id is "pty_N", or a pid in decimal (the newest PTY whose command has that pid: E2B's
 * clients name PTYs by pid). */
static struct pty *pty_find(struct agent *a, json_t *req, struct sbx_err *err)
{
    const char *id = json_string_value(json_object_get(req, "id"));
    if (!id) {
        sbx_err_set(err, EINVAL, "bad_request", "id must be a string");
        return NULL;
    }
    char *end;
    long pid = strtol(id, &end, 10);
    bool by_pid = *id >= '0' && *id <= '9' && !*end && pid > 0;
    for (unsigned i = a->nptys; i-- > 0;)
        if (!a->ptys[i]->deleted &&
            (by_pid ? a->ptys[i]->pgid == (pid_t)pid : !strcmp(a->ptys[i]->id, id)))
            return a->ptys[i];
    sbx_err_set(err, ENOENT, "pty_not_found", "no terminal %.64s", id);
    return NULL;
}

static void pty_close_master(struct pty *p)
{
    struct loop *l = p->agent->loop;
    loop_watch_del(l, p->rw);
    loop_watch_del(l, p->ww);
    p->rw = p->ww = NULL;
    if (p->master >= 0)
        close(p->master);
    p->master = -1;
    free(p->in);
    p->in = NULL;
    p->in_off = p->in_len = 0;
}

static void pty_free(struct pty *p)
{
    struct agent *a = p->agent;
    pty_close_master(p);
    if (p->grace_t)
        loop_timer_cancel(a->loop, p->grace_t);
    if (p->drain_t)
        loop_timer_cancel(a->loop, p->drain_t);
    if (p->deadline_t)
        loop_timer_cancel(a->loop, p->deadline_t);
    ring_free(&p->out);
    for (unsigned i = 0; i < a->nptys; i++) {
        if (a->ptys[i] == p) {
            memmove(&a->ptys[i], &a->ptys[i + 1], (a->nptys - i - 1) * sizeof(a->ptys[0]));
            a->nptys--;
            break;
        }
    }
    free(p);
}

static bool pty_unused(const struct pty *p)
{
    return p->done && !p->att && !p->readers;
}

/* A deleted PTY goes once nothing refers to it any more. */
static void pty_maybe_collect(struct pty *p)
{
    if (p->deleted && pty_unused(p))
        pty_free(p);
}

static int pty_make_room(struct agent *a, struct sbx_err *err)
{
    if (a->nptys < AGENT_MAX_PTYS)
        return 0;
    for (unsigned i = 0; i < a->nptys; i++) {
        if (pty_unused(a->ptys[i])) {
            pty_free(a->ptys[i]);
            return 0;
        }
    }
    return sbx_err_set(err, ENOSPC, "too_many_ptys", "at most %d terminals are kept, all in use",
                       AGENT_MAX_PTYS);
}

static unsigned pty_live_terminals(const struct agent *a)
{
    unsigned n = 0;
    for (unsigned i = 0; i < a->nptys; i++)
        n += a->ptys[i]->kind == PTY_TERMINAL && !a->ptys[i]->done && !a->ptys[i]->deleted;
    return n;
}

static void pty_exit_codes(const struct pty *p, int *code, int *sig)
{
    *code = *sig = 0;
    if (WIFEXITED(p->status)) {
        *code = WEXITSTATUS(p->status);
    } else if (WIFSIGNALED(p->status)) {
        *sig = WTERMSIG(p->status);
        *code = 128 + *sig;
    }
}

/* ---- output: the master side, read all the time ---- */

static void pty_update_read(struct pty *p);
static void reader_poke(struct pty_reader *r);
static void attach_free(struct pty_attach *t);

static void pty_done(struct pty *p)
{
    if (p->done)
        return;
    p->done = true;
    /* Nobody reads a terminal by cursor: once it has told its attached client (below),
     * it is gone. */
    if (p->kind == PTY_TERMINAL)
        p->deleted = true;
    if (p->drain_t) {
        loop_timer_cancel(p->agent->loop, p->drain_t);
        p->drain_t = NULL;
    }
    if (p->grace_t) {
        loop_timer_cancel(p->agent->loop, p->grace_t);
        p->grace_t = NULL;
    }
    if (p->deadline_t) {
        loop_timer_cancel(p->agent->loop, p->deadline_t);
        p->deadline_t = NULL;
    }
    pty_close_master(p);
    if (p->att) {
        struct pty_attach *t = TAKE_PTR(p->att);
        int code, sig;
        pty_exit_codes(p, &code, &sig);
        conn_send_json(p->agent, t->base.id, PROTO_EXIT,
                       json_pack("{s:i,s:i}", "exit_code", code, "signal", sig));
        attach_free(t);
    }
    if (!p->readers) {
        pty_maybe_collect(p);
        return;
    }
    /* Every reader answers now; the last one may free a deleted p. */
    for (struct pty_reader *r = p->readers, *next; r; r = next) {
        next = r->next;
        reader_poke(r);
    }
}

static void pty_drain_cb(struct loop *l, void *data)
{
    struct pty *p = data;
    p->drain_t = NULL;
    pty_done(p);
}

static void pty_read_cb(struct loop *l, int fd, uint32_t events, void *data)
{
    struct pty *p = data;
    struct agent *a = p->agent;
    size_t want = sizeof(a->iobuf);
    if (p->att && p->att->window < want)
        want = (size_t)p->att->window;
    if (want == 0) {
        pty_update_read(p);
        return;
    }
    ssize_t n = read(p->master, a->iobuf, want);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        /* EIO: every holder of the slave side has closed it. */
        p->master_eof = true;
        loop_watch_del(l, p->rw);
        p->rw = NULL;
        if (p->exited)
            pty_done(p);
        return;
    }
    ring_write(&p->out, a->iobuf, (size_t)n);
    p->last_out_ms = sbx_now_ms();
    if (p->att) {
        p->att->window -= (uint64_t)n;
        conn_send(a, p->att->base.id, PROTO_DATA, PROTO_CH_STDOUT, a->iobuf, (uint32_t)n);
    }
    for (struct pty_reader *r = p->readers, *next; r; r = next) {
        next = r->next;
        reader_poke(r);
    }
    pty_update_read(p);
}

static void pty_update_read(struct pty *p)
{
    /* Detached, output only goes to the ring, which never blocks. */
    bool want = p->master >= 0 && !p->master_eof &&
                (!p->att || (p->att->window > 0 && !conn_paused(p->agent)));
    if (want && !p->rw) {
        int r = loop_watch_add(p->agent->loop, p->master, EPOLLIN, pty_read_cb, p, &p->rw);
        if (r < 0)
            agent_die(p->agent, 1, "watching a terminal: %s", strerror(-r));
    } else if (!want && p->rw) {
        loop_watch_del(p->agent->loop, p->rw);
        p->rw = NULL;
    }
}

/* ---- input ---- */

static size_t pty_in_pending(const struct pty *p)
{
    return p->in_len - p->in_off;
}

static void pty_write_cb(struct loop *l, int fd, uint32_t events, void *data);

static void pty_pump_input(struct pty *p)
{
    while (p->master >= 0 && p->in_off < p->in_len) {
        ssize_t n = write(p->master, p->in + p->in_off, p->in_len - p->in_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            /* The terminal is going away: its input can never be read. */
            p->in_off = p->in_len;
            break;
        }
        p->in_off += (size_t)n;
    }
    if (p->in_off == p->in_len)
        p->in_off = p->in_len = 0;
    struct pty_attach *t = p->att;
    if (t && t->owed && pty_in_pending(p) <= PTY_INPUT_MAX) {
        uint64_t owed = t->owed;
        t->owed = 0;
        t->in_window += owed;
        conn_send_window(p->agent, t->base.id, PROTO_CH_STDIN, (uint32_t)owed);
    }
    if (p->master < 0)
        return;
    bool want = p->in_off < p->in_len;
    if (want && !p->ww) {
        int r = loop_watch_add(p->agent->loop, p->master, EPOLLOUT, pty_write_cb, p, &p->ww);
        if (r < 0)
            agent_die(p->agent, 1, "watching a terminal: %s", strerror(-r));
    } else if (!want && p->ww) {
        loop_watch_del(p->agent->loop, p->ww);
        p->ww = NULL;
    }
}

static void pty_write_cb(struct loop *l, int fd, uint32_t events, void *data)
{
    pty_pump_input(data);
}

static void pty_queue_input(struct pty *p, const void *buf, size_t len)
{
    if (p->master < 0 || len == 0)
        return;
    if (p->in_off > 0) {
        memmove(p->in, p->in + p->in_off, p->in_len - p->in_off);
        p->in_len -= p->in_off;
        p->in_off = 0;
    }
    p->in = sbx_xrealloc(p->in, p->in_len + len);
    memcpy(p->in + p->in_len, buf, len);
    p->in_len += len;
    pty_pump_input(p);
}

/* ---- grace: a terminal nobody is attached to ---- */

static void pty_grace_cb(struct loop *l, void *data)
{
    struct pty *p = data;
    p->grace_t = NULL;
    if (!p->exited)
        (void)kill(-p->pgid, SIGKILL);
}

static void pty_deadline_cb(struct loop *l, void *data)
{
    struct pty *p = data;
    p->deadline_t = NULL;
    if (!p->exited)
        (void)kill(-p->pgid, SIGKILL);
}

static void pty_detached(struct pty *p)
{
    p->att = NULL;
    if (p->kind == PTY_TERMINAL && !p->done && !p->grace_t)
        p->grace_t = loop_timer_add(p->agent->loop, p->grace_ms, pty_grace_cb, p);
    pty_update_read(p);
    pty_maybe_collect(p);
}

/* ---- op pty_open ---- */

static int dim_parse(json_t *req, const char *name, unsigned def, unsigned *out,
                     struct sbx_err *err)
{
    json_t *v = json_object_get(req, name);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > PTY_DIM_MAX)
        return sbx_err_set(err, EINVAL, "bad_request", "%s must be an integer in 1..%d", name,
                           PTY_DIM_MAX);
    *out = (unsigned)json_integer_value(v);
    return 0;
}

static int pty_set_size(int master, unsigned cols, unsigned rows)
{
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    return ioctl(master, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

int pty_open_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    json_t *argv = json_object_get(req, "argv");
    if (!json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > 4096)
        return sbx_err_set(err, EINVAL, "bad_request", "argv must be a non-empty array of strings");
    const char *kind = json_string_value(json_object_get(req, "kind"));
    if (!kind || (strcmp(kind, "terminal") && strcmp(kind, "exec")))
        return sbx_err_set(err, EINVAL, "bad_request", "kind must be \"terminal\" or \"exec\"");
    unsigned cols, rows;
    int r;
    if ((r = dim_parse(req, "cols", 80, &cols, err)) < 0 ||
        (r = dim_parse(req, "rows", 24, &rows, err)) < 0)
        return r;
    json_t *g = json_object_get(req, "grace_ms");
    if (g && (!json_is_integer(g) || json_integer_value(g) < 0))
        return sbx_err_set(err, EINVAL, "bad_request", "grace_ms must be a non-negative integer");
    json_t *tmo = json_object_get(req, "timeout_ms");
    if (tmo && (!json_is_integer(tmo) || json_integer_value(tmo) < 0))
        return sbx_err_set(err, EINVAL, "bad_request", "timeout_ms must be a non-negative integer");
    bool terminal = !strcmp(kind, "terminal");
    if (terminal && pty_live_terminals(a) >= PTY_TERMINALS_MAX)
        return sbx_err_set(err, EBUSY, "too_many_terminals",
                           "at most %d terminals may be open in a sandbox", PTY_TERMINALS_MAX);
    bool root;
    if ((r = spawn_user_parse(req, &root, err)) < 0 || (r = pty_make_room(a, err)) < 0)
        return r;

    size_t argc = json_array_size(argv);
    _cleanup_free_ const char **args = sbx_xcalloc(argc + 1, sizeof(*args));
    for (size_t i = 0; i < argc; i++) {
        json_t *v = json_array_get(argv, i);
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
            return sbx_err_set(err, EINVAL, "bad_request", "argv[%zu] is not a string", i);
        args[i] = json_string_value(v);
    }
    const char *cwd = json_string_value(json_object_get(req, "cwd"));

    struct envv env = {0};
    envv_init_base(&env);
    static const char term[] = "TERM=xterm-256color";
    (void)envv_set(&env, term, sizeof(term) - 1);
    r = envv_set_json(&env, json_object_get(req, "env"), "env", err);
    if (r < 0) {
        envv_free(&env);
        return r;
    }

    _cleanup_close_ int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    char name[64];
    if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 ||
        ptsname_r(master, name, sizeof(name)) != 0) {
        envv_free(&env);
        return sbx_err_sys(err, errno, "opening a pseudo-terminal");
    }
    _cleanup_close_ int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0 || (r = pty_set_size(master, cols, rows)) < 0 || sbx_set_nonblock(master) < 0) {
        envv_free(&env);
        return sbx_err_sys(err, errno, "opening %s", name);
    }
    struct spawn_req sr = {.argv = args,
                           .envp = env.v,
                           .cwd = cwd ? cwd : "/workspace",
                           .extra = {-1, -1},
                           .tty = slave,
                           .root = root};
    struct spawn_fds fds;
    pid_t pid;
    r = spawn_command(&sr, &pid, &fds, err);
    envv_free(&env);
    if (r < 0)
        return r;

    struct pty *p = sbx_xcalloc(1, sizeof(*p));
    p->agent = a;
    snprintf(p->id, sizeof(p->id), "pty_%llu", ++a->pty_seq);
    p->kind = terminal ? PTY_TERMINAL : PTY_EXEC;
    p->pgid = pid;
    p->started_at = wall_s();
    p->master = TAKE_FD(master);
    ring_init(&p->out, PTY_RING_MAX);
    p->last_out_ms = sbx_now_ms();
    p->cols = cols;
    p->rows = rows;
    p->grace_ms = g ? json_integer_value(g) : 0;
    a->ptys[a->nptys++] = p;
    /* Until someone attaches, a terminal is already in its grace period. */
    if (terminal)
        p->grace_t = loop_timer_add(a->loop, p->grace_ms, pty_grace_cb, p);
    if (tmo && json_integer_value(tmo) > 0)
        p->deadline_t = loop_timer_add(a->loop, json_integer_value(tmo), pty_deadline_cb, p);
    pty_update_read(p);
    conn_send_json(a, id, PROTO_EXIT,
                   json_pack("{s:s,s:i,s:i,s:i}", "id", p->id, "pid", (int)pid, "cols", (int)cols,
                             "rows", (int)rows));
    return 0;
}

/* ---- op pty_attach ---- */

static struct pty_attach *to_attach(struct stream *s)
{
    return (struct pty_attach *)s;
}

static void attach_free(struct pty_attach *t)
{
    stream_unregister(t->base.agent, &t->base);
    free(t);
}

/* End the stream with EXIT (result stolen), or silently with NULL. */
static void attach_end(struct pty_attach *t, json_t *result)
{
    struct pty *p = t->p;
    if (result)
        conn_send_json(t->base.agent, t->base.id, PROTO_EXIT, result);
    attach_free(t);
    pty_detached(p);
}

static void attach_data(struct stream *s, uint8_t ch, const uint8_t *buf, uint32_t len)
{
    struct pty_attach *t = to_attach(s);
    if (ch != PROTO_CH_STDIN)
        return;
    if (len > t->in_window) {
        conn_send_error(s->agent, s->id, "window_exceeded",
                        "the daemon sent more input than its window allowed");
        attach_end(t, NULL);
        return;
    }
    t->in_window -= len;
    pty_queue_input(t->p, buf, len);
    /* Credit now unless the terminal is not keeping up: then once it has caught up. */
    if (pty_in_pending(t->p) <= PTY_INPUT_MAX) {
        t->in_window += len;
        conn_send_window(s->agent, s->id, PROTO_CH_STDIN, len);
    } else {
        t->owed += len;
    }
}

static void attach_window(struct stream *s, uint8_t ch, uint32_t credit)
{
    struct pty_attach *t = to_attach(s);
    if (ch != PROTO_CH_STDOUT)
        return;
    t->window += credit;
    if (t->window > (uint64_t)1 << 40)
        t->window = (uint64_t)1 << 40;
    pty_update_read(t->p);
}

/* SIGNAL: the daemon's client went away; the terminal stays for its grace period. */
static void attach_signal(struct stream *s, int sig)
{
    attach_end(to_attach(s), json_pack("{s:b}", "detached", 1));
}

static void attach_resume(struct stream *s)
{
    pty_update_read(to_attach(s)->p);
}

static void attach_abort(struct stream *s)
{
    attach_end(to_attach(s), NULL);
}

static const struct stream_ops attach_ops = {
    .data = attach_data,
    .window = attach_window,
    .signal = attach_signal,
    .resume = attach_resume,
    .abort = attach_abort,
};

int pty_attach_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    struct pty *p = pty_find(a, req, err);
    if (!p)
        return -ENOENT;
    if (p->att)
        attach_end(p->att, json_pack("{s:b,s:s}", "detached", 1, "reason", "replaced"));
    struct pty_attach *t = sbx_xcalloc(1, sizeof(*t));
    t->base = (struct stream){.agent = a, .id = id, .ops = &attach_ops};
    t->p = p;
    t->window = PROTO_WINDOW_INIT;
    t->in_window = PROTO_WINDOW_INIT;
    int r = stream_register(a, &t->base);
    if (r < 0) {
        free(t);
        return sbx_err_set(err, -r, "internal", "registering stream %u failed", id);
    }
    if (p->grace_t) {
        loop_timer_cancel(a->loop, p->grace_t);
        p->grace_t = NULL;
    }
    p->att = t;
    /* The recent screen first (unless tail: live output only); the ring is smaller than
     * the window. */
    uint64_t off = json_is_true(json_object_get(req, "tail")) ? p->out.total : ring_start(&p->out);
    while (off < p->out.total) {
        const uint8_t *buf;
        size_t n = ring_peek(&p->out, off, &buf, AGENT_READ_CHUNK);
        conn_send(a, id, PROTO_DATA, PROTO_CH_STDOUT, buf, (uint32_t)n);
        t->window -= n;
        off += n;
    }
    if (p->done) {
        int code, sig;
        pty_exit_codes(p, &code, &sig);
        attach_end(t, json_pack("{s:i,s:i}", "exit_code", code, "signal", sig));
        return 0;
    }
    pty_update_read(p);
    return 0;
}

/* ---- op pty_read: write input, wait for output, answer what came after a cursor ---- */

static struct pty_reader *to_reader(struct stream *s)
{
    return (struct pty_reader *)s;
}

static void reader_unlink(struct pty_reader *r)
{
    for (struct pty_reader **pp = &r->p->readers; *pp; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    }
    if (r->t)
        loop_timer_cancel(r->base.agent->loop, r->t);
    stream_unregister(r->base.agent, &r->base);
}

static void reader_finish(struct pty_reader *r)
{
    struct agent *a = r->base.agent;
    struct pty *p = r->p;
    if (conn_paused(a)) {
        /* Up to PTY_RING_MAX more bytes: wait until the daemon has caught up. */
        r->pending = true;
        return;
    }
    uint64_t start = ring_start(&p->out);
    uint64_t off = r->since < start ? start : r->since;
    if (off > p->out.total)
        off = p->out.total;
    while (off < p->out.total) {
        const uint8_t *buf;
        size_t n = ring_peek(&p->out, off, &buf, AGENT_READ_CHUNK);
        conn_send(a, r->base.id, PROTO_DATA, PROTO_CH_STDOUT, buf, (uint32_t)n);
        off += n;
    }
    p->read_cursor = p->out.total;
    /* Output the ring no longer held when this read asked for it. */
    uint64_t dropped = r->since < start ? start - r->since : 0;
    json_t *res = json_pack("{s:s,s:i,s:I,s:b,s:s,s:I,s:I}", "id", p->id, "pid", (int)p->pgid,
                            "cursor", (json_int_t)p->out.total, "alive", !p->done, "status",
                            p->done ? "exited" : "running", "dropped", (json_int_t)dropped,
                            "started_at", (json_int_t)p->started_at);
    if (p->done) {
        int code, sig;
        pty_exit_codes(p, &code, &sig);
        json_object_set_new(res, "exit_code", json_integer(code));
        json_object_set_new(res, "signal", json_integer(sig));
    } else {
        json_object_set_new(res, "exit_code", json_null());
    }
    conn_send_json(a, r->base.id, PROTO_EXIT, res);
    bool release = r->release && p->done;
    reader_unlink(r);
    free(r);
    if (release)
        p->deleted = true;
    pty_maybe_collect(p);
}

static void reader_timer_cb(struct loop *l, void *data)
{
    struct pty_reader *r = data;
    r->t = NULL;
    reader_poke(r);
}

/* Answer now, or arm the timer for when to look again. */
static void reader_poke(struct pty_reader *r)
{
    struct pty *p = r->p;
    long long now = sbx_now_ms();
    if (r->pending)
        return; /* waiting for the connection to drain */
    if (p->done || now >= r->deadline_ms) {
        reader_finish(r);
        return;
    }
    long long next = r->deadline_ms;
    if (!r->until_exit && p->out.total > r->since) {
        long long quiet_at = p->last_out_ms + PTY_QUIET_MS;
        if (p->out.total - r->since >= PTY_RING_MAX || now >= quiet_at) {
            reader_finish(r);
            return;
        }
        if (quiet_at < next)
            next = quiet_at;
    }
    if (r->t)
        loop_timer_cancel(r->base.agent->loop, r->t);
    r->t = loop_timer_add(r->base.agent->loop, next - now, reader_timer_cb, r);
}

static void reader_resume(struct stream *s)
{
    struct pty_reader *r = to_reader(s);
    if (r->pending && !conn_paused(s->agent)) {
        r->pending = false;
        reader_finish(r);
    }
}

static void reader_abort(struct stream *s)
{
    struct pty_reader *r = to_reader(s);
    struct pty *p = r->p;
    reader_unlink(r);
    free(r);
    pty_maybe_collect(p);
}

static const struct stream_ops reader_ops = {
    .resume = reader_resume,
    .abort = reader_abort,
};

int pty_read_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    struct pty *p = pty_find(a, req, err);
    if (!p)
        return -ENOENT;
    json_t *in = json_object_get(req, "input");
    if (in && !json_is_string(in))
        return sbx_err_set(err, EINVAL, "bad_request", "input must be a string");
    json_t *since = json_object_get(req, "since");
    if (since && (!json_is_integer(since) || json_integer_value(since) < 0))
        return sbx_err_set(err, EINVAL, "bad_request", "since must be a non-negative integer");
    json_t *wait = json_object_get(req, "wait_ms");
    if (wait && (!json_is_integer(wait) || json_integer_value(wait) < 0))
        return sbx_err_set(err, EINVAL, "bad_request", "wait_ms must be a non-negative integer");
    if (in && json_string_length(in) > 0) {
        if (p->done)
            return sbx_err_set(err, EPIPE, "pty_not_running", "%s has exited", p->id);
        if (pty_in_pending(p) + json_string_length(in) > PTY_INPUT_MAX)
            return sbx_err_set(err, ENOBUFS, "pty_input_full",
                               "%s is not reading its input", p->id);
    }
    struct pty_reader *r = sbx_xcalloc(1, sizeof(*r));
    r->base = (struct stream){.agent = a, .id = id, .ops = &reader_ops};
    r->p = p;
    r->since = since ? (uint64_t)json_integer_value(since) : p->read_cursor;
    r->until_exit = json_is_true(json_object_get(req, "until_exit"));
    r->release = json_is_true(json_object_get(req, "release"));
    r->deadline_ms = sbx_now_ms() + (wait ? json_integer_value(wait) : 0);
    int ret = stream_register(a, &r->base);
    if (ret < 0) {
        free(r);
        return sbx_err_set(err, -ret, "internal", "registering stream %u failed", id);
    }
    r->next = p->readers;
    p->readers = r;
    if (in)
        pty_queue_input(p, json_string_value(in), json_string_length(in));
    /* What the input makes the command print comes later: wait for it to go quiet. */
    if (in && json_string_length(in) > 0)
        p->last_out_ms = sbx_now_ms();
    reader_poke(r);
    return 0;
}

/* ---- ops pty_resize, pty_kill ---- */

int pty_resize_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    struct pty *p = pty_find(a, req, err);
    if (!p)
        return -ENOENT;
    unsigned cols, rows;
    int r;
    if ((r = dim_parse(req, "cols", p->cols, &cols, err)) < 0 ||
        (r = dim_parse(req, "rows", p->rows, &rows, err)) < 0)
        return r;
    /* The kernel sends SIGWINCH to the terminal's foreground process group. */
    if (p->master >= 0 && (r = pty_set_size(p->master, cols, rows)) < 0)
        return sbx_err_sys(err, -r, "resizing %s", p->id);
    p->cols = cols;
    p->rows = rows;
    conn_send_json(a, id, PROTO_EXIT,
                   json_pack("{s:s,s:i,s:i}", "id", p->id, "cols", (int)cols, "rows", (int)rows));
    return 0;
}

int pty_input_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    struct pty *p = pty_find(a, req, err);
    if (!p)
        return -ENOENT;
    json_t *data = json_object_get(req, "data");
    if (!json_is_string(data) || json_string_length(data) > PTY_INPUT_MAX / 3 * 4)
        return sbx_err_set(err, EINVAL, "bad_request", "data must be base64 of at most %u bytes",
                           PTY_INPUT_MAX);
    size_t n;
    _cleanup_free_ unsigned char *buf = sbx_xmalloc(json_string_length(data) / 4 * 3 + 3);
    if (sbx_base64_decode(json_string_value(data), json_string_length(data), buf, &n) < 0)
        return sbx_err_set(err, EINVAL, "bad_request", "data is not base64");
    if (p->done || p->exited)
        return sbx_err_set(err, EPIPE, "pty_not_running", "%s has exited", p->id);
    if (pty_in_pending(p) + n > PTY_INPUT_MAX)
        return sbx_err_set(err, ENOBUFS, "pty_input_full", "%s is not reading its input", p->id);
    pty_queue_input(p, buf, n);
    conn_send_json(a, id, PROTO_EXIT, json_pack("{s:s,s:I}", "id", p->id, "queued", (json_int_t)n));
    return 0;
}

int pty_kill_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err)
{
    struct pty *p = pty_find(a, req, err);
    if (!p)
        return -ENOENT;
    json_t *sig = json_object_get(req, "signal");
    if (sig &&
        (!json_is_integer(sig) || json_integer_value(sig) < 1 || json_integer_value(sig) > 64))
        return sbx_err_set(err, EINVAL, "bad_request", "signal must be an integer in 1..64");
    if (sig && json_integer_value(sig) != SIGKILL) {
        /* Any other signal is only delivered: the PTY stays as it was. */
        if (!p->exited)
            (void)kill(-p->pgid, (int)json_integer_value(sig));
        conn_send_json(a, id, PROTO_EXIT, json_pack("{s:s,s:b}", "id", p->id, "deleted", 0));
        return 0;
    }
    if (!p->exited)
        (void)kill(-p->pgid, SIGKILL);
    p->deleted = true;
    conn_send_json(a, id, PROTO_EXIT, json_pack("{s:s,s:b}", "id", p->id, "deleted", 1));
    pty_maybe_collect(p);
    return 0;
}

/* ---- reaping ---- */

bool pty_child_exit(struct agent *a, pid_t pid, int status)
{
    for (unsigned i = 0; i < a->nptys; i++) {
        struct pty *p = a->ptys[i];
        if (p->exited || p->pgid != pid)
            continue;
        p->exited = true;
        p->status = status;
        p->ended_at = wall_s();
        if (p->master_eof || p->master < 0)
            pty_done(p);
        else
            p->drain_t = loop_timer_add(a->loop, PTY_DRAIN_MS, pty_drain_cb, p);
        return true;
    }
    return false;
}

void pty_kill_all(struct agent *a)
{
    for (unsigned i = 0; i < a->nptys; i++)
        if (!a->ptys[i]->exited)
            (void)kill(-a->ptys[i]->pgid, SIGKILL);
}
