/* sbxd's configuration: flags over environment over defaults, fixed after start. */
#ifndef SBX_CONFIG_H
#define SBX_CONFIG_H

#include <stddef.h>

#include "../common/err.h"
#include "../runtime/rt.h"

/* The one value of SBX_ALLOW_LOCAL that allows the local backend: no accident sets it. */
#define SBX_ALLOW_LOCAL_VALUE "yes-no-isolation"

/* The most an operator may let one request's url inputs fetch: what sbxd holds in memory
 * until they are written. */
#define INPUT_URL_BYTES_LIMIT (1LL << 30)

struct sbxd_config {
    char *listen;         /* --listen / SBX_LISTEN, default 127.0.0.1:8787 */
    char *data_dir;       /* --data-dir / SBX_DATA_DIR, default ./data */
    char *template_cache; /* SBX_TEMPLATE_CACHE, default /var/cache/sbx/templates */
    char *runsc;          /* SBX_RUNSC, default "runsc" */
    char *runsc_platform; /* SBX_RUNSC_PLATFORM: ptrace (default), systrap or kvm */
    char *docker_host;    /* SBX_DOCKER_HOST: the docker backend's engine socket */
    /* The provider backends' platform connections (SBX_E2B_API_URL, SBX_CUBE_API_URL, ...,
     * docs/providers.md); api_url NULL when unset. Strings owned. */
    struct rt_provider e2b, cube;
    char *agent_path;     /* SBX_AGENT, default sbx-agent beside sbxd */
    char *bsl_path;       /* SBX_BSL, default sbx-bsl beside sbxd (docs/bsl.md) */
    char *shim_path;      /* SBX_SHIM, default sbx-shim beside sbxd */
    long long memory_mb;      /* SBX_MEMORY_MB, 2048 */
    long long pids_max;       /* SBX_PIDS_MAX, 128 (docs/security.md: why not more) */
    long long cpu_millicores; /* SBX_CPU_MILLICORES, host_millicores */
    long long host_millicores; /* 1000 x the host's online cores, read once at start */
    long long tmp_mb;         /* SBX_TMP_MB, 512 */
    long long max_per_key;    /* SBX_MAX_PER_KEY, 3 */
    long long max_per_user;   /* SBX_MAX_PER_USER, 5 */
    /* SBX_V2_CAPACITY: v2 sandboxes (creating or running) this host takes; past it a create
     * without backend gets v1, with backend "v2" 503 sandbox_capacity. 0: no limit. */
    long long v2_capacity;
    long long workspace_mb;   /* SBX_WORKSPACE_MB, 2048; 0 = a plain directory, no quota */
    long long artifact_url_ttl; /* SBX_ARTIFACT_URL_TTL, seconds a signed link lives, 3600 */
    char *public_url;         /* SBX_PUBLIC_URL, base of signed links, http://<listen> */
    char *clamav_db;          /* SBX_CLAMAV_DB, the system's ClamAV database, /var/lib/clamav */
    char *fetch_ca_file;      /* SBX_FETCH_CA_FILE, an extra CA bundle for url inputs, or NULL */
    char *probe_host; /* SBX_PROBE_HOST: what the probe reaches where allow_out names no host
                         and egress is allowed by default, or NULL */
    /* What one request's url inputs may fetch in all (docs/files.md). */
    long long input_url_max_bytes; /* SBX_INPUT_URL_MAX_BYTES, 64 MiB (..INPUT_URL_BYTES_LIMIT) */
    long long input_url_timeout_s; /* SBX_INPUT_URL_TIMEOUT_SECONDS, 60 (..900) */
    char *signatures;         /* SBX_SIGNATURES, our own set, share/signatures/sbx.ndb */
    /* llm_query's OpenAI-compatible endpoint; NULL when the operator set none. The key
     * stays in sbxd: sandboxes never see it. */
    char *llm_url;     /* SBX_LLM_URL, the base URL (…/v1): we POST {url}/chat/completions */
    char *llm_api_key; /* SBX_LLM_API_KEY, optional */
    char *llm_model;   /* SBX_LLM_MODEL, the default model */
    /* The chat gateway's Anthropic-format endpoint (docs/chat.md), or NULL. */
    char *llm_anthropic_url;     /* SBX_LLM_ANTHROPIC_URL (…/v1): we POST {url}/messages */
    char *llm_anthropic_api_key; /* SBX_LLM_ANTHROPIC_API_KEY, sent as x-api-key */
    long long chat_keepalive_ms; /* a streamed chat's comment while tools run, 15 s
                                    (SBX_TEST_CHAT_KEEPALIVE_MS: tests only) */
    /* Egress (docs/egress.md). NULL when unset. */
    char *network_policy;        /* SBX_NETWORK_POLICY: the operator's policy file (JSON) */
    char *egress_hosts;          /* SBX_EGRESS_HOSTS: tests only, a hosts file as the resolver */
    char *egress_test_upstreams; /* SBX_EGRESS_TEST_UPSTREAMS: tests only, ADDR:PORT,... */
    /* Terminals (docs/terminals.md). */
    char **terminal_origins;    /* SBX_TERMINAL_ORIGINS, comma-separated; NULL-terminated */
    char *skills_dir;      /* SBX_SKILLS_DIR: the skills shipped with sbx, skills/ of the checkout */
    char *skill_index_url; /* SBX_SKILL_INDEX_URL: where "@owner/slug" sources come from, or NULL */
    char **cors_origins;
    long long http_idle_s;      /* SBX_HTTP_IDLE_SECONDS, 30: an idle connection is closed */
    long long http_per_address; /* SBX_HTTP_PER_ADDRESS, 256 connections from one address */        /* SBX_CORS_ORIGINS: browser apps' origins, or "*" */
    long long terminal_idle_ms; /* SBX_TERMINAL_IDLE_SECONDS, 900 (60..86400) */
    long long terminal_grace_s; /* SBX_TERMINAL_GRACE_SECONDS, 300 (0..86400) */
    long long ticket_ttl_ms;    /* 120 s */
    /* What one second of a configuration's terminal_idle_disconnect_sec lasts, in ms
     * (1000; SBX_TEST_TERMINAL_IDLE_UNIT_MS, a test knob). */
    long long terminal_idle_unit_ms;
    /* MCP (docs/mcp.md). */
    char **mcp_origins; /* SBX_MCP_ORIGINS: browser Origins allowed at /mcp (default none) */
    char **mcp_hosts;   /* SBX_MCP_HOSTS: Host names allowed besides loopback and the listen
                           and public addresses (DNS rebinding) */
    long long mcp_tick_ms; /* progress every 10 s (SBX_TEST_MCP_TICK_MS: tests only) */
    long long mcp_hold_ms; /* a command's handle after 50 s (SBX_TEST_MCP_HOLD_MS: tests) */
    /* Preview URLs (docs/preview.md). */
    char *preview_listen;  /* SBX_PREVIEW_LISTEN, default 127.0.0.1:8788 */
    char *preview_url;     /* SBX_PREVIEW_URL, base of path-style links, http://<preview_listen> */
    char *preview_domain;  /* SBX_PREVIEW_DOMAIN: links by host name {port}-{id}.<domain>; or NULL */
    /* SBX_E2B_DOMAIN: the domain the E2B SDK is told, so its getHost(port) names
     * {port}-{id}.<domain>, which the preview listener routes by name; default the
     * preview domain, else sbx.localhost:<preview listener's port> (browsers resolve
     * *.localhost to loopback by themselves). */
    char *e2b_domain;
    char *preview_scheme;  /* SBX_PREVIEW_SCHEME, of host-name links, default https */
    unsigned *preview_reserved; /* SBX_PREVIEW_RESERVED_PORTS, default 8080 */
    size_t npreview_reserved;
    /* Metering, billing and metrics (docs/billing.md, docs/operations.md). */
    long long daily_exec_s;       /* SBX_DAILY_EXEC_SECONDS per user per UTC day, 7200; 0: none */
    long long billing_start_s;    /* SBX_BILLING_START (YYYY-MM-DD, UTC), 2026-10-17 */
    long long billing_interval_s; /* SBX_BILLING_INTERVAL_SECONDS, 600; divides a day */
    long long price_exec_hour;    /* SBX_PRICE_EXEC_HOUR_MICRO_EUR, 100000 (0.10 EUR) */
    long long free_exec_s;        /* SBX_FREE_EXEC_SECONDS per user per month, 36000 */
    long long price_v2_hour;      /* SBX_PRICE_V2_HOUR_MICRO_EUR, 100000 */
    long long free_v2_s;          /* SBX_FREE_V2_SECONDS per user per month, 18000 */
    long long price_snapshot_gb_month; /* SBX_PRICE_SNAPSHOT_GB_MONTH_MICRO_EUR, 50000 */
    long long price_volume_gb_month; /* SBX_PRICE_VOLUME_GB_MONTH_MICRO_EUR, the snapshot price */
    char *data_region;                 /* SBX_DATA_REGION, the x-sbx-data-region header, "local" */
    char *metrics_listen;  /* SBX_METRICS_LISTEN: /metrics without a key on ADDR:PORT, or NULL */
    int log_json;          /* SBX_LOG_FORMAT=json */
    char *test_clock_file; /* SBX_TEST_CLOCK_FILE: tests only, billing's "now" in unix seconds */
    char *test_route_log;  /* SBX_TEST_ROUTE_LOG: tests only, a file each routed request's
                              "METHOD PATTERN" line is appended to (tests/run.py's route check) */
    long long billing_tick_ms; /* SBX_TEST_BILLING_TICK_MS: metering and settlement, 60000 */
    /* SBX_SKILL_ENV: the variables skills declare (docs/configs.md), a JSON file, until
     * skills are installed through the API; NULL when unset. */
    char *skill_env_file;
    /* Warm pools (docs/templates.md). */
    char *warm_pool;               /* SBX_WARM_POOL, "base:2,office:1", or NULL */
    long long warm_pool_min_free_mb; /* SBX_WARM_POOL_MIN_FREE_MB, 2048: below it pools yield */
    char *warm_snapshot;             /* SBX_WARM_SNAPSHOT, "office": templates restored warm */
    /* Custom template builds (docs/templates.md). */
    char *template_registries;   /* SBX_TEMPLATE_REGISTRIES: the hosts a build reaches */
    char *template_apt_sources;  /* SBX_TEMPLATE_APT_SOURCES: sources.list for builds, or NULL */
    char *template_npm_registry; /* SBX_TEMPLATE_NPM_REGISTRY, https://registry.npmjs.org/ */
    long long template_builds_max; /* SBX_TEMPLATE_BUILDS_MAX, 2: builds at once */
    /* SBX_TEMPLATE_SCRIPT: the operator's build script (scripts/build-template.sh beside the
     * checkout sbxd runs from), which templates/query runs for base and desktop. */
    char *template_script;
    /* Execution backends (docs/runtime.md). */
    char **backends;    /* SBX_BACKEND, comma-separated, in order of preference; "gvisor" */
    int probe_backends; /* SBX_BACKEND was set: start one sandbox on each at start-up */
    int allow_local;    /* SBX_ALLOW_LOCAL=yes-no-isolation: "local" may be listed */
    /* SBX_STORE: a postgres:// URL for a PostgreSQL store (docs/scale-out.md); NULL: SQLite
     * in the data dir. May hold a password: never logged. */
    char *store_url;
    /* Nodes sharing that store (docs/scale-out.md). */
    char *node_id;                /* SBX_NODE_ID; NULL: <data dir>/node.id, made once */
    char *node_url;               /* SBX_NODE_URL; NULL: http://<listen address> */
    long long node_capacity;      /* SBX_NODE_CAPACITY, 100 sandboxes creating or running */
    long long node_heartbeat_ms;  /* SBX_NODE_HEARTBEAT_MS, 2000 */
    long long node_dead_ms;       /* SBX_NODE_DEAD_MS, 10000: silent this long, unreachable */
    /* SBX_SHARED_SNAPSHOTS: a directory every node mounts at this path; a paused sandbox's
     * image and workspace are copied there so another node may resume it. NULL: none. */
    char *shared_snapshots;
    /* Volumes (docs/volumes.md): where they live (SBX_VOLUMES_DIR, <data>/volumes), the size
     * of one created without size_mb (SBX_VOLUME_MB, 1024), the largest (SBX_VOLUME_MAX_MB,
     * 10240) and how many one user may have (SBX_VOLUMES_PER_USER, 100). */
    char *volumes_dir;
    long long volume_mb, volume_max_mb, volumes_per_user;
    /* Retention (docs/reliability.md): days kept, 0 = forever. */
    long long retain_exec_days;   /* SBX_RETAIN_EXEC_DAYS, 30 */
    long long retain_egress_days; /* SBX_RETAIN_EGRESS_DAYS, 30 */
    long long retain_audit_days;  /* SBX_RETAIN_AUDIT_DAYS, 365 */
    long long retain_exec_max;    /* SBX_RETAIN_EXEC_MAX, 1000000 records; 0 = no cap */
    long long retain_audit_max;   /* SBX_RETAIN_AUDIT_MAX, 0 = no cap */
    long long retain_day_ms;      /* what a day lasts: SBX_TEST_RETAIN_DAY_MS, tests only */
    long long retain_every_ms;    /* SBX_TEST_RETAIN_EVERY_MS, 3600000: how often it prunes */
    int allow_root; /* SBX_ALLOW_ROOT=1: a request may ask for "user": "root" (docs/security.md) */
    int verbose;
};

/* Fill cfg from argv and the environment. Returns 0, 1 when --help was printed,
 * or a negative errno with err filled. */
int config_load(struct sbxd_config *cfg, int argc, char **argv, struct sbx_err *err);
void config_free(struct sbxd_config *cfg);

#endif
