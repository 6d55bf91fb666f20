#include "spawn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/sbxuser.h"
#include "../common/util.h"
#include "env.h"

extern char **environ;

enum { STAGE_SETUP = 1, STAGE_CHDIR = 2, STAGE_EXEC = 3, STAGE_USER = 4 };

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

static bool kept(long fd, int keep_lo, int keep_hi)
{
    return fd >= keep_lo && fd <= keep_hi;
}

/* Close every fd from lowfd up, except keep_lo..keep_hi. */
static void close_from(int lowfd, int keep_lo, int keep_hi)
{
    if (close_range((unsigned)lowfd, (unsigned)keep_lo - 1, 0) == 0 &&
        close_range((unsigned)keep_hi + 1, ~0u, 0) == 0)
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
                if (*end || end == de->d_name || fd < lowfd || fd == self ||
                    kept(fd, keep_lo, keep_hi))
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
        if (!kept(fd, keep_lo, keep_hi))
            (void)close((int)fd);
}

/* The child shares the agent's memory until it execs (see spawn_command), so it only
 * makes syscalls on its own state and never returns. The ids are set with raw syscalls:
 * glibc's wrappers would apply them to every thread of the process they think they are in,
 * which is the agent. All agent fds are O_CLOEXEC; we still close everything else in case
 * one is not. */
struct spawn_child_args {
    const struct spawn_req *r;
    bool as_user;
    int in_fd, out_fd, err_fd, rep_fd;
};

static _Noreturn void spawn_child(const struct spawn_req *r, bool as_user, int in_fd, int out_fd,
                                  int err_fd, int rep_fd)
{
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            (void)signal(sig, SIG_DFL);
    if (setsid() < 0)
        child_fail(rep_fd, STAGE_SETUP, errno);
    /* A session leader without a terminal takes this one as its controlling terminal. */
    if (r->tty > 0 && ioctl(r->tty, TIOCSCTTY, 0) < 0)
        child_fail(rep_fd, STAGE_SETUP, errno);
    /* Park the extras above every target first: a source may sit on fd 3 or on
     * another extra's target. */
    int tmp[SPAWN_EXTRA_MAX];
    for (int i = 0; i < SPAWN_EXTRA_MAX; i++) {
        tmp[i] = -1;
        if (r->extra[i] >= 0 &&
            (tmp[i] = fcntl(r->extra[i], F_DUPFD, SPAWN_EXTRA_FD_MIN + SPAWN_EXTRA_MAX)) < 0)
            child_fail(rep_fd, STAGE_SETUP, errno);
    }
    /* The agent keeps 0, 1 and 2 open, so these fds are all >= 3. */
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
        child_fail(rep_fd, STAGE_SETUP, errno);
    if (rep_fd != 3) {
        if (dup3(rep_fd, 3, O_CLOEXEC) < 0)
            child_fail(rep_fd, STAGE_SETUP, errno);
        rep_fd = 3;
    }
    for (int i = 0; i < SPAWN_EXTRA_MAX; i++)
        if (tmp[i] >= 0 && dup2(tmp[i], SPAWN_EXTRA_FD_MIN + i) < 0)
            child_fail(rep_fd, STAGE_SETUP, errno);
    close_from(4, SPAWN_EXTRA_FD_MIN, SPAWN_EXTRA_FD_MIN + SPAWN_EXTRA_MAX - 1);
    for (int i = 0; i < SPAWN_EXTRA_MAX; i++)
        if (r->extra[i] < 0)
            (void)close(SPAWN_EXTRA_FD_MIN + i);
    /* Before the chdir, so that the cwd is checked with the user's rights. The groups go
     * first: after setuid nothing may change them. */
    if (as_user) {
        gid_t g = SBX_USER_GID;
        if (syscall(SYS_setgroups, 1, &g) < 0 || syscall(SYS_setresgid, g, g, g) < 0 ||
            syscall(SYS_setresuid, SBX_USER_UID, SBX_USER_UID, SBX_USER_UID) < 0)
            child_fail(rep_fd, STAGE_USER, errno);
    }
    /* The namespaces backend gives the agent CAP_SETUID/SETGID/KILL as ambient capabilities
     * (src/runtime/namespaces.c): no command may inherit them, root or not. Elsewhere
     * there are none and this does nothing. */
    (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) == 0 && (d[0].inheritable || d[1].inheritable)) {
        d[0].inheritable = d[1].inheritable = 0;
        (void)syscall(SYS_capset, &h, d);
    }
    if (r->cwd && chdir(r->cwd) < 0)
        child_fail(rep_fd, STAGE_CHDIR, errno);
    environ = (char **)r->envp; /* execvp searches the PATH of this environment */
    execvp(r->argv[0], (char *const *)r->argv);
    child_fail(rep_fd, STAGE_EXEC, errno);
}

static int spawn_child_main(void *data)
{
    const struct spawn_child_args *c = data;
    spawn_child(c->r, c->as_user, c->in_fd, c->out_fd, c->err_fd, c->rep_fd);
}

/* Room for execvp's copy of the longest argv a request can carry (a script without #!). */
#define SPAWN_STACK_SIZE (4u * 1024u * 1024u)

/* fork() would copy the agent's address space only for exec to throw it away; under
 * gVisor's ptrace platform a new address space is the dearest part of starting a command.
 * So the child borrows the agent's memory, as posix_spawn does, and the agent waits
 * (CLONE_VFORK) until it has exec'd or failed. The child's stack is one region kept for
 * every spawn (pages are only committed as used): the agent is single threaded and waits
 * for each child, and the same stack each time keeps a sanitizer's view of it consistent. */
static pid_t spawn_clone(int (*fn)(void *), void *arg)
{
    static void *stack;
    if (!stack) {
        void *p = mmap(NULL, SPAWN_STACK_SIZE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return -1;
        stack = p;
    }
    char **env_before = environ;
    pid_t pid = clone(fn, (char *)stack + SPAWN_STACK_SIZE, CLONE_VM | CLONE_VFORK | SIGCHLD, arg);
    environ = env_before; /* the child set it for its execvp */
    return pid;
}

struct signal_all_args {
    int signo;
    unsigned rounds;
};

static int signal_all_main(void *data)
{
    const struct signal_all_args *a = data;
    /* Raw syscall: this task alone takes the user's ids, not the agent it shares memory with. */
    if (syscall(SYS_setresuid, SBX_USER_UID, SBX_USER_UID, SBX_USER_UID) < 0)
        _exit(1);
    for (unsigned i = 0; i < a->rounds; i++)
        if (kill(-1, a->signo) < 0)
            _exit(errno == ESRCH ? 0 : 2);
    _exit(0);
}

int spawn_signal_user_all(int signo, unsigned rounds)
{
    struct signal_all_args a = {signo, rounds};
    pid_t pid = spawn_clone(signal_all_main, &a);
    if (pid < 0)
        return -errno;
    int status;
    if (waitpid(pid, &status, 0) < 0)
        return -errno;
    if (!WIFEXITED(status) || WEXITSTATUS(status) == 2)
        return -EIO;
    return WEXITSTATUS(status) == 1 ? -EPERM : 0;
}

bool spawn_switches_user(void)
{
    /* PID 1 is a sandbox's agent (gvisor, namespaces); as a host process (tests, local)
     * uid 1000 would be somebody's account. */
    return getpid() == 1 && geteuid() == 0;
}

int spawn_user_parse(json_t *req, bool *root, struct sbx_err *err)
{
    json_t *v = json_object_get(req, "user");
    const char *u = json_string_value(v);
    *root = false;
    if (!v || (u && !strcmp(u, SBX_USER_NAME)))
        return 0;
    if (u && !strcmp(u, "root")) {
        *root = true;
        return 0;
    }
    return sbx_err_set(err, EINVAL, "bad_request", "user must be \"user\" or \"root\"");
}

int spawn_as_user(void)
{
    /* The saved uid stays 0, so we get root back; without it the agent could not go on. */
    if (setresgid(-1, SBX_USER_GID, -1) < 0)
        return -errno;
    if (setresuid(-1, SBX_USER_UID, -1) < 0) {
        int e = errno;
        if (setresgid(-1, 0, -1) < 0)
            abort();
        return -e;
    }
    return 0;
}

void spawn_as_root(void)
{
    if (setresuid(-1, 0, -1) < 0 || setresgid(-1, 0, -1) < 0)
        abort();
}

int spawn_pipe(const struct spawn_req *r, int p[2], int flags)
{
    if (r->root || !spawn_switches_user())
        return pipe2(p, flags) < 0 ? -errno : 0;
    /* Made with the user's effective ids, because gVisor refuses to chown a pipe (EPERM)
     * and a pipe re-opened by path checks its owner. */
    int rc = spawn_as_user();
    if (rc < 0)
        return rc;
    rc = pipe2(p, flags) < 0 ? -errno : 0;
    spawn_as_root();
    return rc;
}

/* The command's environment with the identity it runs as: HOME, USER and LOGNAME that
 * the agent set (the base's HOME=/tmp, or a session's saved copy of either identity's) are
 * replaced, ones the request chose are kept, missing USER and LOGNAME (and for the user
 * XDG_CONFIG_HOME and XDG_CACHE_HOME in /tmp) are added. Root keeps HOME=/tmp, as before
 * there was a user. The strings are borrowed; the array is the caller's to free. */
static char **identity_envp(char *const *envp, bool root)
{
    static const char root_user[] = "USER=root", root_logname[] = "LOGNAME=root";
    const char *home = root ? ENV_BASE_HOME : env_user_home;
    const char *user = root ? root_user : env_user_user;
    const char *logname = root ? root_logname : env_user_logname;
    size_t n = 0;
    while (envp[n])
        n++;
    char **v = sbx_xcalloc(n + 3 + ENV_USER_XDG_N, sizeof(char *));
    size_t k = 0;
    bool has_user = false, has_logname = false, has_xdg[ENV_USER_XDG_N] = {false};
    for (size_t i = 0; i < n; i++) {
        const char *e = envp[i];
        if (!strcmp(e, ENV_BASE_HOME) || !strcmp(e, env_user_home))
            e = home;
        else if (!strcmp(e, env_user_user) || !strcmp(e, root_user))
            e = user;
        else if (!strcmp(e, env_user_logname) || !strcmp(e, root_logname))
            e = logname;
        has_user |= !strncmp(e, "USER=", 5);
        has_logname |= !strncmp(e, "LOGNAME=", 8);
        for (size_t x = 0; x < ENV_USER_XDG_N; x++)
            has_xdg[x] |= !strncmp(e, env_user_xdg[x], strcspn(env_user_xdg[x], "=") + 1);
        v[k++] = (char *)e;
    }
    for (size_t x = 0; x < ENV_USER_XDG_N && !root; x++)
        if (!has_xdg[x])
            v[k++] = (char *)env_user_xdg[x];
    if (!has_user)
        v[k++] = (char *)user;
    if (!has_logname)
        v[k++] = (char *)logname;
    return v;
}

int spawn_command(const struct spawn_req *r, pid_t *pid_out, struct spawn_fds *fds,
                  struct sbx_err *err)
{
    _cleanup_close_ int in_r = -1, in_w = -1, out_r = -1, out_w = -1, err_r = -1, err_w = -1;
    _cleanup_close_ int rep_r = -1, rep_w = -1;
    int p[2];

    if (r->tty > 0) {
        in_r = fcntl(r->tty, F_DUPFD_CLOEXEC, 3);
        out_w = fcntl(r->tty, F_DUPFD_CLOEXEC, 3);
        err_w = fcntl(r->tty, F_DUPFD_CLOEXEC, 3);
        if (in_r < 0 || out_w < 0 || err_w < 0)
            return sbx_err_set(err, errno, "spawn_failed", "dup: %s", strerror(errno));
    } else if (r->want_stdin) {
        if (pipe2(p, O_CLOEXEC) < 0)
            return sbx_err_set(err, errno, "spawn_failed", "pipe: %s", strerror(errno));
        in_r = p[0];
        in_w = p[1];
    } else {
        in_r = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (in_r < 0)
            return sbx_err_set(err, errno, "spawn_failed", "/dev/null: %s", strerror(errno));
    }
    if (r->tty <= 0) {
        if (pipe2(p, O_CLOEXEC) < 0)
            return sbx_err_set(err, errno, "spawn_failed", "pipe: %s", strerror(errno));
        out_r = p[0];
        out_w = p[1];
        if (pipe2(p, O_CLOEXEC) < 0)
            return sbx_err_set(err, errno, "spawn_failed", "pipe: %s", strerror(errno));
        err_r = p[0];
        err_w = p[1];
    }
    if (pipe2(p, O_CLOEXEC) < 0)
        return sbx_err_set(err, errno, "spawn_failed", "pipe: %s", strerror(errno));
    rep_r = p[0];
    rep_w = p[1];

    struct spawn_req as = *r;
    _cleanup_free_ char **envp = NULL;
    bool switches = spawn_switches_user(); /* asked here: the child is not PID 1 */
    bool as_user = !r->root && switches;
    if (switches) {
        envp = identity_envp(r->envp, r->root);
        as.envp = envp;
    }
    if (as_user) {
        /* A terminal belongs to whoever runs in it (mesg, write and tty(1) look). */
        if (r->tty > 0)
            (void)fchown(r->tty, SBX_USER_UID, SBX_USER_GID);
    }
    struct spawn_child_args c = {&as, as_user, in_r, out_w, err_w, rep_w};
    pid_t pid = spawn_clone(spawn_child_main, &c);
    if (pid < 0 && errno == EAGAIN)
        return sbx_err_set(err, EAGAIN, "process_limit",
                           "the sandbox is at its process limit: clone: %s", strerror(errno));
    if (pid < 0)
        return sbx_err_set(err, errno, "spawn_failed", "clone: %s", strerror(errno));

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
        if (rep.err == EAGAIN && (rep.stage == STAGE_USER || rep.stage == STAGE_EXEC))
            return sbx_err_set(err, EAGAIN, "process_limit",
                               "the sandbox is at its process limit: %s", strerror(rep.err));
        if (rep.stage == STAGE_USER)
            return sbx_err_set(err, rep.err, "spawn_failed", "switching %s to user %s: %s",
                               r->argv[0], SBX_USER_NAME, strerror(rep.err));
        if (rep.stage == STAGE_CHDIR)
            return sbx_err_set(err, rep.err, "invalid_cwd", "cannot change directory to %s: %s",
                               r->cwd, strerror(rep.err));
        if (rep.stage == STAGE_EXEC)
            return sbx_err_set(err, rep.err, "spawn_failed", "cannot execute %s: %s", r->argv[0],
                               strerror(rep.err));
        return sbx_err_set(err, rep.err, "spawn_failed", "setting up %s: %s", r->argv[0],
                           strerror(rep.err));
    }
    if ((in_w >= 0 && sbx_set_nonblock(in_w) < 0) || (out_r >= 0 && sbx_set_nonblock(out_r) < 0) ||
        (err_r >= 0 && sbx_set_nonblock(err_r) < 0)) {
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
