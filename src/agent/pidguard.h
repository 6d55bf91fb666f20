/* The sandbox's process limit, held by the agent (docs/security.md, "Processes").
 *
 * Commands run as the unprivileged user with RLIMIT_NPROC = the sandbox's pids limit
 * (gVisor counts threads in it, as Linux does), so a fork past it fails with EAGAIN inside,
 * and the agent (root, counted apart) can still start commands. A fork bomb would still sit
 * at the limit for ever, outliving the exec that started it, and under gVisor's ptrace
 * platform every process a sandbox ever had costs host tasks that gVisor keeps, so a few
 * bombs in a row would reach the host's ceiling and end the whole sandbox. So the guard
 * counts the user's processes (not threads) five times a second, and when they are at the
 * limit (within a sixteenth of it) it kills the session (setsid group) holding the most of
 * them at once, since every moment a bomb spends there costs host tasks: the exec, background
 * process, terminal or kernel that started the bomb, with everything it left behind, including what
 * outlived its exec. When no session holds most of them (setsid in every child), it stops
 * every user process and kills them all. */
#ifndef SBX_AGENT_PIDGUARD_H
#define SBX_AGENT_PIDGUARD_H

#include <stdbool.h>
#include <sys/types.h>

struct agent;

/* How often the count is looked at, and how many looks in a row at the limit (within
 * limit / PIDGUARD_SLACK of it) make the biggest session the offender. One: measured
 * under ptrace, each further look a bomb survives leaves gVisor a few hundred more host
 * tasks (docs/security.md). */
#define PIDGUARD_TICK_MS 200
#define PIDGUARD_STRIKES 1
#define PIDGUARD_SLACK 16
/* The biggest session is the bomb when it holds at least 1/PIDGUARD_DOMINANT_DIV of the
 * user's processes; otherwise every user process is killed (pidguard.c, kill_everything). */
#define PIDGUARD_DOMINANT_DIV 2
/* Upper bound on the processes one scan looks at. */
#define PIDGUARD_SCAN_MAX 16384

/* Start watching, when commands run as the user under a finite RLIMIT_NPROC (a sandbox's
 * agent); otherwise nothing to hold. */
void pidguard_start(struct agent *a);

/* A request may start a user process: a guard that stopped looking, since nothing but the
 * agent and its idle spare shells ran, looks again from the next tick on. */
void pidguard_wake(struct agent *a);

/* Whether nothing but the agent and its idle resident shells runs (one read of /proc):
 * nothing of the user's can be forking, sleeping on a timer or waiting for input. */
bool pidguard_nothing_runs(const struct agent *a);

/* Whether the guard killed session sid (or its leader) at or after since_ms (sbx_now_ms:
 * the session's start) and no one claimed it yet; its record goes. An exec, a background
 * process or the kernel asks when its leader is reaped, with the leader's wait status, to
 * say the limit killed it rather than a plain SIGKILL. A leader killed by SIGKILL also
 * counts when the guard killed every user process since it started. A leader the guard's
 * stop got killed by another signal (gVisor's hang-up, pidguard.c) is the guard's kill:
 * *status becomes SIGKILL's. */
bool pidguard_claim(struct agent *a, pid_t sid, long long since_ms, int *status);

#endif
