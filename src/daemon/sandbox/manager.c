#include "manager.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "agentcall.h"
#include "../audit/audit.h"
#include "channel.h"
#include "template.h"
#include "wsimage.h"

struct manager {
    const struct sbxd_config *cfg;
    struct loop *loop;
    struct store *store;
    struct rt_config rt;
    char *runsc_root;
    char *cgroup_parent;
    char *ws_template; /* the formatted workspace image to clone; NULL without a quota */
    struct sandbox *sandboxes; /* live ones, newest first */
    sandbox_stream_open_fn stream_open; /* agent-opened streams (egress) */
    void *stream_open_data;
};

static void stop_start_watch(struct sandbox *sb)
{
    if (sb->start_fd < 0)
        return;
    loop_watch_del(sb->mgr->loop, sb->start_watch);
    sb->start_watch = NULL;
    close(sb->start_fd);
    sb->start_fd = -1;
}

static void stop_ckpt_watch(struct sandbox *sb)
{
    if (sb->ckpt_fd >= 0) {
        loop_watch_del(sb->mgr->loop, sb->ckpt_watch);
        sb->ckpt_watch = NULL;
        close(sb->ckpt_fd);
        sb->ckpt_fd = -1;
    }
    if (sb->op_timer) {
        loop_timer_cancel(sb->mgr->loop, sb->op_timer);
        sb->op_timer = NULL;
    }
    if (sb->machine_timer) {
        loop_timer_cancel(sb->mgr->loop, sb->machine_timer);
        sb->machine_timer = NULL;
    }
}

static void sandbox_free(struct sandbox *sb)
{
    if (!sb)
        return;
    stop_start_watch(sb);
    stop_ckpt_watch(sb);
    free(sb->image_dir);
    channel_free(sb->chan);
    while (sb->waiters) {
        struct sandbox_waiter *w = sb->waiters;
        sb->waiters = w->next;
        free(w);
    }
    store_sandbox_clear(&sb->rec);
    free(sb->egress);
    free(sb->dir);
    free(sb->state_dir);
    free(sb->workspace);
    free(sb);
}

static struct sandbox *sandbox_alloc(struct manager *m, const char *id)
{
    struct sandbox *sb = sbx_xcalloc(1, sizeof(*sb));
    sb->mgr = m;
    sb->start_fd = -1;
    sb->ckpt_fd = -1;
    sb->dir = sbx_xasprintf("%s/sandboxes/%s", m->cfg->data_dir, id);
    sb->state_dir = sbx_xasprintf("%s/state", sb->dir);
    sb->workspace = sbx_xasprintf("%s/workspace", sb->dir);
    return sb;
}

int manager_new(const struct sbxd_config *cfg, struct loop *l, struct store *st,
                struct manager **out, struct sbx_err *err)
{
    struct manager *m = sbx_xcalloc(1, sizeof(*m));
    m->cfg = cfg;
    m->loop = l;
    m->store = st;
    m->runsc_root = sbx_xasprintf("%s/runsc", cfg->data_dir);
    m->cgroup_parent = sbx_xstrdup("sbx");
    m->rt = (struct rt_config){
        .runsc_path = cfg->runsc,
        .runsc_root = m->runsc_root,
        .shim_path = cfg->shim_path,
        .agent_path = cfg->agent_path,
        .cgroup_parent = m->cgroup_parent,
    };
    int r = sbx_mkdir_p(m->runsc_root, 0700);
    if (r == 0) {
        _cleanup_free_ char *sbdir = sbx_xasprintf("%s/sandboxes", cfg->data_dir);
        r = sbx_mkdir_p(sbdir, 0700);
    }
    if (r < 0) {
        free(m->runsc_root);
        free(m->cgroup_parent);
        free(m);
        return sbx_err_sys(err, -r, "creating the data dir layout");
    }
    if (cfg->workspace_mb > 0 &&
        (r = wsimage_prepare(cfg->data_dir, cfg->workspace_mb, &m->ws_template, err)) < 0) {
        free(m->runsc_root);
        free(m->cgroup_parent);
        free(m);
        return sbx_err_wrap(err, "preparing the workspace image (SBX_WORKSPACE_MB=0 disables "
                                 "the quota)");
    }
    *out = m;
    return 0;
}

struct loop *manager_loop(const struct manager *m)
{
    return m->loop;
}

struct store *manager_store(const struct manager *m)
{
    return m->store;
}

void manager_set_stream_open(struct manager *m, sandbox_stream_open_fn fn, void *data)
{
    m->stream_open = fn;
    m->stream_open_data = data;
}

void manager_free(struct manager *m)
{
    if (!m)
        return;
    /* Sandboxes keep running without us; only our handles go. */
    while (m->sandboxes) {
        struct sandbox *sb = m->sandboxes;
        m->sandboxes = sb->next;
        if (sb->ttl_timer)
            loop_timer_cancel(m->loop, sb->ttl_timer);
        if (sb->ready_timer)
            loop_timer_cancel(m->loop, sb->ready_timer);
        sandbox_free(sb);
    }
    free(m->runsc_root);
    free(m->cgroup_parent);
    free(m->ws_template);
    free(m);
}

static int destroy(struct manager *m, struct sandbox *sb, const char *reason,
                   const struct sbx_err *cause, const struct auth_identity *who,
                   const char *request_id, struct sbx_err *err);

/* --- readiness ------------------------------------------------------------------ */

static void notify_waiters(struct sandbox *sb, const struct sbx_err *err)
{
    struct sandbox_waiter *w = sb->waiters;
    sb->waiters = NULL;
    while (w) {
        struct sandbox_waiter *n = w->next;
        w->cb(sb, err, w->data);
        free(w);
        w = n;
    }
}

static void paused_error(const struct sandbox *sb, struct sbx_err *err)
{
    sbx_err_set(err, ECONNRESET, "sandbox_not_running",
                "sandbox %s is paused: resume it first", sb->rec.id);
}

static void on_paused_waiters(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->op_timer = NULL;
    if (!sb->paused || sb->restoring)
        return;
    struct sbx_err err = {0};
    paused_error(sb, &err);
    notify_waiters(sb, &err);
}

static void add_waiter(struct sandbox *sb, sandbox_ready_fn cb, void *data)
{
    struct sandbox_waiter *w = sbx_xcalloc(1, sizeof(*w));
    w->cb = cb;
    w->data = data;
    struct sandbox_waiter **p = &sb->waiters;
    while (*p)
        p = &(*p)->next;
    *p = w;
}

static bool is_v1(const struct sandbox *sb)
{
    return !strcmp(sb->rec.backend, "v1");
}

static void v1_start(struct sandbox *sb);

void sandbox_when_ready(struct sandbox *sb, sandbox_ready_fn cb, void *data)
{
    if (sb->ready) {
        cb(sb, NULL, data);
        return;
    }
    add_waiter(sb, cb, data);
    /* A paused sandbox will not become ready by itself. Answered on the next turn:
     * callers expect their callback after they have returned. */
    if (sb->paused && !sb->restoring && !sb->op_timer)
        sb->op_timer = loop_timer_add(sb->mgr->loop, 0, on_paused_waiters, sb);
    /* v1: each op gets a fresh machine; a spent one is replaced once it has stopped. */
    if (is_v1(sb) && !sb->chan && !sb->v1_starting && !sb->machine_timer && !sb->ended)
        v1_start(sb);
}

void sandbox_drop_waiter(struct sandbox *sb, void *data)
{
    for (struct sandbox_waiter **p = &sb->waiters; *p; p = &(*p)->next) {
        if ((*p)->data == data) {
            struct sandbox_waiter *w = *p;
            *p = w->next;
            free(w);
            return;
        }
    }
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
    if (strcmp(sb->rec.status, SANDBOX_RUNNING)) {
        struct sbx_err err = {0};
        if (store_sandbox_set_status(sb->mgr->store, sb->rec.id, SANDBOX_RUNNING, NULL, 0, &err) <
            0)
            log_error("sandbox %s: %s", sb->rec.id, err.msg);
        snprintf(sb->rec.status, sizeof(sb->rec.status), "%s", SANDBOX_RUNNING);
    }
    if (!sb->ready)
        log_info("sandbox %s: agent ready", sb->rec.id);
    sb->v1_starting = false;
    sb->ready = true;
    notify_waiters(sb, NULL);
}

static void v1_stop(struct loop *l, void *data);

static void on_channel_idle(struct channel *c, void *data)
{
    struct sandbox *sb = data;
    if (!is_v1(sb) || sb->ended || sb->machine_timer)
        return;
    /* The op is over: this machine is spent. Stopped on the next turn, outside the
     * channel's own callback. */
    sb->ready = false;
    sb->machine_timer = loop_timer_add(sb->mgr->loop, 0, v1_stop, sb);
}

static void on_channel_closed(struct channel *c, const struct sbx_err *why, void *data)
{
    struct sandbox *sb = data;
    if (sb->ended)
        return;
    if (sb->pausing) {
        /* The checkpoint stops the container: expected. Its outcome decides. */
        sb->chan_lost = true;
        return;
    }
    if (is_v1(sb)) {
        /* A v1 machine ended under its op; the sandbox is its workspace and stays. */
        log_warn("sandbox %s: v1 machine gone: %s", sb->rec.id, why->msg);
        on_channel_idle(c, sb);
        return;
    }
    log_warn("sandbox %s: channel closed: %s", sb->rec.id, why->msg);
    struct sbx_err err = {0};
    sbx_err_set(&err, ECONNRESET, "sandbox_not_running", "sandbox %s stopped: %s", sb->rec.id,
                why->msg);
    struct sbx_err derr = {0};
    (void)destroy(sb->mgr, sb, rt_alive(sb->state_dir) ? "channel_lost" : "runtime_exited", &err,
                  NULL, NULL, &derr);
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

/* The policy given at creation: kept with the sandbox and in the store. */
static int egress_init(struct manager *m, struct sandbox *sb, const struct egress_policy *p,
                       struct sbx_err *err)
{
    sb->egress = sbx_xmalloc(sizeof(*sb->egress));
    *sb->egress = *p;
    json_t *j = egress_policy_to_json(p);
    _cleanup_free_ char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return store_egress_policy_set(m->store, sb->rec.id, text ? text : "{\"mode\":\"none\"}",
                                   sbx_wall_ms() / 1000, err);
}

/* After a restart: the stored policy; none when there is none or it no longer parses. */
static void egress_load(struct manager *m, struct sandbox *sb)
{
    sb->egress = sbx_xcalloc(1, sizeof(*sb->egress));
    _cleanup_free_ char *text = NULL;
    struct sbx_err err = {0};
    if (store_egress_policy_get(m->store, sb->rec.id, &text, &err) < 0 || !text)
        return;
    json_t *j = json_loads(text, 0, NULL);
    if (egress_policy_parse(j, sb->egress, &err) < 0) {
        log_warn("sandbox %s: stored egress policy unreadable (%s): none", sb->rec.id, err.msg);
        memset(sb->egress, 0, sizeof(*sb->egress));
    }
    json_decref(j);
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
    (void)manager_destroy(sb->mgr, sb, "start_timeout", &err);
}

static int attach(struct manager *m, struct sandbox *sb, struct sbx_err *err)
{
    int fd;
    int r = rt_connect(sb->state_dir, &fd, err);
    if (r < 0)
        return r;
    r = channel_new(m->loop, fd, &chan_ops, sb, &sb->chan, err);
    if (r < 0)
        return r;
    sb->ready = false;
    if (!sb->ready_timer)
        sb->ready_timer = loop_timer_add(m->loop, SANDBOX_READY_TIMEOUT_MS, on_ready_timeout, sb);
    return 0;
}

static void cold_start(struct sandbox *sb, const struct sbx_err *why);

static void on_start_news(struct loop *l, int fd, uint32_t events, void *data)
{
    struct sandbox *sb = data;
    struct sbx_err err = {0};
    int r = rt_start_read(sb->rec.id, sb->state_dir, sb->start_fd, &err);
    if (r == -EAGAIN)
        return;
    stop_start_watch(sb);
    if (r == 0)
        r = attach(sb->mgr, sb, &err);
    if (r < 0 && sb->restoring && !sb->cold_tried) {
        cold_start(sb, &err);
        return;
    }
    if (r < 0 && is_v1(sb)) {
        log_error("sandbox %s: v1 machine: %s", sb->rec.id, err.msg);
        sb->v1_starting = false;
        snprintf(err.code, sizeof(err.code), "sandbox_start_failed");
        notify_waiters(sb, &err);
        return;
    }
    if (r < 0) {
        log_error("sandbox %s: %s", sb->rec.id, err.msg);
        struct sbx_err derr = {0};
        (void)destroy(sb->mgr, sb, "start_failed", &err, NULL, NULL, &derr);
    }
}

/* --- TTL -------------------------------------------------------------------------- */

static void on_ttl(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->ttl_timer = NULL;
    log_info("sandbox %s: TTL expired", sb->rec.id);
    struct sbx_err err = {0};
    if (manager_destroy(sb->mgr, sb, "expired", &err) < 0)
        log_error("sandbox %s: expiring: %s", sb->rec.id, err.msg);
}

static void arm_ttl(struct manager *m, struct sandbox *sb)
{
    long long ms = sb->rec.expires_at * 1000 - sbx_wall_ms();
    sb->ttl_timer = loop_timer_add(m->loop, ms > 0 ? ms : 0, on_ttl, sb);
}

/* --- create ----------------------------------------------------------------------- */

static void new_sandbox_id(char out[STORE_ID_MAX + 1])
{
    unsigned char raw[10];
    char hex[21];
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        abort();
    sbx_hex(raw, sizeof(raw), hex);
    snprintf(out, STORE_ID_MAX + 1, "sb_%s", hex);
}

static int v2_running(const struct manager *m)
{
    int n = 0;
    for (const struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
        n += !is_v1(sb) && !sb->paused;
    return n;
}

static void on_v1_created(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->op_timer = NULL;
    notify_waiters(sb, NULL); /* only the create's own callback waits yet */
}

/* cp -a of a directory's contents: workspaces without the quota image. */
static int copy_tree(const char *from, const char *to, struct sbx_err *err)
{
    _cleanup_free_ char *src = sbx_xasprintf("%s/.", from);
    char *argv[] = {"cp", "-a", "--reflink=auto", src, (char *)to, NULL};
    extern char **environ;
    pid_t pid;
    int r = posix_spawnp(&pid, "cp", NULL, NULL, argv, environ);
    if (r != 0)
        return sbx_err_sys(err, r, "copying a workspace");
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return sbx_err_sys(err, errno, "copying a workspace");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return sbx_err_set(err, EIO, "internal", "copying a workspace failed (status %d)", st);
    return 0;
}

/* A v1 workspace snapshot ("snap_<hex of its sandbox>_<hex>") of one of the caller's
 * live sandboxes: the path of its image (or directory, without the quota). */
static int snapshot_source(struct manager *m, const struct auth_identity *who, const char *snap,
                           char **out, struct sbx_err *err)
{
    char sid[STORE_ID_MAX + 1];
    size_t n = strlen(snap);
    bool ok = n == 5 + 20 + 1 + 8 && !strncmp(snap, "snap_", 5) && snap[25] == '_';
    for (size_t i = 5; ok && i < n; i++)
        ok = i == 25 || (snap[i] >= '0' && snap[i] <= '9') || (snap[i] >= 'a' && snap[i] <= 'f');
    if (!ok)
        return sbx_err_set(err, ENOENT, "snapshot_not_found", "no snapshot with id %.64s", snap);
    snprintf(sid, sizeof(sid), "sb_%.20s", snap + 5);
    for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next) {
        if (strcmp(sb->rec.id, sid) || strcmp(sb->rec.user, who->user))
            continue;
        char *path = sbx_xasprintf("%s/snapshots/%s/%s", sb->dir, snap,
                                   m->ws_template ? "workspace.img" : "workspace");
        if (access(path, F_OK) == 0) {
            *out = path;
            return 0;
        }
        free(path);
    }
    return sbx_err_set(err, ENOENT, "snapshot_not_found", "no snapshot with id %s", snap);
}

int manager_create(struct manager *m, const struct auth_identity *who,
                   const struct sandbox_params *p, sandbox_ready_fn cb, void *data,
                   struct sandbox **out, struct sbx_err *err)
{
    long long per_user, per_key;
    int r = store_sandbox_count_live(m->store, who->user, who->key_id, &per_user, &per_key, err);
    if (r < 0)
        return r;
    if (per_key >= m->cfg->max_per_key)
        return sbx_err_set(err, EAGAIN, "sandbox_concurrency_limit",
                           "at most %lld running sandboxes per key", m->cfg->max_per_key);
    if (per_user >= m->cfg->max_per_user)
        return sbx_err_set(err, EAGAIN, "sandbox_concurrency_limit",
                           "at most %lld running sandboxes per user", m->cfg->max_per_user);
    bool v1 = p->backend && !strcmp(p->backend, "v1");
    char fallback[sizeof(((struct sandbox *)0)->fallback)] = "";
    if (!v1 && m->cfg->v2_capacity > 0 && v2_running(m) >= m->cfg->v2_capacity) {
        if (p->backend)
            return sbx_err_set(err, EAGAIN, "sandbox_capacity",
                               "this host runs at most %lld v2 sandboxes: retry later or create "
                               "with backend \"v1\"",
                               m->cfg->v2_capacity);
        v1 = true;
        snprintf(fallback, sizeof(fallback), "v2 is at capacity on this host (%lld sandboxes)",
                 m->cfg->v2_capacity);
    }
    _cleanup_free_ char *from = NULL;
    if (p->snapshot_id && (r = snapshot_source(m, who, p->snapshot_id, &from, err)) < 0)
        return r;

    struct template_info tpl;
    r = template_resolve(m->cfg->template_cache, p->template_name, &tpl, err);
    if (r < 0)
        return r;

    char id[STORE_ID_MAX + 1];
    new_sandbox_id(id);
    struct sandbox *sb = sandbox_alloc(m, id);
    struct store_sandbox *rec = &sb->rec;
    long long now = sbx_wall_ms() / 1000;
    snprintf(rec->id, sizeof(rec->id), "%s", id);
    snprintf(rec->user, sizeof(rec->user), "%s", who->user);
    snprintf(rec->key_id, sizeof(rec->key_id), "%s", who->key_id);
    snprintf(rec->status, sizeof(rec->status), "%s", SANDBOX_CREATING);
    snprintf(rec->backend, sizeof(rec->backend), "%s", v1 ? "v1" : "v2");
    snprintf(rec->runtime, sizeof(rec->runtime), "gvisor");
    snprintf(rec->template_name, sizeof(rec->template_name), "%s", tpl.name);
    snprintf(rec->template_digest, sizeof(rec->template_digest), "%s", tpl.digest);
    rec->env_json = json_dumps(p->env, JSON_COMPACT | JSON_SORT_KEYS);
    if (!rec->env_json)
        rec->env_json = sbx_xstrdup("{}");
    rec->ttl_seconds = p->ttl_seconds;
    rec->created_at = now;
    rec->expires_at = now + p->ttl_seconds;
    rec->memory_mb = m->cfg->memory_mb;
    rec->pids = m->cfg->pids_max;
    rec->cpu_millicores = m->cfg->cpu_millicores;
    rec->enable_default_session = p->enable_default_session;

    r = store_sandbox_insert(m->store, rec, err);
    if (r < 0)
        goto fail_nostore;
    if ((r = egress_init(m, sb, &p->egress, err)) < 0)
        goto fail;
    if (fallback[0]) {
        snprintf(sb->fallback, sizeof(sb->fallback), "%s", fallback);
        (void)store_meta_set(m->store, id, STORE_META_FALLBACK, fallback, NULL);
    }

    if ((r = sbx_mkdir_p(sb->state_dir, 0700)) < 0 || (r = sbx_mkdir_p(sb->workspace, 0755)) < 0) {
        sbx_err_sys(err, -r, "creating the sandbox directory");
        goto fail;
    }
    if (m->ws_template) {
        _cleanup_free_ char *image = sbx_xasprintf("%s/workspace.img", sb->dir);
        if ((r = wsimage_mount(from ? from : m->ws_template, image, sb->workspace, err)) < 0)
            goto fail;
    } else if (from && (r = copy_tree(from, sb->workspace, err)) < 0) {
        goto fail;
    }
    if (v1) {
        /* No machine until an op needs one; the sandbox is its workspace. */
        template_info_clear(&tpl);
        if ((r = store_sandbox_set_status(m->store, id, SANDBOX_RUNNING, NULL, 0, err)) < 0)
            goto fail;
        snprintf(rec->status, sizeof(rec->status), "%s", SANDBOX_RUNNING);
        sb->next = m->sandboxes;
        m->sandboxes = sb;
        arm_ttl(m, sb);
        log_info("sandbox %s: v1 for user %s (key %s)%s%s", id, who->user, who->key_id,
                 fallback[0] ? ": " : "", fallback);
        if (cb) {
            add_waiter(sb, cb, data);
            sb->op_timer = loop_timer_add(m->loop, 0, on_v1_created, sb);
        }
        *out = sb;
        return 0;
    }
    struct rt_spec spec = {
        .id = id,
        .rootfs = tpl.rootfs,
        .state_dir = sb->state_dir,
        .workspace = sb->workspace,
        .memory_bytes = (uint64_t)rec->memory_mb << 20,
        .pids_max = (uint64_t)rec->pids,
        .cpu_millicores = (uint64_t)rec->cpu_millicores,
        .tmp_bytes = (uint64_t)m->cfg->tmp_mb << 20,
        .hostname = "sandbox",
    };
    r = rt_start(&m->rt, &spec, &sb->start_fd, err);
    if (r < 0)
        goto fail;
    r = loop_watch_add(m->loop, sb->start_fd, EPOLLIN, on_start_news, sb, &sb->start_watch);
    if (r < 0) {
        sbx_err_sys(err, -r, "watching the sandbox start");
        goto fail;
    }
    sb->ready_timer = loop_timer_add(m->loop, SANDBOX_READY_TIMEOUT_MS, on_ready_timeout, sb);
    template_info_clear(&tpl);
    sb->next = m->sandboxes;
    m->sandboxes = sb;
    arm_ttl(m, sb);
    log_info("sandbox %s: starting for user %s (key %s)", id, who->user, who->key_id);
    if (cb)
        sandbox_when_ready(sb, cb, data);
    *out = sb;
    return 0;

fail:
    (void)store_sandbox_set_status(m->store, id, SANDBOX_FAILED, "start_failed",
                                   sbx_wall_ms() / 1000, NULL);
    {
        struct sbx_err e2 = {0};
        (void)rt_destroy(&m->rt, id, sb->state_dir, sb->dir, &e2);
    }
    snprintf(err->code, sizeof(err->code), "sandbox_start_failed");
fail_nostore:
    template_info_clear(&tpl);
    sandbox_free(sb);
    return r < 0 ? r : -EIO;
}

/* --- memory snapshots: pause, resume, fork (docs/snapshots.md) ----------------------- */

static int launch(struct manager *m, struct sandbox *sb, const char *image, bool forked,
                  struct sbx_err *err);
static bool container_known(struct manager *m, const char *id);

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
    if (launch(sb->mgr, sb, NULL, false, &err) < 0) {
        log_error("sandbox %s: v1 machine: %s", sb->rec.id, err.msg);
        sb->v1_starting = false;
        snprintf(err.code, sizeof(err.code), "sandbox_start_failed");
        notify_waiters(sb, &err);
    }
}

static void v1_start(struct sandbox *sb)
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
    if (rt_destroy(&sb->mgr->rt, sb->rec.id, sb->state_dir, NULL, &err) < 0)
        log_error("sandbox %s: stopping the v1 machine: %s", sb->rec.id, err.msg);
    if (sb->waiters && !sb->ended)
        v1_start(sb);
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
        .cpu_millicores = (uint64_t)sb->rec.cpu_millicores,
        .tmp_bytes = (uint64_t)m->cfg->tmp_mb << 20,
        .hostname = "sandbox",
    };
}

/* Start sb from image (cold when NULL), watched as a create is. */
static int launch(struct manager *m, struct sandbox *sb, const char *image, bool forked,
                  struct sbx_err *err)
{
    struct template_info tpl;
    int r = template_resolve(m->cfg->template_cache, sb->rec.template_name, &tpl, err);
    if (r < 0)
        return r;
    struct rt_spec spec;
    fill_spec(m, sb, tpl.rootfs, &spec);
    r = image ? rt_restore(&m->rt, &spec, image, forked, &sb->start_fd, err)
              : rt_start(&m->rt, &spec, &sb->start_fd, err);
    template_info_clear(&tpl);
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
    if (launch(sb->mgr, sb, NULL, false, &err) < 0) {
        log_error("sandbox %s: cold start: %s", sb->rec.id, err.msg);
        struct sbx_err derr = {0};
        (void)destroy(sb->mgr, sb, "start_failed", &err, NULL, NULL, &derr);
    }
}

/* The image could not be used: start cold from the saved workspace (restored: false). */
static void cold_start(struct sandbox *sb, const struct sbx_err *why)
{
    log_warn("sandbox %s: restore failed (%s); starting cold from the workspace", sb->rec.id,
             why->msg);
    sb->cold_tried = true;
    sb->op_deadline = sbx_now_ms() + SANDBOX_SHIM_GONE_MS;
    if (sb->op_timer)
        loop_timer_cancel(sb->mgr->loop, sb->op_timer);
    sb->op_timer = loop_timer_add(sb->mgr->loop, 0, on_cold_poll, sb);
}

static void op_finish(struct sandbox *sb, const struct sbx_err *err)
{
    sandbox_op_fn cb = sb->op_cb;
    void *data = sb->op_data;
    sb->op_cb = NULL;
    sb->op_data = NULL;
    if (cb)
        cb(sb, err, data);
}

/* Whether sb can be snapshotted now; @verb ("pause", "fork") names the operation in the error. */
static int check_can_snapshot(const struct sandbox *sb, const char *verb, struct sbx_err *err)
{
    if (strcmp(sb->rec.backend, "v2"))
        return sbx_err_set(err, ENOTSUP, "not_supported_on_v1",
                           "sandbox %s runs on v1, which has no memory snapshots: use "
                           "POST /v1/sandboxes/%s/snapshot",
                           sb->rec.id, sb->rec.id);
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

static int start_checkpoint(struct manager *m, struct sandbox *sb, const char *image,
                            loop_fd_cb done, struct sbx_err *err)
{
    (void)sbx_rm_rf(image); /* a leftover of a pause that failed half-way */
    int r = rt_checkpoint(&m->rt, sb->rec.id, sb->state_dir, image, &sb->ckpt_fd, err);
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
    if (agentcall_start(sb, json_pack("{s:s}", "op", "snapshot_resume"), &relisten_ops, NULL,
                        NULL, &err) < 0)
        log_warn("sandbox %s: snapshot_resume: %s", sb->rec.id, err.msg);
}

static void on_prepared(json_t *result, const struct sbx_err *perr, void *data)
{
    struct prepare *p = data;
    struct sandbox *sb = p->sb;
    /* ended: the sandbox went while the agent answered (destroy reported the op). */
    if (!sb->ended) {
        struct sbx_err err = {0};
        if (perr) {
            /* Nothing was parked or checkpointed: the sandbox runs on as it was. */
            err = *perr;
        } else if (start_checkpoint(sb->mgr, sb, p->image, p->done, &err) < 0) {
            log_error("sandbox %s: checkpoint: %s", sb->rec.id, err.msg);
            if (sb->chan)
                agent_relisten(sb);
        }
        if (err.code[0]) {
            sb->pausing = sb->forking = false;
            sb->ready = sb->chan != NULL;
            if (sb->ready)
                notify_waiters(sb, NULL);
            op_finish(sb, &err);
        }
    }
    free(p->image);
    free(p);
}

/* snapshot_prepare on the agent (docs/protocol.md), then the checkpoint. */
static int prepare_checkpoint(struct sandbox *sb, const char *image, loop_fd_cb done,
                              struct sbx_err *err)
{
    struct prepare *p = sbx_xcalloc(1, sizeof(*p));
    p->sb = sb;
    p->image = sbx_xstrdup(image);
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
    if (store_sandbox_set_status(m->store, sb->rec.id, SANDBOX_PAUSED, NULL, 0, &err) < 0 ||
        store_meta_set(m->store, sb->rec.id, STORE_META_PAUSED_AT, at, &err) < 0)
        log_error("sandbox %s: %s", sb->rec.id, err.msg);
    snprintf(sb->rec.status, sizeof(sb->rec.status), "%s", SANDBOX_PAUSED);
    log_info("sandbox %s: paused in %lld ms", sb->rec.id, sbx_now_ms() - sb->op_t0);
    struct sbx_err perr = {0};
    paused_error(sb, &perr);
    notify_waiters(sb, &perr); /* requests that came in while it was pausing */
}

/* The checkpoint stopped the container; its shim is still deleting it. A pause is done
 * now (a resume waits for the shim to be gone); a fork, which restores the parent under
 * the same id right away, waits here (op_cb). */
static void on_stopped(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->op_timer = NULL;
    if (sb->forking && rt_busy(sb->state_dir) && sbx_now_ms() < sb->op_deadline) {
        sb->op_timer = loop_timer_add(l, 5, on_stopped, sb);
        return;
    }
    channel_free(sb->chan);
    sb->chan = NULL;
    sb->pausing = sb->chan_lost = false;
    if (!sb->forking)
        mark_paused(sb);
    sb->forking = false;
    op_finish(sb, NULL);
}

static void on_ckpt(struct loop *l, int fd, uint32_t events, void *data)
{
    struct sandbox *sb = data;
    struct sbx_err err = {0};
    int r = ckpt_outcome(sb, &err);
    if (r == -EAGAIN)
        return;
    if (r == 0) {
        sb->op_deadline = sbx_now_ms() + SANDBOX_SHIM_GONE_MS;
        on_stopped(l, sb);
        return;
    }
    log_error("sandbox %s: checkpoint: %s", sb->rec.id, err.msg);
    sb->pausing = sb->forking = false;
    (void)sbx_rm_rf(sb->image_dir);
    if (!sb->chan_lost && rt_alive(sb->state_dir)) {
        sb->ready = true; /* the checkpoint failed before it stopped anything */
        agent_relisten(sb);
        notify_waiters(sb, NULL);
        op_finish(sb, &err);
        return;
    }
    /* A failed checkpoint can take the sandbox down with it (a panic in gVisor's
     * save): it comes back cold from its workspace rather than being lost. */
    op_finish(sb, &err);
    channel_free(sb->chan);
    sb->chan = NULL;
    sb->restoring = true;
    sb->expect_boot[0] = '\0';
    sb->op_t0 = sbx_now_ms();
    cold_start(sb, &err);
}

int manager_pause(struct manager *m, struct sandbox *sb, sandbox_op_fn cb, void *data,
                  struct sbx_err *err)
{
    int r = check_can_snapshot(sb, "pause", err);
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
    if ((r = prepare_checkpoint(sb, image, on_ckpt, err)) < 0)
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
    int r = launch(sb->mgr, sb, sb->cold_tried ? NULL : sb->image_dir, false, &err);
    if (r < 0 && !sb->cold_tried) {
        log_warn("sandbox %s: restore failed (%s); starting cold", sb->rec.id, err.msg);
        sb->cold_tried = true;
        r = launch(sb->mgr, sb, NULL, false, &err);
    }
    if (r < 0) {
        log_error("sandbox %s: resume: %s", sb->rec.id, err.msg);
        sb->restoring = false;
        sb->paused = true;
        snprintf(err.code, sizeof(err.code), "sandbox_start_failed");
        notify_waiters(sb, &err); /* it stays paused: its image and workspace are kept */
    }
}

int manager_resume(struct manager *m, struct sandbox *sb, sandbox_ready_fn cb, void *data,
                   struct sbx_err *err)
{
    if (!sb->paused || sb->restoring)
        return sbx_err_set(err, EALREADY, "sandbox_not_paused", "sandbox %s is not paused",
                           sb->rec.id);
    long long per_user, per_key;
    int r = store_sandbox_count_live(m->store, sb->rec.user, sb->rec.key_id, &per_user, &per_key,
                                     err);
    if (r < 0)
        return r;
    if (per_key >= m->cfg->max_per_key || per_user >= m->cfg->max_per_user)
        return sbx_err_set(err, EAGAIN, "sandbox_concurrency_limit",
                           "resuming would pass %lld running sandboxes per %s",
                           per_key >= m->cfg->max_per_key ? m->cfg->max_per_key
                                                          : m->cfg->max_per_user,
                           per_key >= m->cfg->max_per_key ? "key" : "user");
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
    add_waiter(sb, cb, data);
    on_resume_free(m->loop, sb);
    return 0;
}

/* --- v1 workspace snapshots --- */

static long long dir_bytes(int dirfd, int depth);

/* Frozen, a loop-mounted workspace is written out whole and clean to its image file
 * (which otherwise lags behind: dirty pages, the journal). -1 when not frozen. */
static int freeze_workspace(const struct manager *m, const struct sandbox *sb)
{
    if (!m->ws_template)
        return -1;
    int fd = open(sb->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 && ioctl(fd, FIFREEZE, 0) < 0) {
        log_warn("sandbox %s: freezing the workspace: %s", sb->rec.id, strerror(errno));
        close(fd);
        fd = -1;
    }
    return fd;
}

static void thaw_workspace(int fd)
{
    if (fd < 0)
        return;
    (void)ioctl(fd, FITHAW, 0);
    close(fd);
}

int manager_workspace_snapshot(struct manager *m, struct sandbox *sb, json_t **out,
                               struct sbx_err *err)
{
    if (!is_v1(sb))
        return sbx_err_set(err, ENOTSUP, "not_supported_on_v2",
                           "sandbox %s runs on v2: use pause and fork, which keep its memory too",
                           sb->rec.id);
    _cleanup_free_ char *root = sbx_xasprintf("%s/snapshots", sb->dir);
    int n = 0;
    DIR *d = opendir(root);
    for (struct dirent *de; d && (de = readdir(d));)
        n += !strncmp(de->d_name, "snap_", 5);
    if (d)
        closedir(d);
    if (n >= SANDBOX_SNAPSHOTS_MAX)
        return sbx_err_set(err, EAGAIN, "too_many_snapshots",
                           "at most %d snapshots per sandbox", SANDBOX_SNAPSHOTS_MAX);
    unsigned char raw[4];
    char hex[9];
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        abort();
    sbx_hex(raw, sizeof(raw), hex);
    _cleanup_free_ char *id = sbx_xasprintf("snap_%s_%s", sb->rec.id + 3, hex);
    _cleanup_free_ char *dir = sbx_xasprintf("%s/%s", root, id);
    int r = sbx_mkdir_p(dir, 0700);
    if (r < 0)
        return sbx_err_sys(err, -r, "creating %s", dir);
    if (m->ws_template) {
        _cleanup_free_ char *src = sbx_xasprintf("%s/workspace.img", sb->dir);
        _cleanup_free_ char *dst = sbx_xasprintf("%s/workspace.img", dir);
        _cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
        _cleanup_close_ int outfd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        int frozen = freeze_workspace(m, sb);
        r = in < 0 || outfd < 0 ? -errno : sbx_copy_sparse(in, outfd);
        thaw_workspace(frozen);
        if (r < 0)
            sbx_err_sys(err, -r, "copying the workspace image");
    } else {
        _cleanup_free_ char *dst = sbx_xasprintf("%s/workspace", dir);
        if ((r = sbx_mkdir_p(dst, 0755)) == 0)
            r = copy_tree(sb->workspace, dst, err);
        else
            sbx_err_sys(err, -r, "creating %s", dst);
    }
    if (r < 0) {
        (void)sbx_rm_rf(dir);
        return r;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    long long bytes = dfd < 0 ? 0 : dir_bytes(dfd, 1);
    *out = json_pack("{s:s,s:s,s:s,s:I,s:I}", "id", id, "object", "snapshot", "sandbox_id",
                     sb->rec.id, "size_bytes", (json_int_t)bytes, "created_at",
                     (json_int_t)(sbx_wall_ms() / 1000));
    log_info("sandbox %s: workspace snapshot %s (%lld bytes)", sb->rec.id, id, bytes);
    return 0;
}

/* --- fork --- */

struct fork_op {
    struct manager *m;
    struct auth_identity who;
    char parent_id[STORE_ID_MAX + 1];
    char *image_dir;
    int count, pending;
    long long ttl, t0;
    struct fork_child kids[SANDBOX_FORK_MAX];
    fork_done_fn cb;
    void *data;
};

static void fork_finish(struct fork_op *f, const struct sbx_err *err)
{
    if (f->image_dir)
        (void)sbx_rm_rf(f->image_dir); /* every copy has read it whole by now */
    f->cb(f->parent_id, f->kids, f->count, err, f->data);
    free(f->image_dir);
    free(f);
}

static void on_kid_ready(struct sandbox *kid, const struct sbx_err *err, void *data)
{
    struct fork_op *f = data;
    for (int i = 0; i < f->count; i++) {
        struct fork_child *k = &f->kids[i];
        if (strcmp(k->id, kid->rec.id))
            continue;
        k->ok = !err;
        if (err)
            k->err = *err;
        k->restored = !err && kid->restored;
        k->ready_ms = err ? 0 : kid->ready_ms;
    }
    if (--f->pending == 0)
        fork_finish(f, NULL);
}

/* A copy of the stopped parent's workspace for a fork: with the quota the image, without
 * it a plain recursive copy. */
static int copy_workspace(struct manager *m, const struct sandbox *from, struct sandbox *to,
                          struct sbx_err *err)
{
    if (!m->ws_template)
        return copy_tree(from->workspace, to->workspace, err);
    _cleanup_free_ char *src = sbx_xasprintf("%s/workspace.img", from->dir);
    _cleanup_free_ char *dst = sbx_xasprintf("%s/workspace.img", to->dir);
    return wsimage_mount(src, dst, to->workspace, err);
}

static int fork_kid(struct fork_op *f, struct sandbox *parent, struct fork_child *out,
                    struct sbx_err *err)
{
    struct manager *m = f->m;
    char id[STORE_ID_MAX + 1];
    new_sandbox_id(id);
    struct sandbox *sb = sandbox_alloc(m, id);
    struct store_sandbox *rec = &sb->rec;
    const struct store_sandbox *p = &parent->rec;
    long long now = sbx_wall_ms() / 1000;
    *rec = *p;
    snprintf(rec->id, sizeof(rec->id), "%s", id);
    snprintf(rec->key_id, sizeof(rec->key_id), "%s", f->who.key_id);
    snprintf(rec->status, sizeof(rec->status), "%s", SANDBOX_CREATING);
    rec->env_json = sbx_xstrdup(p->env_json ? p->env_json : "{}");
    rec->ttl_seconds = f->ttl ? f->ttl : p->ttl_seconds;
    rec->created_at = now;
    rec->expires_at = now + rec->ttl_seconds;
    rec->ended_at = 0;
    rec->end_reason[0] = '\0';
    int r = store_sandbox_insert(m->store, rec, err);
    if (r < 0) {
        sandbox_free(sb);
        return r;
    }
    snprintf(out->id, sizeof(out->id), "%s", id);
    snprintf(sb->parent_id, sizeof(sb->parent_id), "%s", p->id);
    (void)store_meta_set(m->store, id, STORE_META_PARENT, p->id, NULL);
    /* A copy goes out the way its parent does. */
    if ((r = store_egress_policy_copy(m->store, p->id, id, now, err)) == 0)
        egress_load(m, sb);
    if (r == 0 && ((r = sbx_mkdir_p(sb->state_dir, 0700)) < 0 ||
                   (r = sbx_mkdir_p(sb->workspace, 0755)) < 0))
        sbx_err_sys(err, -r, "creating the sandbox directory");
    if (r == 0)
        r = copy_workspace(m, parent, sb, err);
    if (r == 0) {
        sb->restoring = true;
        sb->op_t0 = f->t0;
        snprintf(sb->expect_boot, sizeof(sb->expect_boot), "%s", parent->boot_id);
        sb->image_dir = sbx_xstrdup(f->image_dir);
        r = launch(m, sb, f->image_dir, true, err);
    }
    if (r < 0) {
        (void)store_sandbox_set_status(m->store, id, SANDBOX_FAILED, "start_failed", now, NULL);
        struct sbx_err e2 = {0};
        (void)rt_destroy(&m->rt, id, sb->state_dir, sb->dir, &e2);
        sandbox_free(sb);
        snprintf(err->code, sizeof(err->code), "sandbox_start_failed");
        return r;
    }
    sb->next = m->sandboxes;
    m->sandboxes = sb;
    arm_ttl(m, sb);
    log_info("sandbox %s: forked from %s", id, p->id);
    f->pending++;
    sandbox_when_ready(sb, on_kid_ready, f);
    return 0;
}

static void on_parent_ready(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct fork_op *f = data;
    if (err)
        log_error("sandbox %s: back after the fork: %s", f->parent_id, err->msg);
    if (--f->pending == 0)
        fork_finish(f, NULL);
}

/* The parent is stopped (a checkpoint stops a container: runsc's --leave-running
 * restores it behind a new runsc that our shim does not hold). Its workspace is still,
 * so the copies are consistent; then the parent and every copy restore from the image. */
static void fork_on_checkpoint(struct sandbox *parent, const struct sbx_err *err, void *data)
{
    struct fork_op *f = data;
    if (err || parent->ended) {
        struct sbx_err gone = {0};
        if (!err)
            sbx_err_set(&gone, ECONNRESET, "sandbox_not_running", "sandbox %s went away",
                        f->parent_id);
        log_error("sandbox %s: fork: %s", f->parent_id, err ? err->msg : gone.msg);
        fork_finish(f, err ? err : &gone);
        return;
    }
    int frozen = freeze_workspace(f->m, parent);
    for (int i = 0; i < f->count; i++) {
        struct sbx_err kerr = {0};
        if (fork_kid(f, parent, &f->kids[i], &kerr) < 0) {
            f->kids[i].ok = false;
            f->kids[i].err = kerr;
            log_error("sandbox %s: fork copy %d: %s", f->parent_id, i, kerr.msg);
        }
    }
    thaw_workspace(frozen);
    struct sbx_err perr = {0};
    parent->restoring = true;
    parent->cold_tried = false;
    parent->drop_image = false;
    parent->op_t0 = sbx_now_ms();
    snprintf(parent->expect_boot, sizeof(parent->expect_boot), "%s", parent->boot_id);
    free(parent->image_dir);
    parent->image_dir = sbx_xstrdup(f->image_dir);
    if (launch(f->m, parent, f->image_dir, false, &perr) < 0) {
        parent->cold_tried = true;
        if (launch(f->m, parent, NULL, false, &perr) < 0) {
            struct sbx_err derr = {0};
            (void)destroy(f->m, parent, "start_failed", &perr, NULL, NULL, &derr);
        }
    }
    if (!parent->ended) {
        f->pending++;
        sandbox_when_ready(parent, on_parent_ready, f);
    }
    f->pending--; /* the checkpoint's own count */
    if (f->pending == 0)
        fork_finish(f, NULL);
}

int manager_fork(struct manager *m, struct sandbox *sb, const struct auth_identity *who,
                 int count, long long ttl_seconds, fork_done_fn cb, void *data,
                 struct sbx_err *err)
{
    int r = check_can_snapshot(sb, "fork", err);
    if (r < 0)
        return r;
    struct store_sandbox_counts n;
    if ((r = store_sandbox_counts(m->store, who->user, who->key_id, &n, err)) < 0)
        return r;
    if (n.key_active + count > SANDBOX_FORK_KEY_ACTIVE)
        return sbx_err_set(err, EAGAIN, "sandbox_concurrency_limit",
                           "a fork may not take a key past %d active sandboxes (%lld now)",
                           SANDBOX_FORK_KEY_ACTIVE, n.key_active);
    if (n.user_running + count > m->cfg->max_per_user)
        return sbx_err_set(err, EAGAIN, "sandbox_concurrency_limit",
                           "a fork may not take a user past %lld running sandboxes (%lld now)",
                           m->cfg->max_per_user, n.user_running);
    struct fork_op *f = sbx_xcalloc(1, sizeof(*f));
    f->m = m;
    f->who = *who;
    snprintf(f->parent_id, sizeof(f->parent_id), "%s", sb->rec.id);
    f->count = count;
    f->ttl = ttl_seconds;
    f->t0 = sbx_now_ms();
    f->pending = 1;
    f->cb = cb;
    f->data = data;
    unsigned char raw[6];
    char hex[13];
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        abort();
    sbx_hex(raw, sizeof(raw), hex);
    f->image_dir = sbx_xasprintf("%s/snapshots/fork-%s", sb->dir, hex);
    if ((r = prepare_checkpoint(sb, f->image_dir, on_ckpt, err)) < 0) {
        free(f->image_dir);
        free(f);
        return r;
    }
    sb->pausing = sb->forking = true;
    sb->chan_lost = false;
    sb->ready = false; /* requests wait for the parent to be back */
    sb->op_cb = fork_on_checkpoint;
    sb->op_data = f;
    return 0;
}

/* --- lookup, list, destroy ----------------------------------------------------------- */

int manager_lookup(struct manager *m, const struct auth_identity *who, const char *id,
                   struct sandbox **out, struct sbx_err *err)
{
    for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next) {
        if (!strcmp(sb->rec.id, id) && !strcmp(sb->rec.user, who->user)) {
            *out = sb;
            return 0;
        }
    }
    return sbx_err_set(err, ENOENT, "sandbox_not_found", "no sandbox with id %s", id);
}

void manager_each(struct manager *m, const char *user, sandbox_each_fn cb, void *data)
{
    /* The list is newest first; answer in creation order. */
    size_t n = 0;
    for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
        n++;
    _cleanup_free_ struct sandbox **v = sbx_xcalloc(n, sizeof(*v));
    size_t i = n;
    for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
        v[--i] = sb;
    for (i = 0; i < n; i++)
        if (!user || !strcmp(v[i]->rec.user, user))
            cb(v[i], data);
}

static void on_reap(struct loop *l, void *data)
{
    sandbox_free(data);
}

static int destroy(struct manager *m, struct sandbox *sb, const char *reason,
                   const struct sbx_err *cause, const struct auth_identity *who,
                   const char *request_id, struct sbx_err *err)
{
    if (sb->ended)
        return 0;
    sb->ended = true;
    for (struct sandbox **p = &m->sandboxes; *p; p = &(*p)->next) {
        if (*p == sb) {
            *p = sb->next;
            break;
        }
    }
    if (sb->ttl_timer)
        loop_timer_cancel(m->loop, sb->ttl_timer);
    if (sb->ready_timer)
        loop_timer_cancel(m->loop, sb->ready_timer);
    sb->ttl_timer = sb->ready_timer = NULL;
    const char *status = !strcmp(reason, "deleted") || !strcmp(reason, "expired") ||
                                 !strcmp(reason, "run_finished")
                             ? SANDBOX_DESTROYED
                             : SANDBOX_FAILED;
    int r = store_sandbox_set_status(m->store, sb->rec.id, status, reason, sbx_wall_ms() / 1000,
                                     err);
    struct sbx_err rerr = {0};
    if (rt_destroy(&m->rt, sb->rec.id, sb->state_dir, sb->dir, &rerr) < 0)
        log_error("sandbox %s: destroy: %s", sb->rec.id, rerr.msg);
    log_info("sandbox %s: destroyed (%s)", sb->rec.id, reason);
    audit_record(m->store, who, sb->rec.user, request_id, "sandbox.destroy", sb->rec.id, reason,
                 NULL);
    struct sbx_err gone = {0};
    if (cause) {
        gone = *cause;
        snprintf(gone.code, sizeof(gone.code), "sandbox_start_failed");
    } else {
        sbx_err_set(&gone, ECANCELED, "sandbox_start_failed", "sandbox %s did not start (%s)",
                    sb->rec.id, reason);
    }
    stop_start_watch(sb);
    stop_ckpt_watch(sb);
    notify_waiters(sb, &gone);
    if (sb->op_cb) { /* a pause or a fork's checkpoint that will never end */
        struct sbx_err ended = {0};
        sbx_err_set(&ended, ECANCELED, "sandbox_not_running", "sandbox %s went away (%s)",
                    sb->rec.id, reason);
        op_finish(sb, &ended);
    }
    /* Streams and callers may still be on the stack: free on the next turn. */
    (void)loop_timer_add(m->loop, 0, on_reap, sb);
    return r;
}

int manager_destroy(struct manager *m, struct sandbox *sb, const char *reason,
                    struct sbx_err *err)
{
    return destroy(m, sb, reason, NULL, NULL, NULL, err);
}

int manager_destroy_by(struct manager *m, struct sandbox *sb, const struct auth_identity *who,
                       const char *request_id, const char *reason, struct sbx_err *err)
{
    return destroy(m, sb, reason, NULL, who, request_id, err);
}

/* --- start-up reconciliation --------------------------------------------------------- */

struct reconcile {
    struct manager *m;
    char **live; /* ids the store says are live */
    size_t n, cap;
};

static void reconcile_one(const struct store_sandbox *rec, void *data)
{
    struct reconcile *rc = data;
    struct manager *m = rc->m;
    if (rc->n == rc->cap) {
        rc->cap = rc->cap ? rc->cap * 2 : 16;
        rc->live = sbx_xrealloc(rc->live, rc->cap * sizeof(*rc->live));
    }
    rc->live[rc->n++] = sbx_xstrdup(rec->id);

    struct sandbox *sb = sandbox_alloc(m, rec->id);
    sb->rec = *rec;
    sb->rec.env_json = sbx_xstrdup(rec->env_json);
    egress_load(m, sb);
    struct sbx_err err = {0};
    (void)store_meta_get(m->store, rec->id, STORE_META_BOOT_ID, sb->boot_id, sizeof(sb->boot_id),
                         NULL);
    (void)store_meta_get(m->store, rec->id, STORE_META_PARENT, sb->parent_id,
                         sizeof(sb->parent_id), NULL);
    (void)store_meta_get(m->store, rec->id, STORE_META_FALLBACK, sb->fallback,
                         sizeof(sb->fallback), NULL);
    if (is_v1(sb)) {
        /* v1 keeps no machine between ops; one caught mid-op by the restart goes. */
        if (rt_alive(sb->state_dir))
            (void)rt_destroy(&m->rt, rec->id, sb->state_dir, NULL, &err);
        sb->next = m->sandboxes;
        m->sandboxes = sb;
        arm_ttl(m, sb);
        log_info("sandbox %s: v1, kept", rec->id);
        return;
    }
    if (!strcmp(rec->status, SANDBOX_PAUSED)) {
        /* No shim is normal for a paused sandbox: its image waits on disk. */
        char at[24];
        if (store_meta_get(m->store, rec->id, STORE_META_PAUSED_AT, at, sizeof(at), NULL) == 0)
            sb->paused_at = strtoll(at, NULL, 10);
        sb->paused = true;
        sb->next = m->sandboxes;
        m->sandboxes = sb;
        arm_ttl(m, sb);
        log_info("sandbox %s: paused, kept", rec->id);
        return;
    }
    if (!rt_alive(sb->state_dir) || attach(m, sb, &err) < 0) {
        log_warn("sandbox %s: not running any more, cleaning up %s", rec->id, err.msg);
        (void)store_sandbox_set_status(m->store, rec->id, SANDBOX_FAILED, "lost",
                                       sbx_wall_ms() / 1000, NULL);
        (void)rt_destroy(&m->rt, rec->id, sb->state_dir, sb->dir, &err);
        sandbox_free(sb);
        return;
    }
    sb->next = m->sandboxes;
    m->sandboxes = sb;
    arm_ttl(m, sb);
    log_info("sandbox %s: re-attached", rec->id);
}

static bool is_live(const struct reconcile *rc, const char *id)
{
    for (size_t i = 0; i < rc->n; i++)
        if (!strcmp(rc->live[i], id))
            return true;
    return false;
}

/* Whatever runs or lies on disk without a live record goes. */
static void sweep_orphans(struct manager *m, const struct reconcile *rc)
{
    char **ids = NULL;
    struct sbx_err lerr = {0};
    if (rt_list(&m->rt, &ids, &lerr) == 0) {
        for (char **p = ids; *p; p++) {
            if (is_live(rc, *p))
                continue;
            log_warn("container %s has no live sandbox: removing it", *p);
            _cleanup_free_ char *dir = sbx_xasprintf("%s/sandboxes/%s", m->cfg->data_dir, *p);
            _cleanup_free_ char *state = sbx_xasprintf("%s/state", dir);
            (void)rt_destroy(&m->rt, *p, state, dir, &lerr);
        }
        rt_strv_free(ids);
    } else {
        log_warn("listing containers: %s", lerr.msg);
    }
    _cleanup_free_ char *sbdir = sbx_xasprintf("%s/sandboxes", m->cfg->data_dir);
    DIR *d = opendir(sbdir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || is_live(rc, de->d_name))
            continue;
        _cleanup_free_ char *dir = sbx_xasprintf("%s/%s", sbdir, de->d_name);
        _cleanup_free_ char *state = sbx_xasprintf("%s/state", dir);
        if (!rt_alive(state)) {
            log_info("removing leftover sandbox dir %s", dir);
            (void)rt_destroy(&m->rt, de->d_name, state, dir, &lerr);
        }
    }
    closedir(d);
}

int manager_start(struct manager *m, struct sbx_err *err)
{
    struct reconcile rc = {.m = m};
    /* Nothing runs across a restart of ours: the agent drops a former daemon's execs. */
    int r = store_exec_interrupt_running(m->store, sbx_wall_ms(), err);
    if (r == 0)
        r = store_idem_release_in_progress(m->store, err);
    if (r == 0)
        r = store_sandbox_each_live(m->store, NULL, reconcile_one, &rc, err);
    if (r == 0)
        sweep_orphans(m, &rc);
    for (size_t i = 0; i < rc.n; i++)
        free(rc.live[i]);
    free(rc.live);
    return r;
}

/* --- JSON and validation ------------------------------------------------------------ */

/* Bytes on disk beneath dirfd (allocated blocks: images are sparse). Depth is bounded
 * by what the daemon itself writes there. */
static long long dir_bytes(int dirfd, int depth)
{
    DIR *d = fdopendir(dirfd);
    if (!d) {
        close(dirfd);
        return 0;
    }
    long long total = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        if (de->d_name[0] == '.' ||
            fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (S_ISREG(st.st_mode))
            total += (long long)st.st_blocks * 512;
        else if (S_ISDIR(st.st_mode) && depth > 0) {
            int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0)
                total += dir_bytes(sub, depth - 1);
        }
    }
    closedir(d);
    return total;
}

long long sandbox_snapshot_bytes(const struct sandbox *sb)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/snapshots", sb->dir);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? 0 : dir_bytes(fd, 2);
}

json_t *sandbox_to_json(const struct sandbox *sb)
{
    const struct store_sandbox *r = &sb->rec;
    json_t *env = json_loads(r->env_json ? r->env_json : "{}", 0, NULL);
    json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:o,s:{s:I,s:I,s:I},s:b,s:o}", "id", r->id,
                     "object", "sandbox", "status", r->status, "backend", r->backend, "runtime",
                     r->runtime, "template", r->template_name, "template_digest",
                     r->template_digest, "created_at", (json_int_t)r->created_at, "expires_at",
                     (json_int_t)r->expires_at, "ttl_seconds", (json_int_t)r->ttl_seconds, "env",
                     env ? env : json_object(), "limits", "memory_mb", (json_int_t)r->memory_mb,
                     "pids", (json_int_t)r->pids, "cpu_millicores",
                     (json_int_t)r->cpu_millicores, "enable_default_session",
                     r->enable_default_session, "egress",
                     sb->egress ? egress_policy_to_json(sb->egress) : json_pack("{s:s}", "mode", "none"));
    json_object_set_new(j, "snapshot_bytes", json_integer(sandbox_snapshot_bytes(sb)));
    if (sb->paused)
        json_object_set_new(j, "paused_at", json_integer(sb->paused_at));
    if (sb->parent_id[0])
        json_object_set_new(j, "parent_id", json_string(sb->parent_id));
    if (sb->fallback[0])
        json_object_set_new(j, "backend_fallback", json_string(sb->fallback));
    return j;
}

int sandbox_env_validate(json_t *env, const char *field, struct sbx_err *err)
{
    if (!env)
        return 0;
    if (!json_is_object(env))
        return sbx_err_set(err, EINVAL, "invalid_env", "%s must be an object of strings", field);
    if (json_object_size(env) > SANDBOX_ENV_MAX)
        return sbx_err_set(err, EINVAL, "invalid_env", "%s has more than %d variables", field,
                           SANDBOX_ENV_MAX);
    const char *k;
    json_t *v;
    json_object_foreach(env, k, v)
    {
        bool ok = k[0] && !(k[0] >= '0' && k[0] <= '9') && strlen(k) <= 128;
        for (const char *c = k; ok && *c; c++)
            ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                 (*c >= '0' && *c <= '9') || *c == '_';
        if (!ok)
            return sbx_err_set(err, EINVAL, "invalid_env",
                               "%s: %.64s is not a valid variable name", field, k);
        if (!strncmp(k, "SBX_", 4) || !strncmp(k, "GOOGLE_", 7))
            return sbx_err_set(err, EINVAL, "invalid_env",
                               "%s: variables named SBX_* or GOOGLE_* are reserved (%.64s)",
                               field, k);
        if (!json_is_string(v))
            return sbx_err_set(err, EINVAL, "invalid_env", "%s: %.64s must be a string", field, k);
        if (json_string_length(v) > SANDBOX_ENV_VALUE_MAX ||
            memchr(json_string_value(v), '\0', json_string_length(v)))
            return sbx_err_set(err, EINVAL, "invalid_env",
                               "%s: %.64s is too long or contains NUL", field, k);
    }
    return 0;
}

int sandbox_params_parse(json_t *body, struct sandbox_params *out, struct sbx_err *err)
{
    struct sandbox_params p = {.template_name = "base",
                               .ttl_seconds = SANDBOX_TTL_DEFAULT,
                               .enable_default_session = true};
    json_t *v;
    if ((v = json_object_get(body, "template")) && !json_is_null(v)) {
        if (!json_is_string(v) || !template_name_valid(json_string_value(v)))
            return sbx_err_set(err, EINVAL, "invalid_template",
                               "template must be the name of a built template");
        p.template_name = json_string_value(v);
    }
    if ((v = json_object_get(body, "ttl_seconds")) && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > SANDBOX_TTL_MAX)
            return sbx_err_set(err, EINVAL, "invalid_ttl",
                               "ttl_seconds must be an integer from 1 to %d", SANDBOX_TTL_MAX);
        p.ttl_seconds = json_integer_value(v);
    }
    if ((v = json_object_get(body, "backend")) && !json_is_null(v)) {
        if (!json_is_string(v) ||
            (strcmp(json_string_value(v), "v1") && strcmp(json_string_value(v), "v2")))
            return sbx_err_set(err, EINVAL, "invalid_backend", "backend must be \"v1\" or \"v2\"");
        p.backend = json_string_value(v);
    }
    if ((v = json_object_get(body, "snapshot_id")) && !json_is_null(v)) {
        if (!json_is_string(v))
            return sbx_err_set(err, EINVAL, "invalid_request", "snapshot_id must be a string");
        p.snapshot_id = json_string_value(v);
    }
    if ((v = json_object_get(body, "enable_default_session")) && !json_is_null(v)) {
        if (!json_is_boolean(v))
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "enable_default_session must be true or false");
        p.enable_default_session = json_is_true(v);
    }
    int er = egress_policy_parse(json_object_get(body, "egress"), &p.egress, err);
    if (er < 0)
        return er;
    v = json_object_get(body, "env");
    if (v && !json_is_null(v)) {
        int r = sandbox_env_validate(v, "env", err);
        if (r < 0)
            return r;
        p.env = v;
    }
    *out = p;
    return 0;
}
