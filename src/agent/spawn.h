/* Starting a command the way every agent op does: a new session and process
 * group, piped stdout/stderr, stdin from a pipe or /dev/null, nothing else of
 * the agent's fds, and failures before exec (chdir, exec) reported
 * synchronously over a close-on-exec pipe, like posix_spawn. */
#ifndef SBX_AGENT_SPAWN_H
#define SBX_AGENT_SPAWN_H

#include <jansson.h>
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
    /* The request asked to run as root (the daemon checked the operator allows it).
     * Otherwise a sandbox's agent (PID 1, root) switches the command to the
     * unprivileged user (src/common/sbxuser.h); an agent run as a host process (tests,
     * the local backend) leaves it as whoever the agent is. */
    bool root;
};

struct spawn_fds {
    int in_w;         /* -1 without stdin */
    int out_r, err_r; /* -1 with a tty */
};

/* Returns 0 with the child's pid (a group leader) and non-blocking pipe ends, or
 * -errno with err->code "invalid_cwd", "process_limit" (EAGAIN: the sandbox's process
 * limit) or "spawn_failed". A child that failed before exec is left to the reaper. */
int spawn_command(const struct spawn_req *r, pid_t *pid_out, struct spawn_fds *fds,
                  struct sbx_err *err);

/* A request's "user": absent or "user" (false), "root" (true), else bad_request. */
int spawn_user_parse(json_t *req, bool *root, struct sbx_err *err);
/* pipe2 for an extra fd the command re-opens by path (/dev/fd/N): owned by the user the
 * command will run as. 0 or -errno. */
int spawn_pipe(const struct spawn_req *r, int p[2], int flags);
/* Take the unprivileged user's effective ids (0 or -errno), and root's back (aborts if it
 * cannot: the agent could not go on). For what must be the user's without a chown, which
 * gVisor refuses for pipes and the namespaces backend for everything. */
int spawn_as_user(void);
void spawn_as_root(void);
/* Whether commands not asking for root run as the unprivileged user here. */
bool spawn_switches_user(void);

/* Send signo to every process of the user's, rounds times over (each round reaches the
 * ones forked during the one before), from a child that takes the user's ids: kill(-1)
 * then reaches exactly what the user could signal, in one call, whatever the count.
 * 0 or a negative errno. */
int spawn_signal_user_all(int signo, unsigned rounds);

#endif
