/* POST /v1/sandbox-configs/templates/query {config | config_id, ensure_standard?,
 * replace_standard?, ensure_desktop?, replace_desktop?} (document 002, docs/configs.md):
 * the templates the configuration's backend can start here, whether the standard (base)
 * and desktop templates are built, and with replace_* the stored configuration's
 * template set to one of them. Templates are built by the operator on the host
 * (scripts/build-template.sh); a template asked for that is not built is a 409 naming how
 * to build it, never a configuration pointing at nothing. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/router.h"
#include "../http/server.h"
#include "../sandbox/template.h"
#include "../sbxd.h"
#include "../templates/listing.h"
#include "configs.h"

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

/* ensure_* and replace_* need the template built here. */
static int ensure(struct sbxd *d, const char *name, const char *flag, struct sbx_err *err)
{
    if (built(d, name))
        return 0;
    return sbx_err_set(err, EBUSY, "template_not_built",
                       "%s: template %s is not built on this host; the operator builds it with "
                       "scripts/build-template.sh %s (docs/templates.md)",
                       flag, name, name);
}

/* The stored configuration with its template replaced, under its lock: 409 while
 * sandboxes of it live (the template is what they run), 423 while another request holds
 * it. *out: the configuration as answers show it. */
static int replace_template(struct sbxd *d, struct http_req *req, const char *id, const char *tpl,
                            json_t **out, struct sbx_err *err)
{
    const char *owner = http_req_id(req);
    int r = configs_lock(d->configs, id, owner, err);
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
    if (r == 0 && strcmp(json_string_value(json_object_get(l.doc, "template")), tpl)) {
        if ((r = configs_check_inventory(d->configs, id, false, err)) == 0) {
            free(l.rec.config_json);
            l.rec.config_json = json_dumps(doc, JSON_COMPACT);
            l.rec.updated_at = sbx_wall_ms() / 1000;
            json_decref(l.doc);
            l.doc = doc;
            doc = NULL;
            r = store_config_update(d->store, &l.rec, err);
        }
    }
    configs_unlock(d->configs, id, owner);
    if (r == 0)
        *out = configs_to_json(&l);
    json_decref(doc);
    config_loaded_clear(&l);
    return r;
}

static json_t *slot(struct sbxd *d, const char *name, bool ensured)
{
    return json_pack("{s:s,s:b,s:b}", "name", name, "built", built(d, name), "ensured", ensured);
}

static void api_templates_query(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL, *doc = NULL, *config = NULL;
    struct query q;
    int r = http_req_json(req, &body, &err);
    if (r == 0)
        r = read_query(body, &q, &err);
    if (r == 0)
        r = configs_doc_of(d->configs, q.config, q.id, &doc, &err);
    if (r == 0 && (q.want[0] || q.want[1]))
        r = ensure(d, CONFIG_STANDARD_TEMPLATE, q.want[0] ? "ensure_standard" : "replace_standard",
                   &err);
    if (r == 0 && (q.want[2] || q.want[3]))
        r = ensure(d, CONFIG_DESKTOP_TEMPLATE, q.want[2] ? "ensure_desktop" : "replace_desktop",
                   &err);
    if (r == 0 && q.replace)
        r = replace_template(d, req, q.id, q.replace, &config, &err);
    if (r < 0) {
        json_decref(body);
        json_decref(doc);
        http_respond_error(req, &err);
        return;
    }
    const char *user = http_req_identity(req)->user;
    const char *tpl = q.replace ? q.replace : json_string_value(json_object_get(doc, "template"));
    json_t *details = json_pack("{s:s?,s:b,s:b,s:b,s:b,s:s?}", "config_id", q.id, "ensure_standard",
                                q.want[0], "replace_standard", q.want[1], "ensure_desktop",
                                q.want[2], "replace_desktop", q.want[3], "template", q.replace);
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req),
                 "sandbox_config.templates_query", NULL, "ok", details);
    json_t *answer =
        json_pack("{s:s,s:s?,s:s,s:s,s:o,s:o,s:o,s:s?}", "object", "template_query", "config_id",
                  q.id, "backend", json_string_value(json_object_get(doc, "backend")), "template",
                  tpl, "templates", templates_list(d, user), "standard",
                  slot(d, CONFIG_STANDARD_TEMPLATE, q.want[0] || q.want[1]), "desktop",
                  slot(d, CONFIG_DESKTOP_TEMPLATE, q.want[2] || q.want[3]), "replaced",
                  q.replace ? (q.want[1] ? "standard" : "desktop") : NULL);
    if (config)
        json_object_set_new(answer, "sandbox_config", config);
    json_decref(body);
    json_decref(doc);
    http_respond_json(req, 200, answer);
}

static const struct route routes[] = {
    {"POST", "/v1/sandbox-configs/templates/query", AUTH_ADMIN_FULL, api_templates_query, 0},
};

const struct route_table templates_query_routes = ROUTE_TABLE(routes);
