/* The agent's part in memory snapshots (docs/snapshots.md). gVisor's checkpoint
 * (runsc 20221219) panics on a socket that anything waits on ("endpoint still has
 * waiters upon save"), which kills the sandbox, and the agent's egress listener on
 * 127.0.0.1 sits in its epoll set. Before a checkpoint sbxd opens "snapshot_prepare":
 * the agent takes its listening sockets out of its epoll set (loop_fd_park) and refuses
 * (snapshot_unsupported) while any other socket exists in the sandbox, its own egress
 * connections or a user's server. After the checkpoint — "snapshot_resume" on a sandbox
 * that kept running, or a daemon HELLO with "restored" on a restored one — the
 * listeners are watched again. */
#ifndef SBX_AGENT_SNAPSHOT_H
#define SBX_AGENT_SNAPSHOT_H

#include <jansson.h>
#include <stdint.h>

#include "../common/err.h"

/* Listening sockets the agent can park at once. */
#define SNAPSHOT_PARKED_MAX 16

struct agent;

int snapshot_prepare_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int snapshot_resume_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
/* The daemon's HELLO says this agent was just restored from an image. */
void snapshot_restored(struct agent *a);
/* Watch again what snapshot_prepare parked; returns how many. */
int snapshot_relisten(struct agent *a);

#endif
