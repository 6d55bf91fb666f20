/* The namespaces backend's seccomp filter: an allow list, everything else EPERM.
 *
 * It is Docker's default profile for a container without extra capabilities (no
 * CAP_SYS_ADMIN, CAP_SYS_PTRACE, ...) made stricter where a shared-kernel sandbox for
 * untrusted code needs it: io_uring (its own syscall path around this filter and a
 * long record of kernel bugs), ptrace, process_vm_*, name_to_handle_at, memfd_secret,
 * fanotify_mark, modify_ldt, landlock_*, process_mrelease and the 32-bit and x32 entry
 * points are refused too. Namespace creation
 * (unshare, setns, clone with CLONE_NEW*), mounts of every API, keyrings, bpf,
 * perf_event_open, userfaultfd, kexec and modules are absent from the list, as in
 * Docker's. clone3 answers ENOSYS so libc falls back to clone, whose flags the filter
 * can see. docs/runtime.md compares the lists.
 *
 * libseccomp turns the list into BPF at build time (ns_filter_gen.c), not at every
 * container start, where it took 3 ms of each create. */
#include "syscalls.h"

#include <errno.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "../common/util.h"

static const char *const allowed[] = {
    "accept",
    "accept4",
    "access",
    "adjtimex",
    "alarm",
    "arch_prctl",
    "bind",
    "brk",
    "capget",
    "capset",
    "chdir",
    "chmod",
    "chown",
    "clock_getres",
    "clock_gettime",
    "clock_nanosleep",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "eventfd",
    "eventfd2",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fallocate",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchown",
    "fchownat",
    "fcntl",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstatfs",
    "fsync",
    "ftruncate",
    "futex",
    "futex_waitv",
    "futimesat",
    "getcpu",
    "getcwd",
    "getdents",
    "getdents64",
    "getegid",
    "geteuid",
    "getgid",
    "getgroups",
    "getitimer",
    "getpeername",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrandom",
    "getresgid",
    "getresuid",
    "getrlimit",
    "get_robust_list",
    "getrusage",
    "getsid",
    "getsockname",
    "getsockopt",
    "gettid",
    "gettimeofday",
    "getuid",
    "getxattr",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "io_cancel",
    "ioctl",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "ioprio_get",
    "ioprio_set",
    "io_setup",
    "io_submit",
    "kill",
    "lchown",
    "lgetxattr",
    "link",
    "linkat",
    "listen",
    "listxattr",
    "llistxattr",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "madvise",
    "membarrier",
    "memfd_create",
    "mincore",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mprotect",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedsend",
    "mq_unlink",
    "mremap",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "nanosleep",
    "newfstatat",
    "open",
    "openat",
    "openat2",
    "pause",
    "pidfd_open",
    "pidfd_send_signal",
    "pipe",
    "pipe2",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "poll",
    "ppoll",
    "prctl",
    "pread64",
    "preadv",
    "preadv2",
    "prlimit64",
    "pselect6",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "recvfrom",
    "recvmmsg",
    "recvmsg",
    "remap_file_pages",
    "removexattr",
    "rename",
    "renameat",
    "renameat2",
    "restart_syscall",
    "rmdir",
    "rseq",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_tgsigqueueinfo",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "seccomp",
    "select",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "sendfile",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "setfsgid",
    "setfsuid",
    "setgid",
    "setgroups",
    "setitimer",
    "setpgid",
    "setpriority",
    "setregid",
    "setresgid",
    "setresuid",
    "setreuid",
    "setrlimit",
    "set_robust_list",
    "setsid",
    "setsockopt",
    "set_tid_address",
    "setuid",
    "setxattr",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "shutdown",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "socketpair",
    "splice",
    "stat",
    "statfs",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "sysinfo",
    "tee",
    "tgkill",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_settime",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_settime",
    "times",
    "tkill",
    "truncate",
    "umask",
    "uname",
    "unlink",
    "unlinkat",
    "utime",
    "utimensat",
    "utimes",
    "vfork",
    "vmsplice",
    "wait4",
    "waitid",
    "write",
    "writev",
};

/* Every namespace a clone could make: refused, as in Docker's profile. */
#define NS_CLONE_NEW_MASK                                                                          \
    (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |  \
     CLONE_NEWNET)

/* personality(2) values Docker lets through: PER_LINUX, PER_LINUX32, UNAME26 (alone and
 * with PER_LINUX32), and the query. */
static const unsigned long personalities[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};

int ns_seccomp_export(int fd, char *why, size_t why_size)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!ctx) {
        snprintf(why, why_size, "seccomp_init failed");
        return -ENOMEM;
    }
    int r = 0;
    const char *what = "";
    for (size_t i = 0; r == 0 && i < SBX_ARRAY_SIZE(allowed); i++) {
        int nr = seccomp_syscall_resolve_name(allowed[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture */
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
        what = allowed[i];
    }
    if (r == 0) {
        what = "clone";
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, NS_CLONE_NEW_MASK, 0));
    }
    if (r == 0) {
        what = "clone3";
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    }
    if (r == 0) {
        /* AF_VSOCK would reach the host's hypervisor sockets. */
        what = "socket";
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
                             SCMP_A0(SCMP_CMP_NE, AF_VSOCK));
    }
    for (size_t i = 0; r == 0 && i < SBX_ARRAY_SIZE(personalities); i++) {
        what = "personality";
        r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
                             SCMP_A0(SCMP_CMP_EQ, personalities[i]));
    }
    /* A foreign ABI (i386, x32) gets libseccomp's bad-arch default: the process is
     * killed; those tables are other ways into the kernel. */
    if (r == 0) {
        what = "exporting";
        r = seccomp_export_bpf(ctx, fd);
    }
    seccomp_release(ctx);
    if (r < 0)
        snprintf(why, why_size, "seccomp rule %s: %s", what, strerror(-r));
    return r;
}
