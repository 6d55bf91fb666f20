/* A sandbox's artifacts, wherever its workspace is: on this host they are collected from
 * it directly (artifacts.h); a workspace that is not here (agentws.h) has its out/ read
 * through the agent into a staging directory beside the artifact store first, and that is
 * hashed, typed, scanned, stored and signed by the same collection. */
#ifndef SBX_FILES_COLLECT_H
#define SBX_FILES_COLLECT_H

#include "artifacts.h"

struct sbxd;
struct sandbox;

/* Bytes of out/ read from a remote workspace for one collection, at most. */
#define COLLECT_REMOTE_BYTES_MAX (1024ull * 1024ull * 1024ull)

/* cb runs once, on the loop (maybe before this returns). */
void files_collect_artifacts(struct sbxd *d, struct sandbox *sb, artifacts_ready_fn cb,
                             void *data);

#endif
