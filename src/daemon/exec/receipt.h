/* Receipts: the proof of what an exec ran and what it produced. Before a command a
 * probe notes the workspace generation and the state of /workspace/out; after it, the
 * receipt lists the template, the hashes of the command and inputs, every file under
 * /workspace/out the command created or changed (SHA-256, size), and the generation
 * before and after. The generation is a counter that moves whenever the workspace tree
 * changed (any path, type, size, mode or mtime), and is kept in the store. */
#ifndef SBX_RECEIPT_H
#define SBX_RECEIPT_H

#include <jansson.h>

#include "../../common/err.h"

#define RECEIPT_MAX_OUTPUTS 1000
#define WS_WALK_MAX_ENTRIES 200000

struct sandbox;
struct receipt_probe;

/* Before a command runs: its command (hashed) and language, and what the workspace holds. */
int receipt_probe_new(struct sandbox *sb, const char *command, const char *language,
                      struct receipt_probe **out, struct sbx_err *err);
void receipt_probe_free(struct receipt_probe *probe);
/* Never NULL; the facts it could not establish are left out and said in "warnings". */
json_t *receipt_build(struct receipt_probe *probe, struct sandbox *sb, const char *exec_id);

/* A workspace not on this host (sandbox_workspace_remote): the probe and the receipt walk
 * it through the agent's file helper, and the outputs' bytes are read back and hashed by
 * sbxd. ready runs once, on the loop, when the probe is done (what it could not establish
 * is a warning, never a failure); freeing the probe before that cancels it. */
/* gone: the sandbox stopped meanwhile (its channel closed): the command must not start. */
typedef void (*receipt_ready_fn)(const struct sbx_err *gone, void *data);
int receipt_probe_start(struct sandbox *sb, const char *command, const char *language,
                        receipt_ready_fn ready, void *data, struct receipt_probe **out,
                        struct sbx_err *err);
/* built runs once (maybe before this returns) with the receipt (a reference to take). */
typedef void (*receipt_built_fn)(json_t *receipt, void *data);
void receipt_build_start(struct receipt_probe *probe, const char *exec_id,
                         receipt_built_fn built, void *data);
/* Bytes of changed outputs read back for one receipt, at most (past it: a warning). */
#define RECEIPT_AGENT_BYTES_MAX (1024ull * 1024ull * 1024ull)

/* Re-read the workspace tree and move the generation if it changed; returns it. Called
 * around every exec, and by anything else that changes the workspace (file uploads). */
long long receipt_sync_generation(struct sandbox *sb);

#endif
