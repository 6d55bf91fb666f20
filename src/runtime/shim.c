/* Import circle with shim_relay.c, shim_docker.c and shim_provider.c (allowed inside a folder,
 * docs/architecture.md#layering): the shim's main loop (shim.c) drives the frame relay
 * (shim_relay.c) and the docker backend's attach relay (shim_docker.c), which report
 * through the shim's log and its ready line (shim_log, ready_say). All are sbx-shim's;
 * nothing outside sees the loop. */
/* sbx-shim: one per sandbox, detached from the daemon (rt_start double-forks it
 * into its own session). It starts the container with `runsc run --detach` (or
 * `restore --detach`), holds the container's stdio pipes (the agent's channel) and
 * relays whole proto frames between them and at most one client on <state_dir>/shim.sock.
 *
 * The shim is a child subreaper: once the detached runsc has started the container and
 * exited, its sandbox and gofer processes are the shim's children, and the sandbox
 * process's exit is the container's. A foreground `runsc run` would stay alive beside
 * every sandbox only to wait for it (4.7 MiB PSS each, docs/performance.md).
 *
 *   sbx-shim --id ID --state-dir DIR --runsc PATH --root RUNSC_ROOT --ready-fd N
 *            [--cgroup CGROUPS_PATH] [--debug] [--restore IMAGE_DIR [--forked]]
 *            [--runtime gvisor|namespaces|local]
 *
 * With --runtime namespaces or local the shim starts the container itself from the same
 * bundle (namespaces.c) instead of `runsc run`; "kill" is SIGKILL to its init and there
 * is nothing to delete but the cgroups.
 *
 * With --restore the container comes back from a `runsc checkpoint` image (`runsc
 * restore`) instead of booting. A restored agent is in the middle of waiting for input
 * and says nothing first, so the shim greets it with a daemon HELLO
 * {"version":1,"role":"daemon","restored":true[,"forked":true]} and its answer is the
 * "first frame" below. "forked" tells the agent it is one of several copies of one
 * image, so it reseeds what it owns (docs/protocol.md).
 *
 * Readiness: one line on fd N, then the fd is closed:
 *   "ready <ms>\n"     the agent sent its first whole frame <ms> after runsc was spawned
 *   "exited <code>\n"  runsc exited before that (see <state_dir>/runsc.log)
 *   "error <text>\n"   the shim could not set up
 *
 * After every runsc delete the shim rmdirs what is left of CGROUPS_PATH.
 * SIGTERM: destroy (runsc kill KILL, wait, runsc delete --force, remove the dir
 * named in <state_dir>/destroy if present, exit 0). When runsc exits by itself:
 * <state_dir>/exit_status, runsc delete --force, exit 0.
 * Everything is logged to <state_dir>/shim.log. Single threaded (src/common/loop).
 *
 *   sbx-shim --cleanup --id ID --state-dir DIR --runsc PATH --root RUNSC_ROOT
 *            [--cgroup CGROUPS_PATH] [--remove DIR]
 *
 * is the helper rt_destroy starts when no shim is alive: runsc kill KILL, runsc
 * delete --force, remove DIR, exit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/loop.h"
#include "../common/mounts.h"
#include "../common/util.h"
#include "../proto/proto.h"
#include "namespaces.h"
#include "rt.h"
#include "shim.h"
#include "shim_docker.h"
#include "shim_provider.h"

void shim_log(struct shim *s, const char *fmt, ...)
{
    char buf[1024];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = (int)strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    n += snprintf(buf + n, sizeof(buf) - (size_t)n, ".%03ldZ shim[%d] ", ts.tv_nsec / 1000000,
                  (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = m < 0 ? n : (n + m > (int)sizeof(buf) - 2 ? (int)sizeof(buf) - 2 : n + m);
    buf[n++] = '\n';
    if (s->log_fd >= 0)
        (void)sbx_write_all(s->log_fd, buf, (size_t)n);
}

void ready_say(struct shim *s, const char *fmt, ...)
{
    if (s->ready_fd < 0)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if (n > (int)sizeof(buf) - 2)
        n = (int)sizeof(buf) - 2;
    buf[n++] = '\n';
    (void)sbx_write_all(s->ready_fd, buf, (size_t)n); /* EPIPE: the starter is gone; fine */
    close(s->ready_fd);
    s->ready_fd = -1;
}

/* ---- processes ---- */

static void child_reset_signals(void)
{
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    signal(SIGPIPE, SIG_DFL);
}

static void reaped(struct shim *s, pid_t pid, int st);

/* Run argv with stdin /dev/null and stdout/stderr appended to out_fd; wait at most
 * timeout_ms, then SIGKILL it. Returns the wait status or -errno / -ETIMEDOUT.
 * Every other child that exits meanwhile is reaped too: runsc delete waits for the
 * container's gofer to go, and the gofer is ours, so a zombie of it would hold the
 * delete until its timeout. */
static int run_wait(struct shim *s, char *const argv[], int out_fd, int timeout_ms)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        child_reset_signals();
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, 0);
        if (out_fd >= 0) {
            dup2(out_fd, 1);
            dup2(out_fd, 2);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    long long deadline = sbx_now_ms() + timeout_ms;
    for (;;) {
        int st;
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w == pid)
            return st;
        if (w > 0) {
            reaped(s, w, st);
            continue;
        }
        if (w < 0 && errno != EINTR)
            return -errno;
        if (w < 0)
            continue;
        if (sbx_now_ms() > deadline) {
            shim_log(s, "%s %s timed out after %d ms; killing it", argv[0],
                     argv[3] ? argv[3] : "", timeout_ms);
            kill(pid, SIGKILL);
            (void)waitpid(pid, &st, 0);
            return -ETIMEDOUT;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

int shim_spawn_relay(struct shim *s, int in_r, int out_w, int errfd,
                     void (*relay)(struct shim *s), pid_t *pid)
{
    pid_t p = fork();
    if (p < 0)
        return -errno;
    if (p == 0) {
        sigset_t all;
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        /* A write to a shim that went away fails (EPIPE) and ends the relay cleanly. */
        signal(SIGPIPE, SIG_IGN);
        if (dup2(in_r, 0) < 0 || dup2(out_w, 1) < 0 || (errfd >= 0 && dup2(errfd, 2) < 0))
            _exit(125);
        /* Not the shim's: its pid file's and state dir's locks say whether the shim lives
         * (rt_alive, rt_busy), and its listening socket is its own. */
        (void)close_range(3, ~0u, 0);
        relay(s);
    }
    *pid = p;
    return 0;
}

static void runsc_cmd(struct shim *s, const char *what, int timeout_ms)
{
    if (s->provider) {
        shim_provider_cmd(s, what);
        return;
    }
    if (s->docker) {
        if (strcmp(what, "resume"))
            shim_docker_cmd(s, what);
        return;
    }
    if (s->native) {
        /* The container's init is our child: killing it ends its pid namespace. */
        if (!strcmp(what, "kill") && s->run_pid > 0)
            (void)kill(s->run_pid, SIGKILL);
        int n = ns_kill_cgroup(s->cgroup);
        if (n)
            shim_log(s, "%s: killed %d processes left in %s", what, n, s->cgroup);
        return;
    }
    /* runsc --root R kill ID KILL | resume ID | delete --force ID */
    char *argv[8];
    int i = 0;
    argv[i++] = (char *)s->runsc;
    argv[i++] = "--root";
    argv[i++] = (char *)s->root;
    if (!strcmp(what, "kill")) {
        argv[i++] = "kill";
        argv[i++] = (char *)s->id;
        argv[i++] = "KILL";
    } else if (!strcmp(what, "resume")) {
        argv[i++] = "resume";
        argv[i++] = (char *)s->id;
    } else {
        argv[i++] = "delete";
        argv[i++] = "--force";
        argv[i++] = (char *)s->id;
    }
    argv[i] = NULL;
    _cleanup_close_ int out = open(s->runsc_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    long long t0 = sbx_now_ms();
    int st = run_wait(s, argv, out, timeout_ms);
    shim_log(s, "runsc %s: %s %d in %lld ms", what,
             st < 0 ? "error" : WIFEXITED(st) ? "exit" : "signal",
             st < 0 ? st : WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), sbx_now_ms() - t0);
}

/* runsc delete leaves the cgroup behind when `runsc run` failed before the container
 * was recorded; remove what is left (rmdir only: it cannot remove a cgroup in use). */
static void remove_cgroups(struct shim *s)
{
    if (!s->cgroup || s->cgroup[0] != '/' || strstr(s->cgroup, "..") || !strcmp(s->cgroup, "/"))
        return;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "/sys/fs/cgroup%s", s->cgroup);
    (void)rmdir(path); /* v2 */
    DIR *d = opendir("/sys/fs/cgroup");
    if (!d)
        return;
    struct dirent *de;
    int removed = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/sys/fs/cgroup/%s%s", de->d_name, s->cgroup);
        if (rmdir(path) == 0)
            removed++;
    }
    closedir(d);
    if (removed)
        shim_log(s, "removed %d leftover cgroup dirs %s", removed, s->cgroup);
}

static int watch_agent(struct shim *s, pid_t pid, int agent_in, int agent_out);

static int spawn_runsc(struct shim *s)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(out, O_CLOEXEC) < 0) {
        int r = -errno;
        close(in[0]);
        close(in[1]);
        return r;
    }
    (void)fcntl(in[1], F_SETPIPE_SZ, 1 << 20);
    (void)fcntl(out[0], F_SETPIPE_SZ, 1 << 20);
    int errfd = open(s->runsc_log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);

    _cleanup_free_ char *bundle = sbx_xasprintf("%s/bundle", s->state_dir);
    _cleanup_free_ char *pid_file = sbx_xasprintf("--pid-file=%s/sandbox.pid", s->state_dir);
    _cleanup_free_ char *debug_log = sbx_xasprintf("--debug-log=%s/runsc-debug/", s->state_dir);
    _cleanup_free_ char *platform =
        s->platform ? sbx_xasprintf("--platform=%s", s->platform) : NULL;
    char *argv[16];
    int i = 0;
    argv[i++] = (char *)s->runsc;
    argv[i++] = "--root";
    argv[i++] = (char *)s->root;
    argv[i++] = "--network=none";
    /* Writes to a root mounted read-write (a template build's own tree) reach the host, and
     * a read-only one stays refused, as runsc did before 2023 made an overlay of the root in
     * a file beside it (root:self) its default. */
    argv[i++] = "--overlay2=none";
    if (platform)
        argv[i++] = platform;
    if (s->debug) {
        argv[i++] = "--debug";
        argv[i++] = debug_log;
    }
    if (s->restore) {
        argv[i++] = "restore";
        argv[i++] = "--image-path";
        argv[i++] = (char *)s->restore;
    } else {
        argv[i++] = "run";
    }
    argv[i++] = "--bundle";
    argv[i++] = bundle;
    argv[i++] = "--detach";
    argv[i++] = pid_file;
    argv[i++] = (char *)s->id;
    argv[i] = NULL;

    s->t_spawn = sbx_now_ms();
    if (s->native) {
        struct ns_run run = {.bundle = bundle,
                             .cgroup = s->cgroup,
                             .local = !strcmp(s->runtime, "local")};
        char why[512];
        pid_t pid = -1;
        int r = s->provider ? shim_spawn_relay(s, in[0], out[1], errfd, shim_provider_relay, &pid)
                : s->docker ? shim_spawn_relay(s, in[0], out[1], errfd, shim_docker_relay, &pid)
                          : ns_spawn(&run, in[0], out[1], errfd >= 0 ? errfd : 2, &pid, why,
                                     sizeof(why));
        if (r < 0 && (s->docker || s->provider))
            snprintf(why, sizeof(why), "fork: %s", strerror(-r));
        close(in[0]);
        close(out[1]);
        if (r < 0) {
            shim_log(s, "%s container: %s", s->runtime, why);
            if (errfd >= 0) {
                dprintf(errfd, "sbx-shim: %s container: %s\n", s->runtime, why);
                close(errfd);
            }
            close(in[1]);
            close(out[0]);
            return r;
        }
        if (errfd >= 0)
            close(errfd);
        shim_log(s, "%s container set up, agent exec'ed, in %lld ms", s->runtime,
                 sbx_now_ms() - s->t_spawn);
        return watch_agent(s, pid, in[1], out[0]);
    }
    pid_t pid = fork();
    if (pid < 0) {
        int r = -errno;
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        if (errfd >= 0)
            close(errfd);
        return r;
    }
    if (pid == 0) {
        child_reset_signals();
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (errfd >= 0)
            dup2(errfd, 2);
        execvp(argv[0], argv);
        dprintf(2, "sbx-shim: exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    if (errfd >= 0)
        close(errfd);
    s->launch_pid = pid;
    return watch_agent(s, -1, in[1], out[0]);
}

static int watch_agent(struct shim *s, pid_t pid, int agent_in, int agent_out)
{
    s->run_pid = pid;
    s->agent_in = agent_in;
    s->agent_out = agent_out;
    int r = shim_relay_agent(s);
    if (r < 0)
        return r;
    shim_log(s, "spawned %s %s (pid %d) for %s", s->native ? s->runtime : "runsc",
             s->restore ? "restore" : "run", (int)(pid > 0 ? pid : s->launch_pid), s->id);
    if (s->restore)
        shim_relay_hello(s);
    return 0;
}

/* ---- the end ---- */

static char *read_remove_dir(struct shim *s)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/destroy", s->state_dir);
    char *data = NULL;
    if (sbx_read_file(path, 8192, &data, NULL) < 0)
        return NULL;
    data[strcspn(data, "\n")] = '\0';
    if (data[0] != '/' || !strcmp(data, "/") || strstr(data, "/../") || strstr(data, "/./")) {
        shim_log(s, "ignoring unsafe remove dir '%s'", data);
        free(data);
        return NULL;
    }
    return data;
}

static void write_exit_status(struct shim *s, int st)
{
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 255;
    s->exit_code = code;
    _cleanup_free_ char *path = sbx_xasprintf("%s/exit_status", s->state_dir);
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%d\n", code);
    int r = sbx_write_file_atomic(path, buf, (size_t)n, 0600);
    if (r < 0)
        shim_log(s, "writing %s: %s", path, strerror(-r));
}

static void shim_free(struct shim *s)
{
    if (s->provider_secret) {
        explicit_bzero(s->provider_secret, strlen(s->provider_secret));
        free(s->provider_secret);
    }
    if (s->client_fd >= 0)
        close(s->client_fd);
    proto_decoder_free(s->client_dec);
    proto_outq_free(s->to_client);
    proto_decoder_free(s->agent_dec);
    proto_outq_free(s->to_agent);
    if (s->loop) {
        struct loop_watch *ws[] = {s->listen_w, s->client_w, s->agent_in_w, s->agent_out_w,
                                   s->sig_w};
        for (size_t i = 0; i < SBX_ARRAY_SIZE(ws); i++)
            loop_watch_del(s->loop, ws[i]); /* freed by loop_free */
        loop_free(s->loop);
    }
    free(s->docker_remote);
    free(s->docker_tls_dir);
    free(s->docker_seed);
    free(s->sock_path);
    free(s->pid_path);
    free(s->runsc_log);
    free(s->log_path);
    *s = (struct shim){.log_fd = s->log_fd};
}

/* Remove our traces and, when destroy asked for it, the sandbox's directory. Order
 * matters for rt_destroy's race: unlink shim.pid first, then look at the marker. */
static void finish(struct shim *s)
{
    (void)unlink(s->sock_path);
    (void)unlink(s->pid_path);
    _cleanup_free_ char *rm = read_remove_dir(s);
    shim_log(s, "exiting: frames to agent %llu, to clients %llu, dropped (no client) %llu%s%s",
             s->frames_down, s->frames_up, s->frames_dropped, rm ? "; removing " : "",
             rm ? rm : "");
    if (rm) {
        if (s->docker)
            shim_docker_cmd(s, "volume"); /* a remote engine's workspace */
        close(s->log_fd);
        s->log_fd = -1;
        /* A loop-mounted workspace (the quota) must be detached, not emptied. */
        (void)sbx_umount_beneath(rm);
        (void)sbx_rm_rf(rm);
    }
    shim_free(s);
    exit(0);
}

static void container_exited(struct shim *s, int st)
{
    shim_log(s, "container exited: %s %d", WIFEXITED(st) ? "status" : "signal",
             WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    write_exit_status(s, st);
    s->run_pid = -1;
}

/* The detached runsc is done: on success the container runs and its sandbox process,
 * named in sandbox.pid, is ours now; else the start failed and that is the exit. */
static void launched(struct shim *s, int st)
{
    s->launch_pid = -1;
    _cleanup_free_ char *path = sbx_xasprintf("%s/sandbox.pid", s->state_dir);
    _cleanup_free_ char *text = NULL;
    long pid = 0;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && sbx_read_file(path, 32, &text, NULL) == 0)
        pid = strtol(text, NULL, 10);
    if (pid <= 1) {
        shim_log(s, "runsc %s --detach failed: %s %d", s->restore ? "restore" : "run",
                 WIFEXITED(st) ? "status" : "signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        container_exited(s, WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 255 << 8 : st);
        return;
    }
    s->run_pid = (pid_t)pid;
    shim_log(s, "container started: sandbox process %ld, %lld ms after spawning runsc", pid,
             sbx_now_ms() - s->t_spawn);
}

/* A child of ours has exited: the launcher, the container, or a gofer or other orphan of
 * runsc's, for which there is nothing to do. */
static void reaped(struct shim *s, pid_t pid, int st)
{
    if (pid == s->launch_pid)
        launched(s, st);
    else if (pid == s->run_pid)
        container_exited(s, st);
}

/* Reaps what has exited. While the detached runsc lives, nothing of the container is our
 * child yet, so the launcher is waited for by pid; after it, every child: the sandbox
 * process, the gofer and whatever else runsc leaves to its subreaper. */
static void reap_children(struct shim *s)
{
    int st;
    if (s->launch_pid > 0) {
        pid_t w = waitpid(s->launch_pid, &st, WNOHANG);
        if (w == s->launch_pid)
            launched(s, st);
        else if (w < 0 && errno != EINTR) {
            s->launch_pid = -1;
            container_exited(s, 255 << 8);
        }
        if (s->launch_pid > 0)
            return;
    }
    for (;;) {
        pid_t w = waitpid(-1, &st, WNOHANG);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        reaped(s, w, st);
    }
    /* ECHILD: the container's process is not (or no longer) ours to wait for. */
    if (s->run_pid > 0 && kill(s->run_pid, 0) < 0 && errno == ESRCH)
        container_exited(s, 255 << 8);
}

static bool running(const struct shim *s)
{
    return s->launch_pid > 0 || s->run_pid > 0;
}

static void reap_run(struct shim *s, bool block, int timeout_ms)
{
    long long deadline = sbx_now_ms() + timeout_ms;
    for (;;) {
        reap_children(s);
        if (!running(s) || !block)
            return;
        if (sbx_now_ms() > deadline) {
            shim_log(s, "the container did not exit in %d ms; SIGKILL", timeout_ms);
            if (s->launch_pid > 0)
                kill(s->launch_pid, SIGKILL);
            if (s->run_pid > 0)
                kill(s->run_pid, SIGKILL);
            deadline = sbx_now_ms() + 1000;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* A fork's checkpoint may hold it paused, and a paused sandbox would take its SIGKILL only
 * once the wait for its end had run out. */
static void unhold(struct shim *s)
{
    _cleanup_free_ char *held = sbx_xasprintf("%s/" RT_HELD_FILE, s->state_dir);
    if (!s->native && access(held, F_OK) == 0)
        runsc_cmd(s, "resume", SHIM_KILL_TIMEOUT_MS);
}

static void destroy(struct shim *s)
{
    shim_log(s, "SIGTERM: destroying %s", s->id);
    shim_relay_drop_client(s, "destroy");
    if (s->ready_fd >= 0)
        ready_say(s, "error destroyed while starting");
    if (running(s)) {
        unhold(s);
        runsc_cmd(s, "kill", SHIM_KILL_TIMEOUT_MS);
        reap_run(s, true, SHIM_WAIT_TIMEOUT_MS);
    }
    runsc_cmd(s, "delete", SHIM_DELETE_TIMEOUT_MS);
    remove_cgroups(s);
    finish(s);
}

static void on_runsc_exit(struct shim *s)
{
    shim_relay_drain(s);
    if (s->ready_fd >= 0) {
        /* A failed start: stop looking alive before rt_start hears about it. */
        (void)unlink(s->sock_path);
        (void)unlink(s->pid_path);
        ready_say(s, "exited %d", s->exit_code);
    }
    shim_relay_drop_client(s, "runsc exited");
    runsc_cmd(s, "delete", SHIM_DELETE_TIMEOUT_MS);
    remove_cgroups(s);
    finish(s);
}

static void on_signal(struct loop *l, int fd, uint32_t events, void *data)
{
    struct shim *s = data;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        switch (si.ssi_signo) {
        case SIGTERM:
        case SIGINT:
            destroy(s);
            break;
        case SIGCHLD:
            reap_run(s, false, 0);
            if (!running(s))
                on_runsc_exit(s);
            break;
        default:
            break;
        }
    }
}

/* ---- setup ---- */

/* bind/connect to a path that may be longer than sun_path, via /proc/self/fd. */
static int sock_addr(const char *dir, const char *name, struct sockaddr_un *sa, int *dirfd)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    *dirfd = -1;
    if ((size_t)snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", dir, name) <
        sizeof(sa->sun_path))
        return 0;
    *dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*dirfd < 0)
        return -errno;
    snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", *dirfd, name);
    return 0;
}

static int setup(struct shim *s)
{
    /* pid file, locked: rt_alive/rt_destroy test the lock, so a recycled pid never counts. */
    s->pid_fd = open(s->pid_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (s->pid_fd < 0)
        return -errno;
    if (flock(s->pid_fd, LOCK_EX | LOCK_NB) < 0)
        return errno == EWOULDBLOCK ? -EEXIST : -errno;
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
    if (ftruncate(s->pid_fd, 0) < 0 || pwrite(s->pid_fd, buf, (size_t)n, 0) != n)
        return -errno;

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_SETMASK, &set, NULL) < 0)
        return -errno;
    s->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (s->sig_fd < 0)
        return -errno;
    int r = loop_watch_add(s->loop, s->sig_fd, EPOLLIN, on_signal, s, &s->sig_w);
    if (r < 0)
        return r;

    s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->listen_fd < 0)
        return -errno;
    struct sockaddr_un sa;
    _cleanup_close_ int dirfd = -1;
    r = sock_addr(s->state_dir, "shim.sock", &sa, &dirfd);
    if (r < 0)
        return r;
    (void)unlink(s->sock_path);
    if (bind(s->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return -errno;
    if (chmod(s->sock_path, 0600) < 0)
        return -errno;
    if (listen(s->listen_fd, 8) < 0)
        return -errno;
    r = loop_watch_add(s->loop, s->listen_fd, EPOLLIN, shim_relay_accept, s, &s->listen_w);
    if (r < 0)
        return r;
    if (!s->native && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        return -errno;
    _cleanup_free_ char *pid_file = sbx_xasprintf("%s/sandbox.pid", s->state_dir);
    (void)unlink(pid_file);
    return spawn_runsc(s);
}

static bool safe_remove_dir(const char *d)
{
    return d && d[0] == '/' && strcmp(d, "/") && !strstr(d, "/../") && !strstr(d, "/./") &&
           !strchr(d, '\n');
}

static int cleanup_main(struct shim *s, const char *remove)
{
    shim_log(s, "cleanup helper for %s (no shim alive)", s->id);
    unhold(s);
    runsc_cmd(s, "kill", SHIM_KILL_TIMEOUT_MS);
    runsc_cmd(s, "delete", SHIM_DELETE_TIMEOUT_MS);
    remove_cgroups(s);
    (void)unlink(s->sock_path);
    if (remove && safe_remove_dir(remove)) {
        shim_log(s, "removing %s", remove);
        if (s->docker)
            shim_docker_cmd(s, "volume");
        close(s->log_fd);
        s->log_fd = -1;
        (void)sbx_umount_beneath(remove);
        int r = sbx_rm_rf(remove);
        return r < 0 ? 1 : 0;
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: sbx-shim --id ID --state-dir DIR --runsc PATH --root DIR "
                    "--ready-fd N [--cgroup PATH] [--debug] [--platform NAME] "
                    "[--restore DIR [--forked]] "
                    "[--runtime gvisor|namespaces|local|docker|e2b|cube] [--docker-host SOCKET]\n"
                    "       sbx-shim --cleanup --id ID --state-dir DIR --runsc PATH --root DIR "
                    "[--cgroup PATH] [--remove DIR] [--runtime NAME]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct shim s = {.log_fd = -1, .ready_fd = -1, .pid_fd = -1, .listen_fd = -1,
                     .client_fd = -1, .agent_in = -1, .agent_out = -1, .sig_fd = -1,
                     .exit_code = -1, .runsc = "runsc", .dir_fd = -1, .launch_pid = -1,
                     .run_pid = -1};
    static const struct option opts[] = {
        {"id", required_argument, NULL, 'i'},    {"state-dir", required_argument, NULL, 's'},
        {"runsc", required_argument, NULL, 'r'}, {"root", required_argument, NULL, 'R'},
        {"ready-fd", required_argument, NULL, 'f'}, {"debug", no_argument, NULL, 'd'},
        {"cleanup", no_argument, NULL, 'C'},     {"remove", required_argument, NULL, 'X'},
        {"cgroup", required_argument, NULL, 'G'},
        {"restore", required_argument, NULL, 'B'}, {"forked", no_argument, NULL, 'F'},
        {"runtime", required_argument, NULL, 'T'}, {"platform", required_argument, NULL, 'P'},
        {"docker-host", required_argument, NULL, 'D'},
        {NULL, 0, NULL, 0},
    };
    int c;
    bool cleanup = false;
    const char *remove = NULL;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'i': s.id = optarg; break;
        case 's': s.state_dir = optarg; break;
        case 'r': s.runsc = optarg; break;
        case 'R': s.root = optarg; break;
        case 'f': s.ready_fd = atoi(optarg); break;
        case 'd': s.debug = true; break;
        case 'C': cleanup = true; break;
        case 'X': remove = optarg; break;
        case 'G': s.cgroup = optarg; break;
        case 'B': s.restore = optarg; break;
        case 'F': s.forked = true; break;
        case 'T': s.runtime = optarg; break;
        case 'P': s.platform = optarg; break;
        case 'D': s.docker_host = optarg; break;
        default: usage();
        }
    }
    if (!s.id || !s.state_dir || !s.root || s.state_dir[0] != '/')
        usage();
    if (!s.runtime)
        s.runtime = "gvisor";
    if (strcmp(s.runtime, "gvisor") && strcmp(s.runtime, "namespaces") &&
        strcmp(s.runtime, "local") && strcmp(s.runtime, "docker") && strcmp(s.runtime, "e2b") &&
        strcmp(s.runtime, "cube"))
        usage();
    s.native = strcmp(s.runtime, "gvisor") != 0;
    s.docker = !strcmp(s.runtime, "docker");
    s.provider = !strcmp(s.runtime, "e2b") || !strcmp(s.runtime, "cube");
    if (s.docker && (!s.docker_host || s.docker_host[0] != '/'))
        usage();
    if (s.native && s.restore) {
        fprintf(stderr, "sbx-shim: the %s runtime has no memory snapshots\n", s.runtime);
        exit(2);
    }
    if (s.ready_fd >= 0)
        (void)fcntl(s.ready_fd, F_SETFD, FD_CLOEXEC);

    umask(077);
    signal(SIGPIPE, SIG_IGN);
    if (chdir("/") < 0)
        return 1;
    /* Held until exit, through the cleanup and the removal of cgroups (rt_busy). */
    s.dir_fd = open(s.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s.dir_fd >= 0)
        (void)flock(s.dir_fd, LOCK_SH);
    s.log_path = sbx_xasprintf("%s/shim.log", s.state_dir);
    s.log_fd = open(s.log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (s.log_fd >= 0 && s.log_fd != 2)
        (void)dup2(s.log_fd, 2); /* stray diagnostics land in the log, too */
    s.sock_path = sbx_xasprintf("%s/shim.sock", s.state_dir);
    s.pid_path = sbx_xasprintf("%s/shim.pid", s.state_dir);
    s.runsc_log = sbx_xasprintf("%s/runsc.log", s.state_dir);
    if (s.docker)
        shim_docker_load(&s);
    if (s.provider)
        shim_provider_load(&s);
    if (cleanup) {
        int rc = cleanup_main(&s, remove);
        shim_free(&s);
        return rc;
    }
    s.agent_dec = proto_decoder_new();
    s.to_agent = proto_outq_new(SHIM_OUTQ_MAX);

    int r = loop_new(&s.loop);
    if (r == 0)
        r = setup(&s);
    if (r < 0) {
        shim_log(&s, "setup failed: %s", strerror(-r));
        ready_say(&s, "error shim setup: %s", strerror(-r));
        if (r != -EEXIST) {
            (void)unlink(s.sock_path);
            (void)unlink(s.pid_path);
        }
        pid_t pids[] = {s.launch_pid, s.run_pid};
        for (size_t i = 0; i < SBX_ARRAY_SIZE(pids); i++)
            if (pids[i] > 0) {
                kill(pids[i], SIGKILL);
                (void)waitpid(pids[i], NULL, 0);
            }
        shim_free(&s);
        return 1;
    }
    r = loop_run(s.loop);
    shim_log(&s, "event loop ended: %s", r < 0 ? strerror(-r) : "stopped");
    shim_free(&s);
    return r < 0 ? 1 : 0;
}
