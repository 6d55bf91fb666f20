/* A session's next shell, started ahead of its command (docs/sessions.md, "The spare
 * shell").
 *
 * Starting bash is most of what a session command costs under gVisor (a new address
 * space, the dynamic loader, bash's own start). So once a shell command of a session has
 * ended, the agent starts the next one's bash at once, from the state the session now has:
 * its environment, directory and user, its stdout/stderr/state pipes and its prelude pipe,
 * whose end bash waits for before it runs anything. The next command of that session, if
 * it is `bash -c S` with nothing of its own (no env, cwd or stdin, the session's user),
 * is written into that prelude as the variable __sbx_c, and the shell runs
 * `eval -- "$__sbx_c"`: still a fresh bash in its own process group, from the same
 * state, with the same EXIT trap. Anything else, or a spare that no longer fits (the
 * session moved on, was deleted, or the shell died), gets a spawn as before.
 *
 * At most AGENT_MAX_SPARES spares, for the sessions used last. */
#ifndef SBX_AGENT_SPARE_H
#define SBX_AGENT_SPARE_H

#include <stdbool.h>
#include <sys/types.h>

struct agent;
struct session;
struct session_run;
struct spawn_fds;

/* The longest command handed to a spare (it goes through a pipe the agent must not
 * block on); longer ones are spawned. */
#define SPARE_CMD_MAX (16u * 1024u)

/* If the spare fits a command S of s run as root (or not), hand S to it: true, with its
 * pid (a group leader), pipes and session run. Otherwise false (a spare that no longer
 * fits s is dropped) and the caller spawns. */
bool spare_take(struct agent *a, struct session *s, bool root, const char *cmd, pid_t *pid,
                struct spawn_fds *fds, struct session_run **run);

/* After a command's answer was sent: start the spare for the session agent->spare_for
 * names, unless the one there still fits. Failing to start one only costs the next
 * command its speed. */
void spare_refill(struct agent *a);

/* Kill every spare: before a checkpoint, since gVisor does not bring back a shell that
 * waits on a pipe it opened through /dev/fd (the sandbox is lost at the restore). */
void spare_drop_all(struct agent *a);

#endif
