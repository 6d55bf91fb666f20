/* The sandbox's processes as /proc shows them, for the agent's watchers (pidguard.c,
 * oomwatch.c) and its resident shells (spare.c). Meaningful only as the sandbox's init:
 * elsewhere /proc holds the host's processes. */
#ifndef SBX_AGENT_PROCSTAT_H
#define SBX_AGENT_PROCSTAT_H

#include <sys/types.h>

/* The fields of /proc/<pid>/stat the agent looks at. */
struct procstat {
    char state;
    pid_t ppid, pgrp, sid;
};

/* name, an entry of /proc: the pid it names, or 0 when it is not a process. */
pid_t procstat_pid(const char *name);

/* The fields of <dirfd>/<name>/stat (an open /proc and "N", or AT_FDCWD and "/proc/N"):
 * 0, or -1 when they cannot be read (the process is gone). */
int procstat_read(int dirfd, const char *name, struct procstat *out);

#endif
