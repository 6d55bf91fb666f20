/* Import circle with e2b_api.c (allowed inside a folder, docs/architecture.md#layering):
 * create takes its volumeMounts; it answers through e2b_api.c's key check and error. */
/* E2B's volumes (docs/e2b.md) on sbx's volumes (docs/volumes.md, volumes/volumes.h):
 *   POST   /e2b/api/volumes {name}        -> 201 {volumeID, name, token}
 *   GET    /e2b/api/volumes               [{volumeID, name}]
 *   GET    /e2b/api/volumes/{id or name}  {volumeID, name, token}
 *   DELETE /e2b/api/volumes/{id or name}  204 (409 volume_in_use while a sandbox mounts it)
 * and the SDK's Volume file API, which it sends to E2B_VOLUME_API_URL (set it to the same
 * .../e2b/api) with the volume's token as Bearer, not the API key:
 *   GET    /e2b/api/volumecontent/{id}/dir?path&depth    entries
 *   POST   /e2b/api/volumecontent/{id}/dir?path          mkdir -p, 201 the entry
 *   GET    /e2b/api/volumecontent/{id}/path?path         the entry
 *   DELETE /e2b/api/volumecontent/{id}/path?path         204
 *   GET    /e2b/api/volumecontent/{id}/file?path         the bytes
 *   PUT    /e2b/api/volumecontent/{id}/file?path         raw body (files/upload.c), the entry
 * The token is per volume, random, sealed in the store beside its owner (the personal
 * variables' table, scope "e2b_volume", which nothing else reads) and answered only to the
 * owner's key; it acts as the volume's owner on that volume alone. Paths are the volume
 * routes' (beneath the volume's root by openat2, files/workspace.h); a leading '/' is the
 * volume's root. Sandbox.create({volumeMounts}) becomes the create's "volumes". */
#include "e2b_volumes.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <string.h>
#include <unistd.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../configs/configs.h"
#include "../files/upload.h"
#include "../files/workspace.h"
#include "../http/router.h"
#include "../http/server.h"
#include "../sbxd.h"
#include "../volumes/volumes.h"
#include "e2b.h"
#include "e2b_api.h"

#define VOL_SCOPE "e2b_volume"
#define VOL_TOKEN_HEX 48
#define VOL_LIST_MAX 10000

static char *token_context(const char *user, const char *id)
{
    return sbx_xasprintf("e2b_volume:%s:%s", user, id);
}

struct token_find {
    char *sealed;
};

static void token_row(const struct store_env_var *v, void *data)
{
    struct token_find *f = data;
    if (!f->sealed)
        f->sealed = sbx_xstrdup(v->value);
}

/* The volume's token in clear (made and stored the first time), malloc'd. */
static int volume_token(struct sbxd *d, const struct store_volume *vol, char **out,
                        struct sbx_err *err)
{
    struct token_find f = {0};
    _cleanup_free_ char *ctx = token_context(vol->user, vol->id);
    int r = store_personal_env_each(d->store, vol->user, VOL_SCOPE, vol->id, token_row, &f, err);
    if (r >= 0 && f.sealed) {
        r = secrets_open_value(d->configs->secrets, ctx, f.sealed, out, err);
        free(f.sealed);
        return r;
    }
    free(f.sealed);
    if (r < 0)
        return r;
    char tok[VOL_TOKEN_HEX + 1];
    sbx_random_id("", VOL_TOKEN_HEX / 2, tok, sizeof(tok));
    char *sealed = NULL;
    if ((r = secrets_seal(d->configs->secrets, ctx, tok, &sealed, err)) < 0)
        return r;
    struct store_env_var v = {.user = vol->user, .scope = VOL_SCOPE, .target = vol->id,
                              .name = "token", .value = sealed, .updated_at = sbx_wall_ms()};
    r = store_personal_env_set(d->store, &v, err);
    free(sealed);
    if (r < 0)
        return r;
    *out = sbx_xstrdup(tok);
    OPENSSL_cleanse(tok, sizeof(tok));
    return 0;
}

static void answer_volume(struct sbxd *d, struct http_req *req, unsigned status,
                          const struct store_volume *vol)
{
    struct sbx_err err = {0};
    char *tok = NULL;
    if (volume_token(d, vol, &tok, &err) < 0) {
        e2b_fail(req, &err);
        return;
    }
    http_respond_json(req, status,
                      json_pack("{s:s,s:s,s:s}", "volumeID", vol->id, "name", vol->name, "token",
                                tok));
    secrets_drop(tok);
}

static void api_volume_create(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    struct store_volume vol;
    int r = e2b_begin(d, req, &body, &err);
    if (r > 0)
        return;
    const char *user = http_req_identity(req)->user;
    const char *name = json_string_value(json_object_get(body, "name"));
    if (r == 0 && !name)
        r = sbx_err_set(&err, EINVAL, "invalid_volume", "name must be a string");
    if (r == 0 && !d->volumes)
        r = sbx_err_set(&err, ENOTSUP, "invalid_volume", "this daemon has no volumes");
    if (r == 0)
        r = volumes_create(d->volumes, user, name, 0, &vol, &err);
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "volume.create", NULL,
                 r < 0 ? err.code : "ok",
                 json_pack("{s:s,s:s?,s:s?}", "via", "e2b", "volume_id", r < 0 ? NULL : vol.id,
                           "name", name));
    json_decref(body);
    if (r < 0)
        e2b_fail(req, &err);
    else
        answer_volume(d, req, 201, &vol);
}

static void list_one(const struct store_volume *v, void *data)
{
    json_array_append_new(data, json_pack("{s:s,s:s}", "volumeID", v->id, "name", v->name));
}

static void api_volume_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    if (e2b_authenticate(d, req) < 0)
        return;
    json_t *items = json_array();
    if (store_volume_each(d->store, http_req_identity(req)->user, list_one, items, &err) < 0) {
        json_decref(items);
        e2b_fail(req, &err);
        return;
    }
    http_respond_json(req, 200, items);
}

static void api_volume_get(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct store_volume vol;
    if (e2b_authenticate(d, req) < 0)
        return;
    if (!d->volumes || volumes_get(d->volumes, http_req_identity(req)->user,
                                   http_req_param(req, 0), &vol, &err) < 0) {
        if (!d->volumes)
            sbx_err_set(&err, ENOENT, "volume_not_found", "this daemon has no volumes");
        e2b_fail(req, &err);
        return;
    }
    answer_volume(d, req, 200, &vol);
}

static void api_volume_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct store_volume vol = {0};
    if (e2b_authenticate(d, req) < 0)
        return;
    const char *user = http_req_identity(req)->user;
    int r = d->volumes ? volumes_delete(d->volumes, user, http_req_param(req, 0), &vol, &err)
                       : sbx_err_set(&err, ENOENT, "volume_not_found", "this daemon has no volumes");
    if (r == 0) {
        struct store_env_var v = {.user = user, .scope = VOL_SCOPE, .target = vol.id,
                                  .name = "token"};
        struct sbx_err terr = {0};
        (void)store_personal_env_delete(d->store, &v, &terr); /* none when never asked for */
    }
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "volume.delete",
                 NULL, r < 0 ? err.code : "ok",
                 json_pack("{s:s,s:s}", "via", "e2b", "volume_id", r < 0 ? http_req_param(req, 0) : vol.id));
    if (r < 0)
        e2b_fail(req, &err);
    else
        http_respond_text(req, 204, "");
}

/* ---- the volume's content, by its token ---- */

struct vol_ctx {
    struct store_volume vol;
    struct auth_identity who; /* the volume's owner */
    int root;
    char path[WS_PATH_MAX + 1]; /* relative to the volume's root, "" for it */
};

/* The volume of path parameter 0, its token checked (401 otherwise, 404 for no such
 * volume), its root opened and the query's path made relative. */
static int vol_open(struct sbxd *d, struct http_req *req, bool empty_ok, struct vol_ctx *c)
{
    struct sbx_err err = {0};
    c->root = -1;
    const char *h = http_req_header(req, "Authorization");
    const char *tok = h && !strncasecmp(h, "Bearer ", 7) ? h + 7 : NULL;
    _cleanup_free_ char *dir = NULL;
    char *want = NULL;
    int r = !d->volumes ? sbx_err_set(&err, ENOENT, "volume_not_found", "no volumes here")
                        : store_volume_get(d->store, NULL, http_req_param(req, 0), &c->vol, &err);
    if (r == 0 && strcmp(c->vol.id, http_req_param(req, 0)))
        r = sbx_err_set(&err, ENOENT, "volume_not_found", "volume %.64s not found",
                        http_req_param(req, 0)); /* by id only: names are per user */
    if (r == 0 && (r = volume_token(d, &c->vol, &want, &err)) == 0 &&
        (!tok || strlen(tok) != VOL_TOKEN_HEX || CRYPTO_memcmp(tok, want, VOL_TOKEN_HEX)))
        r = sbx_err_set(&err, EACCES, "invalid_api_key", "the volume's token is missing or wrong");
    if (want)
        secrets_drop(want);
    const char *p = http_req_query(req, "path");
    while (p && *p == '/')
        p++;
    snprintf(c->path, sizeof(c->path), "%s", p ? p : "");
    if (r == 0)
        r = ws_path_check(c->path, empty_ok, &err);
    if (r == 0 && (r = volumes_root(d->volumes, &c->vol, &dir, &err)) == 0)
        r = ws_open_root(dir, &c->root, &err);
    if (r < 0) {
        if (!strcmp(err.code, "file_not_found"))
            snprintf(err.code, sizeof(err.code), "not_found");
        e2b_fail(req, &err);
        return -1;
    }
    memset(&c->who, 0, sizeof(c->who));
    c->who.authenticated = true;
    snprintf(c->who.user, sizeof(c->who.user), "%s", c->vol.user);
    c->who.role = AUTH_ROLE_MEMBER;
    c->who.tool_level = AUTH_TOOL_SANDBOX;
    return 0;
}

static json_t *iso(time_t t)
{
    return e2b_rfc3339((long long)t);
}

/* E2B's VolumeEntryStat. */
static json_t *entry_json(const char *path, const struct stat *st, const char *target)
{
    const char *type = S_ISREG(st->st_mode)   ? "file"
                       : S_ISDIR(st->st_mode) ? "directory"
                       : S_ISLNK(st->st_mode) ? "symlink"
                                              : "unknown";
    const char *base = strrchr(path, '/');
    _cleanup_free_ char *abs = sbx_xasprintf("/%s", path);
    json_t *o = json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:o,s:o,s:o}", "name",
                          base ? base + 1 : (*path ? path : "/"), "path", abs, "type", type,
                          "size", (json_int_t)st->st_size, "mode",
                          (json_int_t)(st->st_mode & 07777), "uid", (json_int_t)st->st_uid, "gid",
                          (json_int_t)st->st_gid, "atime", iso(st->st_atime), "mtime",
                          iso(st->st_mtime), "ctime", iso(st->st_ctime));
    if (target && *target)
        json_object_set_new(o, "target", json_string(target));
    return o;
}

static json_t *upload_answer(const char *path, const struct stat *st)
{
    return entry_json(path, st, NULL);
}

static void answer_entry(struct http_req *req, struct vol_ctx *c, unsigned status)
{
    struct sbx_err err = {0};
    struct stat st;
    char target[WS_PATH_MAX + 1] = "";
    if (ws_lstat(c->root, c->path, &st, target, sizeof(target), &err) < 0) {
        if (!strcmp(err.code, "file_not_found"))
            snprintf(err.code, sizeof(err.code), "not_found");
        e2b_fail(req, &err);
        return;
    }
    http_respond_json(req, status, entry_json(c->path, &st, target));
}

static void api_content_stat(struct sbxd *d, struct http_req *req)
{
    struct vol_ctx c;
    if (vol_open(d, req, true, &c) < 0)
        return;
    answer_entry(req, &c, 200);
    close(c.root);
}

struct walk {
    json_t *items;
    long long depth;
    size_t base; /* the listed directory's part of each entry's path */
};

static int walk_one(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    struct walk *w = data;
    long long level = 1;
    for (const char *s = e->path + w->base; *s; s++)
        level += *s == '/';
    if (level > w->depth)
        return 0;
    json_array_append_new(w->items, entry_json(e->path, e->st, NULL));
    return 0;
}

static void api_content_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct vol_ctx c;
    if (vol_open(d, req, true, &c) < 0)
        return;
    struct walk w = {.items = json_array(), .depth = 1, .base = *c.path ? strlen(c.path) + 1 : 0};
    bool truncated = false;
    /* depth 1: the directory's own entries; each more, one level further down. */
    if (http_req_query_int(req, "depth", 1, 64, "invalid_request", &w.depth, &err) < 0 ||
        ws_walk(c.root, c.path, w.depth > 1, VOL_LIST_MAX, walk_one, &w, &truncated, &err) < 0) {
        if (!strcmp(err.code, "file_not_found"))
            snprintf(err.code, sizeof(err.code), "not_found");
        json_decref(w.items);
        e2b_fail(req, &err);
    } else {
        http_respond_json(req, 200, w.items);
    }
    close(c.root);
}

static void api_content_mkdir(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct vol_ctx c;
    bool created = false;
    if (vol_open(d, req, false, &c) < 0)
        return;
    if (ws_mkdirs(c.root, c.path, &created, &err) < 0) {
        if (!strcmp(err.code, "workspace_too_large"))
            sbx_err_set(&err, ENOSPC, "volume_full", "the volume is full");
        e2b_fail(req, &err);
    } else {
        audit_record(d->store, &c.who, NULL, http_req_id(req), "volume.file.mkdir", c.vol.id,
                     "ok", json_pack("{s:s,s:s,s:s}", "via", "e2b", "volume", c.vol.name, "path",
                                     c.path));
        answer_entry(req, &c, 201);
    }
    close(c.root);
}

static void api_content_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct vol_ctx c;
    struct stat st;
    char target[WS_PATH_MAX + 1];
    if (vol_open(d, req, false, &c) < 0)
        return;
    /* ws_remove takes a missing path for done; E2B's answer is 404. */
    if (ws_lstat(c.root, c.path, &st, target, sizeof(target), &err) < 0 ||
        ws_remove(c.root, c.path, &err) < 0) {
        if (!strcmp(err.code, "file_not_found"))
            snprintf(err.code, sizeof(err.code), "not_found");
        e2b_fail(req, &err);
    } else {
        audit_record(d->store, &c.who, NULL, http_req_id(req), "volume.file.delete", c.vol.id,
                     "ok", json_pack("{s:s,s:s,s:s}", "via", "e2b", "volume", c.vol.name, "path",
                                     c.path));
        http_respond_text(req, 204, "");
    }
    close(c.root);
}

static void api_content_read(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    struct vol_ctx c;
    int fd = -1;
    uint64_t size;
    if (vol_open(d, req, false, &c) < 0)
        return;
    if (ws_open_file(c.root, c.path, &fd, &size, &err) < 0) {
        if (!strcmp(err.code, "file_not_found"))
            snprintf(err.code, sizeof(err.code), "not_found");
        e2b_fail(req, &err);
    } else {
        http_respond_fd(req, 200, fd, size, "application/octet-stream");
    }
    close(c.root);
}

/* The body streams to files/upload.c, which audits volume.file.upload as the owner. */
static void api_content_write(struct sbxd *d, struct http_req *req)
{
    struct vol_ctx c;
    if (vol_open(d, req, false, &c) < 0)
        return;
    *http_req_identity(req) = c.who; /* the upload's audit entry names the owner */
    char why[128];
    snprintf(why, sizeof(why), "volume %s is full (%lld MB)", c.vol.name, c.vol.size_mb);
    struct files_upload_target t = {.action = "volume.file.upload",
                                    .target_id = c.vol.id,
                                    .full_code = "volume_full",
                                    .full_message = why,
                                    .answer = upload_answer};
    files_upload_serve(d, req, c.root, c.path, &t);
}

int e2b_volume_mounts(json_t *in, json_t **out, struct sbx_err *err)
{
    *out = NULL;
    if (!in || json_is_null(in))
        return 0;
    if (!json_is_array(in))
        return sbx_err_set(err, EINVAL, "invalid_volume",
                           "volumeMounts must be a list of {name, path}");
    json_t *list = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(in, i, m)
    {
        json_t *name = json_object_get(m, "name"), *path = json_object_get(m, "path");
        if (!json_is_string(name) || !json_is_string(path)) {
            json_decref(list);
            return sbx_err_set(err, EINVAL, "invalid_volume",
                               "volumeMounts[%zu] must be {name, path}", i);
        }
        json_array_append_new(list, json_pack("{s:O,s:O}", "volume", name, "path", path));
    }
    *out = list;
    return 0;
}

static const struct route routes[] = {
    {"POST", "/e2b/api/volumes", AUTH_PUBLIC, api_volume_create, 0},
    {"GET", "/e2b/api/volumes", AUTH_PUBLIC, api_volume_list, 0},
    {"GET", "/e2b/api/volumes/{}", AUTH_PUBLIC, api_volume_get, 0},
    {"DELETE", "/e2b/api/volumes/{}", AUTH_PUBLIC, api_volume_delete, 0},
    {"GET", "/e2b/api/volumecontent/{}/dir", AUTH_PUBLIC, api_content_list, 0},
    {"POST", "/e2b/api/volumecontent/{}/dir", AUTH_PUBLIC, api_content_mkdir, 0},
    {"GET", "/e2b/api/volumecontent/{}/path", AUTH_PUBLIC, api_content_stat, 0},
    {"DELETE", "/e2b/api/volumecontent/{}/path", AUTH_PUBLIC, api_content_delete, 0},
    {"GET", "/e2b/api/volumecontent/{}/file", AUTH_PUBLIC, api_content_read, 0},
    {"PUT", "/e2b/api/volumecontent/{}/file", AUTH_PUBLIC, api_content_write, ROUTE_STREAM_BODY},
};

const struct route_table e2b_volume_routes = ROUTE_TABLE(routes);
