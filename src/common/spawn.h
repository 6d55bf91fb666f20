/* Starting a helper program with posix_spawn: a vfork-style clone,
 * whose cost does not grow with the caller's size as a fork's page-table copy does. The
 * runtime (its shim), template builds and the template tree share it. */
#ifndef SBX_COMMON_SPAWN_H
#define SBX_COMMON_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

struct sbx_spawn_opts {
    int in;             /* its stdin (e.g. a pipe of secrets), or <= 0 for /dev/null */
    int out, err;       /* its stdout and stderr, or -1 for /dev/null */
    int keep_fd;        /* an fd that survives the exec (its FD_CLOEXEC cleared), or -1 */
    bool own_session;   /* setsid: detached, outlives the caller's session */
    bool own_group;     /* its own process group: a kill of -pid reaches its children */
    bool clean_signals; /* an empty signal mask and default handlers */
};

/* Start argv[0] (a path) with envp: 0 with *pid set, or -errno. */
int sbx_spawn(pid_t *pid, char *const argv[], char *const envp[],
              const struct sbx_spawn_opts *o);

#endif
