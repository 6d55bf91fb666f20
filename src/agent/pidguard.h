/* The sandbox's process limit, held by the agent (docs/security.md, "Processes").
 *
 * Commands run as the unprivileged user with RLIMIT_NPROC = the sandbox's pids limit
 * (gVisor counts threads in it, as Linux does), so a fork past it fails with EAGAIN inside,
 * and the agent (root, counted apart) can still start commands. That is not enough under
 * gVisor's ptrace platform: every process a sandbox ever had costs about sixteen host
 * tasks that gVisor keeps, so a fork bomb held at the limit, or a few in a row, would
 * reach the host's ceiling and end the whole sandbox. So the guard counts the user's
 * processes (not threads) a few times a second, and when they reach a quarter of the
 * limit it kills the session (setsid group) holding the most of them: the exec,
 * background process, terminal or kernel that started the bomb, with everything it left
 * behind, including what outlived its exec. */
#ifndef SBX_AGENT_PIDGUARD_H
#define SBX_AGENT_PIDGUARD_H

struct agent;

/* How often the count is looked at, how many looks in a row at the bound make a session
 * the offender, and the bound: limit / PIDGUARD_SHARE processes, at least PIDGUARD_MIN. */
#define PIDGUARD_TICK_MS 200
#define PIDGUARD_STRIKES 1
#define PIDGUARD_SHARE 4
#define PIDGUARD_MIN 16
/* Upper bound on the processes one scan looks at. */
#define PIDGUARD_SCAN_MAX 16384

/* Start watching, when commands run as the user under a finite RLIMIT_NPROC (a sandbox's
 * agent); otherwise nothing to hold. */
void pidguard_start(struct agent *a);

#endif
