/* Streamed, atomic uploads (upload.h). */
#include "upload.h"

#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../../common/jobs.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/router.h"
#include "../sbxd.h"
#include "workspace.h"

struct upload {
    struct sbxd *d;
    struct ws_writer w;
    char *path;
    char *action, *target_id, *full_code, *full_message;
    json_t *(*answer)(const char *path, const struct stat *st);
    /* While the commit runs on a worker: the request (NULL once the client is gone) and
     * what the audit record needs of it. */
    struct http_req *req;
    struct auth_identity who;
    char req_id[HTTP_REQUEST_ID_LEN + 1];
    int ret;
    struct sbx_err err;
};

/* A full filesystem, in the target's words. */
static int blame(const struct upload *u, struct sbx_err *err)
{
    if (u->full_code && !strcmp(err->code, "workspace_too_large"))
        sbx_err_set(err, ENOSPC, u->full_code, "%s", u->full_message);
    return sbx_err_ret(err);
}

static void upload_free(struct upload *u)
{
    ws_writer_close(&u->w);
    free(u->path);
    free(u->action);
    free(u->target_id);
    free(u->full_code);
    free(u->full_message);
    free(u);
}

static int upload_data(struct http_req *req, const char *buf, size_t len, void *data,
                       struct sbx_err *err)
{
    struct upload *u = data;
    if (u->w.written + len > FILES_UPLOAD_MAX)
        return sbx_err_set(err, EFBIG, "file_too_large", "uploads are limited to %llu bytes",
                           FILES_UPLOAD_MAX);
    return ws_writer_write(&u->w, buf, len, err) < 0 ? blame(u, err) : 0;
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
        u->ret = blame(u, &u->err);
    bool ok = u->ret == 0;
    audit_record(u->d->store, &u->who, NULL, u->req_id, u->action, u->target_id,
                 ok ? "ok" : u->err.code,
                 json_pack("{s:s,s:I}", "path", u->path, "size", (json_int_t)u->w.written));
    if (u->req && !ok)
        http_respond_error(u->req, &u->err);
    struct stat st;
    if (u->req && ok && u->answer && fstat(u->w.fd, &st) == 0)
        http_respond_json(u->req, 200, u->answer(u->path, &st));
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

bool files_upload_length(struct http_req *req, uint64_t *len, bool *has_len)
{
    *has_len = http_req_content_length(req, len);
    if (*has_len && *len > FILES_UPLOAD_MAX) {
        http_respond_errorf(req, "file_too_large", "uploads are limited to %llu bytes",
                            FILES_UPLOAD_MAX);
        return false;
    }
    return true;
}

void files_upload_serve(struct sbxd *d, struct http_req *req, int root, const char *path,
                        const struct files_upload_target *t)
{
    _cleanup_close_ int fd = root;
    struct sbx_err err = {0};
    uint64_t len = 0;
    bool has_len;
    if (!files_upload_length(req, &len, &has_len))
        return;
    struct upload *u = sbx_xcalloc(1, sizeof(*u));
    u->d = d;
    u->w.dir = u->w.fd = -1; /* nothing to close before ws_writer_open */
    u->path = sbx_xstrdup(path);
    u->action = sbx_xstrdup(t->action);
    u->target_id = sbx_xstrdup(t->target_id);
    u->full_code = t->full_code ? sbx_xstrdup(t->full_code) : NULL;
    u->full_message = t->full_message ? sbx_xstrdup(t->full_message) : NULL;
    u->answer = t->answer;
    /* Refuse at once what cannot fit; what can is still bounded by the filesystem. */
    struct statvfs vfs;
    if (has_len && fstatvfs(fd, &vfs) == 0 && len > (uint64_t)vfs.f_bavail * vfs.f_frsize) {
        sbx_err_set(&err, ENOSPC, "workspace_too_large", "%llu bytes are free, the upload is %llu",
                    (unsigned long long)vfs.f_bavail * vfs.f_frsize, (unsigned long long)len);
        blame(u, &err);
        upload_free(u);
        http_respond_error(req, &err);
        return;
    }
    if (ws_writer_open(fd, path, 0644, &u->w, &err) < 0) {
        blame(u, &err);
        upload_free(u);
        http_respond_error(req, &err);
        return;
    }
    http_req_stream_body(req, &upload_sink, u, upload_abort);
}
