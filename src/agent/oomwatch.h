/* The memory watcher: a command that grows past the sandbox's memory is killed here,
 * inside, before the host's memory cgroup would end the whole machine (docs/runtime.md,
 * "Memory"). The daemon's HELLO says how much memory the sandbox has; the watcher polls
 * what is used and SIGKILLs the largest process once use crosses OOMWATCH_PERCENT of it.
 * The streams that own a killed process ask oomwatch_claim when they end, to answer
 * oom_killed. */
#ifndef SBX_AGENT_OOMWATCH_H
#define SBX_AGENT_OOMWATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct agent;

/* Killed above OOMWATCH_PERCENT of the limit, and at least OOMWATCH_RESERVE_MIN below
 * it: the host's cgroup also counts gVisor's own memory (measured: 5-10 MiB beyond what
 * the sandbox sees), and a tight Python loop allocates ~800 MiB/s under ptrace, so the
 * host's use peaked at 253 of 256 MiB with a 90 % threshold and no floor. */
#define OOMWATCH_PERCENT 90
#define OOMWATCH_RESERVE_MIN (24ull << 20)
/* Below 2/3 of the threshold the next look comes when a command growing at
 * OOMWATCH_RATE_BYTES_S could first reach that line, within [POLL, POLL_MAX]: an idle
 * sandbox of 2 GiB is looked at once a second rather than ten times (each look wakes the
 * agent, which under ptrace costs the host 0.6 % of a core at 10 a second). The rate is
 * above the 800 MiB/s measured for a tight Python loop. Above the line: HOT_POLL. */
#define OOMWATCH_RATE_BYTES_S (1ull << 30)
#define OOMWATCH_POLL_MS 100
#define OOMWATCH_POLL_MAX_MS 1000
#define OOMWATCH_HOT_POLL_MS 10
/* After a kill the memory comes back within moments (gVisor frees it as the victim
 * exits): for OOMWATCH_SETTLE_MS nothing else is killed unless use grows by another
 * 1/OOMWATCH_SETTLE_GROWTH of the limit (a second process still allocating). */
#define OOMWATCH_SETTLE_MS 1000
#define OOMWATCH_SETTLE_GROWTH 32

/* The sandbox has limit_bytes of memory (0: unknown, the watcher stops). Called on every
 * daemon HELLO; the first one starts the watcher. */
void oomwatch_set_limit(struct agent *a, uint64_t limit_bytes);
/* Whether a process of group pgid (or pid itself, pgid 0) was killed for memory at or
 * after since_ms (sbx_now_ms: the group's start) and not claimed yet; its records go. */
bool oomwatch_claim(struct agent *a, pid_t pgid, pid_t pid, long long since_ms);

#endif
