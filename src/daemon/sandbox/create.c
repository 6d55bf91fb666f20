/* Creating a sandbox: limits, the v2 capacity fallback to v1, the record written
 * before anything starts, its workspace (empty, or a v1 snapshot's copy) and its
 * machine. */
#include "lifecycle.h"

#include <errno.h>
#include <openssl/rand.h>
#include <string.h>
#include <unistd.h>

#include "../../common/log.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "template.h"
#include "wsimage.h"

void sandbox_new_id(char out[STORE_ID_MAX + 1])
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
        n += !sandbox_is_v1(sb) && !sb->paused;
    return n;
}

static void on_v1_created(struct loop *l, void *data)
{
    struct sandbox *sb = data;
    sb->op_timer = NULL;
    sandbox_notify_waiters(sb, NULL); /* only the create's own callback waits yet */
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
    const char *runtime;
    if ((r = manager_runtime_pick(m, p->runtime, &runtime, err)) < 0)
        return r;
    _cleanup_free_ char *from = NULL;
    if (p->snapshot_id && (r = snapshot_source(m, who, p->snapshot_id, &from, err)) < 0)
        return r;

    struct template_info tpl;
    r = template_resolve(m->cfg->template_cache, p->template_name, &tpl, err);
    if (r < 0)
        return r;

    char id[STORE_ID_MAX + 1];
    sandbox_new_id(id);
    struct sandbox *sb = sandbox_alloc(m, id);
    struct store_sandbox *rec = &sb->rec;
    long long now = sbx_wall_ms() / 1000;
    snprintf(rec->id, sizeof(rec->id), "%s", id);
    snprintf(rec->user, sizeof(rec->user), "%s", who->user);
    snprintf(rec->key_id, sizeof(rec->key_id), "%s", who->key_id);
    snprintf(rec->status, sizeof(rec->status), "%s", SANDBOX_CREATING);
    snprintf(rec->backend, sizeof(rec->backend), "%s", v1 ? "v1" : "v2");
    snprintf(rec->runtime, sizeof(rec->runtime), "%s", runtime);
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
    } else if (from && (r = wsimage_copy_tree(from, sb->workspace, err)) < 0) {
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
        sandbox_arm_ttl(m, sb);
        log_info("sandbox %s: v1 for user %s (key %s)%s%s", id, who->user, who->key_id,
                 fallback[0] ? ": " : "", fallback);
        if (cb) {
            sandbox_add_waiter(sb, cb, data);
            sb->op_timer = loop_timer_add(m->loop, 0, on_v1_created, sb);
        }
        *out = sb;
        return 0;
    }
    template_info_clear(&tpl);
    if ((r = sandbox_launch(m, sb, NULL, false, err)) < 0)
        goto fail;
    sb->next = m->sandboxes;
    m->sandboxes = sb;
    sandbox_arm_ttl(m, sb);
    log_info("sandbox %s: starting on %s for user %s (key %s)", id, runtime, who->user,
             who->key_id);
    if (!rt_backend_find(runtime)->isolated)
        log_warn("sandbox %s: runtime local: NO ISOLATION, its code runs on this host", id);
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
