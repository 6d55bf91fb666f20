/* The manager's registry of live sandboxes and the sandbox object: allocation, waiters,
 * TTL, lookup, destruction, a provider sandbox's connection and the JSON the API shows.
 * Starting and watching a sandbox's machine is machine.c; creation create.c; start-up
 * reconcile.c. */
#include "lifecycle.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../../runtime/provider.h"
#include "../audit/audit.h"
#include "../billing/billing.h"
#include "../volumes/volumes.h"
#include "channel.h"
#include "wsimage.h"
#include "wspool.h"

void sandbox_stop_start_watch(struct sandbox *sb)
{
    if (sb->start_fd < 0)
        return;
    loop_watch_del(sb->mgr->loop, sb->start_watch);
    sb->start_watch = NULL;
    close(sb->start_fd);
    sb->start_fd = -1;
}

void sandbox_stop_ckpt_watch(struct sandbox *sb)
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

void sandbox_free(struct sandbox *sb)
{
    if (!sb)
        return;
    sandbox_stop_start_watch(sb);
    sandbox_stop_ckpt_watch(sb);
    if (sb->idle_timer)
        loop_timer_cancel(sb->mgr->loop, sb->idle_timer);
    free(sb->image_dir);
    channel_free(sb->chan);
    while (sb->waiters) {
        struct sandbox_waiter *w = sb->waiters;
        sb->waiters = w->next;
        free(w);
    }
    store_sandbox_clear(&sb->rec);
    free(sb->egress);
    egress_netpolicy_free(sb->net);
    json_decref(sb->config_env);
    json_decref(sb->config_inject);
    json_decref(sb->pty_owners);
    free(sb->dir);
    free(sb->state_dir);
    free(sb->workspace);
    free(sb->build_rootfs);
    json_decref(sb->docker_doc);
    json_decref(sb->provider_doc);
    free(sb);
}

struct sandbox *sandbox_alloc(struct manager *m, const char *id)
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
        .runsc_platform = cfg->runsc_platform,
        .runsc_root = m->runsc_root,
        .shim_path = cfg->shim_path,
        .agent_path = cfg->agent_path,
        /* Mounted when it is there (a tree built before sbx-bsl existed has none). */
        .bsl_path = cfg->bsl_path && access(cfg->bsl_path, X_OK) == 0 ? cfg->bsl_path : NULL,
        .cgroup_parent = m->cgroup_parent,
        .docker_host = cfg->docker_host,
        .e2b = cfg->e2b.api_url ? &cfg->e2b : NULL,
        .cube = cfg->cube.api_url ? &cfg->cube : NULL,
    };
    struct sbx_err perr = {0};
    if (rt_probe(&m->rt, &perr) < 0) /* forks then stop their parent, as older runsc needs */
        log_warn("asking runsc its version: %s", perr.msg);
    int r = sbx_mkdir_p(m->runsc_root, 0700);
    if (r == 0) {
        _cleanup_free_ char *sbdir = sbx_xasprintf("%s/sandboxes", cfg->data_dir);
        r = sbx_mkdir_p(sbdir, 0700);
        /* A hint only: each sandbox's files in block groups of their own (util.h). */
        if (r == 0)
            (void)sbx_mark_topdir(sbdir);
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
    if ((r = jobs_new(l, &m->jobs, err)) < 0 ||
        (m->ws_template &&
         (r = wspool_new(m->jobs, cfg->data_dir, m->ws_template, &m->wspool, err)) < 0)) {
        jobs_free(m->jobs);
        free(m->ws_template);
        free(m->runsc_root);
        free(m->cgroup_parent);
        free(m);
        return r;
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

void manager_set_config_fn(struct manager *m, sandbox_config_fn fn, void *data)
{
    m->config_fn = fn;
    m->config_data = data;
}

void manager_set_provider_fn(struct manager *m, sandbox_provider_fn fn, void *data)
{
    m->provider_fn = fn;
    m->provider_data = data;
}

void sandbox_provider_set(struct sandbox *sb, json_t *doc, const json_t *network,
                          const json_t *inject)
{
    json_t *d = sb->provider_doc = doc;
    const char *kind = json_string_value(json_object_get(d, "kind"));
    bool cube = kind && !strcmp(kind, "cube");
    sb->provider = (struct rt_provider){
        .api_url = json_string_value(json_object_get(d, "api_url")),
        .api_key = json_string_value(json_object_get(d, "api_key")),
        .sandbox_url = json_string_value(json_object_get(d, "proxy_url")),
        .domain = json_string_value(json_object_get(d, "sandbox_domain")),
        .template_id = json_string_value(json_object_get(d, "template_id")),
        .http_timeout_ms = (long)json_integer_value(json_object_get(d, "http_timeout_sec")) * 1000,
        .ttl_s = (long)json_integer_value(
            json_object_get(d, cube ? "cube_sandbox_ttl_seconds" : "e2b_sandbox_ttl_seconds")),
        .config_id = sb->config_id, /* a create fills it before the start */
    };
    /* The configuration's egress policy as the provider's network configuration (E2B's
     * allowOut/denyOut; "0.0.0.0/0" denies everything else): sbx's egress proxy is not
     * in a provider sandbox's path. e2b_host_rules' header injection becomes E2B's
     * rules {host: [{transform: {headers}}]} (the headers opened for this create): the
     * text reaches the provider's control plane through the shim's stdin, never a file
     * (rt_provider_write). Rules of other shapes (methods, paths) have no E2B form. */
    json_t *pol = json_object_get(network, "policy");
    if (json_is_object(pol)) {
        json_t *allow = json_object_get(pol, "allow_out");
        json_t *deny = json_deep_copy(json_object_get(pol, "deny_out"));
        if (!json_is_array(deny)) {
            json_decref(deny);
            deny = json_array();
        }
        if (json_is_true(json_object_get(pol, "deny_egress_by_default")))
            json_array_append_new(deny, json_string("0.0.0.0/0"));
        json_t *net = json_pack("{s:O,s:o}", "allowOut", json_is_array(allow) ? allow : json_null(),
                                "denyOut", deny);
        json_t *rules = json_object();
        const char *rname;
        json_t *hdrs;
        json_object_foreach((json_t *)inject, rname, hdrs)
        {
            if (strncmp(rname, "e2b:", 4))
                continue;
            json_t *set = json_object();
            size_t hi;
            json_t *h;
            json_array_foreach(hdrs, hi, h)
            {
                json_object_set(set, json_string_value(json_object_get(h, "header")),
                                json_object_get(h, "value"));
            }
            json_object_set_new(rules, rname + 4,
                                json_pack("[{s:{s:o}}]", "transform", "headers", set));
        }
        if (json_object_size(rules))
            json_object_set_new(net, "rules", rules);
        else
            json_decref(rules);
        char *text = json_dumps(net, JSON_COMPACT);
        json_decref(net);
        json_object_set_new(d, "network_text", json_string(text ? text : "{}"));
        if (text)
            OPENSSL_cleanse(text, strlen(text));
        free(text);
        sb->provider.network = json_string_value(json_object_get(d, "network_text"));
    }
}

int sandbox_provider_open(struct sandbox *sb, struct sbx_err *err)
{
    struct manager *m = sb->mgr;
    if (sb->provider_doc || !rt_is_provider(sb->rec.runtime) || !sb->config_id[0])
        return 0;
    if (!m->provider_fn)
        return sbx_err_set(err, ENOTSUP, "internal",
                           "no configurations to open %s's provider key from", sb->config_id);
    /* After an sbxd restart: the key opened again from the configuration, and the
     * network policy the sandbox was made with (the store's, not the configuration's
     * current one, which a create may have narrowed). */
    json_t *doc = NULL;
    int r = m->provider_fn(m->provider_data, sb->config_id, &doc, err);
    if (r < 0)
        return sbx_err_wrap(err, "opening configuration %s's provider connection", sb->config_id);
    if (!doc)
        return sbx_err_set(err, ENOENT, "provider_auth_failed",
                           "configuration %s has no provider connection any more", sb->config_id);
    _cleanup_free_ char *text = NULL;
    char cid[STORE_ID_MAX + 1];
    json_t *network = NULL;
    if (store_sandbox_config_get(m->store, sb->rec.id, cid, &text, NULL, NULL) == 0 && text)
        network = json_loads(text, 0, NULL);
    sandbox_provider_set(sb, doc, network, sb->config_inject);
    json_decref(network);
    return 0;
}

const struct rt_provider *sandbox_provider_cleanup(struct sandbox *sb)
{
    struct sbx_err err = {0};
    if (sandbox_provider_open(sb, &err) < 0)
        log_warn("sandbox %s: %s: its cleanup cannot delete at the provider", sb->rec.id, err.msg);
    return sb->provider_doc ? &sb->provider : NULL;
}

void manager_set_volumes(struct manager *m, struct volumes *v)
{
    m->volumes = v;
}

void manager_set_exec_hook(struct manager *m, sandbox_exec_hook_fn fn, void *data)
{
    m->exec_hook = fn;
    m->exec_hook_data = data;
}

void manager_before_exec(struct sandbox *sb)
{
    if (sb->mgr->exec_hook)
        sb->mgr->exec_hook(sb->mgr->exec_hook_data, sb);
}

void manager_set_stream_open(struct manager *m, sandbox_stream_open_fn fn, void *data)
{
    m->stream_open = fn;
    m->stream_open_data = data;
}

void manager_set_pool(struct manager *m, const struct sandbox_pool_ops *ops, void *data)
{
    m->pool = ops;
    m->pool_data = data;
}

bool sandbox_workspace_remote(const struct sandbox *sb)
{
    return rt_workspace_remote(sb->rec.runtime, sb->docker_doc ? &sb->docker : NULL);
}

bool sandbox_is_build(const struct sandbox *sb)
{
    return !sb->rec.user[0] && !strcmp(sb->rec.key_id, SANDBOX_BUILD_KEY);
}

bool sandbox_is_pooled(const struct sandbox *sb)
{
    return !sb->rec.user[0] && !sandbox_is_build(sb);
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
    jobs_free(m->jobs); /* the pool's fills end first */
    wspool_free(m->wspool);
    free(m->ws_template);
    free(m);
}

void sandbox_notify_waiters(struct sandbox *sb, const struct sbx_err *err)
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

void sandbox_paused_error(const struct sandbox *sb, struct sbx_err *err)
{
    sbx_err_set(err, ECONNRESET, "sandbox_not_running", "sandbox %s is paused: resume it first",
                sb->rec.id);
}

void sandbox_add_waiter(struct sandbox *sb, sandbox_ready_fn cb, void *data)
{
    struct sandbox_waiter *w = sbx_xcalloc(1, sizeof(*w));
    w->cb = cb;
    w->data = data;
    struct sandbox_waiter **p = &sb->waiters;
    while (*p)
        p = &(*p)->next;
    *p = w;
}

bool sandbox_is_v1(const struct sandbox *sb)
{
    return !strcmp(sb->rec.backend, "v1");
}

bool sandbox_keeps_ptys(const struct sandbox *sb)
{
    return !sandbox_is_v1(sb);
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

int sandbox_network_set(struct sandbox *sb, json_t *network, struct sbx_err *err)
{
    egress_netpolicy_free(sb->net);
    sb->net = NULL;
    if (!network || egress_netpolicy_parse(network, &sb->net, err) == 0)
        return 0;
    /* A policy that no longer reads lets nothing out rather than everything. */
    json_t *deny = json_pack("{s:{s:b}}", "policy", "deny_egress_by_default", 1);
    (void)egress_netpolicy_parse(deny, &sb->net, NULL);
    json_decref(deny);
    return -EINVAL;
}

/* Which configuration the sandbox came from, and its network policy. */
static void network_load(struct manager *m, struct sandbox *sb)
{
    _cleanup_free_ char *text = NULL;
    struct sbx_err err = {0};
    if (store_sandbox_config_get(m->store, sb->rec.id, sb->config_id, &text, NULL, &err) < 0 ||
        !text)
        return;
    json_t *j = json_loads(text, 0, NULL);
    if (sandbox_network_set(sb, j, &err) < 0)
        log_warn("sandbox %s: stored network policy unreadable (%s): nothing gets out", sb->rec.id,
                 err.msg);
    json_decref(j);
}

void sandbox_egress_load(struct manager *m, struct sandbox *sb)
{
    network_load(m, sb);
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

/* --- TTL -------------------------------------------------------------------------- */

static void on_ttl(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->ttl_timer = NULL;
    if (!strcmp(sb->rec.status, SANDBOX_CREATING)) {
        /* A TTL ends a sandbox's life, not its creation: the create is answered first (a
         * failed start still fails as it would have). */
        sb->expire_when_ready = true;
        return;
    }
    log_info("sandbox %s: TTL expired", sb->rec.id);
    struct sbx_err err = {0};
    if (manager_destroy(sb->mgr, sb, "expired", &err) < 0)
        log_error("sandbox %s: expiring: %s", sb->rec.id, err.msg);
}

void sandbox_arm_ttl(struct manager *m, struct sandbox *sb)
{
    long long ms = sb->rec.expires_at * 1000 - sbx_wall_ms();
    sb->ttl_timer = loop_timer_add(m->loop, ms > 0 ? ms : 0, on_ttl, sb);
}

int manager_set_expiry(struct manager *m, struct sandbox *sb, long long expires_at,
                       struct sbx_err *err)
{
    int r = store_sandbox_set_expiry(m->store, sb->rec.id, expires_at, err);
    if (r < 0)
        return r;
    sb->rec.expires_at = expires_at;
    if (sb->ttl_timer) {
        loop_timer_cancel(m->loop, sb->ttl_timer);
        sandbox_arm_ttl(m, sb);
    }
    return 0;
}

struct sandbox *manager_find_live(struct manager *m, const char *id)
{
    for (struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
        if (!strcmp(sb->rec.id, id))
            return sb->ended ? NULL : sb;
    return NULL;
}

void sandbox_op_finish(struct sandbox *sb, const struct sbx_err *err)
{
    sandbox_op_fn cb = sb->op_cb;
    void *data = sb->op_data;
    sb->op_cb = NULL;
    sb->op_data = NULL;
    if (cb)
        cb(sb, err, data);
}

/* --- lookup, list, sandbox_destroy ----------------------------------------------------------- */

void manager_describe_running(struct manager *m, const char *user, const char *key_id, char *out,
                              size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    /* Oldest first, as a person would list them. */
    struct sandbox *v[64];
    size_t k = 0;
    for (struct sandbox *sb = m->sandboxes; sb && k < SBX_ARRAY_SIZE(v); sb = sb->next)
        if (!strcmp(sb->rec.user, user) && (!key_id || !strcmp(sb->rec.key_id, key_id)) &&
            (!strcmp(sb->rec.status, SANDBOX_RUNNING) || !strcmp(sb->rec.status, SANDBOX_CREATING)))
            v[k++] = sb;
    for (size_t i = k; i-- > 0;) {
        const struct sandbox *sb = v[i];
        char item[2 * STORE_ID_MAX + 32];
        int w = snprintf(item, sizeof(item), "%s%s%s%s%s", len ? ", " : "", sb->rec.id,
                         sb->parent_id[0] ? " (fork copy of " : "", sb->parent_id,
                         sb->parent_id[0] ? ")" : "");
        if (w < 0 || len + (size_t)w + sizeof(", ...") > n) {
            if (len + sizeof(", ...") <= n)
                memcpy(out + len, ", ...", sizeof(", ..."));
            return;
        }
        memcpy(out + len, item, (size_t)w + 1);
        len += (size_t)w;
    }
}

char *manager_export_dir(const struct manager *m, const char *id)
{
    return m->cfg->shared_snapshots ? sbx_xasprintf("%s/%s", m->cfg->shared_snapshots, id) : NULL;
}

bool manager_has(const struct manager *m, const char *id)
{
    for (const struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
        if (!strcmp(sb->rec.id, id))
            return true;
    return false;
}

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

int sandbox_destroy(struct manager *m, struct sandbox *sb, const char *reason,
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
    if (sb->idle_timer)
        loop_timer_cancel(m->loop, sb->idle_timer);
    sb->ttl_timer = sb->ready_timer = sb->idle_timer = NULL;
    const char *status = !strcmp(reason, "deleted") || !strcmp(reason, "expired") ||
                                 !strcmp(reason, "run_finished") || !strcmp(reason, "pool_yield")
                             ? SANDBOX_DESTROYED
                             : SANDBOX_FAILED;
    billing_sandbox_state(&sb->rec, status);
    int r =
        store_sandbox_set_status(m->store, sb->rec.id, status, reason, sbx_wall_ms() / 1000, err);
    struct sbx_err rerr = {0};
    if (rt_destroy(&m->rt, sb->rec.id, sb->state_dir, sb->dir, sandbox_provider_cleanup(sb),
                   &rerr) < 0)
        log_error("sandbox %s: destroy: %s", sb->rec.id, rerr.msg);
    _cleanup_free_ char *export = manager_export_dir(m, sb->rec.id);
    if (export)
        (void)sbx_rm_rf(export);
    log_info("sandbox %s: destroyed (%s)", sb->rec.id, reason);
    audit_record(m->store, who, sb->rec.user, request_id, "sandbox.destroy", sb->rec.id, reason,
                 NULL);
    struct sbx_err gone = {0};
    if (cause) {
        gone = *cause;
        /* A provider's failure keeps its own code (502/503/504, docs/providers.md). */
        if (strncmp(gone.code, "provider_", 9))
            snprintf(gone.code, sizeof(gone.code), "sandbox_start_failed");
    } else {
        sbx_err_set(&gone, ECANCELED, "sandbox_start_failed", "sandbox %s did not start (%s)",
                    sb->rec.id, reason);
    }
    sandbox_stop_start_watch(sb);
    sandbox_stop_ckpt_watch(sb);
    sandbox_notify_waiters(sb, &gone);
    if (sb->op_cb) { /* a pause or a fork's checkpoint that will never end */
        struct sbx_err ended = {0};
        sbx_err_set(&ended, ECANCELED, "sandbox_not_running", "sandbox %s went away (%s)",
                    sb->rec.id, reason);
        sandbox_op_finish(sb, &ended);
    }
    /* Streams and callers may still be on the stack: free on the next turn. */
    (void)loop_timer_add(m->loop, 0, on_reap, sb);
    return r;
}

int manager_destroy(struct manager *m, struct sandbox *sb, const char *reason, struct sbx_err *err)
{
    return sandbox_destroy(m, sb, reason, NULL, NULL, NULL, err);
}

int manager_destroy_by(struct manager *m, struct sandbox *sb, const struct auth_identity *who,
                       const char *request_id, const char *reason, struct sbx_err *err)
{
    return sandbox_destroy(m, sb, reason, NULL, who, request_id, err);
}

int manager_running_room(struct manager *m, const struct sandbox *sb, const char *verb,
                         struct sbx_err *err)
{
    long long per_user, per_key;
    int r =
        store_sandbox_count_live(m->store, sb->rec.user, sb->rec.key_id, &per_user, &per_key, err);
    if (r < 0)
        return r;
    if (per_key < m->cfg->max_per_key && per_user < m->cfg->max_per_user)
        return 0;
    bool key = per_key >= m->cfg->max_per_key;
    char who_runs[SANDBOX_DESCRIBE_MAX];
    manager_describe_running(m, sb->rec.user, key ? sb->rec.key_id : NULL, who_runs,
                             sizeof(who_runs));
    return sbx_err_set(err, EAGAIN, "sandbox_concurrency_limit",
                       "%s would pass %lld running sandboxes per %s; these count: %s", verb,
                       key ? m->cfg->max_per_key : m->cfg->max_per_user, key ? "key" : "user",
                       who_runs);
}

/* --- JSON and validation ------------------------------------------------------------ */

long long sandbox_snapshot_bytes(const struct sandbox *sb)
{
    _cleanup_free_ char *path = sbx_xasprintf("%s/snapshots", sb->dir);
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd < 0 ? 0 : sbx_dir_bytes(fd, 2);
}

json_t *sandbox_env_object(const struct sandbox *sb)
{
    json_t *env = json_loads(sb->rec.env_json ? sb->rec.env_json : "{}", 0, NULL);
    if (!env)
        env = json_object();
    if (sb->config_env)
        json_object_update_missing(env, sb->config_env);
    return env;
}

json_t *sandbox_to_json(const struct sandbox *sb)
{
    const struct store_sandbox *r = &sb->rec;
    json_t *env = json_loads(r->env_json ? r->env_json : "{}", 0, NULL);
    const char *ck;
    json_t *cv;
    json_object_foreach(sb->config_env, ck, cv)
    {
        if (env)
            json_object_set_new(env, ck, json_string(SANDBOX_ENV_MASK));
    }
    json_t *j = json_pack(
        "{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:o,s:{s:I,s:I,s:I},s:b,s:o}", "id", r->id,
        "object", "sandbox", "status", r->status, "backend", r->backend, "runtime", r->runtime,
        "template", r->template_name, "template_digest", r->template_digest, "created_at",
        (json_int_t)r->created_at, "expires_at", (json_int_t)r->expires_at, "ttl_seconds",
        (json_int_t)r->ttl_seconds, "env", env ? env : json_object(), "limits", "memory_mb",
        (json_int_t)r->memory_mb, "pids", (json_int_t)r->pids, "cpu_millicores",
        (json_int_t)r->cpu_millicores, "enable_default_session", r->enable_default_session,
        "egress",
        sb->egress ? egress_policy_to_json(sb->egress) : json_pack("{s:s}", "mode", "none"));
    json_object_set_new(j, "snapshot_bytes", json_integer(sandbox_snapshot_bytes(sb)));
    if (r->node_id[0])
        json_object_set_new(j, "node", json_string(r->node_id));
    /* Whether a pause or fork keeps memory (restored: true) or only the workspace. */
    const struct rt_backend *be = rt_backend_find(r->runtime);
    json_object_set_new(j, "memory_snapshots", json_boolean(!be || be->memory_snapshots));
    if (sb->paused)
        json_object_set_new(j, "paused_at", json_integer(sb->paused_at));
    if (sb->parent_id[0])
        json_object_set_new(j, "parent_id", json_string(sb->parent_id));
    if (sb->fallback[0])
        json_object_set_new(j, "backend_fallback", json_string(sb->fallback));
    if (sb->config_id[0])
        json_object_set_new(j, "config_id", json_string(sb->config_id));
    json_t *vols = volumes_mounts_json(sb->mgr->volumes, r->id);
    if (json_array_size(vols))
        json_object_set_new(j, "volumes", vols);
    else
        json_decref(vols);
    if (sb->from_pool)
        json_object_set_new(j, "from_pool", json_true());
    if (sb->failed)
        json_object_set_new(j, "state_reason", json_string(r->end_reason));
    if (sb->from_warm_image || sb->restarted) {
        json_object_set_new(j, "restored", json_boolean(sb->restored));
        json_object_set_new(j, "ready_ms", json_integer(sb->ready_ms));
    }
    return j;
}
