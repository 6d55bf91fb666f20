/* POST /v1/sandbox-configs/templates/query {config | config_id, ensure_standard?,
 * replace_standard?, ensure_desktop?, replace_desktop?} (document 002, docs/configs.md):
 * the templates the configuration's backend can start here, whether the standard (base)
 * and desktop templates are built, and with replace_* the stored configuration's
 * template set to one of them. A template asked for that is not built is built: the
 * operator's build of it (templates/operator_build.c) is started or joined, the answer is
 * 202 with the build to follow, and a replace_* is done when that build is ready, never
 * a configuration pointing at nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/util.h"
#include "../../runtime/provider.h"
#include "../audit/audit.h"
#include "../http/router.h"
#include "../http/server.h"
#include "../sandbox/template.h"
#include "../sbxd.h"
#include "../templates/build.h"
#include "../templates/listing.h"
#include "configs.h"
#include "provider_list.h"

static const char *const flags[] = {"ensure_standard", "replace_standard", "ensure_desktop",
                                    "replace_desktop"};

struct query {
    json_t *config;      /* borrowed from the body, or NULL */
    const char *id;      /* borrowed from the body, or NULL */
    bool want[4];        /* as flags[] */
    const char *replace; /* the template a replace_* names, or NULL */
};

static int read_query(json_t *body, struct query *q, struct sbx_err *err)
{
    memset(q, 0, sizeof(*q));
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v)
    {
        bool known = !strcmp(k, "config") || !strcmp(k, "config_id");
        for (size_t i = 0; i < SBX_ARRAY_SIZE(flags); i++)
            known = known || !strcmp(k, flags[i]);
        if (!known)
            return sbx_err_set(err, EINVAL, "invalid_request", "%.64s is not a field of a query",
                               k);
    }
    q->config = json_object_get(body, "config");
    if (json_is_null(q->config))
        q->config = NULL;
    if (q->config && !json_is_object(q->config))
        return sbx_err_set(err, EINVAL, "invalid_request", "config must be an object");
    v = json_object_get(body, "config_id");
    if (v && !json_is_null(v) && !json_is_string(v))
        return sbx_err_set(err, EINVAL, "invalid_request", "config_id must be a string");
    q->id = json_string_value(v);
    if (!q->config && !q->id)
        return sbx_err_set(err, EINVAL, "invalid_request", "send config or config_id");
    for (size_t i = 0; i < SBX_ARRAY_SIZE(flags); i++) {
        v = json_object_get(body, flags[i]);
        if (v && !json_is_null(v) && !json_is_boolean(v))
            return sbx_err_set(err, EINVAL, "invalid_request", "%s must be true or false",
                               flags[i]);
        q->want[i] = json_is_true(v);
    }
    if (q->want[1] && q->want[3])
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "replace_standard and replace_desktop: a configuration has one "
                           "template");
    if ((q->want[1] || q->want[3]) && !q->id)
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "%s needs config_id: the configuration whose template it sets",
                           q->want[1] ? "replace_standard" : "replace_desktop");
    q->replace = q->want[1]   ? CONFIG_STANDARD_TEMPLATE
                 : q->want[3] ? CONFIG_DESKTOP_TEMPLATE
                              : NULL;
    return 0;
}

static bool built(struct sbxd *d, const char *name)
{
    struct template_info tpl;
    struct sbx_err err = {0};
    if (template_resolve(d->cfg.template_cache, name, &tpl, &err) < 0)
        return false;
    template_info_clear(&tpl);
    return true;
}

/* ensure_* and replace_*: the template built here, or its build started (or the one
 * under way joined) in *tb, audited as a template build. */
static int ensure(struct sbxd *d, struct http_req *req, const char *name,
                  struct template_build **tb, struct sbx_err *err)
{
    *tb = NULL;
    if (built(d, name))
        return 0;
    int r = template_build_operator(d->builds, name, tb, err);
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "template.build", NULL,
                 r < 0 ? err->code : "started",
                 json_pack("{s:s,s:s,s:s?}", "name", name, "by", "sandbox_config.templates_query",
                           "build_id", *tb ? template_build_id(*tb) : NULL));
    return r;
}

struct inventory_check {
    struct configs *c;
    const char *id;
    struct sbx_err *err;
    int r;
};

static void inventory_checked(void *data, const struct configs_engine_answer *a)
{
    struct inventory_check *t = data;
    t->r = configs_check_inventory(t->c, t->id, a, false, t->err);
}

/* The stored configuration with its template replaced, under its lock (owner: who holds
 * it): 409 while sandboxes of it live (the template is what they run), 423 while another
 * request holds it. With store false, only the checks of the document (a replace that
 * waits for a build is refused at once when it could never be done). *out: the
 * configuration as answers show it. */
static int replace_template(struct sbxd *d, const char *owner, const char *id, const char *tpl,
                            bool store, json_t **out, struct sbx_err *err)
{
    int r = store ? configs_lock(d->configs, id, owner, err) : 0;
    if (r < 0)
        return r;
    struct config_loaded l = {0};
    json_t *doc = NULL;
    if ((r = configs_load(d->configs, id, &l, err)) == 0) {
        /* The document as a client reads it, the template changed: masked values keep
         * theirs, skill_image stays the server's, every check of a PUT applies. */
        json_t *in = config_doc_masked(l.doc);
        json_object_set_new(in, "template", json_string(tpl));
        r = config_doc_build(d->configs->secrets, &d->configs->ceil, id, in, l.doc, &doc, err);
        json_decref(in);
    }
    if (store && r == 0 && strcmp(json_string_value(json_object_get(l.doc, "template")), tpl)) {
        /* The engine's list read here, on the loop (jobs NULL): a template swap is rare
         * and bounded by the engine's timeout; the inventory routes read it on a worker. */
        struct inventory_check t = {.c = d->configs, .id = id, .err = err};
        configs_engine_ask(d->configs, NULL, id, inventory_checked, &t);
        if ((r = t.r) == 0) {
            free(l.rec.config_json);
            l.rec.config_json = json_dumps(doc, JSON_COMPACT);
            l.rec.updated_at = sbx_wall_ms() / 1000;
            json_decref(l.doc);
            l.doc = doc;
            doc = NULL;
            r = store_config_update(d->store, &l.rec, err);
        }
    }
    if (store)
        configs_unlock(d->configs, id, owner);
    if (r == 0 && out)
        *out = configs_to_json(&l);
    json_decref(doc);
    config_loaded_clear(&l);
    return r;
}

/* A replace_* waiting for its template's build: done when the build is ready, audited as
 * the query that asked for it. */
struct pending {
    struct sbxd *d;
    struct auth_identity who;
    char req_id[64];
    char config_id[STORE_ID_MAX + 1];
    const char *tpl; /* CONFIG_STANDARD_TEMPLATE or CONFIG_DESKTOP_TEMPLATE */
    struct template_build *tb;
};

static void pending_event(json_t *ev, void *data)
{
    json_decref(ev);
}

static void pending_end(void *data)
{
    struct pending *p = data;
    bool ready;
    /* Not ended: the daemon stops (its builds end with it), nothing is recorded. */
    if (template_build_ended(p->tb, &ready)) {
        struct sbx_err err = {0};
        int r = ready ? 0
                      : sbx_err_set(&err, EIO, "template_build_failed", "the build of %s failed",
                                    p->tpl);
        char owner[96];
        snprintf(owner, sizeof(owner), "templates_query:%s", template_build_id(p->tb));
        if (r == 0)
            r = replace_template(p->d, owner, p->config_id, p->tpl, true, NULL, &err);
        if (r < 0)
            log_warn("templates/query %s: replacing %s's template by %s: %s", p->req_id,
                     p->config_id, p->tpl, err.msg);
        audit_record(p->d->store, &p->who, NULL, p->req_id, "sandbox_config.templates_query", NULL,
                     r < 0 ? err.code : "replaced",
                     json_pack("{s:s,s:s,s:s}", "config_id", p->config_id, "template", p->tpl,
                               "build_id", template_build_id(p->tb)));
    }
    free(p);
}

static const struct template_watch_ops pending_ops = {.on_event = pending_event,
                                                      .on_end = pending_end};

static int replace_later(struct sbxd *d, struct http_req *req, const struct query *q,
                         struct template_build *tb, struct sbx_err *err)
{
    struct pending *p = sbx_xcalloc(1, sizeof(*p));
    p->d = d;
    p->who = *http_req_identity(req);
    snprintf(p->req_id, sizeof(p->req_id), "%s", http_req_id(req));
    snprintf(p->config_id, sizeof(p->config_id), "%s", q->id);
    p->tpl = q->replace;
    p->tb = tb;
    if (template_build_watch(tb, &pending_ops, p) < 0) {
        free(p);
        return sbx_err_set(err, EAGAIN, "template_build_limit",
                           "the build of %s has as many followers as it takes: retry once it "
                           "is ready",
                           q->replace);
    }
    return 0;
}

static json_t *slot(struct sbxd *d, const char *name, bool ensured, struct template_build *tb)
{
    json_t *j =
        json_pack("{s:s,s:b,s:b}", "name", name, "built", built(d, name), "ensured", ensured);
    if (tb)
        json_object_set_new(j, "build", template_build_json(tb));
    return j;
}

/* A provider configuration's query: the provider's own templates (GET /templates), asked
 * on a worker thread; sbx's standard and desktop templates are not the provider's. */
struct provider_query {
    struct sbxd *d;
    struct http_req *req; /* NULL once the client has gone */
    struct auth_identity who;
    char req_id[64];
    char *config_id;
    json_t *doc;
};

static void on_provider_query_gone(struct http_req *req, void *data)
{
    ((struct provider_query *)data)->req = NULL;
}

static void on_provider_templates(void *data, json_t *res)
{
    struct provider_query *x = data;
    const char *backend = json_string_value(json_object_get(x->doc, "backend"));
    bool ok = json_is_true(json_object_get(res, "reachable"));
    const char *code = json_string_value(json_object_get(res, "code"));
    audit_record(x->d->store, &x->who, NULL, x->req_id, "sandbox_config.templates_query", NULL,
                 ok ? "ok" : code,
                 json_pack("{s:s?,s:s}", "config_id", x->config_id, "backend", backend));
    if (x->req && !ok) {
        struct sbx_err err = {0};
        sbx_err_set(&err, EIO, code ? code : "provider_error", "%s",
                    json_string_value(json_object_get(res, "error")));
        http_respond_error(x->req, &err);
    } else if (x->req) {
        json_t *list = json_array();
        size_t i;
        json_t *t;
        json_array_foreach(json_object_get(res, "list"), i, t)
        {
            json_array_append_new(
                list, json_pack("{s:O?,s:O?,s:O?,s:O?,s:O?}", "template_id",
                                json_object_get(t, "templateID"), "aliases",
                                json_object_get(t, "aliases"), "public", json_object_get(t, "public"),
                                "cpu_count", json_object_get(t, "cpuCount"), "memory_mb",
                                json_object_get(t, "memoryMB")));
        }
        json_t *p = json_object_get(x->doc, backend);
        http_respond_json(
            x->req, 200,
            json_pack("{s:s,s:s?,s:s,s:O?,s:o,s:{s:b,s:O?,s:O}}", "object", "template_query",
                      "config_id", x->config_id, "backend", backend, "template",
                      json_object_get(p, "template_id"), "templates", list, "provider",
                      "reachable", 1, "api_url", json_object_get(p, "api_url"), "latency_ms",
                      json_object_get(res, "latency_ms")));
    }
    json_decref(res);
    json_decref(x->doc);
    free(x->config_id);
    free(x);
}

static void provider_query(struct sbxd *d, struct http_req *req, const struct query *q,
                           json_t *doc)
{
    for (size_t i = 0; i < SBX_ARRAY_SIZE(flags); i++)
        if (q->want[i]) {
            http_respond_errorf(req, "invalid_request",
                                "%s: a %s configuration runs the provider's templates, not "
                                "sbx's standard or desktop one",
                                flags[i], json_string_value(json_object_get(doc, "backend")));
            json_decref(doc);
            return;
        }
    struct provider_query *x = sbx_xcalloc(1, sizeof(*x));
    x->d = d;
    x->req = req;
    x->who = *http_req_identity(req);
    snprintf(x->req_id, sizeof(x->req_id), "%s", http_req_id(req));
    x->config_id = q->id ? sbx_xstrdup(q->id) : NULL;
    x->doc = doc;
    if (configs_provider_list(d, q->id ? q->id : CONFIGS_PROBE_ID, doc, PROVIDER_LIST_TEMPLATES,
                              on_provider_templates, x))
        http_req_suspend(req, on_provider_query_gone, x);
}

static void api_templates_query(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL, *doc = NULL, *config = NULL;
    struct query q = {0};
    struct template_build *tb[2] = {NULL, NULL}; /* standard, desktop: builds under way */
    int r = http_req_json(req, &body, &err);
    if (r == 0)
        r = read_query(body, &q, &err);
    if (r == 0)
        r = configs_doc_of(d->configs, q.config, q.id, &doc, &err);
    if (r == 0 && rt_is_provider(json_string_value(json_object_get(doc, "backend")))) {
        provider_query(d, req, &q, doc);
        json_decref(body);
        return;
    }
    /* A replace that could never be done is refused before anything is built. */
    if (r == 0 && q.replace)
        r = replace_template(d, NULL, q.id, q.replace, false, NULL, &err);
    if (r == 0 && (q.want[0] || q.want[1]))
        r = ensure(d, req, CONFIG_STANDARD_TEMPLATE, &tb[0], &err);
    if (r == 0 && (q.want[2] || q.want[3]))
        r = ensure(d, req, CONFIG_DESKTOP_TEMPLATE, &tb[1], &err);
    struct template_build *wait = q.want[1] ? tb[0] : q.want[3] ? tb[1] : NULL;
    if (r == 0 && q.replace && wait)
        r = replace_later(d, req, &q, wait, &err);
    else if (r == 0 && q.replace)
        r = replace_template(d, http_req_id(req), q.id, q.replace, true, &config, &err);
    if (r < 0) {
        json_decref(body);
        json_decref(doc);
        http_respond_error(req, &err);
        return;
    }
    const char *user = http_req_identity(req)->user;
    bool done = q.replace && !wait;
    const char *tpl = done ? q.replace : json_string_value(json_object_get(doc, "template"));
    const char *replacing = q.replace && wait ? (q.want[1] ? "standard" : "desktop") : NULL;
    json_t *details = json_pack(
        "{s:s?,s:b,s:b,s:b,s:b,s:s?,s:s?}", "config_id", q.id, "ensure_standard", q.want[0],
        "replace_standard", q.want[1], "ensure_desktop", q.want[2], "replace_desktop", q.want[3],
        "template", done ? q.replace : NULL, "replacing", replacing ? q.replace : NULL);
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req),
                 "sandbox_config.templates_query", NULL, tb[0] || tb[1] ? "building" : "ok",
                 details);
    json_t *answer =
        json_pack("{s:s,s:s?,s:s,s:s,s:o,s:o,s:o,s:s?,s:s?}", "object", "template_query",
                  "config_id", q.id, "backend", json_string_value(json_object_get(doc, "backend")),
                  "template", tpl, "templates", templates_list(d, user), "standard",
                  slot(d, CONFIG_STANDARD_TEMPLATE, q.want[0] || q.want[1], tb[0]), "desktop",
                  slot(d, CONFIG_DESKTOP_TEMPLATE, q.want[2] || q.want[3], tb[1]), "replaced",
                  done ? (q.want[1] ? "standard" : "desktop") : NULL, "replacing", replacing);
    if (config)
        json_object_set_new(answer, "sandbox_config", config);
    json_decref(body);
    json_decref(doc);
    if (tb[0] || tb[1]) {
        /* Building: the build to follow (GET /v1/templates/NAME/build, build-events). */
        const char *name =
            tb[1] && (!tb[0] || q.want[3]) ? CONFIG_DESKTOP_TEMPLATE : CONFIG_STANDARD_TEMPLATE;
        _cleanup_free_ char *loc = sbx_xasprintf("/v1/templates/%s/build", name);
        http_req_add_header(req, "Location", loc);
    }
    http_respond_json(req, tb[0] || tb[1] ? 202 : 200, answer);
}

static const struct route routes[] = {
    {"POST", "/v1/sandbox-configs/templates/query", AUTH_ADMIN_FULL, api_templates_query, 0},
};

const struct route_table templates_query_routes = ROUTE_TABLE(routes);
