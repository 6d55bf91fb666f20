#include "manager.h"

#include <dirent.h>
#include <errno.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/log.h"
#include "../common/text.h"
#include "../common/util.h"
#include "audit.h"
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

static void sandbox_free(struct sandbox *sb)
{
    if (!sb)
        return;
    stop_start_watch(sb);
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

void sandbox_when_ready(struct sandbox *sb, sandbox_ready_fn cb, void *data)
{
    if (sb->ready) {
        cb(sb, NULL, data);
        return;
    }
    struct sandbox_waiter *w = sbx_xcalloc(1, sizeof(*w));
    w->cb = cb;
    w->data = data;
    struct sandbox_waiter **p = &sb->waiters;
    while (*p)
        p = &(*p)->next;
    *p = w;
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
    if (!strcmp(sb->rec.status, SANDBOX_CREATING)) {
        struct sbx_err err = {0};
        if (store_sandbox_set_status(sb->mgr->store, sb->rec.id, SANDBOX_RUNNING, NULL, 0, &err) <
            0)
            log_error("sandbox %s: %s", sb->rec.id, err.msg);
        snprintf(sb->rec.status, sizeof(sb->rec.status), "%s", SANDBOX_RUNNING);
    }
    if (!sb->ready)
        log_info("sandbox %s: agent ready", sb->rec.id);
    sb->ready = true;
    notify_waiters(sb, NULL);
}

static void on_channel_closed(struct channel *c, const struct sbx_err *why, void *data)
{
    struct sandbox *sb = data;
    if (sb->ended)
        return;
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
    snprintf(rec->backend, sizeof(rec->backend), "v2");
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

    if ((r = sbx_mkdir_p(sb->state_dir, 0700)) < 0 || (r = sbx_mkdir_p(sb->workspace, 0755)) < 0) {
        sbx_err_sys(err, -r, "creating the sandbox directory");
        goto fail;
    }
    if (m->ws_template) {
        _cleanup_free_ char *image = sbx_xasprintf("%s/workspace.img", sb->dir);
        if ((r = wsimage_mount(m->ws_template, image, sb->workspace, err)) < 0)
            goto fail;
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
    notify_waiters(sb, &gone);
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

json_t *sandbox_to_json(const struct sandbox *sb)
{
    const struct store_sandbox *r = &sb->rec;
    json_t *env = json_loads(r->env_json ? r->env_json : "{}", 0, NULL);
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:o,s:{s:I,s:I,s:I},s:b,s:o}", "id", r->id,
                     "object", "sandbox", "status", r->status, "backend", r->backend, "runtime",
                     r->runtime, "template", r->template_name, "template_digest",
                     r->template_digest, "created_at", (json_int_t)r->created_at, "expires_at",
                     (json_int_t)r->expires_at, "ttl_seconds", (json_int_t)r->ttl_seconds, "env",
                     env ? env : json_object(), "limits", "memory_mb", (json_int_t)r->memory_mb,
                     "pids", (json_int_t)r->pids, "cpu_millicores",
                     (json_int_t)r->cpu_millicores, "enable_default_session",
                     r->enable_default_session, "egress",
                     sb->egress ? egress_policy_to_json(sb->egress) : json_pack("{s:s}", "mode", "none"));
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
        if (!json_is_string(v) || strcmp(json_string_value(v), "v2"))
            return sbx_err_set(err, EINVAL, "invalid_backend",
                               "backend must be \"v2\" (the only backend this server runs)");
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
