/* The volume routes (docs/volumes.md):
 *   POST   /v1/volumes        {name, size_mb?}
 *   GET    /v1/volumes
 *   GET    /v1/volumes/{id}   (an id or the caller's name for it)
 *   DELETE /v1/volumes/{id}   409 volume_in_use while a live sandbox mounts it
 * Every volume is its owner's: another user's is volume_not_found. */
#include <errno.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/idempotency.h"
#include "../http/router.h"
#include "../http/server.h"
#include "../sbxd.h"
#include "volumes.h"

static void api_volumes_create(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    struct store_volume vol;
    if (idem_begin(d->store, req, NULL))
        return;
    if (http_req_json(req, &body, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        http_respond_errorf(req, "invalid_volume", "the body must be {name, size_mb?}");
        return;
    }
    json_t *name = json_object_get(body, "name"), *size = json_object_get(body, "size_mb");
    int r = 0;
    if (!json_is_string(name))
        r = sbx_err_set(&err, EINVAL, "invalid_volume", "name must be a string");
    else if (size && !json_is_null(size) && (!json_is_integer(size) || json_integer_value(size) < 1))
        r = sbx_err_set(&err, EINVAL, "invalid_volume", "size_mb must be a positive integer");
    if (r == 0)
        r = volumes_create(d->volumes, http_req_identity(req)->user, json_string_value(name),
                           json_is_integer(size) ? json_integer_value(size) : 0, &vol, &err);
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "volume.create",
                 r == 0 ? vol.id : NULL, r == 0 ? "ok" : err.code,
                 json_pack("{s:s?}", "name", json_string_value(name)));
    json_decref(body);
    if (r < 0) {
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 201, volumes_to_json(d->volumes, &vol));
}

struct listing {
    struct volumes *v;
    json_t *list;
};

static void append_volume(const struct store_volume *vol, void *data)
{
    struct listing *l = data;
    json_array_append_new(l->list, volumes_to_json(l->v, vol));
}

static void api_volumes_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct listing l = {d->volumes, json_array()};
    if (store_volume_each(d->store, http_req_identity(req)->user, append_volume, &l, &err) < 0) {
        json_decref(l.list);
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200, json_pack("{s:s,s:o}", "object", "list", "data", l.list));
}

static void api_volumes_get(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct store_volume vol;
    if (volumes_get(d->volumes, http_req_identity(req)->user, http_req_param(req, 0), &vol, &err) <
        0) {
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200, volumes_to_json(d->volumes, &vol));
}

static void api_volumes_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct store_volume vol = {0};
    int r = volumes_delete(d->volumes, http_req_identity(req)->user, http_req_param(req, 0), &vol,
                           &err);
    /* A name nobody has is not an action on anything. */
    if (r == 0 || vol.id[0])
        audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "volume.delete",
                     vol.id, r == 0 ? "ok" : err.code, json_pack("{s:s}", "name", vol.name));
    if (r < 0) {
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200,
                      json_pack("{s:s,s:s,s:b}", "id", vol.id, "object", "volume", "deleted", 1));
}

static const struct route routes[] = {
    {"POST", "/v1/volumes", AUTH_SANDBOX, api_volumes_create, 0},
    {"GET", "/v1/volumes", AUTH_SANDBOX, api_volumes_list, 0},
    {"GET", "/v1/volumes/{}", AUTH_SANDBOX, api_volumes_get, 0},
    {"DELETE", "/v1/volumes/{}", AUTH_SANDBOX, api_volumes_delete, 0},
};

const struct route_table volume_routes = ROUTE_TABLE(routes);
