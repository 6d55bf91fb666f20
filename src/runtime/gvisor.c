/* rt.h over one detached sbx-shim per sandbox: the gVisor backend (runsc), and the
 * namespaces and local backends, which the shim runs itself (namespaces.c).
 * Library code: never logs, never exits; errors go back in struct sbx_err. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/spawn.h"
#include "../common/util.h"
#include "docker_api.h"
#include "oci.h"
#include "provider.h"
#include "rt.h"

#define RT_START_TIMEOUT_DEFAULT_MS 10000
#define RT_LOG_TAIL 600
#define RT_VERSION_MAX 512 /* what rt_probe reads of `runsc --version` */

/* The shim's whole environment: PATH, plus the sanitizer settings of a test build so
 * its reports land where the test runner looks. Nothing else of the daemon's. */
struct shim_env {
    char *v[5];
    char *own[3];
};

static void shim_env_init(struct shim_env *e)
{
    static const char *const pass[] = {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"};
    size_t n = 0;
    e->v[n++] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    for (size_t i = 0; i < SBX_ARRAY_SIZE(pass); i++) {
        const char *val = getenv(pass[i]);
        e->own[i] = val ? sbx_xasprintf("%s=%s", pass[i], val) : NULL;
        if (e->own[i])
            e->v[n++] = e->own[i];
    }
    e->v[n] = NULL;
}

static void shim_env_free(struct shim_env *e)
{
    for (size_t i = 0; i < SBX_ARRAY_SIZE(e->own); i++)
        free(e->own[i]);
}

static bool abs_path_ok(const char *p)
{
    if (!p || p[0] != '/' || !strcmp(p, "/") || strstr(p, "/../") || strstr(p, "/./") ||
        strchr(p, '\n'))
        return false;
    size_t n = strlen(p);
    return !(n >= 3 && !strcmp(p + n - 3, "/..")) && !(n >= 2 && !strcmp(p + n - 2, "/."));
}

/* The last bytes of a log file, on one line, for error messages. */
static void log_tail(const char *path, char *buf, size_t size)
{
    buf[0] = '\0';
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    off_t end = lseek(fd, 0, SEEK_END);
    if (end <= 0)
        return;
    size_t want = size - 1;
    off_t from = end > (off_t)want ? end - (off_t)want : 0;
    ssize_t n = pread(fd, buf, (size_t)(end - from), from);
    if (n <= 0)
        return;
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\n' || buf[i] == '\t')
            buf[i] = ' ';
        else if ((unsigned char)buf[i] < 0x20)
            buf[i] = '?';
}

/* Pid of the shim holding <state_dir>/shim.pid's lock, or 0 when none does. */
/* A process on its way out (PF_EXITING in /proc/<pid>/stat's flags) still holds its
 * locks for a few milliseconds, and a signal to it succeeds but does nothing. */
static bool exiting(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return true; /* gone already */
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* after the command name, which may hold anything */
    unsigned long flags = 0;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) != 1)
        return false;
    return (flags & 0x4) != 0; /* PF_EXITING */
}

static pid_t shim_pid(const char *state_dir)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/shim.pid", state_dir);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return 0;
    if (flock(fd, LOCK_SH | LOCK_NB) == 0)
        return 0; /* nobody holds it: a stale file */
    if (errno != EWOULDBLOCK)
        return 0;
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    long pid = strtol(buf, NULL, 10);
    return pid > 1 && !exiting((pid_t)pid) ? (pid_t)pid : 0;
}

bool rt_alive(const char *state_dir)
{
    if (!state_dir)
        return false;
    pid_t pid = shim_pid(state_dir);
    if (pid <= 0 || (kill(pid, 0) < 0 && errno != EPERM))
        return false;
    _cleanup_free_ char *sock = sbx_xasprintf("%s/shim.sock", state_dir);
    struct stat st;
    return lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode);
}

bool rt_busy(const char *state_dir)
{
    _cleanup_close_ int fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    /* The shim holds a shared lock on the dir for its whole life (shim.c). */
    return flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
}

/* Start argv detached: its own session, stdio on /dev/null, a clean signal mask, default
 * handlers and a clean environment; keep_fd (or -1) survives the exec. posix_spawn's
 * vfork-style clone costs the same however large the daemon is (a fork copies its page
 * tables, twice with the double fork this replaced). The child is the caller's: sbxd's
 * SIGCHLD handler reaps it when it ends (main.c), and an sbxd restart leaves it running
 * in its own session. Returns 0 or -errno. */
static int spawn_detached(char *const argv[], int keep_fd, int stdin_fd)
{
    /* stdin_fd: a provider's secrets (rt_spec's key and network rules), never a file. */
    struct sbx_spawn_opts o = {.in = stdin_fd, .out = -1, .err = -1, .keep_fd = keep_fd,
                               .own_session = true, .clean_signals = true};
    struct shim_env env;
    shim_env_init(&env);
    pid_t pid;
    int r = sbx_spawn(&pid, argv, env.v, &o);
    shim_env_free(&env);
    return r;
}

static void unlink_in(const char *dir, const char *name)
{
    _cleanup_free_ char *p = sbx_xasprintf("%s/%s", dir, name);
    (void)unlink(p);
}

/* One read of a line a helper wrote in a single short write (a watcher's status, the shim's
 * readiness), NUL-terminated: its length, or -errno (-EAGAIN on an empty non-blocking fd). */
static ssize_t read_said(int fd, char *line, size_t size)
{
    ssize_t n;
    do
        n = read(fd, line, size - 1);
    while (n < 0 && errno == EINTR);
    line[n > 0 ? n : 0] = '\0';
    return n < 0 ? -errno : n;
}

/* Read the shim's one readiness line, waiting at most timeout_ms. */
static int read_ready(int fd, int timeout_ms, char *line, size_t size)
{
    size_t len = 0;
    long long deadline = sbx_now_ms() + timeout_ms;
    for (;;) {
        long long left = deadline - sbx_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            return -ETIMEDOUT;
        ssize_t n = read(fd, line + len, size - 1 - len);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -errno;
        }
        if (n == 0) {
            line[len] = '\0';
            return len ? 0 : -EPIPE;
        }
        len += (size_t)n;
        line[len] = '\0';
        if (memchr(line, '\n', len) || len == size - 1) {
            line[strcspn(line, "\n")] = '\0';
            return 0;
        }
    }
}

/* Copy (or hard-link, when both live on one filesystem) src to dst, replacing dst. */
static int install_file(const char *src, const char *dst, int mode)
{
    (void)unlink(dst);
    if (link(src, dst) == 0)
        return 0;
    _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -errno;
    _cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (out < 0)
        return -errno;
    return sbx_copy_sparse(in, out);
}

/* The docker backend's container, as the shim creates it: <state_dir>/docker.json. A
 * start without options (spec->docker NULL: a resume after a daemon restart) keeps the
 * one its first start wrote, so the image and engine runtime stay the sandbox's. */
static int write_docker_config(const struct rt_config *cfg, const struct rt_spec *spec,
                               struct sbx_err *err)
{
    if (!cfg->docker_host || cfg->docker_host[0] != '/')
        return sbx_err_set(err, EINVAL, "internal", "the docker backend has no engine socket");
    _cleanup_free_ char *path = sbx_xasprintf("%s/docker.json", spec->state_dir);
    if (!spec->docker && access(path, F_OK) == 0)
        return 0;
    _cleanup_free_ char *json = NULL;
    int r = oci_build_docker(cfg, spec, &json, err);
    if (r < 0)
        return r;
    if ((r = sbx_write_file_replace(path, json, strlen(json), 0600)) < 0)
        return sbx_err_sys(err, -r, "writing %s", path);
    /* The holder's own options: the engine's, not the container's. */
    _cleanup_free_ char *epath = sbx_xasprintf("%s/" DOCKER_ENGINE_FILE, spec->state_dir);
    const struct rt_docker *d = spec->docker;
    bool remote = d && docker_host_remote(d->host);
    json_t *ej =
        json_pack("{s:I,s:s?,s:s?,s:s?}", "timeout_ms",
                  (json_int_t)(d ? d->http_timeout_ms : 0), "host", remote ? d->host : NULL,
                  "tls_dir", remote && d->tls_dir && *d->tls_dir ? d->tls_dir : NULL,
                  "workspace", remote ? spec->workspace : NULL);
    _cleanup_free_ char *engine = ej ? json_dumps(ej, JSON_COMPACT) : NULL;
    json_decref(ej);
    if (!engine)
        return sbx_err_set(err, ENOMEM, "internal", "serialising %s", epath);
    if ((r = sbx_write_file_replace(epath, engine, strlen(engine), 0600)) < 0)
        return sbx_err_sys(err, -r, "writing %s", epath);
    return 0;
}

/* rt_start and rt_restore: restore_dir NULL boots the container, else restores it. */
static int launch(const struct rt_config *cfg, const struct rt_spec *spec, const char *restore_dir,
                  bool forked, int *ready_fd, struct sbx_err *err)
{
    if (!oci_id_valid(spec->id))
        return sbx_err_set(err, EINVAL, "invalid_request", "invalid sandbox id");
    if (!abs_path_ok(spec->state_dir) || !abs_path_ok(cfg->runsc_root) ||
        !abs_path_ok(cfg->shim_path))
        return sbx_err_set(err, EINVAL, "internal",
                           "state_dir, runsc_root and shim_path must be absolute paths");
    if (rt_alive(spec->state_dir))
        return sbx_err_set(err, EEXIST, "internal", "sandbox %s already has a running shim",
                           spec->id);

    if (restore_dir && !abs_path_ok(restore_dir))
        return sbx_err_set(err, EINVAL, "internal", "the image dir must be an absolute path");
    const struct rt_backend *backend = rt_backend_find(spec->runtime ? spec->runtime : "gvisor");
    if (!backend)
        return sbx_err_set(err, EINVAL, "invalid_request", "unknown runtime '%.32s'",
                           spec->runtime);
    if (!backend->memory_snapshots) {
        /* No memory to bring back: a restore is a cold start over the kept workspace. */
        restore_dir = NULL;
        forked = false;
    }

    /* Each sandbox runs its own copy of the agent: gVisor maps the binary's pages from
     * the file, and a checkpoint image only restores against the very build it was
     * taken with (a rebuilt agent under a restore crashes it). */
    _cleanup_free_ char *bundle = sbx_xasprintf("%s/bundle", spec->state_dir);
    int r = sbx_mkdir_p(bundle, 0700);
    if (r < 0)
        return sbx_err_sys(err, -r, "creating %s", bundle);
    _cleanup_free_ char *agent = sbx_xasprintf("%s/sbx-agent", spec->state_dir);
    _cleanup_free_ char *agent_src =
        restore_dir ? sbx_xasprintf("%s/sbx-agent", restore_dir) : sbx_xstrdup(cfg->agent_path);
    if ((r = install_file(agent_src, agent, 0755)) < 0)
        return sbx_err_sys(err, -r, "installing the agent %s", agent_src);
    struct rt_config pinned = *cfg;
    pinned.agent_path = agent;
    /* sbx-bsl is pinned the same way (a restore needs the mounts its image was taken with):
     * a restore mounts the copy kept beside the image, or none when the image has none. */
    _cleanup_free_ char *bsl = sbx_xasprintf("%s/sbx-bsl", spec->state_dir);
    _cleanup_free_ char *bsl_src = restore_dir     ? sbx_xasprintf("%s/sbx-bsl", restore_dir)
                                   : cfg->bsl_path ? sbx_xstrdup(cfg->bsl_path)
                                                   : NULL;
    /* Only onto the template's own mount point: runsc would otherwise make one in the shared,
     * read-only template tree on the host (templates built before sbx-bsl have none). */
    _cleanup_free_ char *bsl_point = sbx_xasprintf("%s" OCI_BSL_PATH, spec->rootfs);
    pinned.bsl_path = NULL;
    if (bsl_src && access(bsl_src, F_OK) == 0 && access(bsl_point, F_OK) == 0) {
        if ((r = install_file(bsl_src, bsl, 0755)) < 0)
            return sbx_err_sys(err, -r, "installing sbx-bsl %s", bsl_src);
        pinned.bsl_path = bsl;
    }
    _cleanup_free_ char *json = NULL;
    r = oci_build_config(&pinned, spec, &json, err);
    if (r < 0)
        return sbx_err_wrap(err, "sandbox %s", spec->id);
    if ((r = sbx_mkdir_p(cfg->runsc_root, 0700)) < 0)
        return sbx_err_sys(err, -r, "creating %s", cfg->runsc_root);
    _cleanup_free_ char *config = sbx_xasprintf("%s/config.json", bundle);
    /* Not fsynced: only the shim and runsc read it while the sandbox runs, and a host
     * crash ends both, its cgroups too (a cleanup then finds nothing to do). */
    if ((r = sbx_write_file_replace(config, json, strlen(json), 0600)) < 0)
        return sbx_err_sys(err, -r, "writing %s", config);
    bool docker = !strcmp(backend->name, "docker");
    if (docker && (r = write_docker_config(&pinned, spec, err)) < 0)
        return sbx_err_wrap(err, "sandbox %s", spec->id);
    _cleanup_close_ int secret_fd = -1;
    if (rt_is_provider(backend->name)) {
        char *secret = NULL;
        if ((r = rt_provider_write(cfg, spec, backend->name, &secret, err)) < 0)
            return sbx_err_wrap(err, "sandbox %s", spec->id);
        secret_fd = secret ? rt_provider_secret_pipe(secret) : -1;
        if (secret)
            explicit_bzero(secret, strlen(secret));
        free(secret);
        if (secret && secret_fd < 0)
            return sbx_err_sys(err, -secret_fd, "handing sandbox %s's provider key to its shim",
                               spec->id);
    }
    unlink_in(spec->state_dir, "exit_status");
    unlink_in(spec->state_dir, "destroy");
    unlink_in(spec->state_dir, RT_HELD_FILE);
    _cleanup_free_ char *runsc_log = sbx_xasprintf("%s/runsc.log", spec->state_dir);
    {
        _cleanup_close_ int lfd =
            open(runsc_log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (lfd < 0)
            return sbx_err_sys(err, errno, "creating %s", runsc_log);
    }

    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return sbx_err_sys(err, errno, "pipe");
    _cleanup_close_ int ready_r = pfd[0];
    _cleanup_close_ int ready_w = pfd[1];
    if (ready_w <= 2) { /* keep it clear of the stdio the child redirects */
        int fd = fcntl(ready_w, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
            return sbx_err_sys(err, errno, "dup");
        close(ready_w);
        ready_w = fd;
    }
    char fdbuf[16];
    snprintf(fdbuf, sizeof(fdbuf), "%d", ready_w);
    char *argv[24];
    int i = 0;
    argv[i++] = (char *)cfg->shim_path;
    argv[i++] = "--runtime";
    argv[i++] = (char *)backend->name;
    argv[i++] = "--id";
    argv[i++] = (char *)spec->id;
    argv[i++] = "--state-dir";
    argv[i++] = (char *)spec->state_dir;
    argv[i++] = "--runsc";
    argv[i++] = (char *)(cfg->runsc_path ? cfg->runsc_path : "runsc");
    argv[i++] = "--root";
    argv[i++] = (char *)cfg->runsc_root;
    argv[i++] = "--ready-fd";
    argv[i++] = fdbuf;
    char cgpath[512];
    if (oci_cgroups_path(cfg->cgroup_parent, spec->id, cgpath, sizeof(cgpath)) == 0) {
        argv[i++] = "--cgroup";
        argv[i++] = cgpath;
    }
    if (cfg->debug)
        argv[i++] = "--debug";
    if (docker) {
        argv[i++] = "--docker-host";
        argv[i++] = (char *)cfg->docker_host;
    }
    if (cfg->runsc_platform) {
        argv[i++] = "--platform";
        argv[i++] = (char *)cfg->runsc_platform;
    }
    if (restore_dir) {
        argv[i++] = "--restore";
        argv[i++] = (char *)restore_dir;
        if (forked)
            argv[i++] = "--forked";
    }
    argv[i] = NULL;

    r = spawn_detached(argv, ready_w, secret_fd);
    if (r < 0)
        return sbx_err_sys(err, -r, "starting %s", cfg->shim_path);
    close(TAKE_FD(ready_w));

    if ((r = sbx_set_nonblock(ready_r)) < 0)
        return sbx_err_sys(err, -r, "readiness pipe");
    *ready_fd = TAKE_FD(ready_r);
    return 0;
}

int rt_start(const struct rt_config *cfg, const struct rt_spec *spec, int *ready_fd,
             struct sbx_err *err)
{
    return launch(cfg, spec, NULL, false, ready_fd, err);
}

int rt_restore(const struct rt_config *cfg, const struct rt_spec *spec, const char *image_dir,
               bool forked, int *ready_fd, struct sbx_err *err)
{
    return launch(cfg, spec, image_dir, forked, ready_fd, err);
}

/* A checkpoint without memory: the sandbox stops as for a pause (its shim kills the
 * container and keeps the directory) and the outcome is known at once. */
static int stop_for_checkpoint(const struct rt_config *cfg, const char *id, const char *state_dir,
                               int *done_fd, struct sbx_err *err)
{
    int r = rt_destroy(cfg, id, state_dir, NULL, NULL, err);
    if (r < 0)
        return r;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK) < 0)
        return sbx_err_sys(err, errno, "pipe");
    (void)sbx_write_all(pfd[1], "0\n", 2); /* a wait status of 0: done */
    close(pfd[1]);
    *done_fd = pfd[0];
    return 0;
}

/* The steps a watcher runs: each runsc command in turn until one fails; undo, when set,
 * runs after a failure of any step but the first. */
struct watched {
    char *const *steps[2];
    int n;
    char *const *undo;
    const char *undone; /* a file removed once undo has succeeded, or NULL */
    int pid_step;       /* the step whose pid goes to pidfd (rt_checkpoint_wait), or -1 */
};

/* In the watcher: run argv to its end; its wait status, or -1. */
static int watched_step(char *const argv[], int nul, int outfd, int pidfd, char *const envp[])
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (dup2(nul, 0) < 0 || dup2(outfd, 1) < 0 || dup2(outfd, 2) < 0)
            _exit(126);
        execvpe(argv[0], argv, envp);
        _exit(127);
    }
    if (pidfd >= 0) {
        char line[24];
        int n = snprintf(line, sizeof(line), "%d\n", (int)pid);
        (void)sbx_write_all(pidfd, line, (size_t)n);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return st;
}

/* The status line a watcher wrote on fd (run_watched): 0 when its last step exited 0,
 * -EAGAIN while it runs (fd non-blocking), else -EIO with *st the step's wait status (-1
 * when the watcher ended without a line). */
static int watched_status(int fd, int *st)
{
    char line[32];
    ssize_t n = read_said(fd, line, sizeof(line));
    if (n == -EAGAIN)
        return -EAGAIN;
    *st = n > 0 ? atoi(line) : -1;
    return n > 0 && WIFEXITED(*st) && WEXITSTATUS(*st) == 0 ? 0 : -EIO;
}

/* A watcher process runs w's steps and writes the wait status of the last one it ran to
 * a pipe: the daemon reaps every child it has, so it could not collect runsc's status
 * itself. stdout and stderr go to outfd. Returns the pipe's read end (O_CLOEXEC). Only
 * async-signal-safe calls after fork. */
static int run_watched(const struct watched *w, int outfd, int pidfd, int *done_fd,
                       struct sbx_err *err)
{
    _cleanup_close_ int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nul < 0)
        return sbx_err_sys(err, errno, "opening /dev/null");
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return sbx_err_sys(err, errno, "pipe");
    _cleanup_close_ int rd = pfd[0];
    _cleanup_close_ int wr = pfd[1];
    struct shim_env env;
    shim_env_init(&env);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        shim_env_free(&env);
        return sbx_err_sys(err, e, "fork");
    }
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        int st = 0, i;
        for (i = 0; i < w->n && st == 0; i++)
            st = watched_step(w->steps[i], nul, outfd, i == w->pid_step ? pidfd : -1, env.v);
        if (st != 0 && i > 1 && w->undo && watched_step(w->undo, nul, outfd, -1, env.v) == 0 &&
            w->undone)
            (void)unlink(w->undone);
        char line[32];
        int n = snprintf(line, sizeof(line), "%d\n", st);
        (void)sbx_write_all(wr, line, (size_t)n);
        _exit(0);
    }
    shim_env_free(&env);
    close(TAKE_FD(wr));
    *done_fd = TAKE_FD(rd);
    return 0;
}

int rt_checkpoint(const struct rt_config *cfg, const char *id, const char *state_dir,
                  const char *image_dir, bool hold, int *done_fd, struct sbx_err *err)
{
    if (!oci_id_valid(id))
        return sbx_err_set(err, EINVAL, "invalid_request", "invalid sandbox id");
    if (!abs_path_ok(state_dir) || !abs_path_ok(image_dir) || !abs_path_ok(cfg->runsc_root))
        return sbx_err_set(err, EINVAL, "internal", "checkpoint paths must be absolute");
    int r = sbx_mkdir_p(image_dir, 0700);
    if (r < 0)
        return sbx_err_sys(err, -r, "creating %s", image_dir);
    /* The image is only good with the agent it was taken from (see launch). A sandbox
     * started before agents were pinned runs cfg->agent_path. */
    _cleanup_free_ char *agent = sbx_xasprintf("%s/sbx-agent", state_dir);
    _cleanup_free_ char *kept = sbx_xasprintf("%s/sbx-agent", image_dir);
    if ((r = install_file(access(agent, F_OK) == 0 ? agent : cfg->agent_path, kept, 0755)) < 0)
        return sbx_err_sys(err, -r, "keeping the agent beside the image");
    _cleanup_free_ char *bsl = sbx_xasprintf("%s/sbx-bsl", state_dir);
    _cleanup_free_ char *bsl_kept = sbx_xasprintf("%s/sbx-bsl", image_dir);
    if (access(bsl, F_OK) == 0 && (r = install_file(bsl, bsl_kept, 0755)) < 0)
        return sbx_err_sys(err, -r, "keeping sbx-bsl beside the image");
    _cleanup_free_ char *log = sbx_xasprintf("%s/checkpoint.log", image_dir);
    _cleanup_close_ int logfd =
        open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (logfd < 0)
        return sbx_err_sys(err, errno, "creating %s", log);
    const struct rt_backend *backend = rt_backend_of(state_dir);
    if (rt_is_provider(backend->name)) {
        /* The provider keeps the sandbox paused, memory and files: its shim pauses it
         * there as it stops, and the next start resumes it (docs/providers.md). */
        _cleanup_free_ char *pause = sbx_xasprintf("%s/" RT_PROVIDER_PAUSE_FILE, state_dir);
        _cleanup_free_ char *refused =
            sbx_xasprintf("%s/" RT_PROVIDER_PAUSE_ERROR_FILE, state_dir);
        (void)unlink(refused);
        if ((r = sbx_write_file_replace(pause, "", 0, 0600)) < 0)
            return sbx_err_sys(err, -r, "writing %s", pause);
    }
    if (!backend->memory_snapshots) {
        r = stop_for_checkpoint(cfg, id, state_dir, done_fd, err);
        if (r < 0 && rt_is_provider(backend->name)) {
            _cleanup_free_ char *pause = sbx_xasprintf("%s/" RT_PROVIDER_PAUSE_FILE, state_dir);
            (void)unlink(pause);
        }
        return r;
    }
    hold = hold && cfg->resumes_in_place;
    _cleanup_free_ char *marker = sbx_xasprintf("%s/" RT_HELD_FILE, state_dir);
    char *runsc = (char *)(cfg->runsc_path ? cfg->runsc_path : "runsc");
    char *root = (char *)cfg->runsc_root;
    char *pause[] = {runsc, "--root", root, "pause", (char *)id, NULL};
    char *resume[] = {runsc, "--root", root, "resume", (char *)id, NULL};
    char *ckpt[] = {runsc,      "--root", root, "checkpoint", "--image-path", (char *)image_dir,
                    (char *)id, NULL,     NULL, NULL};
    struct watched w = {.steps = {ckpt}, .n = 1, .pid_step = 0};
    if (hold) {
        /* Paused first, so its checkpoint's own pause and resume leave it paused until
         * rt_release: nothing it does after the image is taken reaches its workspace
         * before the caller has copied it. */
        ckpt[6] = "--leave-running";
        /* A fork's image is read at once and removed: inflating it would cost every copy
         * CPU time (0.48 against 0.27 s for an idle sandbox here), and compressing it the
         * parent's pause. */
        ckpt[7] = "--compression=none";
        ckpt[8] = (char *)id;
        w = (struct watched){
            .steps = {pause, ckpt}, .n = 2, .undo = resume, .undone = marker, .pid_step = 1};
        if ((r = sbx_write_file_replace(marker, "", 0, 0600)) < 0)
            return sbx_err_sys(err, -r, "writing %s", marker);
    }
    /* runsc's pid, for a daemon that restarts while it runs (rt_checkpoint_wait). */
    _cleanup_free_ char *pidpath = sbx_xasprintf("%s/checkpoint.pid", image_dir);
    _cleanup_close_ int pidfd =
        open(pidpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    int rd;
    if ((r = run_watched(&w, logfd, pidfd, &rd, err)) < 0) {
        if (hold)
            (void)unlink(marker);
        return r;
    }
    if ((r = sbx_set_nonblock(rd)) < 0) {
        close(rd);
        return sbx_err_sys(err, -r, "checkpoint pipe");
    }
    *done_fd = rd;
    return 0;
}

/* The first release date in `runsc --version` ("runsc version release-20240729.0", Debian's
 * "0.0~20240729.0"), or 0. */
static long runsc_date(const char *text)
{
    for (const char *p = strstr(text, "version"); p && *p && *p != '\n'; p++) {
        size_t n = strspn(p, "0123456789");
        if (n == 8 && !strncmp(p, "20", 2))
            return strtol(p, NULL, 10);
        if (n)
            p += n - 1;
    }
    return 0;
}

int rt_probe(struct rt_config *cfg, struct sbx_err *err)
{
    char *argv[] = {(char *)(cfg->runsc_path ? cfg->runsc_path : "runsc"), "--version", NULL};
    struct watched w = {.steps = {argv}, .n = 1, .pid_step = -1};
    int out[2];
    if (pipe2(out, O_CLOEXEC) < 0)
        return sbx_err_sys(err, errno, "pipe");
    _cleanup_close_ int rd = out[0];
    _cleanup_close_ int done = -1;
    int r = run_watched(&w, out[1], -1, &done, err);
    close(out[1]);
    if (r < 0)
        return r;
    char text[RT_VERSION_MAX];
    size_t len = 0;
    ssize_t n;
    /* To the end: the watcher holds the write end until runsc has exited. */
    while ((n = read(rd, text + len, sizeof(text) - 1 - len)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return sbx_err_sys(err, errno, "reading runsc --version");
        len += (size_t)n;
        if (len == sizeof(text) - 1)
            break;
    }
    text[len] = '\0';
    cfg->resumes_in_place = runsc_date(text) >= RT_RUNSC_IN_PLACE;
    return 0;
}

bool rt_held(const char *state_dir)
{
    _cleanup_free_ char *marker = sbx_xasprintf("%s/" RT_HELD_FILE, state_dir);
    return access(marker, F_OK) == 0;
}

int rt_release(const struct rt_config *cfg, const char *id, const char *state_dir,
               struct sbx_err *err)
{
    if (!oci_id_valid(id) || !abs_path_ok(state_dir) || !abs_path_ok(cfg->runsc_root))
        return sbx_err_set(err, EINVAL, "internal", "invalid sandbox id or paths");
    char *argv[] = {(char *)(cfg->runsc_path ? cfg->runsc_path : "runsc"),
                    "--root",
                    (char *)cfg->runsc_root,
                    "resume",
                    (char *)id,
                    NULL};
    struct watched w = {.steps = {argv}, .n = 1, .pid_step = -1};
    _cleanup_free_ char *log = sbx_xasprintf("%s/resume.log", state_dir);
    _cleanup_close_ int logfd =
        open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (logfd < 0)
        return sbx_err_sys(err, errno, "creating %s", log);
    _cleanup_close_ int rd = -1;
    int r = run_watched(&w, logfd, -1, &rd, err);
    if (r < 0)
        return r;
    int st;
    if (watched_status(rd, &st) < 0) {
        char tail[RT_LOG_TAIL];
        log_tail(log, tail, sizeof(tail));
        return sbx_err_set(err, EIO, "internal", "runsc resume failed (status %d): %s", st,
                           tail[0] ? tail : "(no output)");
    }
    _cleanup_free_ char *marker = sbx_xasprintf("%s/" RT_HELD_FILE, state_dir);
    if (unlink(marker) < 0 && errno != ENOENT)
        return sbx_err_sys(err, errno, "removing %s", marker);
    return 0;
}

/* Is pid a `runsc … checkpoint --image-path image_dir` (and not a reused pid)? */
static bool is_checkpoint_of(pid_t pid, const char *image_dir)
{
    char path[48];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    char buf[4096];
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (n <= 0)
        return false;
    buf[n] = '\0';
    bool ckpt = false, image = false;
    for (char *a = buf; a < buf + n; a += strlen(a) + 1) {
        ckpt |= !strcmp(a, "checkpoint");
        image |= !strcmp(a, image_dir);
    }
    return ckpt && image;
}

void rt_checkpoint_wait(const char *image_dir, long long timeout_ms)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/checkpoint.pid", image_dir);
    _cleanup_free_ char *text = NULL;
    if (sbx_read_file(path, 64, &text, NULL) < 0)
        return;
    pid_t pid = (pid_t)atoi(text);
    long long until = sbx_now_ms() + timeout_ms;
    while (pid > 0 && is_checkpoint_of(pid, image_dir) && sbx_now_ms() < until)
        usleep(20 * 1000);
}

int rt_checkpoint_read(const char *image_dir, int done_fd, struct sbx_err *err)
{
    int st;
    int r = watched_status(done_fd, &st);
    if (r != -EIO)
        return r;
    /* runsc says why on its first line; a Go panic's stack follows it. */
    _cleanup_free_ char *log = sbx_xasprintf("%s/checkpoint.log", image_dir);
    char head[RT_LOG_TAIL] = "";
    _cleanup_close_ int fd = open(log, O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, head, sizeof(head) - 1) : -1;
    head[got > 0 ? got : 0] = '\0';
    head[strcspn(head, "\n")] = '\0';
    return sbx_err_set(err, EIO, "internal", "runsc checkpoint failed (status %d): %.300s", st,
                       head[0] ? head : "(no output)");
}

/* Turn the shim's readiness line (or the error reading it) into our answer. */
static int start_outcome(const char *id, const char *state_dir, int r, const char *line,
                         int timeout, struct sbx_err *err)
{
    _cleanup_free_ char *runsc_log = sbx_xasprintf("%s/runsc.log", state_dir);
    _cleanup_free_ char *shim_log = sbx_xasprintf("%s/shim.log", state_dir);
    if (r == 0 && !strncmp(line, "ready", 5))
        return 0;

    char tail[RT_LOG_TAIL];
    if (r == -ETIMEDOUT) {
        pid_t pid = shim_pid(state_dir);
        if (pid > 0)
            (void)kill(pid, SIGTERM); /* kills and deletes the container, keeps the dir */
        log_tail(runsc_log, tail, sizeof(tail));
        return sbx_err_set(err, ETIMEDOUT, "internal",
                           "sandbox %s: the agent did not speak within %d ms; runsc.log: %s", id,
                           timeout, tail[0] ? tail : "(empty)");
    }
    if (r < 0) {
        log_tail(shim_log, tail, sizeof(tail));
        return sbx_err_set(err, -r == EPIPE ? ECHILD : -r, "internal",
                           "sandbox %s: sbx-shim died while starting; shim.log: %s", id,
                           tail[0] ? tail : "(empty)");
    }
    if (!strncmp(line, "exited", 6)) {
        int pr = rt_provider_failure(state_dir, err);
        if (pr < 0)
            return pr;
        log_tail(runsc_log, tail, sizeof(tail));
        return sbx_err_set(err, ECHILD, "internal",
                           "sandbox %s: runsc %s before the agent spoke; runsc.log: %s", id, line,
                           tail[0] ? tail : "(empty)");
    }
    log_tail(shim_log, tail, sizeof(tail));
    return sbx_err_set(err, EIO, "internal", "sandbox %s: sbx-shim: %s; shim.log: %s", id, line,
                       tail[0] ? tail : "(empty)");
}

int rt_start_wait(const struct rt_config *cfg, const struct rt_spec *spec, int ready_fd,
                  struct sbx_err *err)
{
    char line[512];
    int timeout = cfg->start_timeout_ms ? (int)cfg->start_timeout_ms : RT_START_TIMEOUT_DEFAULT_MS;
    int r = read_ready(ready_fd, timeout, line, sizeof(line));
    return start_outcome(spec->id, spec->state_dir, r, line, timeout, err);
}

int rt_start_read(const char *id, const char *state_dir, int ready_fd, struct sbx_err *err)
{
    char line[512];
    ssize_t n = read_said(ready_fd, line, sizeof(line));
    if (n == -EAGAIN)
        return -EAGAIN;
    int r = n < 0 ? (int)n : n == 0 ? -EPIPE : 0;
    line[strcspn(line, "\n")] = '\0';
    return start_outcome(id, state_dir, r, line, 0, err);
}

int rt_connect(const char *state_dir, int *out_fd, struct sbx_err *err)
{
    *out_fd = -1;
    if (!abs_path_ok(state_dir))
        return sbx_err_set(err, EINVAL, "internal", "state_dir must be an absolute path");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    _cleanup_close_ int dirfd = -1;
    if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/shim.sock", state_dir) >=
        sizeof(sa.sun_path)) {
        /* Longer than sun_path: go through the directory's fd. */
        dirfd = open(state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0)
            return sbx_err_sys(err, errno, "opening %s", state_dir);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/shim.sock", dirfd);
    }
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return sbx_err_sys(err, errno, "socket");
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
        int e = errno;
        if (e == ENOENT || e == ECONNREFUSED)
            return sbx_err_set(err, e, "internal", "sandbox not running (no shim at %s/shim.sock)",
                               state_dir);
        return sbx_err_sys(err, e, "connecting to %s/shim.sock", state_dir);
    }
    *out_fd = TAKE_FD(fd);
    return 0;
}

int rt_destroy(const struct rt_config *cfg, const char *id, const char *state_dir,
               const char *remove_dir, const struct rt_provider *provider, struct sbx_err *err)
{
    if (!oci_id_valid(id))
        return sbx_err_set(err, EINVAL, "invalid_request", "invalid sandbox id");
    if (!abs_path_ok(state_dir))
        return sbx_err_set(err, EINVAL, "internal", "state_dir must be an absolute path");
    if (remove_dir) {
        size_t n = strlen(remove_dir);
        while (n > 1 && remove_dir[n - 1] == '/')
            n--;
        if (!abs_path_ok(remove_dir) || strncmp(state_dir, remove_dir, n) != 0 ||
            (state_dir[n] != '\0' && state_dir[n] != '/'))
            return sbx_err_set(err, EINVAL, "internal",
                               "remove_dir must be an absolute path containing state_dir");
        /* Tell the shim (or, below, the helper) what to remove. Written before we look
         * for the shim: it unlinks shim.pid before reading this file. */
        _cleanup_free_ char *marker = sbx_xasprintf("%s/destroy", state_dir);
        _cleanup_free_ char *content = sbx_xasprintf("%.*s\n", (int)n, remove_dir);
        int r = sbx_write_file_atomic(marker, content, strlen(content), 0600);
        if (r < 0 && r != -ENOENT)
            return sbx_err_sys(err, -r, "writing %s", marker);
    }
    pid_t pid = shim_pid(state_dir);
    if (pid > 0 && kill(pid, SIGTERM) == 0)
        return 0;

    /* No shim: a detached helper does the same, so the caller never waits on runsc. */
    if (!abs_path_ok(cfg->shim_path) || !abs_path_ok(cfg->runsc_root))
        return sbx_err_set(err, EINVAL, "internal", "shim_path and runsc_root must be absolute");
    char *argv[20];
    int i = 0;
    argv[i++] = (char *)cfg->shim_path;
    argv[i++] = "--cleanup";
    argv[i++] = "--runtime";
    argv[i++] = (char *)rt_backend_of(state_dir)->name;
    argv[i++] = "--id";
    argv[i++] = (char *)id;
    argv[i++] = "--state-dir";
    argv[i++] = (char *)state_dir;
    argv[i++] = "--runsc";
    argv[i++] = (char *)(cfg->runsc_path ? cfg->runsc_path : "runsc");
    argv[i++] = "--root";
    argv[i++] = (char *)cfg->runsc_root;
    char cgpath[512];
    if (oci_cgroups_path(cfg->cgroup_parent, id, cgpath, sizeof(cgpath)) == 0) {
        argv[i++] = "--cgroup";
        argv[i++] = cgpath;
    }
    if (remove_dir) {
        argv[i++] = "--remove";
        argv[i++] = (char *)remove_dir;
    }
    if (!strcmp(argv[3], "docker") && cfg->docker_host) {
        argv[i++] = "--docker-host";
        argv[i++] = (char *)cfg->docker_host;
    }
    argv[i] = NULL;
    /* A provider's helper deletes at the provider: with the key sbxd holds for it (the
     * platform's, or its configuration's opened again), on its stdin (docs/providers.md). */
    _cleanup_close_ int secret_fd = -1;
    char *secret =
        rt_is_provider(argv[3]) ? rt_provider_cleanup_secret(cfg, state_dir, provider) : NULL;
    if (secret) {
        secret_fd = rt_provider_secret_pipe(secret);
        explicit_bzero(secret, strlen(secret));
        free(secret);
        if (secret_fd < 0)
            return sbx_err_sys(err, -secret_fd, "handing the provider key to the cleanup helper");
    }
    int r = spawn_detached(argv, -1, secret_fd);
    if (r < 0)
        return sbx_err_sys(err, -r, "starting the cleanup helper %s", cfg->shim_path);
    return 0;
}

static bool strv_has(char **v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], s))
            return true;
    return false;
}

int rt_list(const struct rt_config *cfg, char ***out, struct sbx_err *err)
{
    *out = NULL;
    /* runsc keeps "<container>_sandbox:<sandbox>.state" per container in its root.
     * Reading it beats `runsc list`, which takes each container's lock and can block
     * for seconds behind a `runsc delete`. */
    DIR *d = opendir(cfg->runsc_root);
    if (!d) {
        if (errno == ENOENT) {
            *out = sbx_xcalloc(1, sizeof(char *));
            return 0;
        }
        return sbx_err_sys(err, errno, "opening %s", cfg->runsc_root);
    }
    size_t n = 0, cap = 8;
    char **v = sbx_xcalloc(cap + 1, sizeof(char *));
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        const char *us = strstr(de->d_name, "_sandbox:");
        if (len < 7 || strcmp(de->d_name + len - 6, ".state") || !us)
            continue;
        char id[RT_ID_MAX + 1];
        size_t idlen = (size_t)(us - de->d_name);
        if (idlen == 0 || idlen > RT_ID_MAX)
            continue;
        memcpy(id, de->d_name, idlen);
        id[idlen] = '\0';
        /* Prefer the id recorded inside the state file when it parses. */
        _cleanup_free_ char *path = sbx_xasprintf("%s/%s", cfg->runsc_root, de->d_name);
        json_t *j = json_load_file(path, 0, NULL);
        const char *jid = j ? json_string_value(json_object_get(j, "id")) : NULL;
        if (jid && strlen(jid) <= RT_ID_MAX)
            snprintf(id, sizeof(id), "%s", jid);
        if (j)
            json_decref(j);
        if (!oci_id_valid(id) || strv_has(v, n, id))
            continue;
        if (n == cap) {
            cap *= 2;
            v = sbx_xrealloc(v, (cap + 1) * sizeof(char *));
        }
        v[n++] = sbx_xstrdup(id);
        v[n] = NULL;
    }
    closedir(d);
    *out = v;
    return 0;
}

void rt_strv_free(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}
