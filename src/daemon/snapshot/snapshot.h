/* Memory snapshots of v2 sandboxes (pause, resume, fork) and workspace snapshots of v1
 * ones (docs/snapshots.md), on the sandbox life cycle of sandbox/. */
#ifndef SBX_SNAPSHOT_H
#define SBX_SNAPSHOT_H

#include <jansson.h>
#include <stdbool.h>

#include "../../common/err.h"
#include "../sandbox/manager.h"

#define SANDBOX_PAUSED_MAX 10     /* paused sandboxes per user */
#define SANDBOX_FORK_MAX 5        /* copies per fork */
#define SANDBOX_FORK_KEY_ACTIVE 6 /* a fork may not take a key past this many live sandboxes */
#define SANDBOX_SNAPSHOTS_MAX 10  /* v1 workspace snapshots per sandbox */

/* Checkpoint a running v2 sandbox with its memory and stop it (status paused). cb runs
 * once, when it is paused or the pause failed (a sandbox whose checkpoint failed but
 * which still runs keeps running). sandbox_busy while a command or cell runs,
 * sandbox_paused_limit past SANDBOX_PAUSED_MAX per user. */
int snapshot_pause(struct manager *m, struct sandbox *sb, sandbox_op_fn cb, void *data,
                   struct sbx_err *err);
/* Bring a paused sandbox back from its image (restored) or, when the image cannot be
 * used, cold from its workspace (not restored). cb runs when it is ready, as for
 * create; sb->restored and sb->ready_ms then say how it came back. */
int snapshot_resume(struct manager *m, struct sandbox *sb, sandbox_ready_fn cb, void *data,
                    struct sbx_err *err);

/* SBX_SHARED_SNAPSHOTS (handover.c): a pause that just stopped sb is copied to shared
 * storage, and the pause is answered (sandbox_op_finish) once the copy is there. False
 * when there is no shared storage. */
bool snapshot_export_start(struct manager *m, struct sandbox *sb);
/* Take over rec, a sandbox paused on an unreachable node whose pause is on shared
 * storage: the row moves to this node, the copy into its data dir, and cb gets the
 * sandbox, paused, among this node's (or NULL and the error: node_unreachable when there
 * is no current copy, sandbox_moved when another node took it first). */
typedef void (*snapshot_adopt_fn)(struct sandbox *sb, const struct sbx_err *err, void *data);
int snapshot_adopt(struct manager *m, const struct store_sandbox *rec, snapshot_adopt_fn cb,
                   void *data, struct sbx_err *err);
struct fork_child {
    char id[STORE_ID_MAX + 1]; /* "" when the copy could not even be recorded */
    bool ok;
    bool restored;
    long long ready_ms;
    struct sbx_err err; /* when !ok */
};
/* err set: the fork failed as a whole (no copies). Otherwise kids[0..n) say how each
 * copy started. */
typedef void (*fork_done_fn)(const char *parent_id, const struct fork_child *kids, int n,
                             const struct sbx_err *err, void *data);
/* Snapshot a running v2 sandbox, which keeps running, and start count copies of it, each
 * with its own id and copy of the workspace. ttl_seconds 0: the parent's. jobs: the worker
 * threads that copy the workspaces (NULL: on the calling thread). */
struct jobs;
int snapshot_fork(struct manager *m, struct jobs *jobs, struct sandbox *sb,
                  const struct auth_identity *who, int count, long long ttl_seconds,
                  fork_done_fn cb, void *data, struct sbx_err *err);

/* v1: save the workspace as a snapshot (under the sandbox's dir, gone with it) that
 * POST /v1/sandboxes {snapshot_id} starts from. *out: the snapshot object.
 * not_supported_on_v2 on a v2 sandbox. */
int snapshot_workspace(struct manager *m, struct sandbox *sb, json_t **out, struct sbx_err *err);
/* Copy sb's workspace (v1 or v2) into dir (made): its image with the quota, else its tree.
 * *from (when given): the path a create's workspace_from takes. */
int snapshot_workspace_copy(struct manager *m, struct sandbox *sb, const char *dir, char **from,
                            struct sbx_err *err);

#endif
