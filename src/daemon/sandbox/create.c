/* Creating a sandbox: limits, the v2 capacity fallback to v1, the record written
 * before anything starts, its workspace (empty, or a v1 snapshot's copy) and its
 * machine. */
#include "lifecycle.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/jobs.h"
#include "../../common/log.h"
#include "../../common/sbxuser.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../../runtime/provider.h"
#include "../billing/billing.h"
#include "../volumes/volumes.h"
#include "template.h"
#include "wsimage.h"
#include "wspool.h"

void sandbox_new_id(char out[STORE_ID_MAX + 1])
{
    sbx_random_id("sb_", 10, out, STORE_ID_MAX + 1);
}

static int v2_running(const struct manager *m)
{
    int n = 0;
    for (const struct sandbox *sb = m->sandboxes; sb; sb = sb->next)
        n += !sandbox_is_v1(sb) && !sb->paused;
    return n;
}

static void on_created_now(struct loop *l, void *data)
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

/* The CA bundle of a configuration with inject rules, beneath the workspace: a fresh
 * file (a workspace from a snapshot may hold anything under that name, a symlink too). */
static int write_trust(struct sandbox *sb, const char *pem, struct sbx_err *err)
{
    int dfd = open(sb->workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return sbx_err_sys(err, errno, "opening the workspace");
    int r = 0;
    if (unlinkat(dfd, SANDBOX_TRUST_FILE, 0) < 0 && errno != ENOENT)
        r = sbx_err_sys(err, errno, "replacing %s", SANDBOX_TRUST_FILE);
    int fd = r < 0 ? -1
                   : openat(dfd, SANDBOX_TRUST_FILE,
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (r == 0 && fd < 0)
        r = sbx_err_sys(err, errno, "creating %s", SANDBOX_TRUST_FILE);
    if (fd >= 0) {
        int w = sbx_write_all(fd, pem, strlen(pem));
        if (w < 0)
            r = sbx_err_sys(err, -w, "writing %s", SANDBOX_TRUST_FILE);
        close(fd);
    }
    close(dfd);
    return r;
}

/* out/ in a new workspace, the sandbox user's (a daemon that is not root cannot give it away
 * and runs commands as itself). A workspace from a snapshot keeps whatever it holds under
 * that name, a file or a symlink too: only a missing out/ is made. */
static int make_out_dir(struct sandbox *sb, struct sbx_err *err)
{
    _cleanup_close_ int dfd = open(sb->workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return sbx_err_sys(err, errno, "opening the workspace");
    if (mkdirat(dfd, SANDBOX_OUT_DIR, 0755) < 0)
        return errno == EEXIST ? 0
                               : sbx_err_sys(err, errno, "creating %s/ in the workspace",
                                             SANDBOX_OUT_DIR);
    (void)fchownat(dfd, SANDBOX_OUT_DIR, SBX_USER_UID, SBX_USER_GID, AT_SYMLINK_NOFOLLOW);
    return 0;
}

int sandbox_config_settings_set(struct manager *m, struct sandbox *sb, long long idle_sec,
                                long long command_timeout_sec, bool desktop_off,
                                struct sbx_err *err)
{
    char v[24];
    int r = 0;
    sb->terminal_idle_sec = idle_sec;
    sb->command_timeout_sec = command_timeout_sec;
    sb->desktop_disabled = desktop_off;
    snprintf(v, sizeof(v), "%lld", idle_sec);
    if (idle_sec &&
        (r = store_meta_set(m->store, sb->rec.id, STORE_META_TERMINAL_IDLE, v, err)) < 0)
        return r;
    snprintf(v, sizeof(v), "%lld", command_timeout_sec);
    if (command_timeout_sec &&
        (r = store_meta_set(m->store, sb->rec.id, STORE_META_COMMAND_TIMEOUT, v, err)) < 0)
        return r;
    if (desktop_off &&
        (r = store_meta_set(m->store, sb->rec.id, STORE_META_DESKTOP_OFF, "1", err)) < 0)
        return r;
    return 0;
}

/* sb->docker from sb->docker_doc, which it points into. */
static void docker_from_doc(struct sandbox *sb)
{
    json_t *d = sb->docker_doc;
    sb->docker = (struct rt_docker){
        .image = json_string_value(json_object_get(d, "image")),
        .runtime = json_string_value(json_object_get(d, "runtime")),
        .network_mode = json_string_value(json_object_get(d, "network_mode")),
        .http_timeout_ms = json_integer_value(json_object_get(d, "http_timeout_sec")) * 1000,
        .config_id = sb->config_id, /* read at each start: set by then after a restart */
        .host = json_string_value(json_object_get(d, "host")),
        .tls_dir = json_string_value(json_object_get(d, "tls_cert_path")),
    };
}

int sandbox_docker_set(struct manager *m, struct sandbox *sb, json_t *docker, struct sbx_err *err)
{
    _cleanup_free_ char *text = json_dumps(docker, JSON_COMPACT);
    if (!text || strlen(text) >= SANDBOX_DOCKER_DOC_MAX)
        return sbx_err_set(err, EINVAL, "internal", "the docker object does not fit");
    int r = store_meta_set(m->store, sb->rec.id, STORE_META_DOCKER, text, err);
    if (r < 0)
        return r;
    json_decref(sb->docker_doc);
    sb->docker_doc = json_deep_copy(docker);
    docker_from_doc(sb);
    return 0;
}

void sandbox_config_settings_load(struct manager *m, struct sandbox *sb)
{
    _cleanup_free_ char *doc = sbx_xmalloc(SANDBOX_DOCKER_DOC_MAX);
    if (store_meta_get(m->store, sb->rec.id, STORE_META_DOCKER, doc, SANDBOX_DOCKER_DOC_MAX,
                       NULL) == 0) {
        sb->docker_doc = json_loads(doc, 0, NULL);
        if (json_is_object(sb->docker_doc))
            docker_from_doc(sb);
    }
    char v[24];
    if (store_meta_get(m->store, sb->rec.id, STORE_META_TERMINAL_IDLE, v, sizeof(v), NULL) == 0)
        sb->terminal_idle_sec = strtoll(v, NULL, 10);
    if (store_meta_get(m->store, sb->rec.id, STORE_META_COMMAND_TIMEOUT, v, sizeof(v), NULL) == 0)
        sb->command_timeout_sec = strtoll(v, NULL, 10);
    sb->desktop_disabled =
        store_meta_get(m->store, sb->rec.id, STORE_META_DESKTOP_OFF, v, sizeof(v), NULL) == 0 &&
        !strcmp(v, "1");
}

/* A limit asked for: at most the daemon's (or the configuration's, already in p). */
static int pick_limit(const char *name, long long asked, long long dflt, long long *out,
                      struct sbx_err *err)
{
    if (asked > dflt)
        return sbx_err_set(err, EINVAL, "invalid_request", "limits.%s is at most %lld here", name,
                           dflt);
    *out = asked ? asked : dflt;
    return 0;
}

static int create(struct manager *m, const struct auth_identity *who,
                  const struct sandbox_params *p, sandbox_ready_fn cb, void *data,
                  struct sandbox **out, struct sbx_err *err);

/* What a create gives a sandbox of its caller's: owner, env, TTL from now, session flag. */
static void set_owner(struct store_sandbox *rec, const struct auth_identity *who,
                      const struct sandbox_params *p)
{
    long long now = sbx_wall_ms() / 1000;
    snprintf(rec->user, sizeof(rec->user), "%s", who->user);
    snprintf(rec->key_id, sizeof(rec->key_id), "%s", who->key_id);
    free(rec->env_json);
    rec->env_json = json_dumps(p->env, JSON_COMPACT | JSON_SORT_KEYS);
    if (!rec->env_json)
        rec->env_json = sbx_xstrdup("{}");
    rec->ttl_seconds = p->ttl_seconds;
    rec->created_at = now;
    rec->expires_at = now + p->ttl_seconds;
    rec->enable_default_session = p->enable_default_session;
}

/* A warm-pool sandbox made the caller's: the record gets its owner, env, TTL and session
 * flag, the sandbox its egress policy. Limits are the host's, the same for every sandbox.
 * -ENOENT with err untouched when the pool has none to give. */
static int take_pooled(struct manager *m, const struct auth_identity *who,
                       const struct sandbox_params *p, sandbox_ready_fn cb, void *data,
                       struct sandbox **out, struct sbx_err *err)
{
    struct template_info tpl;
    struct sbx_err terr = {0};
    if (template_resolve(m->cfg->template_cache, p->template_name, &tpl, &terr) < 0)
        return -ENOENT; /* the cold path reports it */
    if (!template_usable(tpl.owner, tpl.shared, who->user)) {
        template_info_clear(&tpl);
        return -ENOENT;
    }
    struct sandbox *sb = m->pool->take(m->pool_data, tpl.name, tpl.digest);
    template_info_clear(&tpl);
    if (!sb)
        return -ENOENT;
    struct store_sandbox *rec = &sb->rec;
    billing_sandbox_state(rec, SANDBOX_RUNNING); /* its time in the pool is nobody's */
    set_owner(rec, who, p);
    free(sb->egress);
    sb->egress = NULL;
    struct store_sandbox_limits lim = {m->cfg->max_per_user, m->cfg->max_per_key};
    int r = store_sandbox_claim(m->store, rec, true, &lim, err);
    if (r == 0)
        r = egress_init(m, sb, &p->egress, err);
    if (r < 0) {
        struct sbx_err e2 = {0};
        (void)sandbox_destroy(m, sb, "start_failed", err, NULL, NULL, &e2);
        return r;
    }
    if (sb->ttl_timer)
        loop_timer_cancel(m->loop, sb->ttl_timer);
    sandbox_arm_ttl(m, sb);
    sb->from_pool = true;
    log_info("sandbox %s: from the %s pool for user %s (key %s)", rec->id, rec->template_name,
             who->user, who->key_id);
    if (cb) {
        /* Ready already; answered on the next loop turn, as every create is. */
        sandbox_add_waiter(sb, cb, data);
        sb->op_timer = loop_timer_add(m->loop, 0, on_created_now, sb);
    }
    *out = sb;
    return 0;
}

static int create_sandbox(struct manager *m, const struct auth_identity *who,
                          const struct sandbox_params *p, bool v1, const char *fallback,
                          bool limited, sandbox_ready_fn cb, void *data, struct sandbox **out,
                          struct sbx_err *err);

int manager_create(struct manager *m, const struct auth_identity *who,
                   const struct sandbox_params *p, sandbox_ready_fn cb, void *data,
                   struct sandbox **out, struct sbx_err *err)
{
    if (!p->config_id || p->config_applied)
        return create(m, who, p, cb, data, out, err);
    if (!m->config_fn)
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "this daemon makes no sandboxes from configurations");
    struct sandbox_params cp = *p;
    json_t *hold = NULL;
    int r = m->config_fn(m->config_data, who, &cp, &hold, err);
    if (r == 0)
        r = create(m, who, &cp, cb, data, out, err);
    json_decref(hold);
    return r;
}

static int create(struct manager *m, const struct auth_identity *who,
                  const struct sandbox_params *p, sandbox_ready_fn cb, void *data,
                  struct sandbox **out, struct sbx_err *err)
{
    if (billing_admit(who->user, err) < 0)
        return sbx_err_ret(err);
    long long per_user, per_key;
    int r = store_sandbox_count_live(m->store, who->user, who->key_id, &per_user, &per_key, err);
    if (r < 0)
        return r;
    if (per_key >= m->cfg->max_per_key || per_user >= m->cfg->max_per_user) {
        bool key = per_key >= m->cfg->max_per_key;
        char who_runs[SANDBOX_DESCRIBE_MAX];
        manager_describe_running(m, who->user, key ? who->key_id : NULL, who_runs,
                                 sizeof(who_runs));
        return sbx_err_set(err, EAGAIN, "sandbox_concurrency_limit",
                           "at most %lld running sandboxes per %s, and these count: %s; "
                           "delete or pause one first",
                           key ? m->cfg->max_per_key : m->cfg->max_per_user, key ? "key" : "user",
                           who_runs);
    }
    bool v1 = p->backend && !strcmp(p->backend, "v1");
    /* A pooled sandbox has the host's limits and nothing of a configuration's. */
    bool plain = !p->snapshot_id && !p->config_id && !p->runtime && !p->memory_mb && !p->pids &&
                 !p->cpu_millicores && !p->volumes;
    if (!v1 && plain && m->pool && (r = take_pooled(m, who, p, cb, data, out, err)) != -ENOENT)
        return r;
    char fallback[sizeof(((struct sandbox *)0)->fallback)] = "";
    /* Idle pool sandboxes give way to a user's. */
    while (!v1 && m->cfg->v2_capacity > 0 && v2_running(m) >= m->cfg->v2_capacity && m->pool &&
           m->pool->yield(m->pool_data))
        ;
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
    return create_sandbox(m, who, p, v1, fallback, true, cb, data, out, err);
}

int manager_create_pooled(struct manager *m, const char *template_name, sandbox_ready_fn cb,
                          void *data, struct sandbox **out, struct sbx_err *err)
{
    if (m->cfg->v2_capacity > 0 && v2_running(m) >= m->cfg->v2_capacity)
        return sbx_err_set(err, EAGAIN, "sandbox_capacity", "the host is at capacity");
    static const struct auth_identity nobody = {0};
    struct sandbox_params p = {
        .template_name = template_name,
        .ttl_seconds = SANDBOX_TTL_MAX,
        .backend = "v2",
    };
    return create_sandbox(m, &nobody, &p, false, "", false, cb, data, out, err);
}

int manager_create_build(struct manager *m, const char *template_name, const char *rootfs,
                         const struct egress_policy *egress, long long ttl_seconds,
                         sandbox_ready_fn cb, void *data, struct sandbox **out, struct sbx_err *err)
{
    const char *runtime;
    int r = manager_runtime_pick(m, NULL, &runtime, err);
    if (r < 0)
        return r;
    /* Build steps are the user's code run as root of the tree: never outside a sandbox. */
    if (!rt_backend_find(runtime)->isolated)
        return sbx_err_set(err, EINVAL, "invalid_runtime",
                           "template builds need an isolated backend, and %s is not", runtime);
    if (m->cfg->v2_capacity > 0 && v2_running(m) >= m->cfg->v2_capacity)
        return sbx_err_set(err, EAGAIN, "sandbox_capacity", "the host is at capacity");
    static const struct auth_identity builder = {.key_id = SANDBOX_BUILD_KEY};
    struct sandbox_params p = {
        .template_name = template_name,
        .ttl_seconds = ttl_seconds,
        .backend = "v2",
        .egress = *egress,
        .runtime = runtime,
        .build_rootfs = rootfs,
    };
    return create_sandbox(m, &builder, &p, false, "", false, cb, data, out, err);
}

static void cgroup_prime_run(void *unused)
{
    rt_cgroup_prime();
}

static void cgroup_prime_done(void *unused, bool ran)
{
}

/* The cold path: the record, the workspace and a machine booted from the template. A
 * limited create's record is written only while its owner is within the limits on
 * every node (store_sandbox_claim); pool and build sandboxes belong to nobody. */
static int create_sandbox(struct manager *m, const struct auth_identity *who,
                          const struct sandbox_params *p, bool v1, const char *fallback,
                          bool limited, sandbox_ready_fn cb, void *data, struct sandbox **out,
                          struct sbx_err *err)
{
    long long memory_mb = 0, pids = 0, cpu = 0;
    int r;
    if ((r = pick_limit("memory_mb", p->memory_mb, m->cfg->memory_mb, &memory_mb, err)) < 0 ||
        (r = pick_limit("pids", p->pids, m->cfg->pids_max, &pids, err)) < 0 ||
        (r = pick_limit("cpu_millicores", p->cpu_millicores, m->cfg->cpu_millicores, &cpu, err)) <
            0)
        return r;
    const char *runtime;
    if ((r = manager_runtime_pick(m, p->runtime, &runtime, err)) < 0)
        return r;
    _cleanup_free_ char *from = NULL;
    if (p->snapshot_id && (r = snapshot_source(m, who, p->snapshot_id, &from, err)) < 0)
        return r;
    if (!from && p->workspace_from)
        from = sbx_xstrdup(p->workspace_from);
    if (p->volumes &&
        (r = m->volumes
                 ? volumes_mounts_usable(m->volumes, who->user, p->volumes, err)
                 : sbx_err_set(err, ENOTSUP, "invalid_volume", "this daemon has no volumes")) < 0)
        return r;

    struct template_info tpl;
    r = template_resolve(m->cfg->template_cache, p->template_name, &tpl, err);
    if (r < 0)
        return r;
    if (!template_usable(tpl.owner, tpl.shared, who->user)) {
        template_info_clear(&tpl);
        return template_not_built(p->template_name, err);
    }

    char id[STORE_ID_MAX + 1];
    sandbox_new_id(id);
    struct sandbox *sb = sandbox_alloc(m, id);
    if (p->build_rootfs)
        sb->build_rootfs = sbx_xstrdup(p->build_rootfs);
    if (p->provider && rt_is_provider(runtime))
        sandbox_provider_set(sb, json_deep_copy(p->provider), p->network, p->config_inject);
    struct store_sandbox *rec = &sb->rec;
    snprintf(rec->id, sizeof(rec->id), "%s", id);
    set_owner(rec, who, p);
    snprintf(rec->status, sizeof(rec->status), "%s", SANDBOX_CREATING);
    snprintf(rec->backend, sizeof(rec->backend), "%s", v1 ? "v1" : "v2");
    snprintf(rec->runtime, sizeof(rec->runtime), "%s", runtime);
    snprintf(rec->template_name, sizeof(rec->template_name), "%s", tpl.name);
    snprintf(rec->template_digest, sizeof(rec->template_digest), "%s", tpl.digest);
    rec->memory_mb = memory_mb;
    rec->pids = pids;
    rec->cpu_millicores = cpu;
    snprintf(rec->node_id, sizeof(rec->node_id), "%s", store_node(m->store));

    if (!strcmp(runtime, "namespaces") && !v1)
        jobs_submit(m->jobs, cgroup_prime_run, cgroup_prime_done, NULL);
    struct store_sandbox_limits lim = {m->cfg->max_per_user, m->cfg->max_per_key};
    r = limited ? store_sandbox_claim(m->store, rec, false, &lim, err)
                : store_sandbox_insert(m->store, rec, err);
    if (r < 0)
        goto fail_nostore;
    if ((r = egress_init(m, sb, &p->egress, err)) < 0)
        goto fail;
    if (p->volumes && (r = volumes_mounts_attach(m->volumes, who->user, p->volumes, id, err)) < 0)
        goto fail;
    /* A probe's sandbox comes from a configuration that is not stored (no config_id):
     * it gets the configuration's policy all the same, only no row naming it. */
    if (p->config_applied) {
        _cleanup_free_ char *net = p->network ? json_dumps(p->network, JSON_COMPACT) : NULL;
        snprintf(sb->config_id, sizeof(sb->config_id), "%s", p->config_id ? p->config_id : "");
        sb->config_env = p->config_env ? json_deep_copy(p->config_env) : NULL;
        sb->config_inject = p->config_inject ? json_deep_copy(p->config_inject) : NULL;
        if ((p->config_id && (r = store_sandbox_config_set(m->store, id, p->config_id, net,
                                                           p->config_env_sealed, err)) < 0) ||
            (r = sandbox_network_set(sb, p->network, err)) < 0 ||
            (r = sandbox_config_settings_set(m, sb, p->terminal_idle_sec, p->command_timeout_sec,
                                             p->desktop_disabled, err)) < 0)
            goto fail;
    }
    if (p->docker && !strcmp(runtime, "docker") &&
        (r = sandbox_docker_set(m, sb, p->docker, err)) < 0)
        goto fail;
    if (fallback[0]) {
        snprintf(sb->fallback, sizeof(sb->fallback), "%s", fallback);
        (void)store_meta_set(m->store, id, STORE_META_FALLBACK, fallback, NULL);
    }

    if ((r = sbx_mkdir_p(sb->state_dir, 0700)) < 0 || (r = sbx_mkdir_p(sb->workspace, 0755)) < 0) {
        sbx_err_sys(err, -r, "creating the sandbox directory");
        goto fail;
    }
    /* A provider's or a remote engine's sandbox keeps /workspace there: nothing on this
     * host may stand for it (no image from the pool, no tree copied into a directory the
     * sandbox never sees). */
    bool ws_here = !sandbox_workspace_remote(sb);
    if (!ws_here && from) {
        r = sbx_err_set(err, ENOTSUP, "not_supported_on_provider",
                        "a workspace snapshot or a configuration's skills cannot seed a "
                        "sandbox whose /workspace is at a provider or a remote docker engine");
        goto fail;
    }
    if (m->ws_template && ws_here) {
        _cleanup_free_ char *image = sbx_xasprintf("%s/workspace.img", sb->dir);
        r = from ? -ENOENT : wspool_take(m->wspool, image, sb->workspace, err);
        if (r == -ENOENT)
            r = wsimage_mount(from ? from : m->ws_template, image, sb->workspace, err);
        if (r < 0)
            goto fail;
    } else if (from && (r = wsimage_copy_tree(from, sb->workspace, err)) < 0) {
        goto fail;
    }
    if ((r = make_out_dir(sb, err)) < 0)
        goto fail;
    if (p->trust_pem && (r = write_trust(sb, p->trust_pem, err)) < 0)
        goto fail;
    if (p->workspace_fill &&
        (r = p->workspace_fill(p->workspace_fill_data, sb->workspace, err)) < 0)
        goto fail;
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
            sb->op_timer = loop_timer_add(m->loop, 0, on_created_now, sb);
        }
        *out = sb;
        return 0;
    }
    char boot[33] = "";
    const char *image = m->pool && m->pool->image && !p->build_rootfs
                            ? m->pool->image(m->pool_data, tpl.name, tpl.digest, boot)
                            : NULL;
    template_info_clear(&tpl);
    if (image) {
        /* Restored like a fork's copy (fresh ids, reseeded kernel); measured at its HELLO. */
        sb->restoring = sb->from_warm_image = true;
        sb->op_t0 = sbx_now_ms();
        snprintf(sb->expect_boot, sizeof(sb->expect_boot), "%s", boot);
        sb->image_dir = sbx_xstrdup(image); /* shared: never dropped by this sandbox */
    }
    if ((r = sandbox_launch(m, sb, image, image != NULL, err)) < 0 && image) {
        log_warn("sandbox %s: the warm snapshot failed (%s): cold start", id, err->msg);
        sb->restoring = false;
        sb->cold_tried = true;
        r = sandbox_launch(m, sb, NULL, false, err);
    }
    if (r < 0)
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
        (void)rt_destroy(&m->rt, id, sb->state_dir, sb->dir,
                         sb->provider_doc ? &sb->provider : NULL, &e2);
    }
    /* A full data dir stays the operator's 507, not a failed start. */
    if (strcmp(err->code, "insufficient_storage"))
        snprintf(err->code, sizeof(err->code), "sandbox_start_failed");
fail_nostore:
    template_info_clear(&tpl);
    sandbox_free(sb);
    return r < 0 ? r : -EIO;
}
