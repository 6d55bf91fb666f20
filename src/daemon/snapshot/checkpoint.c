#include "checkpoint.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "../../common/jobs.h"
#include "../../common/log.h"
#include "../../common/util.h"
#include "../../runtime/provider.h"
#include "../billing/billing.h"
#include "../sandbox/agentcall.h"
#include "../sandbox/channel.h"
#include "../sandbox/wsimage.h"
#include "snapshot.h"

int checkpoint_check(const struct sandbox *sb, const char *verb, struct sbx_err *err)
{
    if (strcmp(sb->rec.backend, "v2"))
        return sbx_err_set(err, ENOTSUP, "not_supported_on_v1",
                           "sandbox %s runs on v1, which has no memory snapshots: use "
                           "POST /v1/sandboxes/%s/snapshot",
                           sb->rec.id, sb->rec.id);
    /* A provider's pause is its own (rt_checkpoint); the E2B API has no fork of a running
     * sandbox (its snapshots make templates), so a fork has nothing to map to
     * (docs/providers.md). A remote docker engine's workspace is a volume there, which
     * neither a checkpoint nor a fork could carry (docs/runtime.md "Docker"). */
    if (rt_is_provider(sb->rec.runtime) ? strcmp(verb, "pause") != 0 : sandbox_workspace_remote(sb))
        return sbx_err_set(err, ENOTSUP, "not_supported_on_provider",
                           "sandbox %s keeps its files away from this host (%s%s): %s is not "
                           "offered for it",
                           sb->rec.id, sb->rec.runtime,
                           rt_is_provider(sb->rec.runtime) ? "" : " on a remote engine", verb);
    if (sb->paused)
        return sbx_err_set(err, ECONNRESET, "sandbox_not_running", "sandbox %s is paused",
                           sb->rec.id);
    if (sb->op_cb || sb->pausing || sb->restoring || sb->ckpt_fd >= 0)
        return sbx_err_set(err, EBUSY, "sandbox_busy",
                           "sandbox %s is being paused, resumed or forked", sb->rec.id);
    if (!sb->ready || !sb->chan)
        return sbx_err_set(err, ECONNRESET, "sandbox_not_running", "sandbox %s is not running",
                           sb->rec.id);
    if (sb->exec_busy || sb->kernel_busy)
        return sbx_err_set(err, EBUSY, "sandbox_busy",
                           "sandbox %s is running a command or a cell; %s it afterwards",
                           sb->rec.id, verb);
    return 0;
}

static int start_checkpoint(struct manager *m, struct sandbox *sb, const char *image, bool hold,
                            loop_fd_cb done, struct sbx_err *err)
{
    (void)sbx_rm_rf(image); /* a leftover of a pause that failed half-way */
    int r = rt_checkpoint(&m->rt, sb->rec.id, sb->state_dir, image, hold, &sb->ckpt_fd, err);
    if (r < 0)
        return r;
    r = loop_watch_add(m->loop, sb->ckpt_fd, EPOLLIN, done, sb, &sb->ckpt_watch);
    if (r < 0) {
        close(sb->ckpt_fd);
        sb->ckpt_fd = -1;
        return sbx_err_sys(err, -r, "watching the checkpoint");
    }
    free(sb->image_dir);
    sb->image_dir = sbx_xstrdup(image);
    return 0;
}

struct prepare {
    struct sandbox *sb;
    char *image;
    bool hold;
    loop_fd_cb done;
};

static void on_relisten(json_t *result, const struct sbx_err *err, void *data)
{
    if (err) /* egress stays down in that sandbox until its next restore */
        log_warn("snapshot_resume: %s", err->msg);
}

static const struct agentcall_ops relisten_ops = {.on_done = on_relisten};

/* The checkpoint is over and the sandbox still runs: its agent listens again. */
static void agent_relisten(struct sandbox *sb)
{
    struct sbx_err err = {0};
    if (agentcall_start(sb, json_pack("{s:s}", "op", "snapshot_resume"), &relisten_ops, NULL, NULL,
                        &err) < 0)
        log_warn("sandbox %s: snapshot_resume: %s", sb->rec.id, err.msg);
}

static void on_prepared(json_t *result, const struct sbx_err *perr, void *data)
{
    struct prepare *p = data;
    struct sandbox *sb = p->sb;
    /* ended: the sandbox went while the agent answered (sandbox_destroy reported the op). */
    if (!sb->ended) {
        struct sbx_err err = {0};
        if (perr) {
            /* Nothing was parked or checkpointed: the sandbox runs on as it was. */
            err = *perr;
        } else if (start_checkpoint(sb->mgr, sb, p->image, p->hold, p->done, &err) < 0) {
            log_error("sandbox %s: checkpoint: %s", sb->rec.id, err.msg);
            if (sb->chan)
                agent_relisten(sb);
        }
        if (err.code[0]) {
            sb->pausing = sb->forking = false;
            sb->ready = sb->chan != NULL;
            if (sb->ready)
                sandbox_notify_waiters(sb, NULL);
            sandbox_op_finish(sb, &err);
        }
    }
    free(p->image);
    free(p);
}

/* snapshot_prepare on the agent (docs/protocol.md), then the checkpoint. */
static int prepare_checkpoint(struct sandbox *sb, const char *image, bool hold, loop_fd_cb done,
                              struct sbx_err *err)
{
    struct prepare *p = sbx_xcalloc(1, sizeof(*p));
    p->sb = sb;
    p->image = sbx_xstrdup(image);
    p->hold = hold;
    p->done = done;
    static const struct agentcall_ops ops = {.on_done = on_prepared};
    int r = agentcall_start(sb, json_pack("{s:s}", "op", "snapshot_prepare"), &ops, p, NULL, err);
    if (r < 0) {
        free(p->image);
        free(p);
    }
    return r;
}

/* Read a finished checkpoint's outcome: 0, -EAGAIN while it runs, or the error. */
static int ckpt_outcome(struct sandbox *sb, struct sbx_err *err)
{
    int r = rt_checkpoint_read(sb->image_dir, sb->ckpt_fd, err);
    if (r == -EAGAIN)
        return r;
    loop_watch_del(sb->mgr->loop, sb->ckpt_watch);
    sb->ckpt_watch = NULL;
    close(sb->ckpt_fd);
    sb->ckpt_fd = -1;
    return r;
}

static void mark_paused(struct sandbox *sb)
{
    struct manager *m = sb->mgr;
    sb->paused = true;
    sb->paused_at = sbx_wall_ms() / 1000;
    struct sbx_err err = {0};
    char at[24];
    snprintf(at, sizeof(at), "%lld", sb->paused_at);
    billing_sandbox_state(&sb->rec, SANDBOX_PAUSED);
    if (store_sandbox_set_status(m->store, sb->rec.id, SANDBOX_PAUSED, NULL, 0, &err) < 0 ||
        store_meta_set(m->store, sb->rec.id, STORE_META_PAUSED_AT, at, &err) < 0)
        log_error("sandbox %s: %s", sb->rec.id, err.msg);
    snprintf(sb->rec.status, sizeof(sb->rec.status), "%s", SANDBOX_PAUSED);
    log_info("sandbox %s: paused in %lld ms", sb->rec.id, sbx_now_ms() - sb->op_t0);
    struct sbx_err perr = {0};
    sandbox_paused_error(sb, &perr);
    sandbox_notify_waiters(sb, &perr); /* requests that came in while it was pausing */
}

/* The provider refused the pause (docs/providers.md): its sandbox runs on there, so this
 * one does too. A new shim reconnects to it (the resume's connect answers a running
 * sandbox as it is) while the pause is answered with the provider's refusal; requests
 * meanwhile wait for the agent's HELLO, and the status never left running. */
static void provider_pause_refused(struct sandbox *sb, const struct sbx_err *why)
{
    log_warn("sandbox %s: the provider refused its pause: %s", sb->rec.id, why->msg);
    (void)sbx_rm_rf(sb->image_dir);
    sb->restoring = true;
    sb->cold_tried = true;
    snprintf(sb->expect_boot, sizeof(sb->expect_boot), "%s", sb->boot_id);
    sb->op_t0 = sbx_now_ms();
    struct sbx_err err = {0};
    int r = sandbox_launch(sb->mgr, sb, NULL, false, &err);
    sandbox_op_finish(sb, why);
    if (r < 0)
        sandbox_machine_lost(sb, "resume_failed", &err);
}

/* The checkpoint stopped the container; its shim is still deleting it. A pause is done
 * now (a resume waits for the shim to be gone); a fork, which restores the parent under
 * the same id right away, waits here (op_cb). */
static void on_stopped(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->op_timer = NULL;
    /* A provider's pause is its shim's last call (shim_provider.c): known once it is gone. */
    bool provider = rt_is_provider(sb->rec.runtime);
    if ((sb->forking || provider) && rt_busy(sb->state_dir) && sbx_now_ms() < sb->op_deadline) {
        sb->op_timer = loop_timer_add(l, 5, on_stopped, sb);
        return;
    }
    channel_free(sb->chan);
    sb->chan = NULL;
    sb->pausing = sb->chan_lost = false;
    struct sbx_err perr = {0};
    if (provider && !sb->forking && rt_provider_pause_failure(sb->state_dir, &perr) < 0) {
        provider_pause_refused(sb, &perr);
        return;
    }
    if (!sb->forking) {
        mark_paused(sb);
        if (snapshot_export_start(sb->mgr, sb))
            return; /* answered once its copy for other nodes is there */
    }
    sb->forking = false;
    sandbox_op_finish(sb, NULL);
}

static void on_ckpt(struct loop *l, int fd, uint32_t events, void *data)
{
    struct sandbox *sb = data;
    struct sbx_err err = {0};
    int r = ckpt_outcome(sb, &err);
    if (r == -EAGAIN)
        return;
    if (r == 0 && rt_held(sb->state_dir)) {
        /* Paused, not stopped: its channel stays; checkpoint_release ends the hold. */
        sb->held = true;
        sb->pausing = false;
        sandbox_op_finish(sb, NULL);
        return;
    }
    if (r == 0) {
        sb->op_deadline = sbx_now_ms() + SANDBOX_SHIM_GONE_MS;
        on_stopped(l, sb);
        return;
    }
    log_error("sandbox %s: checkpoint: %s", sb->rec.id, err.msg);
    sb->pausing = sb->forking = false;
    (void)sbx_rm_rf(sb->image_dir);
    if (!sb->chan_lost && rt_alive(sb->state_dir) && rt_held(sb->state_dir)) {
        /* Its pause outlived the checkpoint: runsc could not resume it either. */
        sandbox_op_finish(sb, &err);
        sandbox_machine_lost(sb, "resume_failed", &err);
        return;
    }
    if (!sb->chan_lost && rt_alive(sb->state_dir)) {
        sb->ready = true; /* the checkpoint failed before it stopped anything */
        agent_relisten(sb);
        sandbox_notify_waiters(sb, NULL);
        sandbox_op_finish(sb, &err);
        return;
    }
    /* A failed checkpoint can take the sandbox down with it (a panic in gVisor's
     * save): it comes back cold from its workspace rather than being lost. */
    sandbox_op_finish(sb, &err);
    channel_free(sb->chan);
    sb->chan = NULL;
    sb->restoring = true;
    sb->expect_boot[0] = '\0';
    sb->op_t0 = sbx_now_ms();
    sandbox_cold_start(sb, &err);
}

int checkpoint_start(struct sandbox *sb, const char *image, bool hold, struct sbx_err *err)
{
    return prepare_checkpoint(sb, image, hold, on_ckpt, err);
}

struct release {
    struct manager *m;
    char id[STORE_ID_MAX + 1];
    char *state_dir;
    int ret;
    struct sbx_err err;
    sandbox_ready_fn cb;
    void *data;
};

static void release_run(void *data)
{
    struct release *rl = data;
    rl->ret = rt_release(&rl->m->rt, rl->id, rl->state_dir, &rl->err);
}

static void release_done(void *data, bool ran)
{
    struct release *rl = data;
    struct sandbox *sb = manager_find_live(rl->m, rl->id);
    struct sbx_err err = {0};
    if (!ran) /* held on: the next start releases it (reconcile.c) */
        sbx_err_set(&err, ESHUTDOWN, "shutting_down", "sbxd is stopping");
    else if (rl->ret < 0)
        err = rl->err;
    if (sb && sb->held && ran) {
        sb->held = false;
        sb->forking = false;
        if (err.code[0]) {
            /* Still paused: as lost as a machine that died; its workspace stays. */
            log_error("sandbox %s: resuming after the checkpoint: %s", sb->rec.id, err.msg);
            sandbox_machine_lost(sb, "resume_failed", &err);
        } else if (sb->chan) {
            sb->ready = true;
            agent_relisten(sb);
            sandbox_notify_waiters(sb, NULL);
        }
    }
    rl->cb(sb, err.code[0] ? &err : NULL, rl->data);
    free(rl->state_dir);
    free(rl);
}

void checkpoint_release(struct manager *m, struct jobs *jobs, struct sandbox *sb,
                        sandbox_ready_fn cb, void *data)
{
    struct release *rl = sbx_xcalloc(1, sizeof(*rl));
    rl->m = m;
    snprintf(rl->id, sizeof(rl->id), "%s", sb->rec.id);
    rl->state_dir = sbx_xstrdup(sb->state_dir);
    rl->cb = cb;
    rl->data = data;
    jobs_submit(jobs, release_run, release_done, rl);
}

int checkpoint_freeze_workspace(const struct manager *m, const struct sandbox *sb)
{
    if (!m->ws_template)
        return -1;
    int fd = wsimage_freeze(sb->workspace);
    if (fd < 0)
        log_warn("sandbox %s: freezing the workspace: %s", sb->rec.id, strerror(-fd));
    return fd;
}
