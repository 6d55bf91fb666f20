/* A session's shell, kept between its commands (docs/sessions.md, "The resident shell").
 *
 * Starting bash is most of what a session command costs under gVisor (a new address
 * space, the dynamic loader, bash's own start), and even a fork is tens of milliseconds
 * under ptrace. So once a shell command of a session has ended, the agent starts a bash
 * from the state the session now has (its environment, directory and user) that reads
 * commands from a pipe and runs each in itself: `eval` inside a function, with stdin
 * from /dev/null and stdout/stderr on two FIFOs the agent made for that command (bash
 * cannot receive fds). After each command it writes a record on its state pipe: its exit
 * status, its directory, `export -p`, its EXIT trap, and a dump of everything else a
 * shell keeps (variables, functions, aliases, options, traps, umask, limits, jobs, open
 * fds). The agent saves the directory and the exports into the session as for any
 * command, and compares the rest with what the shell dumped before its first command.
 *
 * The same shell takes the next command only if nothing but the directory and the exports
 * changed, so every command still starts from exactly what a fresh bash of the session
 * would have. Otherwise (an unexported variable, a function, `set -e`, a background job,
 * its own EXIT trap...) the agent answers "x" and the shell exits with the command's
 * status, in the command's redirections, so a trap of the command's own runs where a
 * fresh bash would have run it; the next command gets a new shell. Before a shell is
 * reused, its process group must hold nothing but itself (a timeout kills that group)
 * and its directory must be the one it reported.
 *
 * Anything that does not fit (env, cwd or stdin of its own, another user, a busy or
 * retired shell) is spawned as before. At most AGENT_MAX_SPARES shells, for the
 * sessions used last. */
#ifndef SBX_AGENT_SPARE_H
#define SBX_AGENT_SPARE_H

#include <stdbool.h>
#include <sys/types.h>

struct agent;
struct session;
struct session_run;
struct spawn_fds;
struct spare;

/* The longest command handed to a shell; longer ones are spawned. */
#define SPARE_CMD_MAX (16u * 1024u)
/* Where the command files and FIFOs are made: the sandbox's own /dev (a tmpfs that
 * only root writes), root's directly, the user's in a directory of the user's. */
#define SPARE_DIR "/dev/sbx"
#define SPARE_USER_SUBDIR "u"

/* The shell's command is done without the shell ending: status as from waitpid. */
typedef void (*spare_done_fn)(void *data, int status);

/* Make SPARE_DIR (in a sandbox only; elsewhere every command is spawned). */
void spare_init(struct agent *a);

/* If s has an idle shell that fits a command S run as root (or not), hand S to it: true,
 * with the shell's pid (a group leader, which stays the stream's until done or its
 * exit), the command's output pipes, its session run and the shell, which the caller
 * binds and releases. Otherwise false, and the caller spawns. */
bool spare_take(struct agent *a, struct session *s, bool root, const char *cmd, pid_t *pid,
                struct spawn_fds *fds, struct session_run **run, struct spare **sp);
/* Who is told when the command is done (never if the shell exits instead). */
void spare_bind(struct spare *sp, spare_done_fn done, void *data);
/* The stream reaped the shell: its pid is gone. */
void spare_exited(struct spare *sp);
/* The stream is gone: the shell becomes idle again, or is retired (lost: the command
 * did not come back to it, so it is ending or being killed). */
void spare_release(struct agent *a, struct spare *sp, bool lost);
/* The reaper: was pid a shell of ours? */
bool spare_child_exit(struct agent *a, pid_t pid);

/* After a command's answer was sent: make sure the session agent->spare_for names has
 * a shell, reusing the one there if it is still clean. Failing to start one only costs
 * the next command its speed. */
void spare_refill(struct agent *a);

/* Kill every idle shell: before a checkpoint (the sandbox restores without them; the
 * first command after a resume is spawned). */
void spare_drop_all(struct agent *a);

/* Idle shells: processes that wait for the agent and cannot be forking. */
unsigned spare_idle(const struct agent *a);

#endif
