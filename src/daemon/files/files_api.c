/* Files in a sandbox's /workspace, served from the host side of its workspace
 * directory (no trip through the agent), or through the agent when the workspace is not
 * on this host (agentws.h: a provider's sandbox):
 *   PUT    /v1/sandboxes/{id}/files/{path}   raw body streamed to disk, atomic replace
 *   GET    /v1/sandboxes/{id}/files/{path}   the bytes, with their length
 *   GET    /v1/sandboxes/{id}/files?path=&recursive=
 *   DELETE /v1/sandboxes/{id}/files/{path}
 * Every path is resolved by workspace.c beneath the workspace fd. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "../sandbox/manager.h"
#include "agentws.h"
#include "listing.h"
#include "upload.h"
#include "workspace.h"

/* The sandbox's workspace on this host; *remote (with *root left -1) when it is elsewhere,
 * for agentws.c to reach. */
static int open_workspace(struct sbxd *d, struct http_req *req, struct sandbox **remote,
                          int *root, struct sbx_err *err)
{
    struct sandbox *sb;
    int r = manager_lookup(d->mgr, http_req_identity(req), http_req_param(req, 0), &sb, err);
    if (r < 0)
        return r;
    *remote = sandbox_workspace_remote(sb) ? sb : NULL;
    return *remote ? 0 : ws_open_root(sb->workspace, root, err);
}

/* --- upload ----------------------------------------------------------------------------- */

static void api_files_put(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *path = http_req_param(req, 1);
    int root = -1;
    struct sandbox *remote = NULL;
    if (ws_path_check(path, false, &err) < 0 || open_workspace(d, req, &remote, &root, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    if (remote) {
        agentws_put(d, req, remote, path);
        return;
    }
    /* Without a quota image the workspace is a directory in the data dir, so its ENOSPC is
     * the data dir's being full, not the sandbox's quota. */
    struct files_upload_target t = {.action = "file.upload", .target_id = http_req_param(req, 0)};
    if (d->cfg.workspace_mb == 0) {
        t.full_code = "insufficient_storage";
        t.full_message = "the data directory is full";
    }
    files_upload_serve(d, req, root, path, &t);
}

/* --- download, list, delete --------------------------------------------------------------- */

static void api_files_get(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *path = http_req_param(req, 1);
    _cleanup_close_ int root = -1;
    int fd = -1;
    uint64_t size;
    struct sandbox *remote = NULL;
    if (ws_path_check(path, false, &err) < 0 || open_workspace(d, req, &remote, &root, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    if (remote) {
        agentws_get(d, req, remote, path);
        return;
    }
    if (ws_open_file(root, path, &fd, &size, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    audit_record(d->store, http_req_identity(req), NULL, http_req_id(req), "file.download",
                 http_req_param(req, 0), "ok",
                 json_pack("{s:s,s:I}", "path", path, "size", (json_int_t)size));
    http_respond_fd(req, 200, fd, size, "application/octet-stream");
}

static void api_files_list(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *path;
    bool recursive;
    _cleanup_close_ int root = -1;
    if (files_list_query(req, &path, &recursive) < 0)
        return;
    struct sandbox *remote = NULL;
    if (ws_path_check(path, true, &err) < 0 || open_workspace(d, req, &remote, &root, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    if (remote) {
        agentws_list(d, req, remote, path, recursive);
        return;
    }
    files_list_answer(req, root, path, recursive);
}

static void api_files_delete(struct sbxd *d, struct http_req *req)
{
    struct sbx_err err = {0};
    const char *path = http_req_param(req, 1);
    _cleanup_close_ int root = -1;
    struct sandbox *remote = NULL;
    if (ws_path_check(path, false, &err) < 0 || open_workspace(d, req, &remote, &root, &err) < 0) {
        http_respond_error(req, &err);
        return;
    }
    if (remote) {
        agentws_delete(d, req, remote, path);
        return;
    }
    if (ws_remove(root, path, &err) < 0) {
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
