/* The kills the agent made on its own (the memory watcher's, the process guard's), kept
 * until the stream that owned the victim ends and asks, so that its answer can say why a
 * SIGKILL came from nowhere (oom_killed, process_limit_killed). */
#ifndef SBX_AGENT_KILLLOG_H
#define SBX_AGENT_KILLLOG_H

#include <stdbool.h>
#include <sys/types.h>

/* Kills remembered until their stream asks; when full, the oldest nobody asked for goes. */
#define KILLLOG_MAX 16

struct killlog {
    struct {
        pid_t pid, group; /* the victim, and its process group or session (0: none) */
        long long ms;     /* when (sbx_now_ms): a later process with a reused id is not it */
    } e[KILLLOG_MAX];
    unsigned n; /* oldest first */
};

void killlog_add(struct killlog *l, pid_t pid, pid_t group, long long now_ms);

/* Whether a kill of group (or of pid itself; 0 matches nothing) was made at or after
 * since_ms (the stream's start) and not claimed yet; every record of it goes. */
bool killlog_claim(struct killlog *l, pid_t group, pid_t pid, long long since_ms);

#endif
