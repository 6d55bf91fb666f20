/* POST /v1/system/sandbox-check {config | config_id, deep}: can this host run sandboxes
 * of a configuration? The shallow checks look at the document, the runtime and the
 * template; deep creates a sandbox from it, runs a script in it and destroys it. A
 * failing probe is still 200 with ok false; only bad parameters are errors. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../../runtime/docker_image.h"
#include "../../runtime/rt.h"
#include "../exec/exec.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sandbox/template.h"
#include "../sbxd.h"
#include "configs.h"
#include "provider_list.h"
#include "secrets.h"
#include "probe_net.h"

#define PROBE_SCRIPT "echo sbx-probe-ok; id -u; test -w /workspace"
#define PROBE_EXPECT "sbx-probe-ok\n"
#define PROBE_TIMEOUT_S 60

struct probe {
    struct sbxd *d;
    struct http_req *req;
    struct auth_identity who;
    char config_id[STORE_ID_MAX + 1]; /* "" for a configuration not stored */
    char owner[64];                   /* the lock's: "probe:" and the request id */
    const char *request_id;           /* inside owner: the request may be gone meanwhile */
    json_t *doc;
    json_t *checks;
    struct sandbox *sb;
    struct exec_run *run;
    json_t *argv;
    long long t0;
    bool deep;
    bool locked; /* config_id's lease is held (a deep probe's sandbox) */
    bool gone;   /* the client hung up: finish quietly */
    bool backend_pending; /* the provider's or the engine's check runs on a worker */
    struct probe_net *net;
    char net_host[EGRESS_HOST_MAX + 1];     /* what external_network reached, "" for none */
    char net_skipped[PROBE_NET_REASON_MAX]; /* why external_network was skipped */
};

static void add_check(json_t *checks, const char *name, int ok, const char *message,
                      const char *reason, long long latency_ms)
{
    json_array_append_new(checks,
                          json_pack("{s:s,s:o,s:s,s:s?,s:o}", "name", name, "ok",
                                    ok < 0 ? json_null() : json_boolean(ok), "message", message,
                                    "reason", reason, "latency_ms",
                                    latency_ms >= 0 ? json_integer(latency_ms) : json_null()));
}

static bool runtime_found(const char *runsc)
{
    if (strchr(runsc, '/'))
        return access(runsc, X_OK) == 0;
    const char *path = getenv("PATH");
    _cleanup_free_ char *copy = sbx_xstrdup(path ? path : "/usr/bin:/bin");
    for (char *save = NULL, *dir = strtok_r(copy, ":", &save); dir;
         dir = strtok_r(NULL, ":", &save)) {
        _cleanup_free_ char *p = sbx_xasprintf("%s/%s", dir, runsc);
        if (access(p, X_OK) == 0)
            return true;
    }
    return false;
}

/* What sandboxes of the document can do here (its backend: gvisor when it did not parse). */
static json_t *capabilities(const struct probe *p, const struct rt_backend *b)
{
    return json_pack("{s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b,s:b}", "pause", 1, "fork", 1,
                     "memory_snapshots", b->memory_snapshots, "terminal", 1, "preview", 1,
                     "egress_policy", b->isolated, "l7_inject", p->d->configs->trust_bundle != NULL,
                     "volume_mount", 1, "desktop",
                     json_is_true(json_object_get(p->doc, "desktop_enabled")));
}

static void probe_finish(struct probe *p)
{
    if (p->locked)
        configs_unlock(p->d->configs, p->config_id, p->owner);
    if (!p->gone) {
        bool ok = true;
        size_t i;
        json_t *c;
        json_array_foreach(p->checks, i, c)
        {
            ok = ok && !json_is_false(json_object_get(c, "ok"));
        }
        const struct rt_backend *b =
            rt_backend_find(json_string_value(json_object_get(p->doc, "backend")));
        if (!b)
            b = rt_backend_find("gvisor");
        http_respond_json(p->req, 200,
                          json_pack("{s:s,s:b,s:s,s:O,s:o}", "object", "sandbox_check", "ok", ok,
                                    "provider", b->name, "checks", p->checks, "capabilities",
                                    capabilities(p, b)));
    }
    json_decref(p->checks);
    json_decref(p->doc);
    json_decref(p->argv);
    free(p);
}

static void destroy_sandbox(struct probe *p)
{
    if (!p->sb)
        return;
    struct sbx_err err = {0};
    long long t = sbx_now_ms();
    int r = manager_destroy_by(p->d->mgr, p->sb, &p->who, p->request_id, "probe", &err);
    add_check(p->checks, "sandbox_destroy", r == 0, r == 0 ? "destroyed" : err.msg,
              r == 0 ? NULL : err.code, sbx_now_ms() - t);
    p->sb = NULL;
}

static void on_net_done(const struct exec_result *res, const struct sbx_err *err, void *data)
{
    struct probe *p = data;
    p->run = NULL;
    int ok = 0;
    char msg[600], reason[PROBE_NET_REASON_MAX];
    if (err) {
        snprintf(msg, sizeof(msg), "%s", err->msg);
        snprintf(reason, sizeof(reason), "%s", err->code);
    } else {
        probe_net_sandbox_judge(res->out[0].buf, res->out[0].len, p->net_host, &ok, msg,
                                sizeof(msg), reason);
    }
    add_check(p->checks, "sandbox_external_network", ok, msg, ok ? NULL : reason,
              sbx_now_ms() - p->t0);
    destroy_sandbox(p);
    probe_finish(p);
}

/* The deep probe's sandbox reaches external_network's host through its own egress
 * listener (the configuration's policy as its sandboxes get it). False when there is
 * nothing to run: the check is added, the caller ends the probe. */
static bool sandbox_net_check(struct probe *p)
{
    const char *backend = json_string_value(json_object_get(p->doc, "backend"));
    if (!strcmp(backend, "local"))
        return false; /* the host's network, no listener: external_network says it all */
    if (!p->net_host[0]) {
        add_check(p->checks, "sandbox_external_network", -1,
                  "no host to reach (see external_network)", p->net_skipped, -1);
        return false;
    }
    p->t0 = sbx_now_ms();
    json_decref(p->argv);
    p->argv = probe_net_sandbox_argv(p->net_host);
    struct exec_params ep = {.argv = p->argv,
                             .cwd = "/workspace",
                             .timeout_s = PROBE_TIMEOUT_S,
                             .command = probe_net_sandbox_script,
                             .language = "python"};
    struct exec_origin o = {.who = &p->who, .request_id = p->request_id, .action = "exec"};
    static const struct exec_observer obs = {.on_done = on_net_done};
    struct sbx_err e = {0};
    if (exec_start(p->sb, &ep, &o, &obs, p, &p->run, &e) < 0) {
        add_check(p->checks, "sandbox_external_network", 0, e.msg, e.code, 0);
        return false;
    }
    return true;
}

static void on_script_done(const struct exec_result *res, const struct sbx_err *err, void *data)
{
    struct probe *p = data;
    p->run = NULL;
    bool ok = res && res->exit_code == 0 && res->out[0].len >= strlen(PROBE_EXPECT) &&
              !memcmp(res->out[0].buf, PROBE_EXPECT, strlen(PROBE_EXPECT));
    char msg[160];
    if (err)
        snprintf(msg, sizeof(msg), "%.159s", err->msg);
    else
        snprintf(msg, sizeof(msg), "exit %d", res->exit_code);
    add_check(p->checks, "script", ok, ok ? "the script ran and /workspace is writable" : msg,
              ok    ? NULL
              : err ? err->code
                    : "script_failed",
              sbx_now_ms() - p->t0);
    if (!ok || p->gone || !sandbox_net_check(p)) {
        destroy_sandbox(p);
        probe_finish(p);
    }
}

static void on_probe_ready(struct sandbox *sb, const struct sbx_err *err, void *data)
{
    struct probe *p = data;
    add_check(p->checks, "sandbox_create", !err, err ? err->msg : "created and ready",
              err ? err->code : NULL, sbx_now_ms() - p->t0);
    if (err) {
        p->sb = NULL; /* already being destroyed */
        probe_finish(p);
        return;
    }
    p->t0 = sbx_now_ms();
    p->argv = json_pack("[s,s,s]", "/bin/sh", "-c", PROBE_SCRIPT);
    struct exec_params ep = {.argv = p->argv,
                             .cwd = "/workspace",
                             .timeout_s = PROBE_TIMEOUT_S,
                             .command = PROBE_SCRIPT,
                             .language = "shell"};
    struct exec_origin o = {.who = &p->who, .request_id = p->request_id, .action = "exec"};
    static const struct exec_observer obs = {.on_done = on_script_done};
    struct sbx_err e = {0};
    if (exec_start(sb, &ep, &o, &obs, p, &p->run, &e) < 0) {
        add_check(p->checks, "script", 0, e.msg, e.code, 0);
        destroy_sandbox(p);
        probe_finish(p);
    }
}

static void on_probe_abort(struct http_req *req, void *data)
{
    struct probe *p = data;
    p->gone = true;
    if (p->backend_pending)
        return; /* provider_listed or docker_job_done finishes it */
    if (p->net) {
        probe_net_cancel(p->net);
        p->net = NULL;
        probe_finish(p);
        return;
    }
    /* The sandbox and the script finish on their own; nobody waits for the answer. */
    if (p->sb && !p->run) {
        sandbox_drop_waiter(p->sb, p);
        destroy_sandbox(p);
        probe_finish(p);
    }
}

/* The docker backend's engine: reachable (through TLS with the configuration's
 * certificates for a remote one), its version, the configuration's runtime registered
 * there. One GET /info, bounded by the configuration's http_timeout_sec (at most
 * DOCKER_INFO_TIMEOUT_MS), on a worker thread: an engine that hangs holds no loop. */
struct docker_job {
    struct probe *p;
    char *host, *tls_dir, *runtime;
    long timeout_ms;
    int r;
    struct sbx_err err;
    char *version;
    bool has;
    long long ms;
};

static void docker_job_run(void *data)
{
    struct docker_job *j = data;
    struct docker_engine e = {.host = j->host, .tls_dir = j->tls_dir};
    long long t = sbx_now_ms();
    j->r = docker_engine_info(&e, j->timeout_ms, &j->version, &j->has, j->runtime, &j->err);
    j->ms = sbx_now_ms() - t;
}

static void after_shallow(struct probe *p);

static void docker_job_done(void *data, bool ran)
{
    struct docker_job *j = data;
    struct probe *p = j->p;
    p->backend_pending = false;
    if (!ran) {
        add_check(p->checks, "docker", 0, "the daemon is stopping", "docker_unreachable", -1);
    } else if (j->r < 0) {
        add_check(p->checks, "docker", 0, j->err.msg,
                  !strcmp(j->err.code, "docker_tls_error") ? j->err.code : "docker_unreachable",
                  j->ms);
    } else {
        const char *rt = j->runtime;
        _cleanup_free_ char *msg =
            sbx_xasprintf("engine %s at %s; runtime %s %s", j->version, j->host,
                          rt ? rt : "(the engine's default)",
                          !rt || j->has ? "present" : "not registered");
        add_check(p->checks, "docker", !rt || j->has, msg,
                  !rt || j->has ? NULL : "docker_runtime_missing", j->ms);
    }
    free(j->host);
    free(j->tls_dir);
    free(j->runtime);
    free(j->version);
    free(j);
    if (p->gone)
        probe_finish(p);
    else
        after_shallow(p);
}

/* Starts the engine's check: true when it runs (after_shallow follows it). */
static bool docker_check(struct probe *p, const char *backend)
{
    if (strcmp(backend, "docker"))
        return false;
    json_t *docker = json_object_get(p->doc, "docker");
    const char *host = json_string_value(json_object_get(docker, "host"));
    const char *tls = json_string_value(json_object_get(docker, "tls_cert_path"));
    const char *runtime = json_string_value(json_object_get(docker, "runtime"));
    struct docker_job *j = sbx_xcalloc(1, sizeof(*j));
    j->p = p;
    j->host = sbx_xstrdup(host && *host ? host : p->d->cfg.docker_host);
    j->tls_dir = host && *host && tls ? sbx_xstrdup(tls) : NULL;
    j->runtime = runtime ? sbx_xstrdup(runtime) : NULL;
    j->timeout_ms = (long)json_integer_value(json_object_get(docker, "http_timeout_sec")) * 1000;
    p->backend_pending = true;
    jobs_submit(p->d->jobs, docker_job_run, docker_job_done, j);
    return true;
}

/* A provider backend (docs/providers.md): reachable and the credentials accepted, by one
 * GET /sandboxes with the configuration's key (or the platform's SBX_E2B_* one), on a
 * worker thread (provider_list.c): a provider may take up to its http_timeout_sec. */
static void provider_listed(void *data, json_t *res)
{
    struct probe *p = data;
    p->backend_pending = false;
    long long ms = json_integer_value(json_object_get(res, "latency_ms"));
    if (!json_is_true(json_object_get(res, "reachable"))) {
        add_check(p->checks, "provider", 0, json_string_value(json_object_get(res, "error")),
                  json_string_value(json_object_get(res, "code")), ms);
    } else {
        _cleanup_free_ char *msg = sbx_xasprintf(
            "the provider at %s answers with these credentials (%zu sandboxes listed)",
            json_string_value(json_object_get(res, "api_url")),
            json_array_size(json_object_get(res, "list")));
        add_check(p->checks, "provider", 1, msg, NULL, ms);
    }
    json_decref(res);
    if (p->gone)
        probe_finish(p);
    else
        after_shallow(p);
}

/* Starts the provider check: true when it runs (after_shallow follows it), false when the
 * backend is not a provider's. */
static bool provider_check(struct probe *p, const char *backend)
{
    p->backend_pending = configs_provider_list(
        p->d, p->config_id[0] ? p->config_id : CONFIGS_PROBE_ID, p->doc, PROVIDER_LIST_SANDBOXES,
        provider_listed, p);
    return p->backend_pending;
}

static void shallow_checks(struct probe *p)
{
    const struct sbxd_config *cfg = &p->d->cfg;
    add_check(p->checks, "config", 1, "the configuration is valid", NULL, -1);
    struct sbx_err err = {0};
    const char *backend = json_string_value(json_object_get(p->doc, "backend"));
    if (configs_check_backend(p->d->configs, p->doc, &err) < 0)
        add_check(p->checks, "runtime", 0, err.msg, "backend_not_enabled", -1);
    else if (!strcmp(backend, "gvisor") && !runtime_found(cfg->runsc))
        add_check(p->checks, "runtime", 0, "runsc is not on this host", "runtime_missing", -1);
    else
        add_check(p->checks, "runtime", 1, "the backend is enabled on this host", NULL, -1);
    struct template_info tpl;
    memset(&err, 0, sizeof(err));
    long long t = sbx_now_ms();
    const char *name = json_string_value(json_object_get(p->doc, "template"));
    bool tok = template_resolve(cfg->template_cache, name, &tpl, &err) == 0;
    if (tok)
        template_info_clear(&tpl);
    add_check(p->checks, "template", tok, tok ? "the template is built" : err.msg,
              tok ? NULL : err.code, sbx_now_ms() - t);
    json_t *vol = json_object_get(p->doc, "volume_mount");
    if (json_is_true(json_object_get(vol, "enabled")))
        add_check(p->checks, "volume_mount", -1,
                  "mounted at create from the creator's volume of that id or name",
                  "not_probed", -1);
}

/* The document to probe: the one sent (checked; masked values restored from config_id's)
 * or config_id's as stored. */
static int probe_doc(struct sbxd *d, json_t *body, struct probe *p, struct sbx_err *err)
{
    json_t *cfg = json_object_get(body, "config");
    json_t *idv = json_object_get(body, "config_id");
    if (cfg && json_is_null(cfg))
        cfg = NULL;
    if (cfg && !json_is_object(cfg))
        return sbx_err_set(err, EINVAL, "invalid_request", "config must be an object");
    if (idv && !json_is_null(idv) && !json_is_string(idv))
        return sbx_err_set(err, EINVAL, "invalid_request", "config_id must be a string");
    const char *id = json_string_value(idv);
    if (!cfg && !id)
        return sbx_err_set(err, EINVAL, "invalid_request", "send config or config_id");
    json_t *deep = json_object_get(body, "deep");
    if (deep && !json_is_null(deep) && !json_is_boolean(deep))
        return sbx_err_set(err, EINVAL, "invalid_request", "deep must be true or false");
    if (id)
        snprintf(p->config_id, sizeof(p->config_id), "%s", id);
    return configs_doc_of(d->configs, cfg, id, &p->doc, err);
}

/* A deep probe makes a sandbox from the document, runs the script in it (and the
 * external-network check from it) and destroys it. */
static void start_deep(struct probe *p)
{
    struct sbxd *d = p->d;
    struct sbx_err err = {0};
    struct sandbox_params sp = {
        .template_name = "base", .ttl_seconds = 600, .enable_default_session = false};
    json_t *hold = NULL;
    p->t0 = sbx_now_ms();
    int r = configs_apply(d->configs, &p->who, p->config_id[0] ? p->config_id : NULL, p->doc, &sp,
                          &hold, &err);
    if (r == 0)
        r = manager_create(d->mgr, &p->who, &sp, on_probe_ready, p, &p->sb, &err);
    json_decref(hold);
    if (r < 0) {
        add_check(p->checks, "sandbox_create", 0, err.msg, err.code, sbx_now_ms() - p->t0);
        probe_finish(p);
        return;
    }
    http_req_suspend(p->req, on_probe_abort, p);
}

static void on_net_checked(void *data, int ok, const char *message, const char *reason)
{
    struct probe *p = data;
    p->net = NULL;
    add_check(p->checks, "external_network", ok, message, reason,
              ok < 0 ? -1 : sbx_now_ms() - p->t0);
    if (ok < 0) {
        p->net_host[0] = '\0';
        snprintf(p->net_skipped, sizeof(p->net_skipped), "%s", reason);
    }
    if (p->deep && !p->gone)
        start_deep(p);
    else
        probe_finish(p);
}

static void api_sandbox_check(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    struct probe *p = sbx_xcalloc(1, sizeof(*p));
    p->d = d;
    p->req = req;
    p->who = *http_req_identity(req);
    p->checks = json_array();
    snprintf(p->owner, sizeof(p->owner), "probe:%s", http_req_id(req));
    p->request_id = p->owner + strlen("probe:");
    int r = http_req_json(req, &body, &err);
    if (r == 0)
        r = probe_doc(d, body, p, &err);
    bool deep = json_is_true(json_object_get(body, "deep"));
    json_decref(body);
    if (r < 0 && !strcmp(err.code, "invalid_sandbox_config")) {
        /* A configuration that does not pass its checks is a failed probe, not a bad call. */
        add_check(p->checks, "config", 0, err.msg, err.code, -1);
        p->config_id[0] = '\0';
        probe_finish(p);
        return;
    }
    if (r < 0) {
        json_decref(p->checks);
        json_decref(p->doc);
        free(p);
        http_respond_error(req, &err);
        return;
    }
    p->deep = deep;
    /* The stored configuration must not change while a deep probe runs: its sandbox is
     * made from the document read here. */
    if (deep && p->config_id[0]) {
        if (configs_lock(d->configs, p->config_id, p->owner, &err) < 0) {
            json_decref(p->checks);
            json_decref(p->doc);
            free(p);
            http_respond_error(req, &err);
            return;
        }
        p->locked = true;
    }
    shallow_checks(p);
    const char *backend = json_string_value(json_object_get(p->doc, "backend"));
    if (docker_check(p, backend) || provider_check(p, backend)) {
        http_req_suspend(req, on_probe_abort, p);
        return;
    }
    after_shallow(p);
}

/* The external-network check, then the deep part. */
static void after_shallow(struct probe *p)
{
    struct sbxd *d = p->d;
    p->t0 = sbx_now_ms();
    /* When the policy lets no host out, on_net_checked has run (and may have ended the
     * probe) before this returns: p is touched again only when the check is under way. */
    struct probe_net *net;
    probe_net_start(d->egress, d->jobs, d->cfg.fetch_ca_file, d->cfg.probe_host, p->doc,
                    on_net_checked, p, p->net_host, &net);
    if (net) {
        p->net = net;
        http_req_suspend(p->req, on_probe_abort, p);
    }
}
static const struct route routes[] = {
    {"POST", "/v1/system/sandbox-check", AUTH_ADMIN_FULL, api_sandbox_check, 0},
};

const struct route_table probe_routes = ROUTE_TABLE(routes);
