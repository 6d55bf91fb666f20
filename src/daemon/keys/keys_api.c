#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../auth/auth.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"

static json_t *key_to_json(const struct store_key *k)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I}", "id", k->id, "object", "key", "user",
                     k->user, "role", auth_role_name(k->role), "tool_level",
                     auth_tool_level_name(k->tool_level), "scope", auth_scope_name(k->scope),
                     "created_at", (json_int_t)k->created_at);
}

/* role, tool_level and scope of body into k: the first two required when required, each
 * one given replacing k's. */
static int rights_parse(json_t *body, bool required, struct store_key *k, struct sbx_err *err)
{
    json_t *role = json_object_get(body, "role"), *level = json_object_get(body, "tool_level");
    json_t *scope = json_object_get(body, "scope");
    if (scope && json_is_null(scope))
        scope = NULL;
    if ((role || required) && (!json_is_string(role) ||
                               auth_role_parse(json_string_value(role), &k->role) < 0))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "role must be \"admin\", \"member\" or \"viewer\"");
    if (scope &&
        (!json_is_string(scope) || auth_scope_parse(json_string_value(scope), &k->scope) < 0))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "scope must be \"full_access\" or \"restricted\"");
    if ((level || required) && (!json_is_string(level) ||
                                auth_tool_level_parse(json_string_value(level), &k->tool_level) < 0))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "tool_level must be \"none\", \"basic\" or \"sandbox\"");
    return 0;
}

static void api_keys_create(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    if (http_req_json(req, &body, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    const char *user = json_string_value(json_object_get(body, "user"));
    struct store_key k = {0};
    if (!user || !auth_user_valid(user))
        sbx_err_set(&err, EINVAL, "invalid_request", "user must be 1-64 of [A-Za-z0-9_.@-]");
    else
        (void)rights_parse(body, true, &k, &err);
    if (err.code[0]) {
        json_decref(body);
        http_respond_error(req, &err);
        return;
    }
    char key[AUTH_KEY_LEN + 1];
    snprintf(k.user, sizeof(k.user), "%s", user);
    json_decref(body);
    k.created_at = sbx_wall_ms() / 1000;
    if (auth_key_generate(key, k.id, k.hash, &err) < 0 ||
        store_key_insert(d->store, &k, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "key.create", NULL, "ok",
                 json_pack("{s:s,s:s}", "key_id", k.id, "for_user", k.user));
    json_t *o = key_to_json(&k);
    json_object_set_new(o, "key", json_string(key));
    memset(key, 0, sizeof(key));
    http_respond_json(req, 201, o);
}

static void append_key(const struct store_key *k, void *data)
{
    json_array_append_new(data, key_to_json(k));
}

static void api_keys_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *list = json_array();
    if (store_key_each(d->store, append_key, list, &err) < 0) {
        json_decref(list);
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200, json_pack("{s:s,s:o}", "object", "list", "data", list));
}

static void api_keys_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *id = http_req_param(req, 0);
    if (store_key_delete(d->store, id, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "key.delete", NULL, "ok",
                 json_pack("{s:s}", "key_id", id));
    /* What the key opened ends now, not at its next request. */
    if (d->key_revoked)
        d->key_revoked(d, id);
    http_respond_json(req, 200,
                      json_pack("{s:s,s:s,s:b}", "id", id, "object", "key", "deleted", 1));
}

/* PATCH /v1/keys/{id} {role?, tool_level?, scope?}: a lowering (any of the three) ends at
 * once what the key opened, as a delete does: the sessions were opened with rights the key
 * no longer has. */
static void api_keys_update(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    if (http_req_json(req, &body, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    const char *id = http_req_param(req, 0), *field;
    json_t *v;
    json_object_foreach(body, field, v)
    {
        if (strcmp(field, "role") && strcmp(field, "tool_level") && strcmp(field, "scope")) {
            sbx_err_set(&err, EINVAL, "invalid_request",
                        "a key's role, tool_level and scope can change; %.64s cannot", field);
            break;
        }
    }
    struct store_key old, k;
    if (!err.code[0] && json_object_size(body) == 0)
        sbx_err_set(&err, EINVAL, "invalid_request", "give role, tool_level or scope");
    if (!err.code[0] && store_key_get(d->store, id, &old, &err) == 0) {
        k = old;
        if (rights_parse(body, false, &k, &err) == 0)
            (void)store_key_update(d->store, &k, &err);
    }
    json_decref(body);
    if (err.code[0]) {
        http_respond_error(req, &err);
        return;
    }
    bool lowered = k.role < old.role || k.tool_level < old.tool_level ||
                   (old.scope == AUTH_SCOPE_FULL && k.scope != AUTH_SCOPE_FULL);
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "key.update", NULL, "ok",
                 json_pack("{s:s,s:s,s:s,s:s,s:b}", "key_id", id, "role", auth_role_name(k.role),
                           "tool_level", auth_tool_level_name(k.tool_level), "scope",
                           auth_scope_name(k.scope), "lowered", lowered));
    if (lowered && d->key_revoked)
        d->key_revoked(d, id);
    http_respond_json(req, 200, key_to_json(&k));
}

static const struct route routes[] = {
    {"POST", "/v1/keys", AUTH_ADMIN, api_keys_create, 0},
    {"GET", "/v1/keys", AUTH_ADMIN, api_keys_list, 0},
    {"PATCH", "/v1/keys/{}", AUTH_ADMIN, api_keys_update, 0},
    {"DELETE", "/v1/keys/{}", AUTH_ADMIN, api_keys_delete, 0},
};

const struct route_table key_routes = ROUTE_TABLE(routes);
