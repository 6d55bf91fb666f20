/* /v1/sandbox-configs: list, create, read, replace, delete, the inventory of sandboxes
 * made from one, and the workspace policy (docs/configs.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "configs.h"
#include "provider_list.h"

static bool scripts_disabled(struct sbxd *d)
{
    char v[8];
    return store_setting_get(d->store, STORE_SETTING_SCRIPTS_DISABLED, v, sizeof(v), NULL) == 0 &&
           !strcmp(v, "1");
}

static void audit_config(struct sbxd *d, struct http_req *req, const char *action, const char *id,
                         const char *outcome)
{
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), action, NULL, outcome,
                 json_pack("{s:s}", "config_id", id));
}

/* {name, description?, config} of a create or a replace. */
static int read_body(struct http_req *req, json_t **body, const char **name,
                     const char **description, json_t **config, struct sbx_err *err)
{
    int r = http_req_json(req, body, err);
    if (r < 0)
        return r;
    *name = json_string_value(json_object_get(*body, "name"));
    json_t *dv = json_object_get(*body, "description");
    *description = dv && !json_is_null(dv) ? json_string_value(dv) : "";
    *config = json_object_get(*body, "config");
    if (!*name || !(*name)[0] || strlen(*name) > CONFIG_NAME_MAX ||
        !sbx_utf8_valid(*name, strlen(*name)))
        return sbx_err_set(err, EINVAL, "invalid_sandbox_config",
                           "name is required: 1-%d characters", CONFIG_NAME_MAX);
    if (!*description || strlen(*description) > CONFIG_DESCRIPTION_MAX)
        return sbx_err_set(err, EINVAL, "invalid_sandbox_config",
                           "description must be a string of at most %d bytes",
                           CONFIG_DESCRIPTION_MAX);
    if (!json_is_object(*config))
        return sbx_err_set(err, EINVAL, "invalid_sandbox_config", "config must be an object");
    return 0;
}

static void respond(struct http_req *req, unsigned status, const struct config_loaded *l)
{
    http_respond_json(req, status, configs_to_json(l));
}

static void api_configs_create(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL, *config, *doc = NULL;
    const char *name, *description;
    struct config_loaded l = {0};
    sbx_random_id("cfg_", 8, l.rec.id, sizeof(l.rec.id));
    int r = read_body(req, &body, &name, &description, &config, &err);
    if (r == 0)
        r = config_doc_build(d->configs->secrets, &d->configs->ceil, l.rec.id, config, NULL, &doc,
                             &err);
    if (r == 0)
        r = configs_check_backend(d->configs, doc, &err);
    if (r == 0) {
        l.rec.name = sbx_xstrdup(name);
        l.rec.description = sbx_xstrdup(description);
        l.rec.config_json = json_dumps(doc, JSON_COMPACT);
        l.rec.created_at = l.rec.updated_at = sbx_wall_ms() / 1000;
        l.doc = doc;
        r = store_config_insert(d->store, &l.rec, &err);
    }
    json_decref(body);
    if (r < 0) {
        json_decref(doc);
        store_config_clear(&l.rec);
        http_respond_error(req, &err);
        return;
    }
    audit_config(d, req, "sandbox_config.create", l.rec.id, "ok");
    respond(req, 201, &l);
    config_loaded_clear(&l);
}

static void append_config(const struct store_config *c, void *data)
{
    struct config_loaded l = {.rec = *c, .doc = json_loads(c->config_json, 0, NULL)};
    if (l.doc)
        json_array_append_new(data, configs_to_json(&l));
    json_decref(l.doc);
}

static void api_configs_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *list = json_array();
    if (store_config_each(d->store, append_config, list, &err) < 0) {
        json_decref(list);
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200,
                      json_pack("{s:s,s:o,s:b}", "object", "list", "data", list,
                                "workspace_scripts_disabled", scripts_disabled(d)));
}

static void api_configs_get(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct config_loaded l;
    if (configs_load(d->configs, http_req_param(req, 0), &l, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    respond(req, 200, &l);
    config_loaded_clear(&l);
}

static void count_install(const struct store_skill_install *i, void *data)
{
    (void)i;
    ++*(size_t *)data;
}

/* Spec 002: desktop_enabled cannot be switched once a skill is installed: the installs
 * ran, and their snapshot was taken, on the template it describes. */
static int check_desktop_switch(struct sbxd *d, const char *id, const json_t *doc,
                                const json_t *stored, struct sbx_err *err)
{
    bool now = json_is_true(json_object_get(doc, "desktop_enabled"));
    if (now == json_is_true(json_object_get(stored, "desktop_enabled")))
        return 0;
    size_t n = 0;
    int r = store_skill_install_each(d->store, id, NULL, count_install, &n, err);
    if (r < 0)
        return r;
    if (n)
        return sbx_err_set(err, EBUSY, "desktop_switch_locked",
                           "configuration %s has %zu skill install(s): desktop_enabled cannot "
                           "be switched %s once a skill is installed (delete them first)",
                           id, n, now ? "on" : "off");
    return 0;
}

static int force_param(struct http_req *req, bool *force, struct sbx_err *err)
{
    const char *f = http_req_query(req, "force");
    *force = f && !strcmp(f, "true");
    if (f && !*force && strcmp(f, "false"))
        return sbx_err_set(err, EINVAL, "invalid_request", "force must be true or false");
    return 0;
}

/* A PUT or DELETE that checks the inventory (or an inventory read), suspended while the
 * configuration's backend lists its sandboxes: a docker engine (configs_engine_ask) or a
 * provider (provider_list.h), both asked on a worker thread, since either may take its
 * whole http_timeout_sec to answer and must not hold the daemon's loop. */
struct change {
    struct sbxd *d;
    struct http_req *req; /* NULL once the client has gone */
    char id[STORE_ID_MAX + 1];
    char owner[96]; /* the configuration's lease holder: the request's id */
    bool force, identity;
    json_t *doc; /* a PUT's new document */
    json_t *body;
    struct config_loaded l;
    /* a: what the backend said; NULL when the inventory is not checked. */
    void (*finish)(struct change *x, const struct configs_engine_answer *a);
};

static void change_free(struct change *x)
{
    json_decref(x->doc);
    json_decref(x->body);
    config_loaded_clear(&x->l);
    free(x);
}

static void on_change_gone(struct http_req *req, void *data)
{
    ((struct change *)data)->req = NULL;
}

static void on_listed(void *data, json_t *remote)
{
    struct change *x = data;
    struct configs_engine_answer a = {.remote = remote};
    x->finish(x, &a);
    json_decref(remote);
}

static void on_engine(void *data, const struct configs_engine_answer *a)
{
    struct change *x = data;
    x->finish(x, a);
}

/* Run x->finish now, or once the backend has listed its sandboxes when the inventory is
 * checked. */
static void change_run(struct change *x, bool check)
{
    if (!check) {
        x->finish(x, NULL);
        return;
    }
    if (configs_provider_list(x->d, x->id, x->l.doc, PROVIDER_LIST_SANDBOXES, on_listed, x) ||
        configs_engine_ask(x->d->configs, x->d->jobs, x->id, on_engine, x))
        http_req_suspend(x->req, on_change_gone, x);
}

static void put_finish(struct change *x, const struct configs_engine_answer *a)
{
    struct sbx_err err = {0};
    int r = 0;
    if (!x->req)
        r = sbx_err_set(&err, ECANCELED, "request_gone", "the client went away");
    else if (a)
        r = configs_check_inventory(x->d->configs, x->id, a, x->force, &err);
    if (r == 0) {
        struct config_loaded *l = &x->l;
        const char *name = json_string_value(json_object_get(x->body, "name"));
        json_t *dv = json_object_get(x->body, "description");
        free(l->rec.name);
        free(l->rec.description);
        free(l->rec.config_json);
        l->rec.name = sbx_xstrdup(name);
        l->rec.description = sbx_xstrdup(dv && !json_is_null(dv) ? json_string_value(dv) : "");
        l->rec.config_json = json_dumps(x->doc, JSON_COMPACT);
        l->rec.updated_at = sbx_wall_ms() / 1000;
        json_decref(l->doc);
        l->doc = x->doc;
        x->doc = NULL;
        r = store_config_update(x->d->store, &l->rec, &err);
    }
    configs_unlock(x->d->configs, x->id, x->owner);
    if (x->req && r < 0)
        http_respond_error(x->req, &err);
    else if (x->req) {
        audit_config(x->d, x->req, "sandbox_config.update", x->id, "ok");
        respond(x->req, 200, &x->l);
    }
    change_free(x);
}

/* What a configuration's sandboxes are: its backend and template, and a provider's
 * connection (its control plane and template; a key alone may change). */
static bool same_identity(const json_t *a, const json_t *b, bool *backend)
{
    *backend = strcmp(json_string_value(json_object_get(a, "backend")),
                      json_string_value(json_object_get(b, "backend")));
    if (*backend || strcmp(json_string_value(json_object_get(a, "template")),
                           json_string_value(json_object_get(b, "template"))))
        return false;
    for (int i = 0; i < 2; i++) {
        json_t *pa = json_object_get(a, i ? "cube" : "e2b"), *pb = json_object_get(b, i ? "cube" : "e2b");
        static const char *const fields[] = {"api_url", "template_id", "proxy_url",
                                             "sandbox_domain"};
        for (size_t f = 0; f < SBX_ARRAY_SIZE(fields); f++)
            if (!json_equal(json_object_get(pa, fields[f]) ?: json_null(),
                            json_object_get(pb, fields[f]) ?: json_null()))
                return false;
    }
    return true;
}

static void api_configs_put(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct change *x = sbx_xcalloc(1, sizeof(*x));
    x->d = d;
    x->req = req;
    x->finish = put_finish;
    snprintf(x->id, sizeof(x->id), "%s", http_req_param(req, 0));
    snprintf(x->owner, sizeof(x->owner), "%s", http_req_id(req));
    json_t *config;
    const char *name, *description;
    int r = force_param(req, &x->force, &err);
    if (r == 0)
        r = read_body(req, &x->body, &name, &description, &config, &err);
    if (r < 0 || (r = configs_lock(d->configs, x->id, x->owner, &err)) < 0) {
        change_free(x);
        http_respond_error(req, &err);
        return;
    }
    if ((r = configs_load(d->configs, x->id, &x->l, &err)) == 0 &&
        (r = config_doc_build(d->configs->secrets, &d->configs->ceil, x->id, config, x->l.doc,
                              &x->doc, &err)) == 0) {
        /* What the sandboxes run is the backend and its template. A backend kept as it
         * was stays, even if the operator no longer enables it. */
        bool backend;
        x->identity = !same_identity(x->doc, x->l.doc, &backend);
        if (backend)
            r = configs_check_backend(d->configs, x->doc, &err);
        if (r == 0)
            r = check_desktop_switch(d, x->id, x->doc, x->l.doc, &err);
    }
    if (r < 0) {
        configs_unlock(d->configs, x->id, x->owner);
        change_free(x);
        http_respond_error(req, &err);
        return;
    }
    change_run(x, x->identity);
}

static void delete_finish(struct change *x, const struct configs_engine_answer *a)
{
    struct sbx_err err = {0};
    struct sbxd *d = x->d;
    const char *id = x->id;
    _cleanup_free_ char *snap_from = NULL, *snap_parked = NULL;
    int r = x->req ? configs_check_inventory(d->configs, id, a, x->force, &err)
                   : sbx_err_set(&err, ECANCELED, "request_gone", "the client went away");
    if (r == 0 && d->configs->snapshot_park_fn)
        r = d->configs->snapshot_park_fn(d->configs->skills_data, id, &snap_from, &snap_parked,
                                         &err);
    if (r == 0 && (r = store_config_delete(d->store, id, &err)) < 0 && snap_parked &&
        rename(snap_parked, snap_from) < 0)
        log_error("configuration %s: putting its skill snapshot back to %s: %s", id, snap_from,
                  strerror(errno));
    if (r < 0) {
        configs_unlock(d->configs, id, x->owner);
        if (x->req)
            http_respond_error(x->req, &err);
        change_free(x);
        return;
    }
    /* The store no longer names it (its lease is gone with it): its removal cannot be
     * refused any more, and a leftover is removed at the next start (installs_new). */
    if (snap_parked && sbx_rm_rf(snap_parked) < 0)
        log_warn("configuration %s: removing its skill snapshot %s failed", id, snap_parked);
    audit_config(d, x->req, "sandbox_config.delete", id, "ok");
    http_respond_json(
        x->req, 200, json_pack("{s:s,s:s,s:b}", "id", id, "object", "sandbox_config", "deleted", 1));
    change_free(x);
}

static void api_configs_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct change *x = sbx_xcalloc(1, sizeof(*x));
    x->d = d;
    x->req = req;
    x->finish = delete_finish;
    snprintf(x->id, sizeof(x->id), "%s", http_req_param(req, 0));
    snprintf(x->owner, sizeof(x->owner), "%s", http_req_id(req));
    if (force_param(req, &x->force, &err) < 0 ||
        configs_lock(d->configs, x->id, x->owner, &err) < 0) {
        change_free(x);
        http_respond_error(req, &err);
        return;
    }
    /* Unreadable: the inventory check says so (it loads it too). */
    (void)configs_load(d->configs, x->id, &x->l, &err);
    change_run(x, true);
}

static void inventory_finish(struct change *x, const struct configs_engine_answer *a)
{
    struct sbx_err err = {0};
    bool verified = true;
    json_t *engine = NULL;
    json_t *inv = x->req ? configs_inventory(x->d->configs, x->id, a, &verified, &engine, &err)
                         : NULL;
    if (!x->req) {
        /* nobody to answer */
    } else if (!inv) {
        http_respond_error(x->req, &err);
    } else {
        json_t *out = json_pack("{s:s,s:s,s:b,s:o}", "object", "list", "config_id", x->id,
                                "verified", verified, "data", inv);
        if (engine)
            json_object_set_new(out, a->remote ? "provider" : "engine", engine);
        http_respond_json(x->req, 200, out);
    }
    change_free(x);
}

/* The backend's list is read on a worker thread: one that hangs holds no loop. */
static void api_configs_inventory(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct change *x = sbx_xcalloc(1, sizeof(*x));
    x->d = d;
    x->req = req;
    x->finish = inventory_finish;
    snprintf(x->id, sizeof(x->id), "%.*s", STORE_ID_MAX, http_req_param(req, 0));
    if (strlen(http_req_param(req, 0)) > STORE_ID_MAX ||
        configs_load(d->configs, x->id, &x->l, &err) < 0) {
        if (!err.code[0])
            sbx_err_set(&err, ENOENT, "sandbox_config_not_found", "no configuration %.64s",
                        http_req_param(req, 0));
        change_free(x);
        http_respond_error(req, &err);
        return;
    }
    change_run(x, true);
}

static void api_workspace_policy(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    if (http_req_json(req, &body, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    json_t *v = json_object_get(body, "scripts_disabled");
    bool on = json_is_true(v), valid = json_is_boolean(v);
    json_decref(body);
    if (!valid) {
        http_respond_errorf(req, "invalid_request", "scripts_disabled must be true or false");
        return;
    }
    if (store_setting_set(d->store, STORE_SETTING_SCRIPTS_DISABLED, on ? "1" : "0", &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req),
                 "sandbox_config.workspace_policy", NULL, "ok",
                 json_pack("{s:b}", "scripts_disabled", on));
    http_respond_json(
        req, 200,
        json_pack("{s:s,s:b}", "object", "workspace_policy", "workspace_scripts_disabled", on));
}

static const struct route routes[] = {
    {"GET", "/v1/sandbox-configs", AUTH_VIEWER_FULL, api_configs_list, 0},
    {"POST", "/v1/sandbox-configs", AUTH_ADMIN_FULL, api_configs_create, 0},
    {"PUT", "/v1/sandbox-configs/workspace-policy", AUTH_ADMIN_FULL, api_workspace_policy, 0},
    {"GET", "/v1/sandbox-configs/{}", AUTH_VIEWER_FULL, api_configs_get, 0},
    {"PUT", "/v1/sandbox-configs/{}", AUTH_ADMIN_FULL, api_configs_put, 0},
    {"DELETE", "/v1/sandbox-configs/{}", AUTH_ADMIN_FULL, api_configs_delete, 0},
    {"GET", "/v1/sandbox-configs/{}/sandboxes", AUTH_ADMIN, api_configs_inventory, 0},
};

const struct route_table config_routes = ROUTE_TABLE(routes);
