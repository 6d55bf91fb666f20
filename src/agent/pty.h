/* Terminals (docs/protocol.md, "pty_*"): one mechanism for the daemon's WebSocket
 * terminals and for exec_command/write_stdin sessions. A PTY is a record, not a
 * stream: the command runs on the slave side of a pseudo-terminal in its own session
 * (the terminal is its controlling terminal), the agent reads the master side all the
 * time into a ring of the recent output (replayed on re-attach, read by cursor), and
 * streams come and go around it: "pty_attach" pipes bytes both ways for as long as a
 * WebSocket is connected, "pty_read" writes input and waits for output.
 *
 * A terminal PTY left without an attached stream for its grace period is killed; an
 * exec PTY lives until it exits or is killed. Records of exited PTYs are kept (their
 * output can still be read) and reused oldest first. */
#ifndef SBX_AGENT_PTY_H
#define SBX_AGENT_PTY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/err.h"

/* Live terminals (kind "terminal") at once. */
#define PTY_TERMINALS_MAX 5
/* Recent output kept per PTY: what a re-attach replays and what reads can reach. */
#define PTY_RING_MAX (256u * 1024u)
/* Input waiting for the terminal to take it. */
#define PTY_INPUT_MAX (1024u * 1024u)
/* A read returns once new output has been quiet this long. */
#define PTY_QUIET_MS 100
/* After the command exits, output still in flight is read for at most this long. */
#define PTY_DRAIN_MS 200
#define PTY_DIM_MAX 1000

struct agent;

int pty_open_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int pty_attach_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int pty_read_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int pty_resize_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int pty_input_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);
int pty_kill_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);

/* pid was reaped: returns true when it was a PTY's command. */
bool pty_child_exit(struct agent *a, pid_t pid, int status);
/* The agent is going away: kill every PTY's process group. */
void pty_kill_all(struct agent *a);

#endif
