/* A sandbox's machine: the runtime instance (runsc behind its shim) and the agent channel
 * on it. Launching cold or from an image, the agent's HELLO (which measures whether a
 * restore brought the memory back), a channel that closes, the cold start when an image
 * is unusable, and the v1 backend's machine per op. */
#include "lifecycle.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/sbxuser.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../billing/billing.h"
#include "../volumes/volumes.h"
#include "channel.h"
#include "template.h"

static void on_cold_poll(struct loop *l, void *data);
static void on_restart_refused(struct loop *l, void *data);

static void on_paused_waiters(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->op_timer = NULL;
    if (!sb->paused || sb->restoring)
        return;
    struct sbx_err err = {0};
    sandbox_paused_error(sb, &err);
    sandbox_notify_waiters(sb, &err);
}

void sandbox_when_ready(struct sandbox *sb, sandbox_ready_fn cb, void *data)
{
    if (sb->ready) {
        cb(sb, NULL, data);
        return;
    }
    /* A failed sandbox starts again for whoever needs it; a refusal (its user is at
     * the running limit) is answered on the next turn, as callers expect. */
    if (sb->failed) {
        sb->restart_err = (struct sbx_err){0};
        if (manager_restart(sb->mgr, sb, cb, data, &sb->restart_err) == 0)
            return;
        sandbox_add_waiter(sb, cb, data);
        if (!sb->op_timer)
            sb->op_timer = loop_timer_add(sb->mgr->loop, 0, on_restart_refused, sb);
        return;
    }
    sandbox_add_waiter(sb, cb, data);
    /* A paused sandbox will not become ready by itself. Answered on the next turn:
     * callers expect their callback after they have returned. */
    if (sb->paused && !sb->restoring && !sb->op_timer)
        sb->op_timer = loop_timer_add(sb->mgr->loop, 0, on_paused_waiters, sb);
    /* v1: each op gets a fresh machine; a spent one is replaced once it has stopped. */
    if (sandbox_is_v1(sb) && !sb->chan && !sb->v1_starting && !sb->machine_timer && !sb->ended)
        sandbox_v1_start(sb);
}

/* A sandbox that has run before (its agent said HELLO once: it has a boot id) keeps its
 * workspace whatever happens to its machine; a new one that never started goes, and so
 * does a pool member (nobody's) and a v1 one (its machines are per op, handled apart). */
static bool keep_on_failure(const struct sandbox *sb)
{
    return sb->boot_id[0] && !sandbox_is_pooled(sb) && !sandbox_is_v1(sb);
}

static void start_failed(struct sandbox *sb, const char *reason, const struct sbx_err *err)
{
    if (keep_on_failure(sb)) {
        sandbox_machine_lost(sb, reason, err);
        return;
    }
    struct sbx_err derr = {0};
    (void)sandbox_destroy(sb->mgr, sb, reason, err, NULL, NULL, &derr);
}

static void on_lost_channel_free(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->machine_timer = NULL;
    if (sb->failed) {
        channel_free(sb->chan);
        sb->chan = NULL;
    }
}

void sandbox_machine_lost(struct sandbox *sb, const char *reason, const struct sbx_err *why)
{
    struct manager *m = sb->mgr;
    if (sb->ended)
        return;
    if (!keep_on_failure(sb)) {
        struct sbx_err derr = {0};
        (void)sandbox_destroy(m, sb, reason, why, NULL, NULL, &derr);
        return;
    }
    log_warn("sandbox %s: machine lost (%s): kept as failed with its workspace", sb->rec.id,
             reason);
    sb->failed = true;
    sb->ready = false;
    sb->restoring = false;
    sandbox_stop_start_watch(sb);
    sandbox_stop_ckpt_watch(sb);
    if (sb->ready_timer) {
        loop_timer_cancel(m->loop, sb->ready_timer);
        sb->ready_timer = NULL;
    }
    /* We may be inside the channel's own callback: it goes on the next turn. */
    if (sb->chan && !sb->machine_timer)
        sb->machine_timer = loop_timer_add(m->loop, 0, on_lost_channel_free, sb);
    /* What is left of the machine stops; no remove dir: the workspace stays. */
    struct sbx_err err = {0};
    if (rt_destroy(&m->rt, sb->rec.id, sb->state_dir, NULL, sandbox_provider_cleanup(sb),
                   &err) < 0)
        log_error("sandbox %s: stopping what is left of its machine: %s", sb->rec.id, err.msg);
    billing_sandbox_state(&sb->rec, SANDBOX_FAILED);
    if (store_sandbox_set_failed(m->store, sb->rec.id, reason, &err) < 0)
        log_error("sandbox %s: %s", sb->rec.id, err.msg);
    snprintf(sb->rec.status, sizeof(sb->rec.status), "%s", SANDBOX_FAILED);
    snprintf(sb->rec.end_reason, sizeof(sb->rec.end_reason), "%s", reason);
    if (why) /* not a restart someone asked for */
        audit_record(m->store, NULL, sb->rec.user, NULL, "sandbox.failed", sb->rec.id, reason,
                     NULL);
    struct sbx_err gone = {0};
    sbx_err_set(&gone, ECONNRESET, "sandbox_not_running",
                "sandbox %s stopped (%s%s%s): it is kept as failed with its files; the next "
                "exec or POST /v1/sandboxes/%s/restart starts it again",
                sb->rec.id, reason, why ? ": " : "", why ? why->msg : "", sb->rec.id);
    if (!strncmp(reason, "start_", 6)) /* a restart that could not start */
        snprintf(gone.code, sizeof(gone.code), "sandbox_start_failed");
    sandbox_notify_waiters(sb, &gone);
    if (sb->op_cb)
        sandbox_op_finish(sb, &gone);
}

/* --- restart: a failed (or running) sandbox starts cold from its workspace ---------- */

static void on_restart_refused(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->op_timer = NULL;
    if (!sb->failed)
        return;
    struct sbx_err err = sb->restart_err;
    sandbox_notify_waiters(sb, &err);
}

int manager_restart(struct manager *m, struct sandbox *sb, sandbox_ready_fn cb, void *data,
                    struct sbx_err *err)
{
    if (sandbox_is_v1(sb))
        return sbx_err_set(err, EINVAL, "not_supported_on_v1",
                           "a v1 sandbox gets a fresh machine for every operation: there is "
                           "nothing to restart");
    if (sb->paused || sb->pausing || sb->held || sb->restoring || (!sb->failed && !sb->ready)) {
        if (sb->paused)
            sandbox_paused_error(sb, err);
        else
            sbx_err_set(err, EBUSY, "sandbox_busy",
                        "sandbox %s is starting, pausing or "
                        "restoring: try again when that is done",
                        sb->rec.id);
        return sbx_err_ret(err);
    }
    int r = manager_running_room(m, sb, "restarting", err);
    if (r < 0)
        return r;
    if (!sb->failed)
        sandbox_machine_lost(sb, "restarted", NULL);
    if (sb->machine_timer) { /* the old channel goes now */
        loop_timer_cancel(m->loop, sb->machine_timer);
        sb->machine_timer = NULL;
    }
    channel_free(sb->chan);
    sb->chan = NULL;
    log_info("sandbox %s: restarting cold from its workspace", sb->rec.id);
    struct sbx_err serr = {0};
    if (store_sandbox_set_status(m->store, sb->rec.id, SANDBOX_CREATING, NULL, 0, &serr) < 0)
        log_error("sandbox %s: %s", sb->rec.id, serr.msg);
    snprintf(sb->rec.status, sizeof(sb->rec.status), "%s", SANDBOX_CREATING);
    sb->failed = false;
    sb->restarted = true;
    sb->restoring = true; /* its HELLO measures restored (false: a new boot id) */
    sb->cold_tried = true;
    sb->expect_boot[0] = '\0';
    sb->op_t0 = sbx_now_ms();
    sandbox_add_waiter(sb, cb, data);
    sb->op_deadline = sbx_now_ms() + SANDBOX_SHIM_GONE_MS;
    if (sb->op_timer)
        loop_timer_cancel(m->loop, sb->op_timer);
    sb->op_timer = loop_timer_add(m->loop, 0, on_cold_poll, sb);
    return 0;
}

/* The sandbox is told it has memory_mb (gVisor's MemTotal; the agent's HELLO), and the
 * agent's watcher kills inside before that is used up. The host's cgroup is raised above
 * it so that it stays the host's backstop and never ends the machine first: it also counts
 * gVisor's own memory, what a burst allocates before the watcher acts, and memory gVisor
 * has freed but not yet given back to the host (asynchronously: a second hog right after
 * the first can find the first one's pages still charged). Not for local: no watcher. */
static void memory_headroom(struct sandbox *sb)
{
    const char *rt = sb->rec.runtime[0] ? sb->rec.runtime : "gvisor";
    if (!strcmp(rt, "local") || sb->rec.memory_mb <= 0)
        return;
    uint64_t limit = (uint64_t)sb->rec.memory_mb << 20;
    uint64_t extra = limit * SANDBOX_MEMORY_HEADROOM_PERCENT / 100 + SANDBOX_MEMORY_HEADROOM_MIN;
    struct sbx_err err = {0};
    if (rt_cgroup_memory_set(&sb->mgr->rt, sb->rec.id, limit + extra, &err) < 0)
        log_warn("sandbox %s: no memory headroom for the host's cgroup: %s", sb->rec.id, err.msg);
}

int manager_usage(const struct sandbox *sb, struct sandbox_usage *out, struct sbx_err *err)
{
    *out = (struct sandbox_usage){0};
    if (sb->paused || !rt_alive(sb->state_dir))
        return sbx_err_set(err, ENOENT, "not_found", "sandbox %s has no running machine",
                           sb->rec.id);
    struct rt_usage u;
    int r = rt_cgroup_usage(&sb->mgr->rt, sb->rec.id, &u, err);
    if (r < 0)
        return r;
    out->memory_bytes = u.memory_bytes;
    out->cpu_usec = u.cpu_usec;
    _cleanup_free_ char *pidfile = sbx_xasprintf("%s/sandbox.pid", sb->state_dir);
    struct stat st;
    long long now = sbx_wall_ms();
    long long since = stat(pidfile, &st) == 0
                          ? (long long)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000
                          : sb->rec.created_at * 1000;
    out->running_ms = now > since ? now - since : 0;
    struct statvfs vfs;
    if (statvfs(sb->workspace, &vfs) < 0)
        return sbx_err_sys(err, errno, "statvfs %s", sb->workspace);
    out->disk_total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
    out->disk_used = (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
    return 0;
}

static void on_hello(struct channel *c, json_t *hello, void *data)
{
    struct sandbox *sb = data;
    if (sb->ended)
        return;
    const char *role = json_string_value(json_object_get(hello, "role"));
    if (!role || strcmp(role, "agent"))
        return;
    if (sb->ready_timer) {
        loop_timer_cancel(sb->mgr->loop, sb->ready_timer);
        sb->ready_timer = NULL;
    }
    const char *boot = json_string_value(json_object_get(hello, "boot_id"));
    if (sb->restoring) {
        /* Measured, never assumed: only the agent process that was checkpointed knows
         * its boot id; a cold start makes a new one. */
        sb->restoring = false;
        sb->restored = boot && sb->expect_boot[0] && !strcmp(boot, sb->expect_boot);
        sb->ready_ms = sbx_now_ms() - sb->op_t0;
        log_info("sandbox %s: back in %lld ms (%s)", sb->rec.id, sb->ready_ms,
                 sb->restored ? "restored" : "cold start");
        if (sb->image_dir && sb->drop_image)
            (void)sbx_rm_rf(sb->image_dir); /* a resume's image is spent */
        free(sb->image_dir);
        sb->image_dir = NULL;
    }
    if (boot && strlen(boot) < sizeof(sb->boot_id) && strcmp(boot, sb->boot_id)) {
        snprintf(sb->boot_id, sizeof(sb->boot_id), "%s", boot);
        struct sbx_err err = {0};
        if (store_meta_set(sb->mgr->store, sb->rec.id, STORE_META_BOOT_ID, boot, &err) < 0)
            log_error("sandbox %s: %s", sb->rec.id, err.msg);
    }
    memory_headroom(sb);
    if (strcmp(sb->rec.status, SANDBOX_RUNNING)) {
        struct sbx_err err = {0};
        billing_sandbox_state(&sb->rec, SANDBOX_RUNNING);
        if (store_sandbox_set_status(sb->mgr->store, sb->rec.id, SANDBOX_RUNNING, NULL, 0, &err) <
            0)
            log_error("sandbox %s: %s", sb->rec.id, err.msg);
        snprintf(sb->rec.status, sizeof(sb->rec.status), "%s", SANDBOX_RUNNING);
    }
    if (!sb->ready)
        log_info("sandbox %s: agent ready", sb->rec.id);
    sb->v1_starting = false;
    sb->ready = true;
    sandbox_idle_arm(sb);
    sandbox_notify_waiters(sb, NULL);
    if (sb->expire_when_ready && !sb->ended && !sb->ttl_timer) {
        sb->expire_when_ready = false;
        sandbox_arm_ttl(sb->mgr, sb); /* past its expiry: fires on the next turn */
    }
}

static void v1_stop(struct loop *l, void *data);

/* idle_ttl_seconds passed with no stream open to the agent (no command, terminal, file
 * transfer through it, egress connection): the container stops. The sandbox is kept as
 * failed with end_reason "idle" and its workspace, as after any lost machine, so the
 * next exec (or a restart) starts it cold again. */
static void on_idle_ttl(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->idle_timer = NULL;
    if (sb->ended || sb->failed || !sb->ready || !sb->chan || channel_stream_count(sb->chan))
        return; /* busy again: the next idle moment re-arms it */
    long long ttl = json_integer_value(json_object_get(sb->docker_doc, "idle_ttl_seconds"));
    log_info("sandbox %s: idle for %lld s: stopping its container", sb->rec.id, ttl);
    struct sbx_err why = {0};
    sbx_err_set(&why, ETIMEDOUT, "sandbox_idle", "no activity for %lld s (idle_ttl_seconds)",
                ttl);
    sandbox_machine_lost(sb, "idle", &why);
}

void sandbox_idle_arm(struct sandbox *sb)
{
    long long ttl = json_integer_value(json_object_get(sb->docker_doc, "idle_ttl_seconds"));
    if (ttl <= 0 || sb->ended)
        return;
    if (sb->idle_timer)
        loop_timer_cancel(sb->mgr->loop, sb->idle_timer);
    sb->idle_timer = loop_timer_add(sb->mgr->loop, ttl * 1000, on_idle_ttl, sb);
}

static void on_channel_idle(struct channel *c, void *data)
{
    struct sandbox *sb = data;
    sandbox_idle_arm(sb);
    if (!sandbox_is_v1(sb) || sb->ended || sb->machine_timer)
        return;
    /* The op is over: this machine is spent. Stopped on the next turn, outside the
     * channel's own callback. */
    sb->ready = false;
    sb->machine_timer = loop_timer_add(sb->mgr->loop, 0, v1_stop, sb);
}

static void on_channel_closed(struct channel *c, const struct sbx_err *why, void *data)
{
    struct sandbox *sb = data;
    /* A failed sandbox's machine was stopped on purpose (its channel goes on the next
     * turn): its close, when it comes first, changes nothing, the reason included. */
    if (sb->ended || sb->failed)
        return;
    if (sb->pausing) {
        /* The checkpoint stops the container: expected. Its outcome decides. */
        sb->chan_lost = true;
        return;
    }
    if (sandbox_is_v1(sb)) {
        /* A v1 machine ended under its op; the sandbox is its workspace and stays. */
        log_warn("sandbox %s: v1 machine gone: %s", sb->rec.id, why->msg);
        on_channel_idle(c, sb);
        return;
    }
    log_warn("sandbox %s: channel closed: %s", sb->rec.id, why->msg);
    struct sbx_err err = {0};
    sbx_err_set(&err, ECONNRESET, "sandbox_not_running", "sandbox %s stopped: %s", sb->rec.id,
                why->msg);
    sandbox_machine_lost(sb, rt_alive(sb->state_dir) ? "channel_lost" : "runtime_exited", &err);
}

static int on_agent_open(struct channel *c, struct chan_stream *st, json_t *req,
                         const struct chan_stream_ops **ops, void **sdata, void *data,
                         struct sbx_err *err)
{
    struct sandbox *sb = data;
    if (sb->ended || !sb->mgr->stream_open)
        return sbx_err_set(err, EPERM, "unknown_op", "this daemon accepts no agent streams");
    return sb->mgr->stream_open(sb, st, req, ops, sdata, sb->mgr->stream_open_data, err);
}

static const struct channel_ops chan_ops = {
    .on_hello = on_hello,
    .on_closed = on_channel_closed,
    .on_idle = on_channel_idle,
    .on_open = on_agent_open,
};

static void on_ready_timeout(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->ready_timer = NULL;
    log_error("sandbox %s: agent not ready after %d ms", sb->rec.id, SANDBOX_READY_TIMEOUT_MS);
    struct sbx_err err = {0};
    sbx_err_set(&err, ETIMEDOUT, "sandbox_start_failed", "sandbox %s: agent not ready after %d ms",
                sb->rec.id, SANDBOX_READY_TIMEOUT_MS);
    start_failed(sb, "start_timeout", &err);
}

int sandbox_attach(struct manager *m, struct sandbox *sb, struct sbx_err *err)
{
    int fd;
    int r = rt_connect(sb->state_dir, &fd, err);
    if (r < 0)
        return r;
    /* The agent's memory watcher kills inside before the host's cgroup would. */
    json_t *hello =
        json_pack("{s:I}", "memory_bytes", (json_int_t)((uint64_t)sb->rec.memory_mb << 20));
    r = channel_new(m->loop, fd, &chan_ops, sb, hello, &sb->chan, err);
    json_decref(hello);
    if (r < 0)
        return r;
    sb->ready = false;
    if (!sb->ready_timer)
        sb->ready_timer = loop_timer_add(m->loop, SANDBOX_READY_TIMEOUT_MS, on_ready_timeout, sb);
    return 0;
}

static void on_start_news(struct loop *l, int fd, uint32_t events, void *data)
{
    struct sandbox *sb = data;
    struct sbx_err err = {0};
    int r = rt_start_read(sb->rec.id, sb->state_dir, sb->start_fd, &err);
    if (r == -EAGAIN)
        return;
    sandbox_stop_start_watch(sb);
    if (r == 0)
        r = sandbox_attach(sb->mgr, sb, &err);
    if (r < 0 && sb->restoring && !sb->cold_tried) {
        sandbox_cold_start(sb, &err);
        return;
    }
    if (r < 0 && sandbox_is_v1(sb)) {
        log_error("sandbox %s: v1 machine: %s", sb->rec.id, err.msg);
        sb->v1_starting = false;
        snprintf(err.code, sizeof(err.code), "sandbox_start_failed");
        sandbox_notify_waiters(sb, &err);
        return;
    }
    if (r < 0) {
        log_error("sandbox %s: %s", sb->rec.id, err.msg);
        start_failed(sb, "start_failed", &err);
    }
}

/* The CFS quota to give: none when the limit covers every core of the host. Such a quota
 * caps nothing the sandbox could use, and costs: the kernel throttles a cgroup whose threads
 * burst past it within one period, which gVisor's sentry and systrap's spinning threads do
 * beside the work (bench_workload.py's job ran x1.63 slower than a bare runsc container
 * under a quota of both cores, x1.0 without: docs/performance.md). */
static uint64_t cpu_quota_millicores(const struct sbxd_config *cfg, long long millicores)
{
    if (millicores <= 0 || (cfg->host_millicores > 0 && millicores >= cfg->host_millicores))
        return 0;
    return (uint64_t)millicores;
}

static void fill_spec(const struct manager *m, const struct sandbox *sb, const char *rootfs,
                      struct rt_spec *spec)
{
    *spec = (struct rt_spec){
        .id = sb->rec.id,
        .rootfs = rootfs,
        .state_dir = sb->state_dir,
        .workspace = sb->workspace,
        .memory_bytes = (uint64_t)sb->rec.memory_mb << 20,
        .pids_max = (uint64_t)sb->rec.pids,
        .cpu_millicores = cpu_quota_millicores(m->cfg, sb->rec.cpu_millicores),
        .tmp_bytes = (uint64_t)m->cfg->tmp_mb << 20,
        .hostname = "sandbox",
        .runtime = sb->rec.runtime[0] ? sb->rec.runtime : NULL,
        .template_name = sb->rec.template_name,
        /* Unset for a docker sandbox of no configuration: its first docker.json holds. */
        .docker = sb->docker_doc ? &sb->docker : NULL,
        .provider = sb->provider_doc ? &sb->provider : NULL,
    };
}

/* Start sb from image (cold when NULL), watched as a create is. */
int sandbox_launch(struct manager *m, struct sandbox *sb, const char *image, bool forked,
                   struct sbx_err *err)
{
    /* A provider sandbox's key, opened again from its configuration when sbxd restarted
     * since its create (its new shim gets it on stdin, docs/providers.md). */
    int r = sandbox_provider_open(sb, err);
    if (r < 0)
        return r;
    struct template_info tpl;
    r = template_resolve(m->cfg->template_cache, sb->rec.template_name, &tpl, err);
    if (r < 0)
        return r;
    struct rt_spec spec;
    fill_spec(m, sb, sb->build_rootfs ? sb->build_rootfs : tpl.rootfs, &spec);
    spec.rootfs_writable = sb->build_rootfs != NULL;
    /* Its volumes, at every start: create, resume, fork, a v1 op, a restart. */
    struct volumes_mountset vols;
    if ((r = volumes_mountset_load(m->volumes, sb->rec.id, &vols, err)) < 0) {
        template_info_clear(&tpl);
        return r;
    }
    spec.mounts = vols.m;
    spec.nmounts = vols.n;
    /* The workspace is the user's (docs/security.md), also one made before that was so;
     * a daemon that is not root cannot give it away and runs commands as itself anyway. */
    (void)lchown(sb->workspace, SBX_USER_UID, SBX_USER_GID);
    r = image ? rt_restore(&m->rt, &spec, image, forked, &sb->start_fd, err)
              : rt_start(&m->rt, &spec, &sb->start_fd, err);
    template_info_clear(&tpl);
    volumes_mountset_clear(&vols);
    if (r < 0)
        return r;
    r = loop_watch_add(m->loop, sb->start_fd, EPOLLIN, on_start_news, sb, &sb->start_watch);
    if (r < 0) {
        close(sb->start_fd);
        sb->start_fd = -1;
        return sbx_err_sys(err, -r, "watching the sandbox start");
    }
    if (!sb->ready_timer)
        sb->ready_timer = loop_timer_add(m->loop, SANDBOX_READY_TIMEOUT_MS, on_ready_timeout, sb);
    return 0;
}

static bool container_known(struct manager *m, const char *id)
{
    char **ids = NULL;
    struct sbx_err err = {0};
    if (rt_list(&m->rt, &ids, &err) < 0)
        return false;
    bool found = false;
    for (char **p = ids; *p && !found; p++)
        found = !strcmp(*p, id);
    rt_strv_free(ids);
    return found;
}

static void on_cold_poll(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->op_timer = NULL;
    /* The failed restore's shim deletes its container; the same id must be free. */
    if ((rt_busy(sb->state_dir) || container_known(sb->mgr, sb->rec.id)) &&
        sbx_now_ms() < sb->op_deadline) {
        sb->op_timer = loop_timer_add(l, 20, on_cold_poll, sb);
        return;
    }
    struct sbx_err err = {0};
    if (sandbox_launch(sb->mgr, sb, NULL, false, &err) < 0) {
        log_error("sandbox %s: cold start: %s", sb->rec.id, err.msg);
        start_failed(sb, "start_failed", &err);
    }
}

/* The image could not be used: start cold from the saved workspace (restored: false). */
void sandbox_cold_start(struct sandbox *sb, const struct sbx_err *why)
{
    log_warn("sandbox %s: restore failed (%s); starting cold from the workspace", sb->rec.id,
             why->msg);
    sb->cold_tried = true;
    sb->op_deadline = sbx_now_ms() + SANDBOX_SHIM_GONE_MS;
    if (sb->op_timer)
        loop_timer_cancel(sb->mgr->loop, sb->op_timer);
    sb->op_timer = loop_timer_add(sb->mgr->loop, 0, on_cold_poll, sb);
}

/* --- the v1 backend: a fresh machine for each op over the persistent workspace ------ */

static void v1_start_poll(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->machine_timer = NULL;
    if (!sb->waiters) { /* whoever asked went away */
        sb->v1_starting = false;
        return;
    }
    /* The last machine's shim may still be deleting the container (same id). */
    if ((rt_busy(sb->state_dir) || container_known(sb->mgr, sb->rec.id)) &&
        sbx_now_ms() < sb->op_deadline) {
        sb->machine_timer = loop_timer_add(l, 5, v1_start_poll, sb);
        return;
    }
    struct sbx_err err = {0};
    if (sandbox_launch(sb->mgr, sb, NULL, false, &err) < 0) {
        log_error("sandbox %s: v1 machine: %s", sb->rec.id, err.msg);
        sb->v1_starting = false;
        snprintf(err.code, sizeof(err.code), "sandbox_start_failed");
        sandbox_notify_waiters(sb, &err);
    }
}

void sandbox_v1_start(struct sandbox *sb)
{
    sb->v1_starting = true;
    sb->op_deadline = sbx_now_ms() + SANDBOX_SHIM_GONE_MS;
    sb->machine_timer = loop_timer_add(sb->mgr->loop, 0, v1_start_poll, sb);
}

static void v1_stop(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->machine_timer = NULL;
    if (sb->chan && channel_stream_count(sb->chan) > 0)
        return; /* an op opened a stream since: it stops when that one ends */
    channel_free(sb->chan);
    sb->chan = NULL;
    sb->ready = false;
    if (sb->ready_timer) {
        loop_timer_cancel(l, sb->ready_timer);
        sb->ready_timer = NULL;
    }
    /* No remove dir: the shim kills and deletes the container and leaves the workspace. */
    struct sbx_err err = {0};
    if (rt_destroy(&sb->mgr->rt, sb->rec.id, sb->state_dir, NULL, NULL, &err) < 0)
        log_error("sandbox %s: stopping the v1 machine: %s", sb->rec.id, err.msg);
    if (sb->waiters && !sb->ended)
        sandbox_v1_start(sb);
}
