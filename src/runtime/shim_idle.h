/* The timer slack of the sandbox's runsc process while the agent says nothing of the user's
 * runs (src/agent/quiet.h says why; docs/runtime.md, "Idle sandboxes"). runsc's systrap
 * platform polls every 400 us for the sandbox's whole life; a stretched slack lets the kernel
 * coalesce those wake-ups. Busy is the kernel's default slack. */
#ifndef SBX_SHIM_IDLE_H
#define SBX_SHIM_IDLE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../proto/proto.h"

#define SHIM_IDLE_SLACK_NS 1000000000ull
#define SHIM_BUSY_SLACK_NS 50000ull

struct shim_idle {
    unsigned long long to_agent_frames; /* every frame queued for the agent (restore HELLO too) */
    bool idle;                          /* the agent's last IDLE was taken */
};

/* A frame of type is about to be queued for the agent: back to busy first unless it starts
 * nothing. sentry: the runsc sandbox process, 0 when there is none to change (not started
 * yet, or a native container, whose processes are the user's own). Returns 0 when nothing
 * changed, the number of threads changed, or -errno. */
int shim_idle_frame_to_agent(struct shim_idle *st, pid_t sentry, uint8_t type);

/* The agent's PROTO_IDLE: taken when it counted every frame queued for it so far. Returns
 * as shim_idle_frame_to_agent. */
int shim_idle_said(struct shim_idle *st, pid_t sentry, const struct proto_frame *f);

#endif
