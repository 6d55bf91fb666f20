/* Starting a command the way every agent op does: a new session and process
 * group, piped stdout/stderr, stdin from a pipe or /dev/null, nothing else of
 * the agent's fds, and failures before exec (chdir, exec) reported
 * synchronously over a close-on-exec pipe, like posix_spawn. */
#ifndef SBX_AGENT_SPAWN_H
#define SBX_AGENT_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

#include "../common/err.h"

/* Extra fds a command may be given, at fixed numbers (shell sessions use them). */
#define SPAWN_EXTRA_MAX 2
#define SPAWN_EXTRA_FD_MIN 100

struct spawn_req {
    const char *const *argv;
    char *const *envp;
    const char *cwd; /* NULL: the agent's own */
    bool want_stdin;
    /* extra[i] (>= 0) becomes fd SPAWN_EXTRA_FD_MIN + i in the command. */
    int extra[SPAWN_EXTRA_MAX];
    /* A terminal's slave side: it becomes fds 0-2 and, after setsid, the command's
     * controlling terminal; no pipes are made (want_stdin is ignored). 0 means none:
     * fd 0 is the agent's connection, never a terminal. */
    int tty;
};

struct spawn_fds {
    int in_w; /* -1 without stdin */
    int out_r, err_r; /* -1 with a tty */
};

/* Returns 0 with the child's pid (a group leader) and non-blocking pipe ends, or
 * -errno with err->code "invalid_cwd" or "spawn_failed". A child that failed
 * before exec is left to the reaper. */
int spawn_command(const struct spawn_req *r, pid_t *pid_out, struct spawn_fds *fds,
                  struct sbx_err *err);

#endif
