/* The namespaces backend, directly in C (docs/runtime.md says why not bubblewrap).
 *
 * The shim (single threaded) makes detached read-only clones of the template and the
 * other bind sources, then clones the container's init with new user, pid, mount, net, ipc
 * and uts namespaces. From outside it writes the uid/gid maps (0..65535 -> NS_ID_BASE..)
 * and hands over an idmapped clone of the workspace; while the child builds its root
 * (template read-only, nosuid, nodev; /proc, /dev, /sys ro, /dev/shm, /tmp, /workspace,
 * the agent), pivots into it, brings up loopback only and sets its hostname, the shim puts
 * it in its cgroups (limits from the bundle) and sets its rlimits, then says "go". The
 * child then enters a new cgroup namespace, drops every capability (bounding set too,
 * root fix-ups locked off), sets no_new_privs and the parent-death signal, loads the
 * seccomp filter and execs the agent as PID 1. Any failure is one line back on the
 * socket; a successful exec closes it (CLOEXEC).
 *
 * local: a mount namespace with the same root, nothing else: host user, pids, network,
 * capabilities. Never for untrusted code. */
#include "namespaces.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/util.h"
#include "cgroup.h"
#include "oci.h"
#include "syscalls.h"

#define NS_WHY_MAX 400
#define NS_SETUP_TIMEOUT_MS 10000
#define NS_ATTACH_AT "/tmp"
#define NS_ENV_MAX 64
#define NS_MOUNTS_MAX 32

/* securebits (linux/securebits.h is not in every header set). */
#define NS_SECBIT_NOROOT (1 << 0)
#define NS_SECBIT_NOROOT_LOCKED (1 << 1)
#define NS_SECBIT_NO_SETUID_FIXUP (1 << 2)
#define NS_SECBIT_NO_SETUID_FIXUP_LOCKED (1 << 3)
#define NS_SECBIT_KEEP_CAPS_LOCKED (1 << 5)
#define NS_SECBIT_NO_CAP_AMBIENT_RAISE (1 << 6)
#define NS_SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED (1 << 7)

static int fail(char *why, size_t size, int e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *why, size_t size, int e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(why, size, fmt, ap);
    va_end(ap);
    if (e && n >= 0 && (size_t)n < size)
        snprintf(why + n, size - (size_t)n, ": %s", strerror(e));
    return -(e ? e : EINVAL);
}

/* ---- cgroups, from outside ---- */

static int write_str(const char *dir, const char *file, const char *val)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return write(fd, val, strlen(val)) < 0 ? -errno : 0;
}

static int write_u64(const char *dir, const char *file, unsigned long long v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", v);
    return write_str(dir, file, buf);
}

struct limits {
    unsigned long long memory, pids, cpu_quota, cpu_period;
};

static void read_limits(json_t *doc, struct limits *l)
{
    json_t *res = json_object_get(json_object_get(doc, "linux"), "resources");
    l->memory = (unsigned long long)json_integer_value(
        json_object_get(json_object_get(res, "memory"), "limit"));
    l->cpu_quota = (unsigned long long)json_integer_value(
        json_object_get(json_object_get(res, "cpu"), "quota"));
    l->cpu_period = (unsigned long long)json_integer_value(
        json_object_get(json_object_get(res, "cpu"), "period"));
    /* The bundle's pids.limit is gVisor's host ceiling (many host tasks per sandboxed
     * process); here a process is a process, so the sandbox's own RLIMIT_NPROC is the
     * cgroup limit. */
    json_t *rl;
    size_t i;
    json_array_foreach(json_object_get(json_object_get(doc, "process"), "rlimits"), i, rl)
    {
        if (!strcmp(json_string_value(json_object_get(rl, "type")) ?: "", "RLIMIT_NPROC"))
            l->pids = (unsigned long long)json_integer_value(json_object_get(rl, "hard"));
    }
}

/* Create the sandbox's cgroup, set the limits and move pid in. v2: one directory; v1 and
 * hybrid: the memory, pids and cpu hierarchies (the others stay the shim's). */
static int cgroup_enter(const char *cgroup, const struct limits *l, pid_t pid, char *why,
                        size_t size)
{
    if (!cgroup)
        return 0;
    char dir[PATH_MAX], pidbuf[24];
    snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
    int r;
    if (rt_cgroup_detect() == RT_CGROUP_V2) {
        char parent[PATH_MAX];
        snprintf(parent, sizeof(parent), RT_CGROUP_ROOT "%s", cgroup);
        char *slash = strrchr(parent, '/');
        *slash = '\0';
        if ((r = sbx_mkdir_p(parent, 0755)) < 0)
            return fail(why, size, -r, "creating cgroup %s", parent);
        (void)write_str(parent, "cgroup.subtree_control", "+memory +pids +cpu");
        snprintf(dir, sizeof(dir), RT_CGROUP_ROOT "%s", cgroup);
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
            return fail(why, size, errno, "creating cgroup %s", dir);
        if (l->memory && ((r = write_u64(dir, "memory.max", l->memory)) < 0 ||
                          (r = write_str(dir, "memory.swap.max", "0")) < 0))
            return fail(why, size, -r, "memory limit in %s", dir);
        if (l->pids && (r = write_u64(dir, "pids.max", l->pids)) < 0)
            return fail(why, size, -r, "pids limit in %s", dir);
        if (l->cpu_quota) {
            char cpu[48];
            snprintf(cpu, sizeof(cpu), "%llu %llu", l->cpu_quota, l->cpu_period);
            if ((r = write_str(dir, "cpu.max", cpu)) < 0)
                return fail(why, size, -r, "cpu limit in %s", dir);
        }
        if ((r = write_str(dir, "cgroup.procs", pidbuf)) < 0)
            return fail(why, size, -r, "joining %s", dir);
        return 0;
    }
    DIR *d = opendir(RT_CGROUP_ROOT);
    if (!d)
        return fail(why, size, errno, "opening " RT_CGROUP_ROOT);
    struct dirent *de;
    r = 0;
    while (r == 0 && (de = readdir(d))) {
        if (de->d_name[0] == '.' || !strcmp(de->d_name, "unified"))
            continue;
        snprintf(dir, sizeof(dir), RT_CGROUP_ROOT "/%s", de->d_name);
        struct stat st;
        if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
            continue; /* cpu -> cpu,cpuacct links */
        bool mem = strstr(de->d_name, "memory") != NULL;
        bool pids = strstr(de->d_name, "pids") != NULL;
        bool cpu = !strcmp(de->d_name, "cpu") || !strncmp(de->d_name, "cpu,", 4);
        if (!(mem || pids || cpu))
            continue; /* each v1 migration costs an RCU grace period: only where limits are */
        snprintf(dir, sizeof(dir), RT_CGROUP_ROOT "/%s%s", de->d_name, cgroup);
        if ((r = sbx_mkdir_p(dir, 0755)) < 0) {
            fail(why, size, -r, "creating cgroup %s", dir);
            break;
        }
        if (mem && l->memory) {
            if ((r = write_u64(dir, "memory.limit_in_bytes", l->memory)) < 0) {
                fail(why, size, -r, "memory limit in %s", dir);
                break;
            }
            (void)write_u64(dir, "memory.memsw.limit_in_bytes", l->memory); /* without swap */
        }
        if (pids && l->pids && (r = write_u64(dir, "pids.max", l->pids)) < 0) {
            fail(why, size, -r, "pids limit in %s", dir);
            break;
        }
        if (cpu && l->cpu_quota &&
            ((r = write_u64(dir, "cpu.cfs_period_us", l->cpu_period)) < 0 ||
             (r = write_u64(dir, "cpu.cfs_quota_us", l->cpu_quota)) < 0)) {
            fail(why, size, -r, "cpu limit in %s", dir);
            break;
        }
        if ((r = write_str(dir, "cgroup.procs", pidbuf)) < 0) {
            fail(why, size, -r, "joining %s", dir);
            break;
        }
    }
    closedir(d);
    return r;
}

int ns_kill_cgroup(const char *cgroup)
{
    if (!cgroup || cgroup[0] != '/' || strstr(cgroup, ".."))
        return 0;
    char path[PATH_MAX];
    int n = 0;
    const char *const where[] = {"", "/pids", "/memory"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(where); i++) {
        snprintf(path, sizeof(path), RT_CGROUP_ROOT "%s%s/cgroup.procs", where[i], cgroup);
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        int pid;
        while (f && fscanf(f, "%d", &pid) == 1)
            if (pid > 1 && kill(pid, SIGKILL) == 0)
                n++;
    }
    return n;
}

/* ---- the child ---- */

/* One of the bundle's mounts. */
struct ns_mount {
    const char *dst, *type, *src;
    unsigned long flags; /* MS_* from the options */
    char data[256];      /* the other options, for mount(2) */
    int fd;              /* bind mounts: a detached clone of src made by the shim, or -1 */
};

struct plan {
    const char *rootfs, *hostname, *workspace_src, *agent_dst;
    const char *env[NS_ENV_MAX + 1];
    json_t *rlimits;
    struct ns_mount m[NS_MOUNTS_MAX];
    size_t nmounts;
    /* The detached clones are opened by the shim before the clone and inherited
     * (CLOEXEC): the child's ids cannot search the daemon's 0700 data dir, so it never
     * looks a host path up itself. */
    int root_fd; /* the template, read-only */
};

/* A volume (docs/volumes.md): a bind mount that is not the workspace (at /workspace or
 * /home/user) or one of sbx's binaries. With a user namespace it is idmapped like the
 * workspace, so that the sandbox's user owns what it owns on the host. */
static bool is_volume(const struct ns_mount *m)
{
    return !strcmp(m->type, "bind") && strcmp(m->dst, "/workspace") &&
           strcmp(m->dst, "/home/user") && strcmp(m->dst, OCI_AGENT_PATH) &&
           strcmp(m->dst, OCI_BSL_PATH);
}

static void send_why(int sock, const char *why)
{
    (void)!write(sock, why, strlen(why));
}

static int recv_fd(int sock)
{
    char byte;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t n;
    do
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        return n == 0 ? -EPIPE : -errno;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (byte == 'n')
        return -ENOENT; /* the parent has no mount to give (local) */
    if (!c || c->cmsg_type != SCM_RIGHTS)
        return -EBADMSG;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof(fd));
    return fd;
}

static int send_fd(int sock, int fd)
{
    char byte = fd >= 0 ? 'f' : 'n';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    memset(&u, 0, sizeof(u));
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        msg.msg_control = u.buf;
        msg.msg_controllen = sizeof(u.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(fd));
    }
    return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* Paths in the new root, relative to it (the child's cwd while it builds it). */
static int in_root(const char *dst, char *out, size_t size)
{
    while (*dst == '/')
        dst++;
    return (size_t)snprintf(out, size, "%s", *dst ? dst : ".") >= size ? -ENAMETOOLONG : 0;
}

static unsigned long mount_flags(json_t *opts, char *data, size_t size)
{
    unsigned long f = 0;
    data[0] = '\0';
    size_t len = 0;
    json_t *o;
    size_t i;
    json_array_foreach(opts, i, o)
    {
        const char *s = json_string_value(o);
        if (!s)
            continue;
        if (!strcmp(s, "nosuid"))
            f |= MS_NOSUID;
        else if (!strcmp(s, "nodev"))
            f |= MS_NODEV;
        else if (!strcmp(s, "noexec"))
            f |= MS_NOEXEC;
        else if (!strcmp(s, "ro"))
            f |= MS_RDONLY;
        else if (!strcmp(s, "strictatime"))
            f |= MS_STRICTATIME;
        else if (!strcmp(s, "bind") || !strcmp(s, "rbind") || !strcmp(s, "rw"))
            continue;
        else if (len + strlen(s) + 2 < size)
            len += (size_t)snprintf(data + len, size - len, "%s%s", len ? "," : "", s);
    }
    return f;
}

/* Device nodes from the host, bound onto files in the sandbox's own /dev tmpfs (a user
 * namespace cannot mknod). */
static int populate_dev(const struct plan *p, char *why, size_t size)
{
    static const char *const devs[] = {"null", "zero", "full", "random", "urandom", "tty"};
    char dst[PATH_MAX], src[64];
    for (size_t i = 0; i < SBX_ARRAY_SIZE(devs); i++) {
        snprintf(src, sizeof(src), "/dev/%s", devs[i]);
        snprintf(dst, sizeof(dst), "dev/%s", devs[i]);
        int fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
        if (fd >= 0)
            close(fd);
        if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
            return fail(why, size, errno, "binding %s", src);
        (void)mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC, NULL);
    }
    snprintf(dst, sizeof(dst), "dev/pts");
    (void)mkdir(dst, 0755);
    if (mount("devpts", dst, "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=0620,gid=5") < 0)
        return fail(why, size, errno, "mounting devpts");
    static const char *const links[][2] = {{"pts/ptmx", "ptmx"},
                                           {"/proc/self/fd", "fd"},
                                           {"/proc/self/fd/0", "stdin"},
                                           {"/proc/self/fd/1", "stdout"},
                                           {"/proc/self/fd/2", "stderr"}};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(links); i++) {
        snprintf(dst, sizeof(dst), "dev/%s", links[i][1]);
        if (symlink(links[i][0], dst) < 0 && errno != EEXIST)
            return fail(why, size, errno, "linking /dev/%s", links[i][1]);
    }
    return 0;
}

/* What Docker masks and makes read-only in /proc, for the same reasons. */
static void harden_proc(const struct plan *p)
{
    static const char *const masked[] = {"/proc/kcore", "/proc/keys", "/proc/timer_list",
                                         "/proc/sched_debug", "/proc/sysrq-trigger"};
    static const char *const ro[] = {"/proc/sys", "/proc/irq", "/proc/bus", "/proc/fs"};
    char dst[PATH_MAX];
    for (size_t i = 0; i < SBX_ARRAY_SIZE(masked); i++) {
        snprintf(dst, sizeof(dst), "%s", masked[i] + 1);
        (void)mount("/dev/null", dst, NULL, MS_BIND, NULL);
    }
    for (size_t i = 0; i < SBX_ARRAY_SIZE(ro); i++) {
        snprintf(dst, sizeof(dst), "%s", ro[i] + 1);
        if (mount(dst, dst, NULL, MS_BIND | MS_REC, NULL) == 0)
            (void)mount(NULL, dst, NULL,
                        MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
    }
}

/* A volume's mount point the read-only template lacks (gVisor makes one): a small tmpfs
 * over its deepest existing ancestor, when that is an empty directory other than the root
 * (/mnt, /srv, /media in Debian's trees), then the rest made in it. Elsewhere -ENOENT
 * stands: docs/volumes.md says which paths these backends take. dst is root-relative. */
static int volume_mount_point(const char *dst)
{
    if (sbx_mkdir_p(dst, 0755) == 0)
        return 0; /* beneath a tmpfs made for another volume */
    char anc[PATH_MAX];
    snprintf(anc, sizeof(anc), "%s", dst);
    struct stat st;
    char *slash;
    while ((slash = strrchr(anc, '/'))) {
        *slash = '\0';
        if (stat(anc, &st) == 0)
            break;
    }
    if (!slash || !S_ISDIR(st.st_mode))
        return -ENOENT;
    /* Empty: rmdir of it fails with ENOTEMPTY otherwise (EROFS here when it is empty: the
     * template is read-only), without reading it. */
    if (rmdir(anc) == 0 || errno != EROFS)
        return -ENOENT;
    if (mount("tmpfs", anc, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") < 0)
        return -ENOENT;
    return sbx_mkdir_p(dst, 0755);
}

static int mount_all(const struct plan *p, int ws_fd, bool local, char *why, size_t size)
{
    char dst[PATH_MAX];
    for (size_t i = 0; i < p->nmounts; i++) {
        const struct ns_mount *m = &p->m[i];
        const char *d = m->dst, *type = m->type;
        if (in_root(d, dst, sizeof(dst)) < 0)
            return fail(why, size, ENAMETOOLONG, "mount point %.64s", d);
        /* Mount points under the sandbox's own /dev tmpfs do not exist yet. */
        (void)mkdir(dst, 0755);
        if (!strcmp(type, "bind")) {
            int fd = !strcmp(d, "/workspace") && ws_fd >= 0 ? ws_fd : m->fd;
            int moved = fd < 0 ? -1 : move_mount(fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH);
            if (moved < 0 && fd >= 0 && errno == ENOENT && is_volume(m) &&
                volume_mount_point(dst) == 0)
                moved = move_mount(fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH);
            if (moved < 0) {
                /* sbx-bsl needs a mount point the read-only template may not have (gVisor
                 * makes one; here a template without it goes without bsl_check). */
                if (errno == ENOENT && !strcmp(d, OCI_BSL_PATH))
                    continue;
                return fail(why, size, errno, "placing %s", d);
            }
            continue;
        }
        if (!strcmp(type, "sysfs") && local)
            continue; /* the host's network namespace: its sysfs is not ours to mount */
        if (!strcmp(type, "proc") && local)
            continue; /* host pids: the host's /proc, bound below */
        if (mount(m->src, dst, type, m->flags, m->data[0] ? m->data : NULL) < 0)
            return fail(why, size, errno, "mounting %s on %s", type, d);
        if (!strcmp(d, "/dev") && populate_dev(p, why, size) < 0)
            return -EIO;
        if (!strcmp(type, "proc"))
            harden_proc(p);
    }
    if (local) {
        static const char *const host[] = {"/proc", "/sys"};
        for (size_t k = 0; k < SBX_ARRAY_SIZE(host); k++) {
            snprintf(dst, sizeof(dst), "%s", host[k] + 1);
            if (mount(host[k], dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                return fail(why, size, errno, "binding %s", host[k]);
        }
    }
    return 0;
}

static int loopback_up(char *why, size_t size)
{
    _cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return fail(why, size, errno, "socket for lo");
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
        return fail(why, size, errno, "reading lo");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        return fail(why, size, errno, "bringing lo up");
    return 0;
}

/* From outside (prlimit). Raising a hard limit takes CAP_SYS_RESOURCE, which a host
 * may withhold even from root: then the limit stops at the shim's own hard limit. */
static int set_rlimits(pid_t pid, json_t *rlimits, char *why, size_t size)
{
    static const struct {
        const char *name;
        int res;
    } known[] = {{"RLIMIT_NOFILE", RLIMIT_NOFILE}, {"RLIMIT_NPROC", RLIMIT_NPROC}};
    json_t *rl;
    size_t i;
    json_array_foreach(rlimits, i, rl)
    {
        const char *t = json_string_value(json_object_get(rl, "type"));
        for (size_t k = 0; t && k < SBX_ARRAY_SIZE(known); k++) {
            if (strcmp(t, known[k].name))
                continue;
            struct rlimit lim = {
                .rlim_cur = (rlim_t)json_integer_value(json_object_get(rl, "soft")),
                .rlim_max = (rlim_t)json_integer_value(json_object_get(rl, "hard"))};
            struct rlimit cur;
            if (prlimit(pid, known[k].res, &lim, NULL) == 0)
                continue;
            if (errno != EPERM || prlimit(pid, known[k].res, NULL, &cur) < 0)
                return fail(why, size, errno, "setrlimit %s", t);
            lim.rlim_max = lim.rlim_max > cur.rlim_max ? cur.rlim_max : lim.rlim_max;
            lim.rlim_cur = lim.rlim_cur > lim.rlim_max ? lim.rlim_max : lim.rlim_cur;
            if (prlimit(pid, known[k].res, &lim, NULL) < 0)
                return fail(why, size, errno, "setrlimit %s", t);
        }
    }
    return 0;
}

static int drop_privileges(char *why, size_t size)
{
    /* The agent keeps CAP_SETUID, CAP_SETGID and CAP_KILL, and nothing else, as ambient
     * capabilities across its exec: it starts commands as the unprivileged user and
     * signals them (timeouts, kills, the fork-bomb guard; docs/security.md). It clears them in
     * every command before exec (src/agent/spawn.c), and the bounding set is empty, so no command
     * gets any capability back. Every step but the last needs CAP_SETPCAP, which the last one
     * drops. */
    const unsigned long roots = NS_SECBIT_NOROOT | NS_SECBIT_NOROOT_LOCKED |
                                NS_SECBIT_NO_SETUID_FIXUP | NS_SECBIT_NO_SETUID_FIXUP_LOCKED |
                                NS_SECBIT_KEEP_CAPS_LOCKED;
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2] = {{0}};
    const uint32_t keep = (1u << CAP_SETUID) | (1u << CAP_SETGID) | (1u << CAP_KILL);
    /* Locked securebits: uid 0 in the namespace never regains capabilities by exec. */
    if (prctl(PR_SET_SECUREBITS, roots) < 0)
        return fail(why, size, errno, "securebits");
    if (syscall(SYS_capget, &h, d) < 0)
        return fail(why, size, errno, "capget");
    d[0].inheritable = keep;
    d[1].inheritable = 0;
    if (syscall(SYS_capset, &h, d) < 0)
        return fail(why, size, errno, "capset (inheritable)");
    (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SETUID, 0, 0) < 0 ||
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SETGID, 0, 0) < 0 ||
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_KILL, 0, 0) < 0)
        return fail(why, size, errno, "ambient capabilities");
    /* From here on no ambient capability can be raised. */
    if (prctl(PR_SET_SECUREBITS,
              roots | NS_SECBIT_NO_CAP_AMBIENT_RAISE | NS_SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED) < 0)
        return fail(why, size, errno, "securebits");
    for (int c = 0; c <= 63; c++)
        if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
            return fail(why, size, errno, "dropping capability %d from the bounding set", c);
    memset(d, 0, sizeof(d));
    d[0].permitted = d[0].effective = d[0].inheritable = keep;
    if (syscall(SYS_capset, &h, d) < 0)
        return fail(why, size, errno, "capset");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return fail(why, size, errno, "no_new_privs");
    return 0;
}

static int build_root(const struct plan *p, int ws_fd, bool local, char *why, size_t size)
{
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return fail(why, size, errno, "making mounts private");
    /* Attached on top of a directory any uid can reach, in our own mount namespace only:
     * the path under the state dir the shim would use is not searchable by our ids. */
    if (move_mount(p->root_fd, "", AT_FDCWD, NS_ATTACH_AT, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        return fail(why, size, errno, "attaching the root %s", p->rootfs);
    if (fchdir(p->root_fd) < 0)
        return fail(why, size, errno, "entering the root");
    if (mount_all(p, ws_fd, local, why, size) < 0)
        return -EIO;
    if (syscall(SYS_pivot_root, ".", ".") < 0)
        return fail(why, size, errno, "pivot_root");
    if (umount2(".", MNT_DETACH) < 0)
        return fail(why, size, errno, "detaching the old root");
    if (chdir("/") < 0)
        return fail(why, size, errno, "chdir /");
    return 0;
}

/* The filter libseccomp built at build time (syscalls.h); no_new_privs is set. */
static int seccomp_load_built(char *why, size_t size)
{
    struct sock_fprog prog = {
        .len = (unsigned short)(ns_seccomp_bpf_len / sizeof(struct sock_filter)),
        .filter = (struct sock_filter *)ns_seccomp_bpf,
    };
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
        return fail(why, size, errno, "loading the seccomp filter");
    return 0;
}

static __attribute__((noreturn)) void child(const struct ns_run *run, struct plan *p, int sock,
                                            int in_fd, int out_fd, int err_fd)
{
    char why[NS_WHY_MAX];
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* Wait for the id maps, and take the idmapped workspace, then the volumes. */
    int ws_fd = recv_fd(sock);
    if (ws_fd < 0 && ws_fd != -ENOENT) {
        send_why(sock, "no workspace mount from the shim");
        _exit(127);
    }
    for (size_t i = 0; !run->local && i < p->nmounts; i++)
        if (is_volume(&p->m[i]) && (p->m[i].fd = recv_fd(sock)) < 0) {
            send_why(sock, "no volume mount from the shim");
            _exit(127);
        }
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) {
        send_why(sock, "dup2 of stdio");
        _exit(127);
    }
    if (!run->local) {
        if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0 || setgroups(0, NULL) < 0) {
            fail(why, sizeof(why), errno, "becoming root of the user namespace");
            goto out;
        }
    }
    if (build_root(p, ws_fd, run->local, why, sizeof(why)) < 0)
        goto out;
    if (ws_fd >= 0)
        close(ws_fd);
    if (!run->local) {
        if (loopback_up(why, sizeof(why)) < 0)
            goto out;
        if (sethostname(p->hostname, strlen(p->hostname)) < 0) {
            fail(why, sizeof(why), errno, "sethostname");
            goto out;
        }
    }
    /* The shim moves us into our cgroups while we built the root (both wait for RCU grace
     * periods, so side by side); the cgroup namespace is rooted where we are then. */
    char go = 0;
    if (read(sock, &go, 1) != 1 || go != 'g')
        _exit(127); /* the shim gave up on us */
    if (!run->local) {
        if (unshare(CLONE_NEWCGROUP) < 0) {
            fail(why, sizeof(why), errno, "cgroup namespace");
            goto out;
        }
        if (drop_privileges(why, sizeof(why)) < 0)
            goto out;
        /* After the credential changes, which reset it: the container dies with the shim. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
            fail(why, sizeof(why), errno, "parent-death signal");
            goto out;
        }
        if (seccomp_load_built(why, sizeof(why)) < 0)
            goto out;
    } else if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
        fail(why, sizeof(why), errno, "parent-death signal");
        goto out;
    }
    execve(p->agent_dst, (char *const[]){(char *)p->agent_dst, NULL}, (char *const *)p->env);
    fail(why, sizeof(why), errno, "exec %s", p->agent_dst);
out:
    send_why(sock, why);
    _exit(127);
}

/* ---- the plan, from the bundle ---- */

static int read_plan(const struct ns_run *run, json_t *doc, struct plan *p, char *why, size_t size)
{
    json_t *proc = json_object_get(doc, "process");
    p->rootfs = json_string_value(json_object_get(json_object_get(doc, "root"), "path"));
    p->hostname = json_string_value(json_object_get(doc, "hostname")) ?: "sbx";
    json_t *mounts = json_object_get(doc, "mounts");
    p->rlimits = json_object_get(proc, "rlimits");
    json_t *args = json_object_get(proc, "args");
    p->agent_dst = json_string_value(json_array_get(args, 0));
    if (!p->rootfs || p->rootfs[0] != '/' || !p->agent_dst || !json_is_array(mounts) ||
        json_array_size(mounts) > NS_MOUNTS_MAX)
        return fail(why, size, EINVAL, "the bundle lacks root, args or mounts");
    json_t *e;
    size_t i, n = 0;
    json_array_foreach(json_object_get(proc, "env"), i, e)
    {
        if (n < NS_ENV_MAX && json_string_value(e))
            p->env[n++] = json_string_value(e);
    }
    p->env[n] = NULL;
    json_t *j;
    json_array_foreach(mounts, i, j)
    {
        struct ns_mount *m = &p->m[p->nmounts++];
        m->dst = json_string_value(json_object_get(j, "destination"));
        m->type = json_string_value(json_object_get(j, "type"));
        m->src = json_string_value(json_object_get(j, "source"));
        m->fd = -1;
        if (!m->dst || m->dst[0] != '/' || !m->type || !m->src)
            return fail(why, size, EINVAL, "a mount of the bundle lacks a field");
        m->flags = mount_flags(json_object_get(j, "options"), m->data, sizeof(m->data));
        if (!strcmp(m->dst, "/workspace"))
            p->workspace_src = m->src;
    }
    if (!p->workspace_src)
        return fail(why, size, EINVAL, "the bundle has no /workspace");
    return 0;
}

static unsigned long long attr_of(unsigned long ms)
{
    return (ms & MS_RDONLY ? MOUNT_ATTR_RDONLY : 0) | (ms & MS_NOSUID ? MOUNT_ATTR_NOSUID : 0) |
           (ms & MS_NODEV ? MOUNT_ATTR_NODEV : 0) | (ms & MS_NOEXEC ? MOUNT_ATTR_NOEXEC : 0);
}

/* A detached copy of a host tree with these attributes. */
static int clone_tree(const char *src, unsigned long long attrs, int *out, char *why, size_t size)
{
    _cleanup_close_ int fd =
        open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (fd < 0)
        return fail(why, size, errno, "cloning the mount of %s", src);
    struct mount_attr a = {.attr_set = attrs};
    if (attrs && mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0)
        return fail(why, size, errno, "setting the attributes of %s", src);
    *out = TAKE_FD(fd);
    return 0;
}

/* Everything the child attaches that is a host path (but, with a user namespace, the
 * workspace: it is idmapped to that namespace, so it can only be made after the clone). */
static int open_trees(struct plan *p, bool local, char *why, size_t size)
{
    int r = clone_tree(p->rootfs, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                       &p->root_fd, why, size);
    if (r < 0)
        return r;
    for (size_t i = 0; i < p->nmounts; i++) {
        struct ns_mount *m = &p->m[i];
        if (strcmp(m->type, "bind") || (!local && (!strcmp(m->dst, "/workspace") || is_volume(m))))
            continue;
        if ((r = clone_tree(m->src, attr_of(m->flags), &m->fd, why, size)) < 0)
            return r;
    }
    return 0;
}

static void close_trees(struct plan *p)
{
    if (p->root_fd >= 0)
        close(p->root_fd);
    for (size_t i = 0; i < p->nmounts; i++)
        if (p->m[i].fd >= 0)
            close(p->m[i].fd);
}

static int write_map(pid_t pid, const char *file, const char *map)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return write(fd, map, strlen(map)) < 0 ? -errno : 0;
}

/* The workspace (or a volume) as the sandbox's root sees it: its on-disk owners (the daemon
 * writes as host root) read as the namespace's own, so both sides keep working on the same
 * files. */
static int idmapped_tree(const char *src, pid_t pid, int *out, char *why, size_t size)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
    _cleanup_close_ int userns = open(path, O_RDONLY | O_CLOEXEC);
    if (userns < 0)
        return fail(why, size, errno, "opening %s", path);
    _cleanup_close_ int tree =
        open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    if (tree < 0)
        return fail(why, size, errno, "cloning the workspace mount");
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                              .userns_fd = (uint64_t)userns};
    if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
        return fail(why, size, errno, "idmapping the workspace");
    *out = TAKE_FD(tree);
    return 0;
}

int ns_spawn(const struct ns_run *run, int in_fd, int out_fd, int err_fd, pid_t *pid, char *why,
             size_t why_size)
{
    _cleanup_free_ char *config = sbx_xasprintf("%s/config.json", run->bundle);
    json_error_t jerr;
    json_t *doc = json_load_file(config, 0, &jerr);
    if (!doc)
        return fail(why, why_size, EINVAL, "reading %s: %s", config, jerr.text);
    struct plan p = {.root_fd = -1};
    struct limits lim = {0};
    _cleanup_close_ int sock = -1;
    _cleanup_close_ int ws = -1;
    int r = read_plan(run, doc, &p, why, why_size);
    if (r < 0)
        goto done;
    read_limits(doc, &lim);
    if ((r = open_trees(&p, run->local, why, why_size)) < 0)
        goto done;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        r = fail(why, why_size, errno, "socketpair");
        goto done;
    }
    unsigned long flags = CLONE_NEWNS | SIGCHLD;
    if (!run->local)
        flags |= CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
    /* A fork with namespaces: the shim is single threaded, so the child may use the heap. */
    pid_t c = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, NULL);
    if (c < 0) {
        r = fail(why, why_size, errno, "clone");
        close(sv[0]);
        close(sv[1]);
        goto done;
    }
    if (c == 0) {
        close(sv[0]);
        child(run, &p, sv[1], in_fd, out_fd, err_fd);
    }
    close(sv[1]);
    sock = sv[0];
    char map[64];
    snprintf(map, sizeof(map), "0 %u %u\n", NS_ID_BASE, NS_ID_COUNT);
    if (!run->local) {
        if ((r = write_map(c, "uid_map", map)) < 0 || (r = write_map(c, "gid_map", map)) < 0) {
            fail(why, why_size, -r, "writing the id maps");
            goto kill_child;
        }
        if ((r = idmapped_tree(p.workspace_src, c, &ws, why, why_size)) < 0)
            goto kill_child;
    }
    if ((r = send_fd(sock, ws)) < 0) {
        fail(why, why_size, -r, "handing the workspace over");
        goto kill_child;
    }
    /* Volumes, idmapped the same way, in the plan's order (the child takes them so). */
    for (size_t i = 0; !run->local && i < p.nmounts; i++) {
        if (!is_volume(&p.m[i]))
            continue;
        _cleanup_close_ int vfd = -1;
        if ((r = idmapped_tree(p.m[i].src, c, &vfd, why, why_size)) < 0)
            goto kill_child;
        if (p.m[i].flags & MS_RDONLY) {
            struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
            if (mount_setattr(vfd, "", AT_EMPTY_PATH | AT_RECURSIVE, &ro, sizeof(ro)) < 0) {
                r = fail(why, why_size, errno, "making %s read-only", p.m[i].dst);
                goto kill_child;
            }
        }
        if ((r = send_fd(sock, vfd)) < 0) {
            fail(why, why_size, -r, "handing a volume over");
            goto kill_child;
        }
    }
    char msg[NS_WHY_MAX];
    ssize_t n;
    if ((r = cgroup_enter(run->cgroup, &lim, c, why, why_size)) < 0 ||
        (r = set_rlimits(c, p.rlimits, why, why_size)) < 0 ||
        (r = send(sock, "g", 1, MSG_NOSIGNAL) == 1 ? 0 : -errno) < 0) {
        /* The child may have failed first (and so be gone): its word is the better one. */
        if ((n = recv(sock, msg, sizeof(msg) - 1, MSG_DONTWAIT)) > 0) {
            msg[n] = '\0';
            fail(why, why_size, 0, "%s", msg);
        } else if (r == -EPIPE) {
            fail(why, why_size, EPIPE, "releasing the container");
        }
        goto kill_child;
    }
    /* Bounded: the shim's signals wait in its signalfd meanwhile, so a child stuck in a
     * mount would otherwise hold it (and its destroy) forever. */
    struct pollfd pf = {.fd = sock, .events = POLLIN};
    int pr;
    do
        pr = poll(&pf, 1, NS_SETUP_TIMEOUT_MS);
    while (pr < 0 && errno == EINTR);
    if (pr == 0) {
        r = fail(why, why_size, ETIMEDOUT, "the container did not start in %d ms",
                 NS_SETUP_TIMEOUT_MS);
        goto kill_child;
    }
    do
        n = read(sock, msg, sizeof(msg) - 1);
    while (n < 0 && errno == EINTR);
    if (n == 0) { /* closed by the exec */
        *pid = c;
        r = 0;
        goto done;
    }
    msg[n > 0 ? n : 0] = '\0';
    fail(why, why_size, 0, "%s", n > 0 ? msg : "the container died while starting");
    r = -EIO;
kill_child:
    kill(c, SIGKILL);
    (void)waitpid(c, NULL, 0);
done:
    close_trees(&p);
    json_decref(doc);
    return r;
}
