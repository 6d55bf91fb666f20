/* The checkpoint that pause and fork share: the agent parks its listeners
 * (snapshot_prepare), runsc checkpoints and stops the container, and the outcome comes
 * back to sb->op_cb. Inside snapshot/ only. */
#ifndef SBX_SNAPSHOT_CHECKPOINT_H
#define SBX_SNAPSHOT_CHECKPOINT_H

#include "../sandbox/lifecycle.h"

/* Whether sb can be snapshotted now; verb ("pause", "fork") names the operation in the
 * error. */
int checkpoint_check(const struct sandbox *sb, const char *verb, struct sbx_err *err);
/* Prepare the agent, then checkpoint into image; sb->op_cb hears the outcome, and a
 * pause (not sb->forking) leaves sb paused. With hold, where runsc resumes in place
 * (rt_checkpoint), the sandbox is left paused but running instead (sb->held, its channel
 * kept) until checkpoint_release. The caller sets the op state on success. */
int checkpoint_start(struct sandbox *sb, const char *image, bool hold, struct sbx_err *err);
/* End a hold, on a worker of jobs (NULL: here): runsc resumes it, its agent listens again
 * and waiting requests go on; if runsc cannot, it is lost as a machine that died. cb hears
 * it with the sandbox (NULL if it went meanwhile). */
struct jobs;
void checkpoint_release(struct manager *m, struct jobs *jobs, struct sandbox *sb,
                        sandbox_ready_fn cb, void *data);

/* Frozen, a loop-mounted workspace is written out whole and clean to its image file
 * (which otherwise lags behind: dirty pages, the journal). Negative when not frozen;
 * wsimage_thaw ends it. */
int checkpoint_freeze_workspace(const struct manager *m, const struct sandbox *sb);

#endif
