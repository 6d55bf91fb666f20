/* /v1/me/env-vars: the caller's own variables (docs/configs.md). Who the caller is
 * comes from the key; no user id is taken from the request. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "envvars.h"

static void api_me_env_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *data = envvars_describe(d->configs, http_req_identity(req)->user, &err);
    if (!data) {
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200, json_pack("{s:s,s:o}", "object", "list", "data", data));
}

/* {<target_field>, name, value?}: set (value) or delete. */
static void me_env_change(struct sbxd *d, struct http_req *req, const char *scope,
                          const char *target_field, bool set)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    if (http_req_json(req, &body, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    const char *who = http_req_identity(req)->user;
    const char *target = json_string_value(json_object_get(body, target_field));
    const char *name = json_string_value(json_object_get(body, "name"));
    const char *value = json_string_value(json_object_get(body, "value"));
    int r;
    if (!target || !target[0] || strlen(target) > STORE_ID_MAX * 2 || !name || (set && !value))
        r = sbx_err_set(&err, EINVAL, "invalid_request", "send {%s, name%s} as strings",
                        target_field, set ? ", value" : "");
    else if (set)
        r = envvars_set(d->configs, who, scope, target, name, value, &err);
    else
        r = envvars_delete(d->configs, who, scope, target, name, &err);
    if (r < 0) {
        json_decref(body);
        http_respond_error(req, &err);
        return;
    }
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req),
                 set ? "env_var.set" : "env_var.delete", NULL, "ok",
                 json_pack("{s:s,s:s,s:s}", "scope", scope, target_field, target, "name", name));
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s}", "object", "env_var", "scope", scope,
                          target_field, target, "name", name, "source", set ? "user" : "unset");
    if (set)
        json_object_set_new(o, "updated_at", json_integer(sbx_wall_ms() / 1000));
    else
        json_object_set_new(o, "deleted", json_true());
    json_decref(body);
    http_respond_json(req, 200, o);
}

static void api_me_env_sandbox_put(struct sbxd *d, struct http_req *req)
{
    me_env_change(d, req, "sandbox", "sandbox_config_id", true);
}

static void api_me_env_sandbox_delete(struct sbxd *d, struct http_req *req)
{
    me_env_change(d, req, "sandbox", "sandbox_config_id", false);
}

static void api_me_env_skill_put(struct sbxd *d, struct http_req *req)
{
    me_env_change(d, req, "skill", "skill_id", true);
}

static void api_me_env_skill_delete(struct sbxd *d, struct http_req *req)
{
    me_env_change(d, req, "skill", "skill_id", false);
}

static const struct route routes[] = {
    {"GET", "/v1/me/env-vars", AUTH_KEY, api_me_env_list, 0},
    {"PUT", "/v1/me/env-vars/sandbox", AUTH_KEY, api_me_env_sandbox_put, 0},
    {"DELETE", "/v1/me/env-vars/sandbox", AUTH_KEY, api_me_env_sandbox_delete, 0},
    {"PUT", "/v1/me/env-vars/skill", AUTH_KEY, api_me_env_skill_put, 0},
    {"DELETE", "/v1/me/env-vars/skill", AUTH_KEY, api_me_env_skill_delete, 0},
};

const struct route_table me_routes = ROUTE_TABLE(routes);
