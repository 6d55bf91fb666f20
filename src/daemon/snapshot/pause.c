/* Pause (a checkpoint that leaves the sandbox stopped, status paused) and resume (a
 * restore from that image, or a cold start from the workspace when it is unusable). */
#include "snapshot.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "checkpoint.h"

int snapshot_pause(struct manager *m, struct sandbox *sb, sandbox_op_fn cb, void *data,
                   struct sbx_err *err)
{
    int r = checkpoint_check(sb, "pause", err);
    if (r < 0)
        return r;
    struct store_sandbox_counts n;
    if ((r = store_sandbox_counts(m->store, sb->rec.user, sb->rec.key_id, &n, err)) < 0)
        return r;
    if (n.user_paused >= SANDBOX_PAUSED_MAX)
        return sbx_err_set(err, EAGAIN, "sandbox_paused_limit",
                           "at most %d paused sandboxes per user: delete old ones to make room",
                           SANDBOX_PAUSED_MAX);
    _cleanup_free_ char *image = sbx_xasprintf("%s/snapshots/memory", sb->dir);
    sb->op_t0 = sbx_now_ms();
    if ((r = checkpoint_start(sb, image, false, err)) < 0)
        return r;
    sb->pausing = true;
    sb->chan_lost = false;
    sb->ready = false; /* requests from now on wait for the outcome */
    sb->op_cb = cb;
    sb->op_data = data;
    return 0;
}

/* A resume right after its pause: the pause's shim may still be deleting the container. */
static void on_resume_free(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->op_timer = NULL;
    if (rt_busy(sb->state_dir) && sbx_now_ms() < sb->op_deadline) {
        sb->op_timer = loop_timer_add(l, 5, on_resume_free, sb);
        return;
    }
    struct sbx_err err = {0};
    int r = sandbox_launch(sb->mgr, sb, sb->cold_tried ? NULL : sb->image_dir, false, &err);
    if (r < 0 && !sb->cold_tried) {
        log_warn("sandbox %s: restore failed (%s); starting cold", sb->rec.id, err.msg);
        sb->cold_tried = true;
        r = sandbox_launch(sb->mgr, sb, NULL, false, &err);
    }
    if (r < 0) {
        log_error("sandbox %s: resume: %s", sb->rec.id, err.msg);
        sb->restoring = false;
        sb->paused = true;
        snprintf(err.code, sizeof(err.code), "sandbox_start_failed");
        sandbox_notify_waiters(sb, &err); /* it stays paused: its image and workspace are kept */
    }
}

int snapshot_resume(struct manager *m, struct sandbox *sb, sandbox_ready_fn cb, void *data,
                    struct sbx_err *err)
{
    if (!sb->paused || sb->restoring)
        return sbx_err_set(err, EALREADY, "sandbox_not_paused", "sandbox %s is not paused",
                           sb->rec.id);
    if (sb->exporting)
        return sbx_err_set(err, EBUSY, "sandbox_busy",
                           "sandbox %s is still being paused: retry in a moment", sb->rec.id);
    struct store_sandbox row;
    int r = store_sandbox_get(m->store, sb->rec.id, &row, err);
    if (r < 0)
        return r;
    bool ours = !strcmp(row.node_id, store_node(m->store));
    store_sandbox_clear(&row);
    if (!ours) /* taken over by another node while this one was unreachable */
        return sbx_err_set(err, EBUSY, "sandbox_moved",
                           "sandbox %s was resumed by another node: ask any node for it",
                           sb->rec.id);
    if ((r = manager_running_room(m, sb, "resuming", err)) < 0)
        return r;
    _cleanup_free_ char *export = manager_export_dir(m, sb->rec.id);
    if (export)
        (void)sbx_rm_rf(export); /* resumed here: the copy for other nodes is spent */
    if (sb->op_timer) {
        loop_timer_cancel(m->loop, sb->op_timer);
        sb->op_timer = NULL;
    }
    free(sb->image_dir);
    sb->image_dir = sbx_xasprintf("%s/snapshots/memory", sb->dir);
    sb->drop_image = true;
    sb->op_t0 = sbx_now_ms();
    snprintf(sb->expect_boot, sizeof(sb->expect_boot), "%s", sb->boot_id);
    _cleanup_free_ char *img = sbx_xasprintf("%s/checkpoint.img", sb->image_dir);
    sb->cold_tried = access(img, F_OK) != 0;
    sb->restoring = true;
    sb->paused = false;
    sb->op_deadline = sbx_now_ms() + SANDBOX_SHIM_GONE_MS;
    sandbox_add_waiter(sb, cb, data);
    on_resume_free(m->loop, sb);
    return 0;
}
