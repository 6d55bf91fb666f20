/* op "exec": run a command in its own session with piped stdio (docs/protocol.md). */
#ifndef SBX_AGENT_EXEC_H
#define SBX_AGENT_EXEC_H

#include <jansson.h>
#include <stdint.h>

#include "../common/err.h"

struct agent;

/* After the main child exits, keep reading its pipes until both reach EOF, or
 * until nothing has been read for EXEC_DRAIN_QUIET_MS while reading was possible,
 * or EXEC_DRAIN_MAX_MS have passed since the exit; whichever comes first. This
 * stops a background grandchild that inherited the pipes from holding the
 * stream open. Time spent blocked on flow control does not count as quiet. */
#define EXEC_DRAIN_QUIET_MS 200
#define EXEC_DRAIN_MAX_MS 5000

/* Start the command of req on stream id (in the session req names, if any: see
 * session.h). Returns 0 when the stream exists (it
 * will end with EXIT), or -errno with err->code set ("bad_request",
 * "invalid_cwd", "spawn_failed") for the caller to send as ERROR. */
int exec_open(struct agent *a, uint32_t id, json_t *req, struct sbx_err *err);

#endif
