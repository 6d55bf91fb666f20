#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/util.h"
#include "../runtime/rt.h"

static char *env_or(const char *name, const char *def)
{
    const char *v = getenv(name);
    return sbx_xstrdup(v && *v ? v : def);
}

static int env_num(const char *name, long long def, long long min, long long max,
                   long long *out, struct sbx_err *err)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        *out = def;
        return 0;
    }
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || *end || n < min || n > max)
        return sbx_err_set(err, EINVAL, "invalid_config", "%s must be an integer in %lld..%lld",
                           name, min, max);
    *out = n;
    return 0;
}

/* "a, b,,c" -> {"a", "b", "c", NULL}. */
static char **split_list(const char *v)
{
    size_t n = 0;
    char **out = sbx_xcalloc(1, sizeof(*out));
    for (const char *p = v ? v : ""; *p;) {
        size_t len = strcspn(p, ",");
        const char *b = p, *e = p + len;
        while (b < e && *b == ' ')
            b++;
        while (e > b && e[-1] == ' ')
            e--;
        if (e > b) {
            out = sbx_xrealloc(out, (n + 2) * sizeof(*out));
            out[n++] = strndup(b, (size_t)(e - b));
            if (!out[n - 1])
                abort();
            out[n] = NULL;
        }
        p += len + (p[len] == ',');
    }
    return out;
}

/* SBX_PREVIEW_RESERVED_PORTS: ports no preview link may name ("" reserves none). */
static int preview_ports(struct sbxd_config *cfg, struct sbx_err *err)
{
    const char *v = getenv("SBX_PREVIEW_RESERVED_PORTS");
    char **list = split_list(v ? v : "8080");
    int r = 0;
    for (char **p = list; *p; p++) {
        char *end;
        errno = 0;
        unsigned long n = strtoul(*p, &end, 10);
        if (!r && (errno || *end || n == 0 || n > 65535))
            r = sbx_err_set(err, EINVAL, "invalid_config",
                            "SBX_PREVIEW_RESERVED_PORTS must be a comma-separated list of ports");
        cfg->preview_reserved =
            sbx_xrealloc(cfg->preview_reserved, (cfg->npreview_reserved + 1) * sizeof(unsigned));
        cfg->preview_reserved[cfg->npreview_reserved++] = (unsigned)n;
        free(*p);
    }
    free(list);
    return r;
}

/* SBX_BILLING_START and the rest of the billing block (docs/billing.md). */
static int billing_config(struct sbxd_config *cfg, struct sbx_err *err)
{
    int r;
    if ((r = env_num("SBX_HTTP_IDLE_SECONDS", 30, 1, 3600, &cfg->http_idle_s, err)) < 0 ||
        (r = env_num("SBX_HTTP_PER_ADDRESS", 256, 1, 100000, &cfg->http_per_address, err)) < 0)
        return r;
    if ((r = env_num("SBX_DAILY_EXEC_SECONDS", 7200, 0, 86400, &cfg->daily_exec_s, err)) < 0 ||
        (r = env_num("SBX_BILLING_INTERVAL_SECONDS", 600, 60, 86400, &cfg->billing_interval_s,
                     err)) < 0 ||
        (r = env_num("SBX_PRICE_EXEC_HOUR_MICRO_EUR", 100000, 0, 1000000000000LL,
                     &cfg->price_exec_hour, err)) < 0 ||
        (r = env_num("SBX_FREE_EXEC_SECONDS", 36000, 0, 31 * 86400, &cfg->free_exec_s, err)) < 0 ||
        (r = env_num("SBX_PRICE_V2_HOUR_MICRO_EUR", 100000, 0, 1000000000000LL, &cfg->price_v2_hour,
                     err)) < 0 ||
        (r = env_num("SBX_FREE_V2_SECONDS", 18000, 0, 31 * 86400, &cfg->free_v2_s, err)) < 0 ||
        (r = env_num("SBX_PRICE_SNAPSHOT_GB_MONTH_MICRO_EUR", 50000, 0, 1000000000000LL,
                     &cfg->price_snapshot_gb_month, err)) < 0 ||
        (r = env_num("SBX_PRICE_VOLUME_GB_MONTH_MICRO_EUR", cfg->price_snapshot_gb_month, 0,
                     1000000000000LL, &cfg->price_volume_gb_month, err)) < 0 ||
        /* Test knob: the tests cannot wait a minute for the meter to run. */
        (r = env_num("SBX_TEST_BILLING_TICK_MS", 60000, 10, 3600000, &cfg->billing_tick_ms, err)) <
            0)
        return r;
    /* Intervals that divide a day also divide every month, so none straddles two. */
    if (86400 % cfg->billing_interval_s)
        return sbx_err_set(err, EINVAL, "invalid_config",
                           "SBX_BILLING_INTERVAL_SECONDS must divide 86400");
    const char *start = getenv("SBX_BILLING_START");
    struct tm tm = {0};
    const char *end = strptime(start && *start ? start : "2026-10-17", "%Y-%m-%d", &tm);
    if (!end || *end)
        return sbx_err_set(err, EINVAL, "invalid_config",
                           "SBX_BILLING_START must be a date YYYY-MM-DD (UTC)");
    cfg->billing_start_s = (long long)timegm(&tm);
    cfg->data_region = env_or("SBX_DATA_REGION", "local");
    const char *ml = getenv("SBX_METRICS_LISTEN"), *cf = getenv("SBX_TEST_CLOCK_FILE"),
               *lf = getenv("SBX_LOG_FORMAT"), *rl = getenv("SBX_TEST_ROUTE_LOG");
    cfg->metrics_listen = ml && *ml ? sbx_xstrdup(ml) : NULL;
    cfg->test_clock_file = cf && *cf ? sbx_xstrdup(cf) : NULL;
    cfg->test_route_log = rl && *rl ? sbx_xstrdup(rl) : NULL;
    if (lf && *lf && strcmp(lf, "json") && strcmp(lf, "text"))
        return sbx_err_set(err, EINVAL, "invalid_config", "SBX_LOG_FORMAT must be text or json");
    cfg->log_json = lf && !strcmp(lf, "json");
    return 0;
}

/* A provider backend's connection from SBX_<P>_API_URL, _API_KEY, _SANDBOX_URL,
 * _SANDBOX_DOMAIN, _TEMPLATE_ID, _HTTP_TIMEOUT_SEC, _SANDBOX_TTL_SECONDS. */
static int provider_env(const char *p, struct rt_provider *out, struct sbx_err *err)
{
    char name[64];
    const char *v;
#define PV(suffix) (snprintf(name, sizeof(name), "SBX_%s_%s", p, suffix), v = getenv(name), v && *v)
    if (PV("API_URL")) {
        if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
            return sbx_err_set(err, EINVAL, "invalid_config", "%s must be an http(s) URL", name);
        out->api_url = sbx_xstrdup(v);
    }
    if (PV("API_KEY"))
        out->api_key = sbx_xstrdup(v);
    if (PV("SANDBOX_URL")) {
        if (strncmp(v, "http://", 7) && strncmp(v, "https://", 8))
            return sbx_err_set(err, EINVAL, "invalid_config", "%s must be an http(s) URL", name);
        out->sandbox_url = sbx_xstrdup(v);
    }
    if (PV("SANDBOX_DOMAIN"))
        out->domain = sbx_xstrdup(v);
    out->template_id = sbx_xstrdup(PV("TEMPLATE_ID") ? v : "base");
#undef PV
    long long t, ttl;
    snprintf(name, sizeof(name), "SBX_%s_HTTP_TIMEOUT_SEC", p);
    int r = env_num(name, 30, 1, 600, &t, err);
    if (r < 0)
        return r;
    snprintf(name, sizeof(name), "SBX_%s_SANDBOX_TTL_SECONDS", p);
    if ((r = env_num(name, RT_PROVIDER_TTL_DEFAULT_S, 60, 30 * 86400, &ttl, err)) < 0)
        return r;
    out->http_timeout_ms = (long)t * 1000;
    out->ttl_s = (long)ttl;
    return 0;
}

static void provider_free(struct rt_provider *p)
{
    free((char *)p->api_url);
    free((char *)p->api_key);
    free((char *)p->sandbox_url);
    free((char *)p->domain);
    free((char *)p->template_id);
    free((char *)p->network);
}

/* SBX_BACKEND: known names only; local (no isolation) only when the operator says so
 * in a second, separate setting. */
static int backend_list(struct sbxd_config *cfg, struct sbx_err *err)
{
    const char *v = getenv("SBX_BACKEND");
    const char *al = getenv("SBX_ALLOW_LOCAL");
    cfg->probe_backends = v && *v;
    cfg->allow_local = al && !strcmp(al, SBX_ALLOW_LOCAL_VALUE);
    cfg->backends = split_list(cfg->probe_backends ? v : "gvisor");
    if (!cfg->backends[0])
        return sbx_err_set(err, EINVAL, "invalid_config", "SBX_BACKEND names no backend");
    for (char **p = cfg->backends; *p; p++) {
        if (!rt_backend_find(*p))
            return sbx_err_set(err, EINVAL, "invalid_config",
                               "SBX_BACKEND: unknown backend '%.32s' (gvisor, namespaces, local, "
                               "docker, e2b, cube)",
                               *p);
        if (!strcmp(*p, "local") && !cfg->allow_local)
            return sbx_err_set(err, EPERM, "invalid_config",
                               "SBX_BACKEND names local, which runs untrusted code on this host "
                               "without isolation; set SBX_ALLOW_LOCAL=" SBX_ALLOW_LOCAL_VALUE
                               " to allow it");
        if ((!strcmp(*p, "e2b") && !cfg->e2b.api_url) || (!strcmp(*p, "cube") && !cfg->cube.api_url))
            return sbx_err_set(err, EINVAL, "invalid_config",
                               "SBX_BACKEND names %s without its provider: set SBX_%s_API_URL "
                               "(docs/providers.md)",
                               *p, !strcmp(*p, "e2b") ? "E2B" : "CUBE");
    }
    return 0;
}

static char *beside_self(const char *name)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return sbx_xstrdup(name);
    self[n] = '\0';
    return sbx_xasprintf("%s/%s", dirname(self), name);
}

int config_load(struct sbxd_config *cfg, int argc, char **argv, struct sbx_err *err)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->listen = env_or("SBX_LISTEN", "127.0.0.1:8787");
    cfg->data_dir = env_or("SBX_DATA_DIR", "data");
    cfg->template_cache = env_or("SBX_TEMPLATE_CACHE", "/var/cache/sbx/templates");
    cfg->runsc = env_or("SBX_RUNSC", "runsc");
    /* systrap, runsc 20240729's own default: the work inside runs 1.5-5x faster than on
     * ptrace. Its idle polling, which kept 4.7 % of a host core busy per sandbox, is
     * coalesced by the shim while nothing runs (docs/runtime.md, "Idle sandboxes"). */
    cfg->runsc_platform = env_or("SBX_RUNSC_PLATFORM", "systrap");
    /* The local engine's socket: a remote (TCP) engine is not supported (docs/runtime.md). */
    cfg->docker_host = env_or("SBX_DOCKER_HOST", "/var/run/docker.sock");
    if (cfg->docker_host[0] != '/')
        return sbx_err_set(err, EINVAL, "invalid_config",
                           "SBX_DOCKER_HOST must be the path of the engine's unix socket");
    const char *a = getenv("SBX_AGENT"), *s = getenv("SBX_SHIM");
    cfg->agent_path = a && *a ? sbx_xstrdup(a) : beside_self("sbx-agent");
    cfg->shim_path = s && *s ? sbx_xstrdup(s) : beside_self("sbx-shim");
    const char *bsl = getenv("SBX_BSL");
    cfg->bsl_path = bsl && *bsl ? sbx_xstrdup(bsl) : beside_self("sbx-bsl");
    const char *lu = getenv("SBX_LLM_URL"), *lk = getenv("SBX_LLM_API_KEY");
    cfg->llm_url = lu && *lu ? sbx_xstrdup(lu) : NULL;
    cfg->llm_api_key = lk && *lk ? sbx_xstrdup(lk) : NULL;
    cfg->llm_model = env_or("SBX_LLM_MODEL", "gpt-4o-mini");
    const char *au = getenv("SBX_LLM_ANTHROPIC_URL"), *ak = getenv("SBX_LLM_ANTHROPIC_API_KEY");
    cfg->llm_anthropic_url = au && *au ? sbx_xstrdup(au) : NULL;
    cfg->llm_anthropic_api_key = ak && *ak ? sbx_xstrdup(ak) : NULL;
    const char *np = getenv("SBX_NETWORK_POLICY"), *eh = getenv("SBX_EGRESS_HOSTS"),
               *eu = getenv("SBX_EGRESS_TEST_UPSTREAMS");
    cfg->network_policy = np && *np ? sbx_xstrdup(np) : NULL;
    cfg->egress_hosts = eh && *eh ? sbx_xstrdup(eh) : NULL;
    const char *se = getenv("SBX_SKILL_ENV");
    cfg->skill_env_file = se && *se ? sbx_xstrdup(se) : NULL;
    cfg->egress_test_upstreams = eu && *eu ? sbx_xstrdup(eu) : NULL;
    const char *su = getenv("SBX_STORE");
    cfg->store_url = su && *su ? sbx_xstrdup(su) : NULL;
    const char *ni = getenv("SBX_NODE_ID"), *nu = getenv("SBX_NODE_URL");
    cfg->node_id = ni && *ni ? sbx_xstrdup(ni) : NULL;
    cfg->node_url = nu && *nu ? sbx_xstrdup(nu) : NULL;
    const char *ss = getenv("SBX_SHARED_SNAPSHOTS");
    cfg->shared_snapshots = ss && *ss ? sbx_xstrdup(ss) : NULL;

    /* Every core of the host by default: a sandbox alone runs a make -j or git's threaded
     * packing as fast as the host would, and sandboxes side by side share the cores as the
     * kernel shares them between processes. An operator who wants a hard cap sets it. */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    cfg->host_millicores = 1000LL * (ncpu > 0 ? ncpu : 1);
    int r;
    if ((r = env_num("SBX_MEMORY_MB", 2048, 64, 1 << 20, &cfg->memory_mb, err)) < 0 ||
        (r = env_num("SBX_PIDS_MAX", 128, 16, 1 << 20, &cfg->pids_max, err)) < 0 ||
        (r = env_num("SBX_CPU_MILLICORES", cfg->host_millicores, 100, 1 << 20, &cfg->cpu_millicores,
                     err)) < 0 ||
        (r = env_num("SBX_TMP_MB", 512, 1, 1 << 20, &cfg->tmp_mb, err)) < 0 ||
        (r = env_num("SBX_MAX_PER_KEY", 3, 1, 10000, &cfg->max_per_key, err)) < 0 ||
        (r = env_num("SBX_MAX_PER_USER", 5, 1, 10000, &cfg->max_per_user, err)) < 0 ||
        (r = env_num("SBX_WORKSPACE_MB", 2048, 0, 1 << 22, &cfg->workspace_mb, err)) < 0 ||
        (r = env_num("SBX_V2_CAPACITY", 0, 0, 1 << 20, &cfg->v2_capacity, err)) < 0 ||
        (r = env_num("SBX_VOLUME_MAX_MB", 10240, 16, 1 << 22, &cfg->volume_max_mb, err)) < 0 ||
        (r = env_num("SBX_VOLUME_MB", cfg->volume_max_mb < 1024 ? cfg->volume_max_mb : 1024, 16,
                     cfg->volume_max_mb, &cfg->volume_mb, err)) < 0 ||
        (r = env_num("SBX_VOLUMES_PER_USER", 100, 1, 100000, &cfg->volumes_per_user, err)) < 0 ||
        (r = env_num("SBX_ARTIFACT_URL_TTL", 3600, 1, 7 * 86400, &cfg->artifact_url_ttl, err)) <
            0)
        return r;
    if (cfg->workspace_mb > 0 && cfg->workspace_mb < 16)
        return sbx_err_set(err, EINVAL, "invalid_config",
                           "SBX_WORKSPACE_MB must be 0 (no quota) or at least 16");
    if (strcmp(cfg->runsc_platform, "ptrace") && strcmp(cfg->runsc_platform, "systrap") &&
        strcmp(cfg->runsc_platform, "kvm"))
        return sbx_err_set(err, EINVAL, "invalid_config",
                           "SBX_RUNSC_PLATFORM must be ptrace, systrap or kvm, not '%.32s'",
                           cfg->runsc_platform);
    long long idle_s;
    if ((r = env_num("SBX_TERMINAL_IDLE_SECONDS", 900, 60, 86400, &idle_s, err)) < 0 ||
        (r = env_num("SBX_TERMINAL_GRACE_SECONDS", 300, 0, 86400, &cfg->terminal_grace_s, err)) <
            0 ||
        /* Test knobs: the tests cannot wait a minute for an idle terminal or two for a
         * ticket to expire. Never set them in production. */
        (r = env_num("SBX_TEST_TERMINAL_IDLE_MS", idle_s * 1000, 1, 86400000,
                     &cfg->terminal_idle_ms, err)) < 0 ||
        (r = env_num("SBX_TEST_TICKET_TTL_MS", 120000, 1, 120000, &cfg->ticket_ttl_ms, err)) < 0 ||
        (r = env_num("SBX_TEST_TERMINAL_IDLE_UNIT_MS", 1000, 1, 1000, &cfg->terminal_idle_unit_ms,
                     err)) < 0)
        return r;
    cfg->terminal_origins = split_list(getenv("SBX_TERMINAL_ORIGINS"));
    cfg->cors_origins = split_list(getenv("SBX_CORS_ORIGINS"));
    const char *sd = getenv("SBX_SKILLS_DIR"), *si = getenv("SBX_SKILL_INDEX_URL");
    cfg->skills_dir = sd && *sd ? sbx_xstrdup(sd) : beside_self("../skills");
    cfg->skill_index_url = si && *si ? sbx_xstrdup(si) : NULL;
    cfg->mcp_origins = split_list(getenv("SBX_MCP_ORIGINS"));
    cfg->mcp_hosts = split_list(getenv("SBX_MCP_HOSTS"));
    if ((r = env_num("SBX_TEST_MCP_TICK_MS", 10000, 100, 60000, &cfg->mcp_tick_ms, err)) < 0 ||
        (r = env_num("SBX_TEST_MCP_HOLD_MS", 50000, 100, 55000, &cfg->mcp_hold_ms, err)) < 0 ||
        (r = env_num("SBX_TEST_CHAT_KEEPALIVE_MS", 15000, 100, 60000, &cfg->chat_keepalive_ms,
                     err)) < 0)
        return r;
    cfg->preview_listen = env_or("SBX_PREVIEW_LISTEN", "127.0.0.1:8788");
    const char *pd = getenv("SBX_PREVIEW_DOMAIN");
    cfg->preview_domain = pd && *pd ? sbx_xstrdup(pd) : NULL;
    cfg->preview_scheme = env_or("SBX_PREVIEW_SCHEME", "https");
    const char *ed = getenv("SBX_E2B_DOMAIN");
    const char *lport = strrchr(cfg->preview_listen, ':');
    cfg->e2b_domain = ed && *ed       ? sbx_xstrdup(ed)
                      : pd && *pd     ? sbx_xstrdup(pd)
                                      : sbx_xasprintf("sbx.localhost:%s", lport ? lport + 1 : "80");
    if ((r = preview_ports(cfg, err)) < 0 || (r = billing_config(cfg, err)) < 0)
        return r;
    if ((r = provider_env("E2B", &cfg->e2b, err)) < 0 ||
        (r = provider_env("CUBE", &cfg->cube, err)) < 0 || (r = backend_list(cfg, err)) < 0)
        return r;
    const char *ar = getenv("SBX_ALLOW_ROOT");
    if (ar && *ar && strcmp(ar, "0") && strcmp(ar, "1"))
        return sbx_err_set(err, EINVAL, "invalid_config", "SBX_ALLOW_ROOT must be 0 or 1");
    cfg->allow_root = ar && !strcmp(ar, "1");
    cfg->clamav_db = env_or("SBX_CLAMAV_DB", "/var/lib/clamav");
    const char *ca = getenv("SBX_FETCH_CA_FILE");
    cfg->fetch_ca_file = ca && *ca ? sbx_xstrdup(ca) : NULL;
    /* None by default: a probe never reaches a host the operator did not name. */
    const char *ph = getenv("SBX_PROBE_HOST");
    cfg->probe_host = ph && *ph ? sbx_xstrdup(ph) : NULL;
    if ((r = env_num("SBX_INPUT_URL_MAX_BYTES", 64LL << 20, 1, INPUT_URL_BYTES_LIMIT,
                     &cfg->input_url_max_bytes, err)) < 0 ||
        (r = env_num("SBX_INPUT_URL_TIMEOUT_SECONDS", 60, 1, 900, &cfg->input_url_timeout_s,
                     err)) < 0)
        return r;
    const char *sig = getenv("SBX_SIGNATURES");
    cfg->signatures = sig && *sig ? sbx_xstrdup(sig) : beside_self("../share/signatures/sbx.ndb");

    const char *wp = getenv("SBX_WARM_POOL");
    cfg->warm_pool = wp && *wp ? sbx_xstrdup(wp) : NULL;
    const char *ws = getenv("SBX_WARM_SNAPSHOT");
    cfg->warm_snapshot = ws && *ws ? sbx_xstrdup(ws) : NULL;
    if ((r = env_num("SBX_WARM_POOL_MIN_FREE_MB", 2048, 0, 1 << 24, &cfg->warm_pool_min_free_mb,
                     err)) < 0)
        return r;
    cfg->template_registries = env_or("SBX_TEMPLATE_REGISTRIES", "deb.debian.org,registry.npmjs.org");
    const char *as = getenv("SBX_TEMPLATE_APT_SOURCES");
    cfg->template_apt_sources = as && *as ? sbx_xstrdup(as) : NULL;
    cfg->template_npm_registry = env_or("SBX_TEMPLATE_NPM_REGISTRY", "https://registry.npmjs.org/");
    if ((r = env_num("SBX_TEMPLATE_BUILDS_MAX", 2, 1, 16, &cfg->template_builds_max, err)) < 0)
        return r;
    const char *ts = getenv("SBX_TEMPLATE_SCRIPT");
    cfg->template_script =
        ts && *ts ? sbx_xstrdup(ts) : beside_self("../scripts/build-template.sh");

    if ((r = env_num("SBX_NODE_CAPACITY", 100, 1, 1000000, &cfg->node_capacity, err)) < 0 ||
        (r = env_num("SBX_NODE_HEARTBEAT_MS", 2000, 100, 60000, &cfg->node_heartbeat_ms, err)) <
            0 ||
        (r = env_num("SBX_NODE_DEAD_MS", 10000, 200, 3600000, &cfg->node_dead_ms, err)) < 0)
        return r;
    if (cfg->node_dead_ms < 2 * cfg->node_heartbeat_ms)
        return sbx_err_set(err, EINVAL, "invalid_config",
                           "SBX_NODE_DEAD_MS must be at least twice SBX_NODE_HEARTBEAT_MS");
    if ((r = env_num("SBX_RETAIN_EXEC_DAYS", 30, 0, 36500, &cfg->retain_exec_days, err)) < 0 ||
        (r = env_num("SBX_RETAIN_EGRESS_DAYS", 30, 0, 36500, &cfg->retain_egress_days, err)) <
            0 ||
        (r = env_num("SBX_RETAIN_AUDIT_DAYS", 365, 0, 36500, &cfg->retain_audit_days, err)) < 0 ||
        (r = env_num("SBX_RETAIN_EXEC_MAX", 1000000, 0, 1LL << 40, &cfg->retain_exec_max, err)) <
            0 ||
        (r = env_num("SBX_RETAIN_AUDIT_MAX", 0, 0, 1LL << 40, &cfg->retain_audit_max, err)) < 0 ||
        (r = env_num("SBX_TEST_RETAIN_DAY_MS", 86400000, 1, 86400000, &cfg->retain_day_ms,
                     err)) < 0 ||
        (r = env_num("SBX_TEST_RETAIN_EVERY_MS", 3600000, 10, 86400000, &cfg->retain_every_ms,
                     err)) < 0)
        return r;

    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"data-dir", required_argument, NULL, 'd'},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "l:d:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            free(cfg->listen);
            cfg->listen = sbx_xstrdup(optarg);
            break;
        case 'd':
            free(cfg->data_dir);
            cfg->data_dir = sbx_xstrdup(optarg);
            break;
        case 'v':
            cfg->verbose++;
            break;
        case 'h':
            printf("usage: sbxd [--listen ADDR:PORT] [--data-dir DIR] [--verbose]\n"
                   "environment: SBX_LISTEN SBX_DATA_DIR SBX_ADMIN_KEY SBX_TEMPLATE_CACHE "
                   "SBX_RUNSC SBX_RUNSC_PLATFORM SBX_DOCKER_HOST SBX_E2B_API_URL SBX_E2B_API_KEY SBX_CUBE_API_URL SBX_MEMORY_MB SBX_PIDS_MAX SBX_CPU_MILLICORES SBX_TMP_MB "
                   "SBX_MAX_PER_KEY SBX_MAX_PER_USER SBX_WORKSPACE_MB SBX_V2_CAPACITY "
                   "SBX_ARTIFACT_URL_TTL "
                   "SBX_PUBLIC_URL SBX_CLAMAV_DB SBX_FETCH_CA_FILE SBX_PROBE_HOST "
                   "SBX_INPUT_URL_MAX_BYTES SBX_INPUT_URL_TIMEOUT_SECONDS SBX_SIGNATURES SBX_LLM_URL "
                   "SBX_LLM_API_KEY "
                   "SBX_LLM_MODEL SBX_TERMINAL_ORIGINS SBX_CORS_ORIGINS SBX_SKILLS_DIR SBX_SKILL_INDEX_URL SBX_TERMINAL_IDLE_SECONDS "
                   "SBX_TERMINAL_GRACE_SECONDS SBX_PREVIEW_LISTEN SBX_PREVIEW_URL "
                   "SBX_PREVIEW_DOMAIN SBX_E2B_DOMAIN SBX_PREVIEW_SCHEME SBX_PREVIEW_RESERVED_PORTS "
                   "SBX_DAILY_EXEC_SECONDS SBX_BILLING_START SBX_BILLING_INTERVAL_SECONDS "
                   "SBX_PRICE_EXEC_HOUR_MICRO_EUR SBX_FREE_EXEC_SECONDS SBX_PRICE_V2_HOUR_MICRO_EUR "
                   "SBX_FREE_V2_SECONDS SBX_PRICE_SNAPSHOT_GB_MONTH_MICRO_EUR SBX_DATA_REGION "
                   "SBX_METRICS_LISTEN SBX_LOG_FORMAT "
                   "SBX_WARM_POOL SBX_WARM_POOL_MIN_FREE_MB SBX_WARM_SNAPSHOT "
                   "SBX_BACKEND SBX_ALLOW_LOCAL SBX_ALLOW_ROOT "
                   "SBX_RETAIN_EXEC_DAYS SBX_RETAIN_EGRESS_DAYS SBX_RETAIN_AUDIT_DAYS "
                   "SBX_RETAIN_EXEC_MAX SBX_RETAIN_AUDIT_MAX\n");
            return 1;
        default:
            return sbx_err_set(err, EINVAL, "invalid_config", "unknown option (see --help)");
        }
    }
    if (optind < argc)
        return sbx_err_set(err, EINVAL, "invalid_config", "unexpected argument %s", argv[optind]);
    /* Sandboxes and the shim refer to the data dir long after we chdir or restart. */
    char abs[PATH_MAX];
    if (sbx_mkdir_p(cfg->data_dir, 0700) < 0 || !realpath(cfg->data_dir, abs))
        return sbx_err_sys(err, errno ? errno : EINVAL, "data dir %s", cfg->data_dir);
    free(cfg->data_dir);
    cfg->data_dir = sbx_xstrdup(abs);
    const char *vd = getenv("SBX_VOLUMES_DIR");
    cfg->volumes_dir = vd && *vd ? sbx_xstrdup(vd) : sbx_xasprintf("%s/volumes", cfg->data_dir);
    const char *pub = getenv("SBX_PUBLIC_URL");
    cfg->public_url = pub && *pub ? sbx_xstrdup(pub) : sbx_xasprintf("http://%s", cfg->listen);
    const char *pu = getenv("SBX_PREVIEW_URL");
    cfg->preview_url =
        pu && *pu ? sbx_xstrdup(pu) : sbx_xasprintf("http://%s", cfg->preview_listen);
    return 0;
}

void config_free(struct sbxd_config *cfg)
{
    free(cfg->node_id);
    free(cfg->node_url);
    free(cfg->shared_snapshots);
    free(cfg->volumes_dir);
    free(cfg->listen);
    free(cfg->data_dir);
    free(cfg->template_cache);
    free(cfg->template_script);
    free(cfg->runsc);
    free(cfg->runsc_platform);
    free(cfg->docker_host);
    provider_free(&cfg->e2b);
    provider_free(&cfg->cube);
    for (char **p = cfg->backends; p && *p; p++)
        free(*p);
    free(cfg->backends);
    free(cfg->agent_path);
    free(cfg->bsl_path);
    free(cfg->shim_path);
    free(cfg->public_url);
    free(cfg->clamav_db);
    free(cfg->fetch_ca_file);
    free(cfg->probe_host);
    free(cfg->signatures);
    free(cfg->llm_url);
    if (cfg->llm_api_key)
        memset(cfg->llm_api_key, 0, strlen(cfg->llm_api_key));
    free(cfg->llm_api_key);
    free(cfg->llm_model);
    free(cfg->llm_anthropic_url);
    if (cfg->llm_anthropic_api_key)
        memset(cfg->llm_anthropic_api_key, 0, strlen(cfg->llm_anthropic_api_key));
    free(cfg->llm_anthropic_api_key);
    free(cfg->network_policy);
    free(cfg->egress_hosts);
    free(cfg->skill_env_file);
    free(cfg->egress_test_upstreams);
    for (char **o = cfg->terminal_origins; o && *o; o++)
        free(*o);
    free(cfg->terminal_origins);
    for (char **o = cfg->cors_origins; o && *o; o++)
        free(*o);
    free(cfg->cors_origins);
    free(cfg->skills_dir);
    free(cfg->skill_index_url);
    for (char **o = cfg->mcp_origins; o && *o; o++)
        free(*o);
    free(cfg->mcp_origins);
    for (char **o = cfg->mcp_hosts; o && *o; o++)
        free(*o);
    free(cfg->mcp_hosts);
    free(cfg->preview_listen);
    free(cfg->preview_url);
    free(cfg->preview_domain);
    free(cfg->e2b_domain);
    free(cfg->preview_scheme);
    free(cfg->preview_reserved);
    free(cfg->data_region);
    free(cfg->metrics_listen);
    free(cfg->test_clock_file);
    free(cfg->test_route_log);
    free(cfg->warm_pool);
    free(cfg->warm_snapshot);
    free(cfg->store_url);
    free(cfg->template_registries);
    free(cfg->template_apt_sources);
    free(cfg->template_npm_registry);
    memset(cfg, 0, sizeof(*cfg));
}
