/* Import circle with e2b_api.c and e2b_network.c (allowed inside a folder,
 * docs/architecture.md#layering): it answers through e2b_api.c's key check and error; the
 * network rules open its secrets. */
/* E2B's secrets (docs/e2b.md), as the SDK's Secret class calls them:
 *   GET    /e2b/api/secrets                 list (limit, nextToken)
 *   POST   /e2b/api/secrets                 {name, value, metadata?} -> 201
 *   GET    /e2b/api/secrets/{id or name}
 *   POST   /e2b/api/secrets/{id or name}    {value, metadata?}: a new version (PATCH too)
 *   DELETE /e2b/api/secrets/{id or name}    204
 * A secret belongs to the key's user (E2B's team). Its value is sealed with the daemon's
 * secrets key (configs/secrets.c) under a context naming the user and the secret, kept in
 * the personal variables' table under the scope "e2b_secret" (a scope nothing else reads),
 * never returned nor logged; every change is audited without it. The network rules of a
 * sandbox name secrets as ${e2b.secrets.<name>} (e2b_network.c), opened at create. */
#include "e2b_secrets.h"

#include <ctype.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../configs/configs.h"
#include "../http/router.h"
#include "../http/server.h"
#include "../sbxd.h"
#include "e2b.h"
#include "e2b_api.h"

#define SECRET_SCOPE "e2b_secret"
#define SECRET_ID_PREFIX "sec_"
#define SECRET_ID_HEX 24
#define SECRETS_PER_USER_MAX 100
#define SECRET_NAME_MAX 128
#define SECRET_META_ENTRIES_MAX 32
#define SECRET_META_KEY_MAX 128
#define SECRET_META_VALUE_MAX 1024
#define SECRET_META_TOTAL_MAX 8192
#define SECRET_LIST_MAX 100

/* One stored secret: its row's fields and its record {sealed, version, metadata,
 * created_at}, all copied (the row goes when the store's statement does). */
struct secret_row {
    char id[SECRET_ID_HEX + sizeof(SECRET_ID_PREFIX)];
    char name[SECRET_NAME_MAX + 1];
    json_t *rec;
    long long updated_at;
};

static void secret_row_clear(struct secret_row *r)
{
    json_decref(r->rec);
    r->rec = NULL;
}

static char *seal_context(const char *user, const char *id)
{
    return sbx_xasprintf("e2b_secret:%s:%s", user, id);
}

struct find_ctx {
    const char *want; /* an id or a name, NULL: count only */
    struct secret_row *out;
    bool found;
    size_t n;
};

static void find_one(const struct store_env_var *v, void *data)
{
    struct find_ctx *f = data;
    f->n++;
    if (f->found || !f->want || (strcmp(v->target, f->want) && strcmp(v->name, f->want)))
        return;
    json_t *rec = json_loads(v->value, 0, NULL);
    if (!json_is_object(rec)) {
        json_decref(rec);
        return;
    }
    snprintf(f->out->id, sizeof(f->out->id), "%s", v->target);
    snprintf(f->out->name, sizeof(f->out->name), "%s", v->name);
    f->out->rec = rec;
    f->out->updated_at = v->updated_at;
    f->found = true;
}

/* The user's secret of that id or name (names are kept lower-cased): secret_not_found. */
static int secret_find(struct sbxd *d, const char *user, const char *id_or_name,
                       struct secret_row *out, struct sbx_err *err)
{
    char want[SECRET_NAME_MAX + 1];
    size_t i = 0;
    for (; id_or_name[i] && i < SECRET_NAME_MAX; i++)
        want[i] = (char)tolower((unsigned char)id_or_name[i]);
    want[i] = '\0';
    struct find_ctx f = {.want = want, .out = out};
    memset(out, 0, sizeof(*out));
    int r = store_personal_env_each(d->store, user, SECRET_SCOPE, NULL, find_one, &f, err);
    if (r < 0)
        return r;
    if (!f.found)
        return sbx_err_set(err, ENOENT, "secret_not_found", "secret %.128s not found", id_or_name);
    return 0;
}

int e2b_secret_value(struct sbxd *d, const char *user, const char *name, char **out,
                     struct sbx_err *err)
{
    struct secret_row row;
    int r = secret_find(d, user, name, &row, err);
    if (r < 0)
        return r;
    const char *sealed = json_string_value(json_object_get(row.rec, "sealed"));
    _cleanup_free_ char *ctx = seal_context(user, row.id);
    r = sealed ? secrets_open_value(d->configs->secrets, ctx, sealed, out, err)
               : sbx_err_set(err, EIO, "secret_unreadable", "secret %s has no value", row.id);
    secret_row_clear(&row);
    return r;
}

/* E2B's Secret object: never the value. */
static json_t *secret_json(const struct secret_row *r)
{
    json_t *md = json_object_get(r->rec, "metadata");
    return json_pack(
        "{s:s,s:s,s:I,s:o,s:o,s:o}", "secretID", r->id, "name", r->name, "currentVersion",
        json_integer_value(json_object_get(r->rec, "version")), "metadata",
        json_is_object(md) ? json_incref(md) : json_object(), "createdAt",
        e2b_rfc3339(json_integer_value(json_object_get(r->rec, "created_at")) / 1000), "updatedAt",
        e2b_rfc3339(r->updated_at / 1000));
}

static int check_name(const char *name, struct sbx_err *err)
{
    size_t n = strlen(name);
    if (n == 0 || n > SECRET_NAME_MAX)
        return sbx_err_set(err, EINVAL, "invalid_request", "name must be 1 to %d characters",
                           SECRET_NAME_MAX);
    if (!strncmp(name, SECRET_ID_PREFIX, strlen(SECRET_ID_PREFIX)))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "the %s prefix is reserved for secret identifiers", SECRET_ID_PREFIX);
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        if (*c < 0x20 || *c == 0x7f || *c == '{' || *c == '}' || *c == '/')
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "a secret name cannot contain '{', '}', '/' or control characters");
    return 0;
}

/* metadata: absent/null, or at most 32 strings within E2B's sizes. */
static int check_metadata(json_t *md, struct sbx_err *err)
{
    if (!md || json_is_null(md))
        return 0;
    if (!json_is_object(md) || json_object_size(md) > SECRET_META_ENTRIES_MAX)
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "metadata must be an object of at most %d strings",
                           SECRET_META_ENTRIES_MAX);
    size_t total = 0;
    const char *k;
    json_t *v;
    json_object_foreach(md, k, v)
    {
        if (!json_is_string(v) || strlen(k) > SECRET_META_KEY_MAX ||
            json_string_length(v) > SECRET_META_VALUE_MAX)
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "metadata.%.64s must be a string (keys up to %d bytes, values up "
                               "to %d)",
                               k, SECRET_META_KEY_MAX, SECRET_META_VALUE_MAX);
        total += strlen(k) + json_string_length(v);
    }
    if (total > SECRET_META_TOTAL_MAX)
        return sbx_err_set(err, EINVAL, "invalid_request", "metadata is larger than %d bytes",
                           SECRET_META_TOTAL_MAX);
    return 0;
}

static int check_value(json_t *v, struct sbx_err *err)
{
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        json_string_length(v) > SECRETS_VALUE_MAX || strlen(json_string_value(v)) != json_string_length(v))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "value must be a string of 1 to %d bytes without NUL",
                           SECRETS_VALUE_MAX);
    return 0;
}

/* Seal value into rec and store the row. */
static int secret_store(struct sbxd *d, const char *user, struct secret_row *row, const char *value,
                        struct sbx_err *err)
{
    _cleanup_free_ char *ctx = seal_context(user, row->id);
    char *sealed = NULL;
    int r = secrets_seal(d->configs->secrets, ctx, value, &sealed, err);
    if (r < 0)
        return r;
    json_object_set_new(row->rec, "sealed", json_string(sealed));
    free(sealed);
    _cleanup_free_ char *text = json_dumps(row->rec, JSON_COMPACT | JSON_SORT_KEYS);
    row->updated_at = sbx_wall_ms();
    struct store_env_var v = {.user = user,
                              .scope = SECRET_SCOPE,
                              .target = row->id,
                              .name = row->name,
                              .value = text,
                              .updated_at = row->updated_at};
    return store_personal_env_set(d->store, &v, err);
}

static void audit_secret(struct sbxd *d, struct http_req *req, const char *action,
                         const char *id, const char *name, const struct sbx_err *err)
{
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), action, NULL,
                 err ? (err->code[0] ? err->code : "internal") : "ok",
                 json_pack("{s:s,s:s?,s:s?}", "via", "e2b", "secret_id", id, "name", name));
}

static void api_secret_create(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    struct secret_row row = {0};
    int r = e2b_begin(d, req, &body, &err);
    if (r > 0)
        return;
    const char *user = http_req_identity(req)->user;
    if (r < 0)
        goto fail;
    json_t *name = json_object_get(body, "name"), *md = json_object_get(body, "metadata");
    if (!json_is_string(name)) {
        sbx_err_set(&err, EINVAL, "invalid_request", "name must be a string");
        goto fail;
    }
    size_t i = 0;
    for (const char *c = json_string_value(name); *c && i < SECRET_NAME_MAX + 1; c++)
        row.name[i++] = (char)tolower((unsigned char)*c);
    row.name[i < sizeof(row.name) ? i : sizeof(row.name) - 1] = '\0';
    if (json_string_length(name) > SECRET_NAME_MAX) {
        sbx_err_set(&err, EINVAL, "invalid_request", "name must be 1 to %d characters",
                    SECRET_NAME_MAX);
        goto fail;
    }
    if (check_name(row.name, &err) < 0 || check_value(json_object_get(body, "value"), &err) < 0 ||
        check_metadata(md, &err) < 0)
        goto fail;
    struct secret_row seen;
    struct find_ctx f = {.want = row.name, .out = &seen};
    if (store_personal_env_each(d->store, user, SECRET_SCOPE, NULL, find_one, &f, &err) < 0)
        goto fail;
    if (f.found) {
        secret_row_clear(&seen);
        sbx_err_set(&err, EEXIST, "secret_exists", "a secret named %s exists", row.name);
        goto fail;
    }
    if (f.n >= SECRETS_PER_USER_MAX) {
        sbx_err_set(&err, EAGAIN, "too_many_secrets", "at most %d secrets per user",
                    SECRETS_PER_USER_MAX);
        goto fail;
    }
    sbx_random_id(SECRET_ID_PREFIX, SECRET_ID_HEX / 2, row.id, sizeof(row.id));
    row.rec = json_pack("{s:i,s:o,s:I}", "version", 1, "metadata",
                        json_is_object(md) ? json_incref(md) : json_object(), "created_at",
                        (json_int_t)sbx_wall_ms());
    if (secret_store(d, user, &row, json_string_value(json_object_get(body, "value")), &err) < 0)
        goto fail;
    audit_secret(d, req, "secret.create", row.id, row.name, NULL);
    http_respond_json(req, 201, secret_json(&row));
    secret_row_clear(&row);
    json_decref(body);
    return;
fail:
    audit_secret(d, req, "secret.create", NULL, row.name[0] ? row.name : NULL, &err);
    secret_row_clear(&row);
    json_decref(body);
    e2b_fail(req, &err);
}

static void api_secret_update(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    struct secret_row row = {0};
    int r = e2b_begin(d, req, &body, &err);
    if (r > 0)
        return;
    const char *user = http_req_identity(req)->user;
    json_t *md;
    if (r < 0 ||
        check_value(json_object_get(body, "value"), &err) < 0 ||
        check_metadata(md = json_object_get(body, "metadata"), &err) < 0 ||
        secret_find(d, user, http_req_param(req, 0), &row, &err) < 0)
        goto fail;
    json_object_set_new(row.rec, "version",
                        json_integer(json_integer_value(json_object_get(row.rec, "version")) + 1));
    if (json_is_object(md))
        json_object_set(row.rec, "metadata", md);
    if (secret_store(d, user, &row, json_string_value(json_object_get(body, "value")), &err) < 0)
        goto fail;
    audit_secret(d, req, "secret.update", row.id, row.name, NULL);
    http_respond_json(req, 200, secret_json(&row));
    secret_row_clear(&row);
    json_decref(body);
    return;
fail:
    audit_secret(d, req, "secret.update", row.id[0] ? row.id : NULL, NULL, &err);
    secret_row_clear(&row);
    json_decref(body);
    e2b_fail(req, &err);
}

static void api_secret_get(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct secret_row row;
    if (e2b_authenticate(d, req) < 0)
        return;
    if (secret_find(d, http_req_identity(req)->user, http_req_param(req, 0), &row, &err) < 0) {
        e2b_fail(req, &err);
        return;
    }
    http_respond_json(req, 200, secret_json(&row));
    secret_row_clear(&row);
}

static void api_secret_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct secret_row row;
    if (e2b_authenticate(d, req) < 0)
        return;
    const char *user = http_req_identity(req)->user;
    if (secret_find(d, user, http_req_param(req, 0), &row, &err) < 0) {
        audit_secret(d, req, "secret.delete", NULL, NULL, &err);
        e2b_fail(req, &err);
        return;
    }
    struct store_env_var v = {.user = user, .scope = SECRET_SCOPE, .target = row.id,
                              .name = row.name};
    int r = store_personal_env_delete(d->store, &v, &err);
    audit_secret(d, req, "secret.delete", row.id, row.name, r < 0 ? &err : NULL);
    secret_row_clear(&row);
    if (r < 0)
        e2b_fail(req, &err);
    else
        http_respond_text(req, 204, "");
}

struct list_ctx {
    json_t *items;
    const char *after; /* nextToken: the id the page before ended with */
    long long limit;
    bool more;
};

static void list_one(const struct store_env_var *v, void *data)
{
    struct list_ctx *c = data;
    if ((c->after && strcmp(v->target, c->after) <= 0) || c->more)
        return;
    if ((long long)json_array_size(c->items) == c->limit) {
        c->more = true;
        return;
    }
    struct secret_row row = {.updated_at = v->updated_at};
    snprintf(row.id, sizeof(row.id), "%s", v->target);
    snprintf(row.name, sizeof(row.name), "%s", v->name);
    row.rec = json_loads(v->value, 0, NULL);
    if (json_is_object(row.rec))
        json_array_append_new(c->items, secret_json(&row));
    secret_row_clear(&row);
}

/* The rows come ordered by id, so the last id of a page is where the next one starts. */
static void api_secret_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    if (e2b_authenticate(d, req) < 0)
        return;
    struct list_ctx c = {.limit = SECRET_LIST_MAX};
    if (http_req_query_int(req, "limit", 1, SECRET_LIST_MAX, "invalid_request", &c.limit, &err) <
        0) {
        e2b_fail(req, &err);
        return;
    }
    c.after = http_req_query(req, "nextToken");
    if (c.after && !*c.after)
        c.after = NULL;
    c.items = json_array();
    if (store_personal_env_each(d->store, http_req_identity(req)->user, SECRET_SCOPE, NULL,
                                list_one, &c, &err) < 0) {
        json_decref(c.items);
        e2b_fail(req, &err);
        return;
    }
    if (c.more) {
        json_t *last = json_array_get(c.items, json_array_size(c.items) - 1);
        http_req_add_header(req, "X-Next-Token",
                            json_string_value(json_object_get(last, "secretID")));
    }
    http_respond_json(req, 200, c.items);
}

static const struct route routes[] = {
    {"GET", "/e2b/api/secrets", AUTH_PUBLIC, api_secret_list, 0},
    {"POST", "/e2b/api/secrets", AUTH_PUBLIC, api_secret_create, 0},
    {"GET", "/e2b/api/secrets/{}", AUTH_PUBLIC, api_secret_get, 0},
    {"POST", "/e2b/api/secrets/{}", AUTH_PUBLIC, api_secret_update, 0},
    {"PATCH", "/e2b/api/secrets/{}", AUTH_PUBLIC, api_secret_update, 0},
    {"DELETE", "/e2b/api/secrets/{}", AUTH_PUBLIC, api_secret_delete, 0},
};

const struct route_table e2b_secret_routes = ROUTE_TABLE(routes);
