/* sbx-agent: PID 1 inside every sandbox. See docs/protocol.md.
 *
 *   main.c    start-up, signals and reaping, frame routing, the op table
 *   fatal.c   agent_die: the one fatal exit, which main hooks to kill what runs
 *   conn.c    the framed connection on fd 0/1 with output back-pressure
 *   stream.c  the table of live streams
 *   chan.c    fd <-> channel byte pumps with flow control
 *   exec.c    op "exec"
 *   spawn.c   starting a command (shared by every op that runs one)
 *   env.c     command environments
 *   session.c ops "session_*", and the session side of "exec" (shell state)
 *   spare.c   a session's resident bash, which runs its shell commands while it stays clean
 *   process.c ops "process_*": background processes and their log rings
 *   ring.c    the byte ring behind process logs
 *   kernel.c  ops "kernel_run", "kernel_reset", "kernel_interrupt" (the Python kernel)
 *   egress.c  the proxy listener on 127.0.0.1: one agent-opened stream per connection
 *   pty.c     ops "pty_*": terminals (WebSocket terminals, exec_command sessions)
 *   pidguard.c the sandbox's process limit: kills the session of a fork bomb
 *   tcpconn.c op "tcp_connect": preview traffic to a port on the sandbox's loopback
 *   oomwatch.c the memory watcher: kills the largest process before the host's limit
 *
 * To add an op: write its open function (validate, start, register a struct
 * stream with its stream_ops) and add a row to agent_ops below. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/util.h"
#include "agent.h"
#include "egress.h"
#include "env.h"
#include "exec.h"
#include "fatal.h"
#include "kernel.h"
#include "oomwatch.h"
#include "pidguard.h"
#include "process.h"
#include "quiet.h"
#include "pty.h"
#include "seccomp.h"
#include "session.h"
#include "snapshot.h"
#include "spare.h"
#include "spawn.h"
#include "stream.h"
#include "tcpconn.h"

typedef int (*agent_open_fn)(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);

static const struct agent_op {
    const char *name;
    agent_open_fn open;
} agent_ops[] = {
    {"exec", exec_open},
    {"session_create", session_create_open},
    {"session_list", session_list_open},
    {"session_delete", session_delete_open},
    {"process_start", process_start_open},
    {"process_list", process_list_open},
    {"process_get", process_get_open},
    {"process_signal", process_signal_open},
    {"process_kill", process_kill_open},
    {"process_logs", process_logs_open},
    {"process_input", process_input_open},
    {"kernel_run", kernel_run_open},
    {"kernel_reset", kernel_reset_open},
    {"kernel_interrupt", kernel_interrupt_open},
    {"snapshot_prepare", snapshot_prepare_open},
    {"snapshot_resume", snapshot_resume_open},
    {"pty_open", pty_open_open},
    {"pty_attach", pty_attach_open},
    {"pty_read", pty_read_open},
    {"pty_resize", pty_resize_open},
    {"pty_input", pty_input_open},
    {"pty_kill", pty_kill_open},
    {"tcp_connect", tcpconn_open},
};

/* Leave no process groups behind (matters when we are not PID 1). Aborting frees
 * streams that may be on the stack below us, but agent_die never returns. */
static void kill_everything(struct agent *a)
{
    stream_abort_all(a);
    process_kill_all(a);
    pty_kill_all(a);
}

/* ---- control frames ---- */

static void send_hello(struct agent *a)
{
    json_t *ops = json_array();
    for (size_t i = 0; i < SBX_ARRAY_SIZE(agent_ops); i++)
        json_array_append_new(ops, json_string(agent_ops[i].name));
    conn_send_json(a, 0, PROTO_HELLO,
                   json_pack("{s:i, s:s, s:s, s:I, s:o, s:i}", "version", PROTO_VERSION, "role",
                             "agent", "boot_id", a->boot_id, "pid", (json_int_t)getpid(), "ops",
                             ops, "max_streams", AGENT_MAX_STREAMS));
}

static void handle_hello(struct agent *a, const struct proto_frame *f)
{
    /* Whatever the payload says, a daemon HELLO means the previous daemon is
     * gone: its streams can never deliver their results. Sessions and background
     * processes are not streams: they stay for the next daemon. */
    stream_abort_all(a);
    /* After a fork's restore every copy holds the same memory: reseed what we own. */
    json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
    if (json_is_true(json_object_get(j, "restored"))) {
        quiet_restored(a);
        snapshot_restored(a);
    } else {
        (void)snapshot_relisten(a); /* a prepare whose daemon died before its checkpoint */
    }
    if (json_is_true(json_object_get(j, "forked")))
        kernel_forked(a);
    /* Only as the sandbox's init: elsewhere /proc holds the host's processes. */
    json_t *mem = json_object_get(j, "memory_bytes");
    if (a->pid1 && json_is_integer(mem) && json_integer_value(mem) > 0)
        oomwatch_set_limit(a, (uint64_t)json_integer_value(mem));
    json_decref(j);
    send_hello(a);
}

static void handle_open(struct agent *a, const struct proto_frame *f)
{
    uint32_t id = f->stream;
    if (id == 0)
        return; /* nowhere to answer; stream 0 is the control stream */
    if ((id & 1) == 0) {
        conn_send_error(a, id, "bad_stream", "streams opened by the daemon use odd ids");
        return;
    }
    struct stream *old = stream_find(a, id);
    if (old) {
        /* The daemon reused a live id: end the old stream (its one ERROR is this). */
        old->ops->abort(old);
        conn_send_error(a, id, "bad_stream", "stream %u is already open", id);
        return;
    }
    json_error_t jerr;
    json_t *req = json_loadb((const char *)f->payload, f->len, JSON_REJECT_DUPLICATES, &jerr);
    if (!req || !json_is_object(req)) {
        json_decref(req);
        conn_send_error(a, id, "bad_request", "request is not a JSON object%s%s", req ? "" : ": ",
                        req ? "" : jerr.text);
        return;
    }
    json_t *op = json_object_get(req, "op");
    if (!json_is_string(op)) {
        json_decref(req);
        conn_send_error(a, id, "bad_request", "request has no string \"op\"");
        return;
    }
    const struct agent_op *found = NULL;
    for (size_t i = 0; i < SBX_ARRAY_SIZE(agent_ops); i++)
        if (strcmp(agent_ops[i].name, json_string_value(op)) == 0)
            found = &agent_ops[i];
    if (!found) {
        conn_send_error(a, id, "unknown_op", "unknown op \"%.64s\"", json_string_value(op));
        json_decref(req);
        return;
    }
    if (a->nstreams >= AGENT_MAX_STREAMS) {
        json_decref(req);
        conn_send_error(a, id, "too_many_streams", "at most %d streams may be open at once",
                        AGENT_MAX_STREAMS);
        return;
    }
    pidguard_wake(a);
    struct sbx_err err = {0};
    int r = found->open(a, id, req, &err);
    json_decref(req);
    if (r < 0)
        conn_send_error(a, id, err.code[0] ? err.code : "internal", "%s", err.msg);
}

static void handle_signal(struct stream *s, const struct proto_frame *f)
{
    json_t *req = json_loadb((const char *)f->payload, f->len, 0, NULL);
    json_t *sig = json_object_get(req, "signal");
    /* A malformed SIGNAL is dropped: answering with ERROR would end a stream
     * whose command is still running. */
    if (json_is_integer(sig) && json_integer_value(sig) > 0 && json_integer_value(sig) < NSIG &&
        s->ops->signal)
        s->ops->signal(s, (int)json_integer_value(sig));
    json_decref(req);
}

static void handle_frame(struct agent *a, const struct proto_frame *f)
{
    quiet_frame_in(a);
    if (f->stream == 0) {
        switch (f->type) {
        case PROTO_HELLO:
            handle_hello(a, f);
            break;
        case PROTO_PING:
            conn_send(a, 0, PROTO_PONG, 0, f->payload, f->len);
            break;
        default:
            break; /* PONG and anything else on stream 0: nothing to do */
        }
        return;
    }
    if (f->type == PROTO_OPEN) {
        handle_open(a, f);
        return;
    }
    /* Frames for an unknown stream are normal: it may have just ended. */
    struct stream *s = stream_find(a, f->stream);
    if (!s)
        return;
    switch (f->type) {
    case PROTO_DATA:
        if (s->ops->data)
            s->ops->data(s, f->flags, f->payload, f->len);
        break;
    case PROTO_EOF:
        if (s->ops->eof)
            s->ops->eof(s, f->flags);
        break;
    case PROTO_WINDOW:
        if (f->len == 4 && s->ops->window)
            s->ops->window(s, f->flags, proto_get_u32(f->payload));
        break;
    case PROTO_SIGNAL:
        handle_signal(s, f);
        break;
    case PROTO_ERROR:
        if (s->ops->peer_end)
            s->ops->peer_end(s);
        break;
    default:
        break; /* HELLO/EXIT/ERROR/PING/PONG on a stream: not meaningful from the daemon */
    }
}

/* ---- signals and reaping ---- */

static void reap(struct agent *a)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0) {
            process_groups_check(a); /* before anything can signal a group emptied here */
            return; /* 0: children remain; ECHILD: none */
        }
        struct stream *s = stream_find_pid(a, pid);
        if (s && s->ops->child_exit)
            s->ops->child_exit(s, pid, status);
        else if (!spare_child_exit(a, pid) && !process_child_exit(a, pid, status) &&
                 !pty_child_exit(a, pid, status))
            kernel_reaped(a, pid, status); /* or an orphan, or a forgotten stream's child */
    }
}

static void signal_cb(struct loop *l, int fd, uint32_t events, void *data)
{
    struct agent *a = data;
    struct signalfd_siginfo si[16];
    for (;;) {
        ssize_t n = read(fd, si, sizeof(si));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        /* SIGTERM/SIGINT/SIGHUP are read and ignored: an init does not die of them. */
    }
    /* SIGCHLD coalesces, so always reap everything that is ready. */
    reap(a);
}

static int setup_signals(struct agent *a)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
        return -errno;
    /* Writes to a vanished daemon or child must fail with EPIPE, not kill us. */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
        return -errno;
    a->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (a->sigfd < 0)
        return -errno;
    return loop_watch_add(a->loop, a->sigfd, EPOLLIN, signal_cb, a, &a->sig_w);
}

static int make_boot_id(char out[33])
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof(b)) {
        ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            /* Fall back to the device for kernels without getrandom. */
            _cleanup_close_ int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                return -errno;
            n = read(fd, b + got, sizeof(b) - got);
            if (n <= 0)
                return n < 0 ? -errno : -EIO;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof(b); i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return 0;
}

/* fds 0 and 1 are the connection; 2 must exist too, so that no pipe we create
 * lands on 0-2 (exec_child relies on it). */
static int check_std_fds(void)
{
    if (fcntl(0, F_GETFD) < 0 || fcntl(1, F_GETFD) < 0)
        return -EBADF;
    if (fcntl(2, F_GETFD) < 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd < 0)
            return -errno;
        if (fd != 2)
            return -EBADF;
    }
    return 0;
}

/* A template may start its own services at boot (the desktop's X, VNC and noVNC): its
 * /usr/lib/sbx/start runs once, detached, with the base environment (docs/templates.md).
 * It is reaped as an orphan; its output goes nowhere (it logs where it wants). A custom
 * template with a ready check also has /usr/lib/sbx/ready: the agent runs it until it
 * exits 0 (at most TEMPLATE_READY_WAIT_MS) before its HELLO, so a create answers once the
 * template's service is up. */
#define TEMPLATE_START "/usr/lib/sbx/start"
#define TEMPLATE_READY "/usr/lib/sbx/ready"
#define TEMPLATE_READY_WAIT_MS 30000
#define TEMPLATE_READY_PAUSE_MS 200

/* Start path detached; with wait, wait for it and answer its exit status (-1: no start). */
static int run_template_script(const char *path, struct envv *env, bool wait)
{
    const char *const argv[] = {path, NULL};
    /* As the user too: the desktop's terminal and any X client could otherwise drive a root
     * one through the display the user's commands share. */
    struct spawn_req req = {.argv = argv, .envp = env->v, .cwd = "/tmp", .extra = {-1, -1}};
    struct spawn_fds fds;
    struct sbx_err err = {0};
    pid_t pid;
    if (spawn_command(&req, &pid, &fds, &err) < 0) {
        dprintf(2, "sbx-agent: %s: %s\n", path, err.msg);
        return -1;
    }
    close(fds.out_r);
    close(fds.err_r);
    int status = -1;
    if (wait)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    return status;
}

static void start_template_services(void)
{
    bool start = access(TEMPLATE_START, X_OK) == 0, ready = access(TEMPLATE_READY, X_OK) == 0;
    if (!start && !ready)
        return;
    struct envv env;
    envv_init_base(&env);
    if (start)
        (void)run_template_script(TEMPLATE_START, &env, false);
    if (ready) {
        int waited = 0;
        while (run_template_script(TEMPLATE_READY, &env, true) != 0 &&
               waited < TEMPLATE_READY_WAIT_MS) {
            struct timespec ts = {0, TEMPLATE_READY_PAUSE_MS * 1000000L};
            nanosleep(&ts, NULL);
            waited += TEMPLATE_READY_PAUSE_MS;
        }
        if (waited >= TEMPLATE_READY_WAIT_MS)
            dprintf(2, "sbx-agent: %s did not pass in %d ms\n", TEMPLATE_READY,
                    TEMPLATE_READY_WAIT_MS);
    }
    envv_free(&env);
}

int main(int argc, char **argv)
{
    static struct agent agent; /* large (iobuf); one per process */
    struct agent *a = &agent;
    int r = check_std_fds();
    if (r < 0) {
        dprintf(2, "sbx-agent: fds 0-2 must be open: %s\n", strerror(-r));
        return 1;
    }
    a->pid1 = getpid() == 1;
    if (!a->pid1 && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
        dprintf(2, "sbx-agent: PR_SET_CHILD_SUBREAPER: %s\n", strerror(errno));
        return 1;
    }
    struct sbx_err serr = {0};
    r = agent_seccomp_install(&serr);
    if (r < 0) {
        dprintf(2, "sbx-agent: %s\n", serr.msg);
        return 1;
    }
    r = make_boot_id(a->boot_id);
    if (r < 0) {
        dprintf(2, "sbx-agent: no randomness for boot_id: %s\n", strerror(-r));
        return 1;
    }
    r = loop_new(&a->loop);
    if (r < 0) {
        dprintf(2, "sbx-agent: epoll: %s\n", strerror(-r));
        return 1;
    }
    r = setup_signals(a);
    if (r < 0) {
        dprintf(2, "sbx-agent: signals: %s\n", strerror(-r));
        return 1;
    }
    a->on_fatal = kill_everything;
    r = conn_init(a, 0, 1, handle_frame);
    if (r < 0) {
        dprintf(2, "sbx-agent: connection: %s\n", strerror(-r));
        return 1;
    }
    /* Only in a sandbox: an agent run on a host (tests) must not take a host port. */
    if (a->pid1 && (r = egress_listen(a)) < 0)
        dprintf(2, "sbx-agent: egress listener: %s (egress unavailable)\n", strerror(-r));
    spare_init(a);
    if (a->pid1) {
        start_template_services();
        pidguard_start(a);
        quiet_start(a);
    }
    send_hello(a);
    r = loop_run(a->loop);
    agent_die(a, 1, "event loop: %s", strerror(-r));
}
