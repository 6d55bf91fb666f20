/* sbxd: the sandbox daemon. main owns start-up and shut-down decisions and logging;
 * everything else returns errors to it. */
#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/jobs.h"
#include "../common/log.h"
#include "../common/util.h"
#include "auth/auth.h"
#include "billing/billing.h"
#include "billing/metrics_api.h"
#include "cluster/cluster.h"
#include "configs/envvars.h"
#include "egress/proxy.h"
#include "files/artifacts.h"
#include "http/router.h"
#include "audit/input_window.h"
#include "audit/retention.h"
#include "files/sweep.h"
#include "live/preview.h"
#include "e2b/e2b_templates.h"
#include "templates/build.h"
#include "templates/pool.h"
#include "templates/poolspec.h"
#include "live/ptycall.h"
#include "live/terminal.h"
#include "mcp/mcp.h"
#include "routes.h"
#include "skills/catalog.h"
#include "skills/installs.h"
#include "sbxd.h"
#include "volumes/volumes.h"

static void on_signal(struct loop *l, int fd, uint32_t events, void *data)
{
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGCHLD) {
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
        } else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
            log_info("signal %u: stopping (sandboxes keep running)", si.ssi_signo);
            loop_stop(l);
        }
    }
}

/* The first admin key: SBX_ADMIN_KEY when given, else a fresh one written to
 * <data>/admin.key. The key itself is never logged. */
static void revoke_ptys(struct sandbox *sb, void *data)
{
    pty_revoke_key(sb, data);
}

/* A key was deleted: what it opened ends at once (docs/keys.md#deleting-a-key). */
static void on_key_revoked(struct sbxd *d, const char *key_id)
{
    if (d->http)
        http_server_revoke_key(d->http, key_id);
    if (d->terminals)
        terminals_revoke(d->terminals, key_id);
    if (d->mgr)
        manager_each(d->mgr, NULL, revoke_ptys, (void *)key_id);
}

static int bootstrap_admin(struct sbxd *d, struct sbx_err *err)
{
    const char *preset = getenv("SBX_ADMIN_KEY");
    _cleanup_free_ char *path = sbx_xasprintf("%s/admin.key", d->cfg.data_dir);
    struct store_key k = {.role = AUTH_ROLE_ADMIN, .tool_level = AUTH_TOOL_SANDBOX};
    char key[AUTH_KEY_MAX + 1];
    snprintf(k.user, sizeof(k.user), "admin");
    k.created_at = sbx_wall_ms() / 1000;

    if (preset && *preset) {
        int r = auth_key_parse(preset, k.id, err);
        if (r < 0)
            return sbx_err_wrap(err, "SBX_ADMIN_KEY must be sbx_ and 20-252 of [A-Za-z0-9_-]");
        struct store_key existing;
        if (store_key_get(d->store, k.id, &existing, NULL) == 0)
            return 0;
        auth_key_hash(preset, k.hash);
        snprintf(key, sizeof(key), "%s", preset);
    } else {
        long long n;
        int r = store_key_count(d->store, &n, err);
        if (r < 0)
            return r;
        if (n > 0)
            return 0;
        r = auth_key_generate(key, k.id, k.hash, err);
        if (r < 0)
            return r;
    }
    int r = store_key_insert(d->store, &k, err);
    if (r < 0)
        return r;
    char line[AUTH_KEY_MAX + 2];
    int n = snprintf(line, sizeof(line), "%s\n", key);
    r = sbx_write_file_atomic(path, line, (size_t)n, 0600);
    memset(line, 0, sizeof(line));
    memset(key, 0, sizeof(key));
    if (r < 0)
        return sbx_err_sys(err, -r, "writing %s", path);
    log_info("admin key %s written to %s", k.id, path);
    return 0;
}

/* The egress proxy, and the manager's hand-off of the streams agents open to it. */
static int egress_start(struct sbxd *d, struct sbx_err *err)
{
    struct egress_proxy_config ec = {.policy_path = d->cfg.network_policy,
                                     .hosts_file = d->cfg.egress_hosts,
                                     .test_upstreams = d->cfg.egress_test_upstreams,
                                     .data_dir = d->cfg.data_dir,
                                     .upstream_ca_file = d->cfg.fetch_ca_file};
    int r = egress_proxy_new(d->loop, d->store, &ec, &d->egress, err);
    if (r < 0)
        return sbx_err_wrap(err, "egress");
    manager_set_stream_open(d->mgr, egress_stream_open, d->egress);
    if (ec.hosts_file || ec.test_upstreams)
        log_warn("egress: SBX_EGRESS_HOSTS / SBX_EGRESS_TEST_UPSTREAMS are set: these are test "
                 "knobs, never for a real deployment");
    if (ec.policy_path)
        log_info("egress: operator network policy from %s", ec.policy_path);
    return 0;
}

/* sbxd backup [--data-dir DIR] DEST: an online copy of the store, while sbxd runs. */
/* Volumes (docs/volumes.md), before the manager re-adopts sandboxes that mount them: each
 * of this node's is mounted on the host again if a reboot took its mount. */
static int volumes_start(struct sbxd *d, struct sbx_err *err)
{
    struct volumes_settings set = {.dir = d->cfg.volumes_dir,
                                   .data_dir = d->cfg.data_dir,
                                   .default_mb = d->cfg.volume_mb,
                                   .max_mb = d->cfg.volume_max_mb,
                                   .per_user = d->cfg.volumes_per_user,
                                   /* Quota images where workspaces have them. */
                                   .images = d->cfg.workspace_mb > 0};
    int r = volumes_new(d->store, &set, &d->volumes, err);
    if (r < 0)
        return r;
    struct sbx_err e = {0};
    if (volumes_adopt(d->volumes, &e) < 0)
        log_warn("volumes: not every volume could be mounted: %s", e.msg);
    manager_set_volumes(d->mgr, d->volumes);
    return 0;
}

static int backup(int argc, char **argv)
{
    struct sbxd_config cfg = {0};
    struct sbx_err err = {0};
    struct store *st = NULL;
    int r = config_load(&cfg, argc - 2, argv + 1, &err);
    if (r == 0) {
        _cleanup_free_ char *db = sbx_xasprintf("%s/sbx.db", cfg.data_dir);
        /* A PostgreSQL store has its own tools (docs/scale-out.md). */
        r = cfg.store_url ? sbx_err_set(&err, ENOTSUP, "invalid_request",
                                        "SBX_STORE is PostgreSQL: back it up with pg_dump")
                          : store_open_at(NULL, db, &st, &err);
        if (r == 0)
            r = store_backup(st, argv[argc - 1], &err);
    }
    store_free(st);
    config_free(&cfg);
    if (r < 0) {
        fprintf(stderr, "sbxd backup: %s\n", err.msg);
        return 1;
    }
    if (r == 0) /* 1: --help was printed */
        printf("sbxd backup: the store is copied to %s\n", argv[argc - 1]);
    return 0;
}

int main(int argc, char **argv)
{
    struct sbxd d = {0};
    struct sbx_err err = {0};
    int sfd = -1, ret = 1;

    if (argc == 2 && !strcmp(argv[1], "--routes")) {
        sbxd_routes_print(stdout);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "backup"))
        return backup(argc, argv);
    int r = config_load(&d.cfg, argc, argv, &err);
    if (r == 0)
        r = warm_settings_check(d.cfg.warm_pool, d.cfg.warm_snapshot, &err);
    if (r != 0)
        config_free(&d.cfg);
    if (r == 1)
        return 0;
    if (r < 0) {
        fprintf(stderr, "sbxd: %s\n", err.msg);
        config_free(&d.cfg);
        return 2;
    }
    sbx_log_set_level(d.cfg.verbose ? LOG_DEBUG : LOG_INFO);
    sbx_log_set_json(d.cfg.log_json);
    signal(SIGPIPE, SIG_IGN);
    umask(022);
    /* libcurl's global state must exist before any worker thread (url inputs) uses it. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "sbxd: libcurl did not initialise\n");
        config_free(&d.cfg);
        return 1;
    }

    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGCHLD);
    /* Shims are double-forked so they outlive us; as their subreaper we still reap them
     * while we live, whatever the host's init does with orphans. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        log_warn("PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
    sigprocmask(SIG_BLOCK, &mask, NULL);
    sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

    _cleanup_free_ char *db = sbx_xasprintf("%s/sbx.db", d.cfg.data_dir);
    if (sfd < 0) {
        sbx_err_sys(&err, errno, "signalfd");
        goto out;
    }
    if ((r = loop_new(&d.loop)) < 0) {
        sbx_err_sys(&err, -r, "creating the event loop");
        goto out;
    }
    if (store_open_at(d.cfg.store_url, db, &d.store, &err) < 0)
        goto out;
    char store_what[256];
    store_describe(d.store, store_what, sizeof(store_what));
    log_info("store: %s", store_what);
    /* Before the manager: it re-adopts this node's sandboxes only. */
    if (cluster_new(&d.cfg, d.loop, d.store, &d.cluster, &err) < 0)
        goto out;
    log_info("node %s", cluster_node_id(d.cluster));
    d.router = (struct router){.tables = sbxd_routes,
                               .ntables = sbxd_route_tables,
                               .store = d.store,
                               .app = &d,
                               .hooks = cluster_hooks(d.cluster),
                               .route_log = d.cfg.test_route_log};
    struct http_server_limits limits = {.idle_s = (unsigned)d.cfg.http_idle_s,
                                        .per_address = (unsigned)d.cfg.http_per_address};
    if (bootstrap_admin(&d, &err) < 0 ||
        billing_new(&d.cfg, d.loop, d.store, &d.billing, &err) < 0 ||
        manager_new(&d.cfg, d.loop, d.store, &d.mgr, &err) < 0 ||
        volumes_start(&d, &err) < 0 || manager_start(d.mgr, &err) < 0 || egress_start(&d, &err) < 0 ||
        jobs_new(d.loop, &d.jobs, &err) < 0 || artifacts_new(&d.cfg, &d.artifacts, &err) < 0 ||
        skills_new(&d.cfg, d.store, d.jobs, &d.skills, &err) < 0 ||
        ((d.cfg.llm_url || d.cfg.llm_anthropic_url) &&
         llm_new(d.loop, d.cfg.llm_url, d.cfg.llm_api_key, d.cfg.llm_model, &d.llm, &err) < 0) ||
        terminals_new(&d.cfg, d.loop, &d.terminals) < 0 ||
        previews_new(&d.cfg, d.loop, d.mgr, &d.previews, &err) < 0 ||
        warm_pool_new(&d.cfg, d.loop, d.mgr, &d.pool, &err) < 0 ||
        retention_new(&d.cfg, d.loop, d.store, &d.retention, &err) < 0 ||
        template_builds_new(&d.cfg, d.loop, d.mgr, d.jobs, &d.builds, &err) < 0 ||
        e2b_templates_new(&d, &d.e2b_templates, &err) < 0 ||
        http_server_new(d.loop, d.cfg.listen, router_dispatch, &d.router, &limits,
                        &d.http, &err) < 0 ||
        metrics_listener_new(&d, &d.metrics, &err) < 0)
        goto out;
    if (d.llm && d.cfg.llm_anthropic_url) /* the chat gateway's /v1/messages (docs/chat.md) */
        llm_set_anthropic(d.llm, d.cfg.llm_anthropic_url, d.cfg.llm_anthropic_api_key);
    d.input_windows = audit_windows_new(d.loop, d.store);
    files_sweep_uploads(d.mgr);
    cluster_set_manager(d.cluster, d.mgr, &d);
    http_server_set_streaming(d.http, router_streams_body);
    http_server_set_hooks(d.http, billing_http_hooks());
    d.key_revoked = on_key_revoked;
    http_server_set_cors(d.http, d.cfg.cors_origins);
    mcp_new(&d, &d.mcp);
    /* Sandbox configurations (docs/configs.md). */
    if (configs_new(&d.cfg, d.store, d.mgr, egress_proxy_ca_pem(d.egress), &d.configs, &err) < 0 ||
        (d.cfg.skill_env_file &&
         envvars_load_declarations(d.configs, d.cfg.skill_env_file, &err) < 0))
        goto out;
    /* Skills installed into configurations (docs/skills.md). */
    if (installs_new(&d, &d.installs, &err) < 0)
        goto out;
    if ((r = loop_watch_add(d.loop, sfd, EPOLLIN, on_signal, &d, NULL)) < 0) {
        sbx_err_sys(&err, -r, "watching signals");
        goto out;
    }
    log_info("sbxd listening on %s (previews on %s), data in %s", d.cfg.listen,
             d.cfg.preview_listen, d.cfg.data_dir);
    /* Where a newcomer with only a browser goes next (docs/console.md, "The first sign-in"). */
    log_info("web console at http://%s/console (sign in with an API key)", d.cfg.listen);
    if ((r = loop_run(d.loop)) < 0) {
        sbx_err_sys(&err, -r, "event loop");
        goto out;
    }
    ret = 0;
out:
    if (ret)
        log_error("%s", err.msg[0] ? err.msg : "start-up failed");
    /* Upgraded connections first: MHD must see them closed before it stops. */
    terminals_free(d.terminals);
    metrics_listener_free(d.metrics);
    http_server_free(d.http);
    mcp_free(d.mcp); /* after the server, which aborted its calls */
    /* After the server: requests waiting on jobs were aborted, so done callbacks only free. */
    jobs_free(d.jobs);
    e2b_templates_free(d.e2b_templates); /* they follow builds: before those go */
    audit_windows_free(d.input_windows); /* what they summed, before the store goes */
    template_builds_free(d.builds); /* after the jobs (their trees), before the manager */
    artifacts_free(d.artifacts);
    installs_free(d.installs); /* before the manager: its rounds wait on sandboxes */
    skills_free(d.skills);
    warm_pool_free(d.pool); /* before the manager: it holds the pool's hooks */
    manager_free(d.mgr);
    configs_free(d.configs);
    /* After the manager: its channels' egress and preview streams have ended. */
    egress_proxy_free(d.egress);
    previews_free(d.previews);
    llm_free(d.llm);
    billing_free(d.billing);
    retention_free(d.retention);
    volumes_free(d.volumes);
    cluster_free(d.cluster);
    store_free(d.store);
    loop_free(d.loop);
    if (sfd >= 0)
        close(sfd);
    config_free(&d.cfg);
    curl_global_cleanup();
    return ret;
}
