/* The agent's one fatal path, for a lost or corrupt connection and for failures the
 * loop cannot go on without. Every module may call it; it calls nothing above it:
 * what must be killed first is the agent's on_fatal hook, set by agent.c. */
#ifndef SBX_AGENT_FATAL_H
#define SBX_AGENT_FATAL_H

struct agent;

/* Log (when fmt), run a->on_fatal, and exit with code. */
_Noreturn void agent_die(struct agent *a, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
