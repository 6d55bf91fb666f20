/* Files on a volume without any sandbox (docs/volumes.md), resolved beneath the volume's
 * root as the workspace's paths are (files/workspace.h: openat2, no escapes by links):
 *   PUT    /v1/volumes/{id}/files/{path}   raw body streamed, atomic; 507 volume_full
 *   GET    /v1/volumes/{id}/files/{path}   the bytes
 *   GET    /v1/volumes/{id}/files?path=&recursive=
 *   DELETE /v1/volumes/{id}/files/{path}
 *   GET    /v1/volumes/{id}/stat?path=
 *   POST   /v1/volumes/{id}/directories    {path}: mkdir -p */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../files/listing.h"
#include "../files/upload.h"
#include "../files/workspace.h"
#include "../http/router.h"
#include "../http/server.h"
#include "../sbxd.h"
#include "volumes.h"

/* The caller's volume (404 for anyone else's) and an O_PATH fd of its root. */
static int open_volume(struct sbxd *d, struct http_req *req, struct store_volume *vol, int *root,
                       struct sbx_err *err)
{
    _cleanup_free_ char *dir = NULL;
    int r = volumes_get(d->volumes, http_req_identity(req)->user, http_req_param(req, 0), vol, err);
    if (r < 0 || (r = volumes_root(d->volumes, vol, &dir, err)) < 0)
        return r;
    return ws_open_root(dir, root, err);
}

static void audit_file(struct sbxd *d, struct http_req *req, const char *action,
                       const struct store_volume *vol, const char *path)
{
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), action, vol->id, "ok",
                 json_pack("{s:s,s:s}", "volume", vol->name, "path", path));
}

static void api_volfiles_put(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *path = http_req_param(req, 1);
    struct store_volume vol;
    int root = -1;
    if (ws_path_check(path, false, &err) < 0 || open_volume(d, req, &vol, &root, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    char why[128];
    snprintf(why, sizeof(why), "volume %s is full (%lld MB)", vol.name, vol.size_mb);
    struct files_upload_target t = {.action = "volume.file.upload",
                                    .target_id = vol.id,
                                    .full_code = "volume_full",
                                    .full_message = why};
    files_upload_serve(d, req, root, path, &t);
}

static void api_volfiles_get(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *path = http_req_param(req, 1);
    struct store_volume vol;
    _cleanup_close_ int root = -1;
    int fd = -1;
    uint64_t size;
    if (ws_path_check(path, false, &err) < 0 || open_volume(d, req, &vol, &root, &err) < 0 ||
        ws_open_file(root, path, &fd, &size, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    http_respond_fd(req, 200, fd, size, "application/octet-stream");
}

static void api_volfiles_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *path;
    bool recursive;
    struct store_volume vol;
    _cleanup_close_ int root = -1;
    if (files_list_query(req, &path, &recursive) < 0)
        return;
    if (ws_path_check(path, true, &err) < 0 || open_volume(d, req, &vol, &root, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    files_list_answer(req, root, path, recursive);
}

static void api_volfiles_stat(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *path = http_req_query(req, "path");
    struct store_volume vol;
    _cleanup_close_ int root = -1;
    struct stat st;
    char target[WS_PATH_MAX + 1] = "";
    if (!path)
        path = "";
    if (ws_path_check(path, true, &err) < 0 || open_volume(d, req, &vol, &root, &err) < 0 ||
        ws_lstat(root, path, &st, target, sizeof(target), &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200, files_stat_json(path, &st, target));
}

static void api_volfiles_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *path = http_req_param(req, 1);
    struct store_volume vol;
    _cleanup_close_ int root = -1;
    if (ws_path_check(path, false, &err) < 0 || open_volume(d, req, &vol, &root, &err) < 0 ||
        ws_remove(root, path, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    audit_file(d, req, "volume.file.delete", &vol, path);
    http_respond_json(req, 200,
                      json_pack("{s:s,s:s,s:b}", "object", "file", "path", path, "deleted", 1));
}

static void api_volfiles_mkdir(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    json_t *body = NULL;
    struct store_volume vol;
    _cleanup_close_ int root = -1;
    bool created = false;
    int r = http_req_json(req, &body, &err);
    const char *path = json_string_value(json_object_get(body, "path"));
    if (r == 0 && !path)
        r = sbx_err_set(&err, EINVAL, "invalid_path", "the body must be {path}");
    if (r < 0 || ws_path_check(path, false, &err) < 0 ||
        open_volume(d, req, &vol, &root, &err) < 0 || ws_mkdirs(root, path, &created, &err) < 0) {
        if (!strcmp(err.code, "workspace_too_large"))
            sbx_err_set(&err, ENOSPC, "volume_full", "the volume is full");
        json_decref(body);
        http_respond_error(req, &err);
        return;
    }
    audit_file(d, req, "volume.file.mkdir", &vol, path);
    http_respond_json(req, created ? 201 : 200,
                      json_pack("{s:s,s:s,s:s,s:b}", "object", "file", "path", path, "type", "directory",
                                "created", created));
    json_decref(body);
}

static const struct route routes[] = {
    {"GET", "/v1/volumes/{}/files", AUTH_SANDBOX, api_volfiles_list, 0},
    {"PUT", "/v1/volumes/{}/files/{*}", AUTH_SANDBOX, api_volfiles_put, ROUTE_STREAM_BODY},
    {"GET", "/v1/volumes/{}/files/{*}", AUTH_SANDBOX, api_volfiles_get, 0},
    {"DELETE", "/v1/volumes/{}/files/{*}", AUTH_SANDBOX, api_volfiles_delete, 0},
    {"GET", "/v1/volumes/{}/stat", AUTH_SANDBOX, api_volfiles_stat, 0},
    {"POST", "/v1/volumes/{}/directories", AUTH_SANDBOX, api_volfiles_mkdir, 0},
};

const struct route_table volume_file_routes = ROUTE_TABLE(routes);
