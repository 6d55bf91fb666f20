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
 * pause (not sb->forking) leaves sb paused. The caller sets the op state on success. */
int checkpoint_start(struct sandbox *sb, const char *image, struct sbx_err *err);

/* Frozen, a loop-mounted workspace is written out whole and clean to its image file
 * (which otherwise lags behind: dirty pages, the journal). Negative when not frozen;
 * wsimage_thaw ends it. */
int checkpoint_freeze_workspace(const struct manager *m, const struct sandbox *sb);

#endif
