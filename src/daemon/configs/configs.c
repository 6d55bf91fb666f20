#include "configs.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../../runtime/docker_api.h"
#include "../../runtime/docker_image.h"
#include "../../runtime/provider.h"
#include "../../runtime/provider_api.h"
#include "../exec/exec.h"
#include "../sandbox/params.h"
#include "../volumes/volumes.h"

#define WIDENED(...) sbx_err_set(err, EINVAL, "sandbox_config_widened", __VA_ARGS__)

void config_loaded_clear(struct config_loaded *l)
{
    if (!l)
        return;
    store_config_clear(&l->rec);
    json_decref(l->doc);
    l->doc = NULL;
}

int configs_load(struct configs *c, const char *id, struct config_loaded *out, struct sbx_err *err)
{
    memset(out, 0, sizeof(*out));
    int r = store_config_get(c->store, id, &out->rec, err);
    if (r < 0)
        return r;
    out->doc = json_loads(out->rec.config_json, 0, NULL);
    if (!json_is_object(out->doc)) {
        config_loaded_clear(out);
        return sbx_err_set(err, EIO, "internal", "configuration %s: stored document unreadable",
                           id);
    }
    return 0;
}

json_t *configs_to_json(const struct config_loaded *l)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:o,s:I,s:I}", "id", l->rec.id, "object",
                     "sandbox_config", "name", l->rec.name, "description", l->rec.description,
                     "sandbox_type", json_string_value(json_object_get(l->doc, "backend")),
                     "config", config_doc_masked(l->doc), "created_at",
                     (json_int_t)l->rec.created_at, "updated_at", (json_int_t)l->rec.updated_at);
}

/* A provider's list entry as the inventory shows it. */
static json_t *remote_row(json_t *ps)
{
    return json_pack("{s:O?,s:O?,s:O?}", "sandbox_id", json_object_get(ps, "sandboxID"),
                     "template_id", json_object_get(ps, "templateID"), "state",
                     json_object_get(ps, "state"));
}

struct inventory {
    struct configs *c;
    json_t *data;
    bool verified;
    /* A docker configuration's: the engine's containers labelled with it, by sandbox id
     * (taken out as rows claim them: what is left runs on the engine with no live row);
     * NULL when the engine was not asked or did not answer. */
    json_t *engine;
    bool provider; /* the provider was asked (configs_inventory's remote) */
    /* A provider configuration's: the provider's sandboxes by their sbx_id metadata, taken
     * out as rows claim them; NULL when the provider was not asked or did not answer. */
    json_t *remote;
};

/* What the provider says of a provider sandbox: {sandbox_id, state}, or null when it has
 * none; as add_engine, a running sandbox without one, or any when the provider did not
 * answer, is not verified. */
static void add_remote(struct inventory *inv, const struct sandbox *sb, json_t *o)
{
    json_t *ps = inv->remote ? json_object_get(inv->remote, sb->rec.id) : NULL;
    if (!ps) {
        json_object_set_new(o, "provider", json_null());
        if (!inv->remote || !sb->failed) {
            inv->verified = false;
            json_object_set_new(o, "verified", json_false());
        }
        return;
    }
    json_object_set_new(o, "provider", remote_row(ps));
    json_object_del(inv->remote, sb->rec.id);
}

/* What the engine says of a docker sandbox's container: {container, state}, or null when
 * it has none. A running sandbox without one, or any when the engine did not answer, is
 * not verified. */
static void add_engine(struct inventory *inv, const struct sandbox *sb, json_t *o)
{
    json_t *ct = inv->engine ? json_object_get(inv->engine, sb->rec.id) : NULL;
    if (!ct) {
        json_object_set_new(o, "engine", json_null());
        /* Stopped (failed, idle) sandboxes have no container; a running one must. */
        if (!inv->engine || (!sb->failed && !sb->paused)) {
            inv->verified = false;
            json_object_set_new(o, "verified", json_false());
        }
        return;
    }
    json_object_set_new(o, "engine",
                        json_pack("{s:O?,s:O?}", "container",
                                  json_array_get(json_object_get(ct, "Names"), 0), "state",
                                  json_object_get(ct, "State")));
    json_object_del(inv->engine, sb->rec.id);
}

static void add_live(const struct store_sandbox *row, void *arg)
{
    struct inventory *inv = arg;
    struct auth_identity who = {.authenticated = true};
    snprintf(who.user, sizeof(who.user), "%s", row->user);
    struct sandbox *sb;
    struct sbx_err err = {0};
    json_t *o = json_pack("{s:s,s:s,s:s}", "id", row->id, "user", row->user, "status", row->status);
    if (manager_lookup(inv->c->mgr, &who, row->id, &sb, &err) < 0) {
        /* A live row with nothing behind it: the store and this daemon disagree. */
        inv->verified = false;
        json_object_set_new(o, "busy", json_null());
        json_object_set_new(o, "verified", json_false());
    } else {
        json_t *why = json_array();
        if (sb->exec_busy)
            json_array_append_new(why, json_string("exec"));
        if (sb->kernel_busy)
            json_array_append_new(why, json_string("run_code"));
        if (sb->pausing || sb->forking)
            json_array_append_new(why, json_string(sb->forking ? "fork" : "pause"));
        if (!sb->ready && !sb->paused && strcmp(sb->rec.backend, "v1"))
            json_array_append_new(why, json_string("starting"));
        json_object_set_new(o, "status", json_string(sb->paused ? "paused" : sb->rec.status));
        json_object_set_new(o, "busy", json_boolean(json_array_size(why) > 0));
        json_object_set_new(o, "busy_with", why);
        json_object_set_new(o, "created_at", json_integer(sb->rec.created_at));
        json_object_set_new(o, "verified", json_true());
        if (!strcmp(sb->rec.runtime, "docker"))
            add_engine(inv, sb, o);
        else if (inv->provider && rt_is_provider(sb->rec.runtime))
            add_remote(inv, sb, o);
    }
    json_array_append_new(inv->data, o);
}

struct engine_job {
    configs_engine_fn cb;
    void *data;
    char *label, *host, *tls_dir;
    long timeout_ms;
    struct configs_engine_answer a;
};

static void engine_job_run(void *data)
{
    struct engine_job *j = data;
    struct docker_engine e = {.host = j->host, .tls_dir = j->tls_dir};
    struct sbx_err err = {0};
    if (docker_engine_containers(&e, j->timeout_ms, j->label, &j->a.list, &err) < 0) {
        snprintf(j->a.why, sizeof(j->a.why), "%s", err.msg);
        snprintf(j->a.code, sizeof(j->a.code), "%s", err.code);
    }
}

static void engine_job_done(void *data, bool ran)
{
    struct engine_job *j = data;
    if (!ran) {
        snprintf(j->a.why, sizeof(j->a.why), "sbxd is stopping");
        snprintf(j->a.code, sizeof(j->a.code), "internal");
    }
    j->cb(j->data, &j->a);
    json_decref(j->a.list);
    free(j->label);
    free(j->host);
    free(j->tls_dir);
    free(j);
}

int configs_docker_engine(struct configs *c, const char *id, char **host, char **tls_dir,
                          long *timeout_ms, struct sbx_err *err)
{
    struct config_loaded l;
    int r = configs_load(c, id, &l, err);
    if (r < 0)
        return r;
    if (strcmp(json_string_value(json_object_get(l.doc, "backend")) ?: "", "docker")) {
        config_loaded_clear(&l);
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "configuration %s is not a docker configuration", id);
    }
    json_t *d = json_object_get(l.doc, "docker");
    const char *h = json_string_value(json_object_get(d, "host"));
    const char *tls = json_string_value(json_object_get(d, "tls_cert_path"));
    *host = sbx_xstrdup(h && *h ? h : c->docker_host);
    *tls_dir = h && *h && tls ? sbx_xstrdup(tls) : NULL;
    *timeout_ms = (long)json_integer_value(json_object_get(d, "http_timeout_sec")) * 1000;
    config_loaded_clear(&l);
    return 0;
}

bool configs_engine_ask(struct configs *c, struct jobs *jobs, const char *id,
                        configs_engine_fn cb, void *data)
{
    struct sbx_err err = {0};
    char *host = NULL, *tls_dir = NULL;
    long timeout_ms = 0;
    if (configs_docker_engine(c, id, &host, &tls_dir, &timeout_ms, &err) < 0) {
        struct configs_engine_answer none = {0};
        cb(data, &none);
        return false;
    }
    struct engine_job *j = sbx_xcalloc(1, sizeof(*j));
    j->cb = cb;
    j->data = data;
    j->a.asked = true;
    j->label = sbx_xasprintf(DOCKER_LABEL_CONFIG "=%s", id);
    j->host = host;
    j->tls_dir = tls_dir;
    j->timeout_ms = timeout_ms;
    j->a.host = j->host;
    j->a.tls_dir = j->tls_dir;
    j->a.timeout_ms = j->timeout_ms;
    jobs_submit(jobs, engine_job_run, engine_job_done, j);
    return true;
}

/* The engine's containers, by their sbx.id label, into inv->engine. */
static void engine_index(struct inventory *inv, const json_t *list)
{
    inv->engine = json_object();
    size_t i;
    json_t *ct;
    json_array_foreach(list, i, ct)
    {
        const char *sid = json_string_value(json_object_get(json_object_get(ct, "Labels"),
                                                            DOCKER_LABEL_ID));
        if (sid)
            json_object_set(inv->engine, sid, ct);
    }
}

/* The provider's sandboxes of configuration id (metadata sbx_config), by sbx_id. */
static json_t *remote_of(const json_t *list, const char *id)
{
    json_t *by = json_object();
    size_t i;
    json_t *ps;
    json_array_foreach(list, i, ps)
    {
        json_t *md = json_object_get(ps, "metadata");
        const char *sid = json_string_value(json_object_get(md, PROVIDER_META_ID));
        const char *cid = json_string_value(json_object_get(md, PROVIDER_META_CONFIG));
        if (sid && cid && !strcmp(cid, id))
            json_object_set(by, sid, ps);
    }
    return by;
}

json_t *configs_inventory(struct configs *c, const char *id, const struct configs_engine_answer *a,
                          bool *verified, json_t **engine, struct sbx_err *err)
{
    if (engine)
        *engine = NULL;
    struct config_loaded l;
    int r = configs_load(c, id, &l, err);
    if (r < 0)
        return NULL;
    config_loaded_clear(&l);
    bool docker = a->asked;
    const json_t *remote = a->remote;
    struct inventory inv = {.c = c, .data = json_array(), .verified = true, .provider = !!remote};
    if (docker && a->list)
        engine_index(&inv, a->list);
    if (remote && json_is_true(json_object_get(remote, "reachable")))
        inv.remote = remote_of(json_object_get(remote, "list"), id);
    if (store_config_live_sandboxes(c->store, id, add_live, &inv, err) < 0) {
        json_decref(inv.data);
        json_decref(inv.engine);
        json_decref(inv.remote);
        return NULL;
    }
    /* Containers of this configuration the engine runs with no live sandbox behind them:
     * sbx lost track of them (or another daemon made them), so nothing is certain. */
    json_t *only = json_array();
    const char *sid;
    json_t *ct;
    json_object_foreach(inv.engine, sid, ct)
    {
        json_array_append_new(only, json_pack("{s:s,s:O?,s:O?}", "id", sid, "container",
                                              json_array_get(json_object_get(ct, "Names"), 0),
                                              "state", json_object_get(ct, "State")));
    }
    if (json_array_size(only))
        inv.verified = false;
    if (docker && engine)
        *engine = inv.engine ? json_pack("{s:b,s:o}", "reachable", 1, "unclaimed", only)
                             : json_pack("{s:b,s:s,s:o}", "reachable", 0, "error", a->why,
                                         "unclaimed", only);
    else
        json_decref(only);
    if (docker && !inv.engine)
        inv.verified = false;
    json_decref(inv.engine);
    if (remote) {
        /* Provider sandboxes made from this configuration that no live row claims. */
        json_t *lost = json_array();
        json_object_foreach(inv.remote, sid, ct)
        {
            json_t *row = remote_row(ct);
            json_object_set_new(row, "id", json_string(sid));
            json_array_append_new(lost, row);
        }
        if (json_array_size(lost) || !inv.remote)
            inv.verified = false;
        if (engine)
            *engine = inv.remote ? json_pack("{s:b,s:o}", "reachable", 1, "unclaimed", lost)
                                 : json_pack("{s:b,s:O?,s:o}", "reachable", 0, "error",
                                             json_object_get(remote, "error"), "unclaimed", lost);
        else
            json_decref(lost);
        json_decref(inv.remote);
    }
    *verified = inv.verified;
    return inv.data;
}

int configs_check_inventory(struct configs *c, const char *id, const struct configs_engine_answer *a,
                            bool force, struct sbx_err *err)
{
    bool verified = true;
    json_t *prov = NULL;
    json_t *inv = configs_inventory(c, id, a, &verified, a->remote ? &prov : NULL, err);
    if (!inv)
        return -EIO;
    /* A provider's side counts with no row too (document 002: the remote instances are
     * checked): its sandboxes of this configuration no row claims, or a provider that
     * cannot say. */
    bool remote_doubt = prov && (json_array_size(json_object_get(prov, "unclaimed")) ||
                                 !json_is_true(json_object_get(prov, "reachable")));
    json_decref(prov);
    size_t n = json_array_size(inv), confirmed = 0;
    size_t i;
    json_t *e;
    json_array_foreach(inv, i, e)
    {
        confirmed += json_is_true(json_object_get(e, "verified"));
    }
    json_decref(inv);
    if (confirmed)
        return sbx_err_set(err, EBUSY, "sandboxes_still_live",
                           "%zu sandbox(es) made from configuration %s are live or paused: "
                           "delete them first (GET /v1/sandbox-configs/%s/sandboxes)",
                           confirmed, id, id);
    if ((n || remote_doubt) && !verified && !force)
        return sbx_err_set(err, EBUSY, "sandbox_inventory_unverifiable",
                           "%zu sandbox(es) of configuration %s cannot be verified%s: retry, or "
                           "pass force=true",
                           n, id,
                           remote_doubt ? " (its provider does not answer, or runs sandboxes "
                                          "of it that no sandbox here claims)"
                                        : "");
    return 0;
}

int configs_doc_of(struct configs *c, json_t *config, const char *id, json_t **out,
                   struct sbx_err *err)
{
    struct config_loaded l = {0};
    int r = 0;
    if (id && (r = configs_load(c, id, &l, err)) < 0)
        return r;
    if (config)
        r = config_doc_build(c->secrets, &c->ceil, id ? id : CONFIGS_PROBE_ID, config, l.doc, out,
                             err);
    else
        *out = json_incref(l.doc);
    config_loaded_clear(&l);
    return r;
}

int configs_lock(struct configs *c, const char *id, const char *owner, struct sbx_err *err)
{
    long long now = sbx_wall_ms();
    return store_config_lock(c->store, id, owner, now, now + CONFIGS_LOCK_MS, err);
}

void configs_unlock(struct configs *c, const char *id, const char *owner)
{
    (void)store_config_unlock(c->store, id, owner, NULL);
}

/* A limit a request asks for within the configuration's (0: the daemon's default). */
static int narrow_limit(const char *name, long long asked, long long cfg, long long *out,
                        struct sbx_err *err)
{
    if (asked && cfg && asked > cfg)
        return WIDENED("limits.%s: the configuration allows at most %lld", name, cfg);
    *out = asked ? asked : cfg;
    return 0;
}

/* The manager's hook for POST /v1/sandboxes {config_id}: the request may narrow the
 * configuration (a shorter TTL, lower limits, an allowlist of its own, more variables)
 * but not change what it fixes. */
/* Document 002's volume_mount, when enabled: the creator's own volume of that id or name
 * mounted at mount_path (docs/volumes.md), after any the request names. */
static int apply_volume(const json_t *doc, json_t *h, struct sandbox_params *p,
                        struct sbx_err *err)
{
    json_t *vm = json_object_get(doc, "volume_mount");
    if (!json_is_true(json_object_get(vm, "enabled")))
        return 0;
    const char *provider = json_string_value(json_object_get(vm, "provider"));
    const char *id = json_string_value(json_object_get(vm, "volume_id"));
    const char *name = json_string_value(json_object_get(vm, "volume_name"));
    const char *path = json_string_value(json_object_get(vm, "mount_path"));
    if (provider && *provider && strcmp(provider, "sbx"))
        return sbx_err_set(err, EINVAL, "invalid_volume",
                           "the configuration's volume_mount.provider %.32s is not served here "
                           "(\"sbx\" or none)",
                           provider);
    if (!(id && *id) && !(name && *name))
        return sbx_err_set(err, EINVAL, "invalid_volume",
                           "the configuration's volume_mount names no volume_id or volume_name");
    json_t *list = p->volumes ? json_deep_copy(p->volumes) : json_array();
    json_array_append_new(list, json_pack("{s:s,s:s}", "volume", id && *id ? id : name, "path",
                                          path && *path ? path : "/mnt/volume"));
    json_object_set_new(h, "volumes", list);
    p->volumes = list;
    return volumes_mounts_check(list, err);
}

int configs_apply(struct configs *c, const struct auth_identity *who, const char *id,
                  const json_t *doc, struct sandbox_params *p, json_t **hold, struct sbx_err *err)
{
    int r = 0;
    json_t *h = json_object();
    *hold = h;
    const char *tpl = json_string_value(json_object_get(doc, "template"));
    const char *backend = json_string_value(json_object_get(doc, "backend"));
    if (id)
        json_object_set_new(h, "id", json_string(id));
    json_object_set_new(h, "template", json_string(tpl));
    json_object_set_new(h, "runtime", json_string(backend));
    json_t *limits = json_object_get(doc, "limits");
    json_t *env = NULL;
    if (p->template_given && strcmp(p->template_name, tpl)) {
        r = WIDENED("template is %s in configuration %s", tpl, id);
    } else if (p->runtime && strcmp(p->runtime, backend)) {
        r = WIDENED("runtime is %s in configuration %s", backend, id ? id : "(probe)");
    } else if ((r = narrow_limit("memory_mb", p->memory_mb,
                                 json_integer_value(json_object_get(limits, "memory_mb")),
                                 &p->memory_mb, err)) < 0 ||
               (r = narrow_limit("pids", p->pids,
                                 json_integer_value(json_object_get(limits, "pids")), &p->pids,
                                 err)) < 0 ||
               (r = narrow_limit("cpu_millicores", p->cpu_millicores,
                                 json_integer_value(json_object_get(limits, "cpu_millicores")),
                                 &p->cpu_millicores, err)) < 0 ||
               (r = id ? configs_env_for(c, who->user, id, doc, &env, err)
                       : config_doc_env(c->secrets, CONFIGS_PROBE_ID, doc, &env, err)) < 0) {
        /* err is filled */
    }
    if (r == 0) {
        const char *k;
        json_t *v;
        json_object_foreach(p->env, k, v)
        {
            if (json_object_get(env, k)) {
                r = WIDENED("env.%.64s is set by configuration %s", k, id ? id : "(probe)");
                break;
            }
        }
    }
    json_t *inject = NULL;
    if (r == 0 &&
        (r = config_doc_inject(c->secrets, id ? id : CONFIGS_PROBE_ID, doc, &inject, err)) == 0 &&
        json_object_size(inject) && !rt_is_provider(backend)) {
        /* Its sandboxes trust the CA that signs for the hosts headers are put in. A provider's
         * sandbox gets the headers put in by the provider's own proxy (its network rules,
         * sandbox/create.c), which its sandboxes trust as the provider arranges: this
         * daemon's CA and a bundle path in its workspace would mean nothing there. */
        if (!c->trust_bundle)
            r = sbx_err_set(err, EIO, "inject_unavailable",
                            "configuration %s injects headers but this daemon has no egress CA",
                            id ? id : "(probe)");
        static const char *const trust_vars[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
                                                 "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"};
        for (size_t i = 0; r == 0 && i < SBX_ARRAY_SIZE(trust_vars); i++) {
            if (json_object_get(p->env, trust_vars[i]))
                r = WIDENED("env.%s: configuration %s sets it", trust_vars[i], id ? id : "");
            json_object_set_new(env, trust_vars[i], json_string(SANDBOX_TRUST_PATH));
        }
        p->trust_pem = c->trust_bundle;
    }
    if (r == 0 && json_object_size(env) + json_object_size(p->env) > SANDBOX_ENV_MAX)
        r = WIDENED("the configuration's and the request's env pass %d variables", SANDBOX_ENV_MAX);
    char *sealed = NULL;
    if (r == 0 && (json_object_size(env) || json_object_size(inject))) {
        json_t *both = json_pack("{s:O,s:O}", "env", env, "inject", inject);
        _cleanup_free_ char *text = json_dumps(both, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(both);
        r = secrets_seal(c->secrets, CONFIGS_SANDBOX_ENV_CONTEXT, text, &sealed, err);
        OPENSSL_cleanse(text, strlen(text));
    }
    if (r == 0) {
        if (sealed)
            json_object_set_new(h, "sealed_env", json_string(sealed));
        json_object_set_new(h, "config_env", env);
        env = NULL;
        if (json_object_size(inject))
            json_object_set(h, "config_inject", inject);
        json_t *net = config_doc_network(doc);
        if (net)
            json_object_set_new(h, "network", net);
        p->config_id = json_string_value(json_object_get(h, "id"));
        p->config_applied = true;
        p->template_name = json_string_value(json_object_get(h, "template"));
        p->runtime = json_string_value(json_object_get(h, "runtime"));
        p->terminal_idle_sec =
            json_integer_value(json_object_get(doc, "terminal_idle_disconnect_sec"));
        p->desktop_disabled = !json_is_true(json_object_get(doc, "desktop_enabled"));
        p->config_env = json_object_get(h, "config_env");
        p->config_inject = json_object_get(h, "config_inject");
        p->config_env_sealed = json_string_value(json_object_get(h, "sealed_env"));
        p->network = json_object_get(h, "network");
        /* Stored before issue 40, when it was a TTL, it may be above every command's limit. */
        long long cmd = json_integer_value(json_object_get(doc, "default_timeout_sec"));
        p->command_timeout_sec =
            cmd > c->ceil.command_timeout_sec ? c->ceil.command_timeout_sec : cmd;
        r = apply_volume(doc, h, p, err);
        /* Held with the rest: the loaded document goes before the create reads it. */
        if (json_object_get(doc, "docker"))
            json_object_set(h, "docker", json_object_get(doc, "docker"));
        p->docker = json_object_get(h, "docker");
        /* The provider connection with its key opened (docs/providers.md): held in memory
         * for this create only, written to the sandbox's state dir for its relay. */
        json_t *prov = NULL;
        if (r == 0 &&
            (r = config_doc_provider_open(c->secrets, id ? id : CONFIGS_PROBE_ID, doc, &prov,
                                          err)) == 0 &&
            prov)
            json_object_set_new(h, "provider", prov);
        p->provider = json_object_get(h, "provider");
    }
    free(sealed);
    json_decref(inject);
    json_decref(env);
    return r;
}

int configs_check_backend(struct configs *c, const json_t *doc, struct sbx_err *err)
{
    const char *name;
    int r = manager_runtime_pick(c->mgr, json_string_value(json_object_get(doc, "backend")), &name,
                                 err);
    if (r < 0)
        snprintf(err->code, sizeof(err->code), "invalid_sandbox_config");
    return r;
}

static int apply_config(void *data, const struct auth_identity *who, struct sandbox_params *p,
                        json_t **hold, struct sbx_err *err)
{
    struct configs *c = data;
    struct config_loaded l;
    int r = configs_load(c, p->config_id, &l, err);
    if (r < 0)
        return r;
    r = configs_apply(c, who, l.rec.id, l.doc, p, hold, err);
    if (r == 0 && c->skills_fn)
        r = c->skills_fn(c->skills_data, l.rec.id, p, *hold, err);
    config_loaded_clear(&l);
    return r;
}

/* A provider sandbox's connection when sbxd no longer holds its create's (after an sbxd
 * restart): its configuration's e2b/cube object with the key opened (manager.h). */
static int open_provider(void *data, const char *config_id, json_t **out, struct sbx_err *err)
{
    struct configs *c = data;
    struct config_loaded l;
    *out = NULL;
    int r = configs_load(c, config_id, &l, err);
    if (r < 0)
        return r;
    r = config_doc_provider_open(c->secrets, l.rec.id, l.doc, out, err);
    config_loaded_clear(&l);
    return r;
}

/* After a restart: the variables of every live sandbox made from a configuration,
 * back in memory from their sealed copy. */
static void restore_env(struct sandbox *sb, void *data)
{
    struct configs *c = data;
    char cid[STORE_ID_MAX + 1];
    _cleanup_free_ char *sealed = NULL;
    if (sb->config_env ||
        store_sandbox_config_get(c->store, sb->rec.id, cid, NULL, &sealed, NULL) < 0 || !sealed)
        return;
    char *text = NULL;
    struct sbx_err err = {0};
    if (secrets_open_value(c->secrets, CONFIGS_SANDBOX_ENV_CONTEXT, sealed, &text, &err) < 0) {
        log_warn("sandbox %s: its configuration's variables do not open: %s", sb->rec.id, err.msg);
        return;
    }
    json_t *both = json_loads(text, 0, NULL);
    secrets_drop(text);
    sb->config_env = json_incref(json_object_get(both, "env"));
    json_t *inject = json_object_get(both, "inject");
    if (json_object_size(inject))
        sb->config_inject = json_incref(inject);
    json_decref(both);
}

/* The bundle sandboxes with inject rules trust: the host's roots and the egress CA. */
static char *trust_bundle(const char *ca_pem)
{
    _cleanup_free_ char *roots = NULL;
    size_t len = 0;
    if (sbx_read_file(CONFIGS_SYSTEM_ROOTS, CONFIGS_ROOTS_MAX, &roots, &len) < 0)
        return sbx_xstrdup(ca_pem);
    return sbx_xasprintf("%.*s\n%s", (int)len, roots, ca_pem);
}

int configs_new(const struct sbxd_config *cfg, struct store *st, struct manager *mgr,
                const char *ca_pem, struct configs **out, struct sbx_err *err)
{
    struct configs *c = sbx_xcalloc(1, sizeof(*c));
    c->store = st;
    c->mgr = mgr;
    c->docker_host = sbx_xstrdup(cfg->docker_host);
    c->ceil = (struct config_ceilings){.memory_mb = cfg->memory_mb,
                                       .pids = cfg->pids_max,
                                       .cpu_millicores = cfg->cpu_millicores,
                                       /* the default of every command, plain exec's
                                        * 900 s limit included (spec 000) */
                                       .command_timeout_sec = EXEC_TIMEOUT_MAX};
    int r = secrets_open(cfg->data_dir, &c->secrets, err);
    if (r < 0) {
        free(c);
        return r;
    }
    if (ca_pem)
        c->trust_bundle = trust_bundle(ca_pem);
    manager_set_config_fn(mgr, apply_config, c);
    manager_set_provider_fn(mgr, open_provider, c);
    manager_each(mgr, NULL, restore_env, c);
    *out = c;
    return 0;
}

void configs_free(struct configs *c)
{
    if (!c)
        return;
    secrets_free(c->secrets);
    free(c->trust_bundle);
    free(c->docker_host);
    free(c);
}
