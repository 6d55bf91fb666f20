/* Files in a sandbox's /workspace, served from the host side of its workspace
 * directory (no trip through the agent):
 *   PUT    /v1/sandboxes/{id}/files/{path}   raw body streamed to disk, atomic replace
 *   GET    /v1/sandboxes/{id}/files/{path}   the bytes, with their length
 *   GET    /v1/sandboxes/{id}/files?path=&recursive=
 *   DELETE /v1/sandboxes/{id}/files/{path}
 * Every path is resolved by workspace.c beneath the workspace fd. */
#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

#include "../../common/jobs.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "workspace.h"

#define FILES_UPLOAD_MAX (100ull * 1000ull * 1000ull)
#define FILES_LIST_MAX 10000

static int open_workspace(struct sbxd *d, struct http_req *req, int *root, struct sbx_err *err)
{
    struct sandbox *sb;
    int r = manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, err);
    if (r < 0)
        return r;
    return ws_open_root(sb->workspace, root, err);
}

/* --- upload ----------------------------------------------------------------------------- */

/* Without a quota image the workspace is a directory in the data dir, so its ENOSPC is
 * the data dir's being full, not the sandbox's quota. */
static int blame_disk(const struct sbxd *d, struct sbx_err *err)
{
    if (d->cfg.workspace_mb == 0 && !strcmp(err->code, "workspace_too_large"))
        sbx_err_set(err, ENOSPC, "insufficient_storage", "the data directory is full");
    return sbx_err_ret(err);
}

struct upload {
    struct sbxd *d;
    struct ws_writer w;
    char *path;
    /* While the commit runs on a worker: the request (NULL once the client is gone) and
     * what the audit record needs of it. */
    struct http_req *req;
    struct auth_identity who;
    char req_id[HTTP_REQUEST_ID_LEN + 1];
    char *sandbox_id;
    int ret;
    struct sbx_err err;
};

static void upload_free(struct upload *u)
{
    ws_writer_close(&u->w);
    free(u->path);
    free(u->sandbox_id);
    free(u);
}

static int upload_data(struct http_req *req, const char *buf, size_t len, void *data,
                       struct sbx_err *err)
{
    struct upload *u = data;
    if (u->w.written + len > FILES_UPLOAD_MAX)
        return sbx_err_set(err, EFBIG, "file_too_large", "uploads are limited to %llu bytes",
                           FILES_UPLOAD_MAX);
    return ws_writer_write(&u->w, buf, len, err) < 0 ? blame_disk(u->d, err) : 0;
}

/* fsync of the file and its directory, rename and the release of the replaced file's
 * blocks take tens of milliseconds for a large file: not on the loop. */
static void commit_run(void *data)
{
    struct upload *u = data;
    u->ret = ws_writer_commit(&u->w, true, &u->err);
}

static void commit_done(void *data, bool ran)
{
    struct upload *u = data;
    if (!ran)
        u->ret = sbx_err_set(&u->err, ESHUTDOWN, "shutting_down", "sbxd is stopping");
    if (u->ret < 0)
        u->ret = blame_disk(u->d, &u->err);
    bool ok = u->ret == 0;
    audit_record(u->d->store, &u->who, NULL, u->req_id, "file.upload", u->sandbox_id,
                 ok ? "ok" : u->err.code,
                 json_pack("{s:s,s:I}", "path", u->path, "size", (json_int_t)u->w.written));
    if (u->req && !ok)
        http_respond_error(u->req, &u->err);
    else if (u->req)
        http_respond_json(u->req, 200,
                          json_pack("{s:s,s:s,s:I}", "object", "file", "path", u->path, "size",
                                    (json_int_t)u->w.written));
    upload_free(u);
}

static void commit_abort(struct http_req *req, void *data)
{
    struct upload *u = data;
    u->req = NULL;
}

static void upload_end(struct http_req *req, void *data)
{
    struct upload *u = data;
    u->req = req;
    u->who = *http_req_identity(req);
    snprintf(u->req_id, sizeof(u->req_id), "%s", http_req_id(req));
    u->sandbox_id = sbx_xstrdup(http_req_param(req, 0));
    http_req_suspend(req, commit_abort, u);
    jobs_submit(u->d->jobs, commit_run, commit_done, u);
}

static void upload_failed(struct http_req *req, void *data)
{
    upload_free(data);
}

static void upload_abort(struct http_req *req, void *data)
{
    upload_free(data);
}

static const struct http_body_sink upload_sink = {
    .on_data = upload_data,
    .on_end = upload_end,
    .on_failed = upload_failed,
};

static void api_files_put(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *path = http_req_param(req, 1);
    _cleanup_close_ int root = -1;
    uint64_t len = 0;
    bool has_len = http_req_content_length(req, &len);
    if (ws_path_check(path, false, &err) < 0 || open_workspace(d, req, &root, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    if (has_len && len > FILES_UPLOAD_MAX) {
        http_respond_errorf(req, "file_too_large", "uploads are limited to %llu bytes",
                            FILES_UPLOAD_MAX);
        return;
    }
    /* Refuse at once what cannot fit; what can is still bounded by the filesystem. */
    struct statvfs vfs;
    if (has_len && fstatvfs(root, &vfs) == 0 && len > (uint64_t)vfs.f_bavail * vfs.f_frsize) {
        sbx_err_set(&err, ENOSPC, "workspace_too_large",
                    "the workspace has %llu bytes free, the upload is %llu",
                    (unsigned long long)vfs.f_bavail * vfs.f_frsize, (unsigned long long)len);
        blame_disk(d, &err);
        http_respond_error(req, &err);
        return;
    }
    struct upload *u = sbx_xcalloc(1, sizeof(*u));
    u->d = d;
    if (ws_writer_open(root, path, 0644, &u->w, &err) < 0) {
        blame_disk(d, &err);
        upload_free(u);
        http_respond_error(req, &err);
        return;
    }
    u->path = sbx_xstrdup(path);
    http_req_stream_body(req, &upload_sink, u, upload_abort);
}

/* --- download, list, delete --------------------------------------------------------------- */

static void api_files_get(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *path = http_req_param(req, 1);
    _cleanup_close_ int root = -1;
    int fd = -1;
    uint64_t size;
    if (ws_path_check(path, false, &err) < 0 || open_workspace(d, req, &root, &err) < 0 ||
        ws_open_file(root, path, &fd, &size, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "file.download",
                 http_req_param(req, 0), "ok",
                 json_pack("{s:s,s:I}", "path", path, "size", (json_int_t)size));
    http_respond_fd(req, 200, fd, size, "application/octet-stream");
}

static int list_entry(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    char mode[8];
    snprintf(mode, sizeof(mode), "%04o", (unsigned)e->mode);
    json_array_append_new(data, json_pack("{s:s,s:s,s:I,s:s,s:I}", "path", e->path, "type",
                                          ws_type_name(e->type), "size", (json_int_t)e->size,
                                          "mode", mode, "mtime", (json_int_t)e->mtime));
    return 0;
}

static int parse_bool(const char *v, bool *out)
{
    if (!v || !strcmp(v, "false") || !strcmp(v, "0") || !*v)
        *out = false;
    else if (!strcmp(v, "true") || !strcmp(v, "1"))
        *out = true;
    else
        return -EINVAL;
    return 0;
}

static void api_files_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *path = http_req_query(req, "path");
    bool recursive, truncated = false;
    _cleanup_close_ int root = -1;
    if (!path)
        path = "";
    if (parse_bool(http_req_query(req, "recursive"), &recursive) < 0) {
        http_respond_errorf(req, "invalid_request", "recursive must be true or false");
        return;
    }
    json_t *list = json_array();
    if (ws_path_check(path, true, &err) < 0 || open_workspace(d, req, &root, &err) < 0 ||
        ws_walk(root, path, recursive, FILES_LIST_MAX, list_entry, list, &truncated, &err) < 0) {
        json_decref(list);
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200,
                      json_pack("{s:s,s:s,s:b,s:o,s:b}", "object", "list", "path", path,
                                "recursive", recursive, "data", list, "truncated", truncated));
}

static void api_files_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *path = http_req_param(req, 1);
    _cleanup_close_ int root = -1;
    if (ws_path_check(path, false, &err) < 0 || open_workspace(d, req, &root, &err) < 0 ||
        ws_remove(root, path, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "file.delete",
                 http_req_param(req, 0), "ok", json_pack("{s:s}", "path", path));
    http_respond_json(req, 200,
                      json_pack("{s:s,s:s,s:b}", "object", "file", "path", path, "deleted", 1));
}

static const struct route routes[] = {
    {"GET", "/v1/sandboxes/{}/files", AUTH_SANDBOX, api_files_list, 0},
    {"PUT", "/v1/sandboxes/{}/files/{*}", AUTH_SANDBOX, api_files_put, ROUTE_STREAM_BODY},
    {"GET", "/v1/sandboxes/{}/files/{*}", AUTH_SANDBOX, api_files_get, 0},
    {"DELETE", "/v1/sandboxes/{}/files/{*}", AUTH_SANDBOX, api_files_delete, 0},
};

const struct route_table file_routes = ROUTE_TABLE(routes);
