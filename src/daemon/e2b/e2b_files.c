/* envd's /files on the workspace: GET answers a file's bytes (sendfile), POST takes
 * multipart/form-data (one part named "file" per file, its filename the target path unless
 * ?path= names it) or a raw application/octet-stream body for ?path=, streamed to disk
 * through the atomic writer (files/workspace.c). A target outside the workspace is streamed
 * the same way to a temporary name in the workspace, which the agent then copies to the
 * target inside the sandbox as the request's user (agentfs.c), so that user's permissions
 * decide, as in envd. Errors are envd's {"code", "message"}. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../files/agentfs.h"
#include "../files/workspace.h"
#include "../http/errors.h"
#include "../http/server.h"
#include "../sandbox/lifecycle.h"
#include "../sbxd.h"
#include "e2b.h"
#include "envd.h"

#define E2B_UPLOAD_MAX (100ull * 1000ull * 1000ull)
#define E2B_UPLOAD_FILES_MAX 256

static void envd_error(struct http_req *req, unsigned status, const char *msg)
{
    http_respond_json(req, status, json_pack("{s:i,s:s}", "code", (int)status, "message", msg));
}

static void envd_sbx_error(struct http_req *req, const struct sbx_err *err, const char *path)
{
    char msg[512];
    if (!strcmp(err->code, "file_not_found")) {
        snprintf(msg, sizeof(msg), "path '%.400s' does not exist", path);
        envd_error(req, 404, msg);
        return;
    }
    if (!strcmp(err->code, "path_permission_denied")) {
        snprintf(msg, sizeof(msg), "permission denied: '%.400s'", path);
        envd_error(req, 403, msg);
        return;
    }
    if (!strcmp(err->code, "workspace_too_large")) {
        envd_error(req, 507, err->msg);
        return;
    }
    envd_error(req, http_status_for_code(err->code), err->msg[0] ? err->msg : err->code);
}

struct sandbox_read {
    struct envd_ctx c;
    struct agentfs *f;
    char *path;
};

static void sandbox_read_done(json_t *ok, const uint8_t *raw, size_t len,
                              const struct sbx_err *err, void *data)
{
    struct sandbox_read *r = data;
    if (err) {
        envd_sbx_error(r->c.req, err, r->path);
    } else {
        audit_record(r->c.d->store, &r->c.who, NULL, http_req_id(r->c.req), "file.download",
                     r->c.sb->rec.id, "ok",
                     json_pack("{s:s,s:I,s:s}", "path", r->path, "size", (json_int_t)len, "via",
                               "e2b"));
        /* A memfd, so the bytes go out as a workspace file does (http_respond_fd). */
        int fd = memfd_create("e2b-read", MFD_CLOEXEC);
        if (fd < 0 || (len && pwrite(fd, raw, len, 0) != (ssize_t)len)) {
            if (fd >= 0)
                close(fd);
            envd_error(r->c.req, 500, "could not hold the file's bytes");
        } else {
            http_respond_fd(r->c.req, 200, fd, len, "application/octet-stream");
        }
    }
    free(r->path);
    free(r);
}

static void sandbox_read_gone(struct http_req *req, void *data)
{
    struct sandbox_read *r = data;
    agentfs_cancel(r->f);
    free(r->path);
    free(r);
}

/* A path outside the workspace: read inside the sandbox as the request's user (agentfs.c),
 * so the user's permissions decide, as in envd. */
static void read_in_sandbox(const struct envd_ctx *c, const char *path)
{
    struct sbx_err err = {0};
    const char *user;
    if (e2b_user(c->req, c->sb, &user, &err) < 0) {
        envd_sbx_error(c->req, &err, path);
        return;
    }
    struct sandbox_read *r = sbx_xcalloc(1, sizeof(*r));
    r->c = *c;
    r->path = sbx_xstrdup(path);
    if (agentfs_start(c->sb, user, json_pack("{s:s,s:s}", "op", "read", "path", path),
                      sandbox_read_done, r, &r->f, &err) < 0) {
        envd_sbx_error(c->req, &err, path);
        free(r->path);
        free(r);
        return;
    }
    http_req_suspend(c->req, sandbox_read_gone, r);
}

void envd_files_get(const struct envd_ctx *c)
{
    struct sbx_err err = {0};
    const char *path = http_req_query(c->req, "path");
    char rel[WS_PATH_MAX + 1];
    _cleanup_close_ int root = -1;
    int fd = -1;
    uint64_t size;
    if (!path || !*path) {
        envd_error(c->req, 400, "path query parameter is required");
        return;
    }
    if (e2b_path_to_ws(path, rel, sizeof(rel), &err) < 0) {
        if (!strcmp(err.code, "invalid_path") && path[0] == '/')
            read_in_sandbox(c, path);
        else
            envd_sbx_error(c->req, &err, path);
        return;
    }
    if (ws_open_root(c->sb->workspace, &root, &err) < 0 ||
        ws_open_file(root, rel, &fd, &size, &err) < 0) {
        envd_sbx_error(c->req, &err, path);
        return;
    }
    audit_record(c->d->store, &c->who, NULL, http_req_id(c->req), "file.download", c->sb->rec.id,
                 "ok",
                 json_pack("{s:s,s:I,s:s}", "path", rel, "size", (json_int_t)size, "via", "e2b"));
    http_respond_fd(c->req, 200, fd, size, "application/octet-stream");
}

/* ---- upload ---- */

struct upload {
    struct sbxd *d;
    struct auth_identity who;
    char sandbox_id[STORE_ID_MAX + 1];
    char request_id[64]; /* the upload's, for its audit entries */
    int root;
    char *query_path; /* ?path=, or NULL */
    struct http_form *form;
    struct ws_writer w;
    bool open;
    char rel[WS_PATH_MAX + 1];
    char *filename; /* of the part being written */
    uint64_t total;
    json_t *results;
    bool failed;
    struct sbx_err err; /* what stopped the upload */
    /* Targets outside the workspace: the file being written is for target (else NULL);
     * committed ones wait in moves, [[temporary rel, target, size, index in results]],
     * until the body is
     * complete and the agent copies them one after the other. */
    char *target;
    json_t *moves;
    struct http_req *req; /* while the copies run */
    const char *user;
    struct agentfs *f;
};

/* The first waiting copy's temporary file is not needed any more. */
static void move_drop(struct upload *u)
{
    struct sbx_err err = {0};
    /* Already gone is fine: a kill of the sandbox took the workspace's contents. */
    (void)ws_remove(u->root, json_string_value(json_array_get(json_array_get(u->moves, 0), 0)),
                    &err);
    json_array_remove(u->moves, 0);
}

static void upload_free(struct upload *u)
{
    if (u->open)
        ws_writer_close(&u->w);
    http_form_free(u->form);
    while (json_array_size(u->moves))
        move_drop(u);
    if (u->root >= 0)
        close(u->root);
    free(u->query_path);
    free(u->filename);
    free(u->target);
    json_decref(u->results);
    json_decref(u->moves);
    free(u);
}

static int file_open(struct upload *u, const char *target, struct sbx_err *err)
{
    if (json_array_size(u->results) >= E2B_UPLOAD_FILES_MAX)
        return sbx_err_set(err, EINVAL, "invalid_request", "at most %d files per upload",
                           E2B_UPLOAD_FILES_MAX);
    free(TAKE_PTR(u->target));
    int r = e2b_path_to_ws(target, u->rel, sizeof(u->rel), err);
    if (r < 0 && !strcmp(err->code, "invalid_path") && target[0] == '/') {
        /* Outside the workspace: a temporary name of the writer's own form (WatchDir does
         * not report it, a restart sweeps it), copied to target once complete. */
        if (strlen(target) > WS_PATH_MAX)
            return sbx_err_set(err, ENAMETOOLONG, "invalid_path", "the path is too long");
        sbx_random_id(WS_TMP_PREFIX, 8, u->rel, sizeof(u->rel));
        u->target = sbx_xstrdup(target);
        memset(err, 0, sizeof(*err));
        r = 0;
    }
    if (r < 0 || (r = ws_writer_open(u->root, u->rel, 0644, &u->w, err)) < 0)
        return r;
    u->open = true;
    return 0;
}

static int file_write(struct upload *u, const char *buf, size_t len, struct sbx_err *err)
{
    u->total += len;
    if (u->total > E2B_UPLOAD_MAX)
        return sbx_err_set(err, EFBIG, "file_too_large", "uploads are limited to %llu bytes",
                           E2B_UPLOAD_MAX);
    return ws_writer_write(&u->w, buf, len, err);
}

static int file_commit(struct upload *u, struct sbx_err *err)
{
    if (!u->open)
        return 0;
    int r = ws_writer_commit(&u->w, true, err);
    uint64_t size = u->w.written;
    ws_writer_close(&u->w);
    u->open = false;
    if (r == 0 && u->target) {
        /* Audited once the agent has copied it; its answer keeps its place among them. */
        json_array_append_new(u->moves, json_pack("[s,s,I,I]", u->rel, u->target, (json_int_t)size,
                                                  (json_int_t)json_array_size(u->results)));
        json_array_append_new(u->results, json_null());
        return 0;
    }
    audit_record(
        u->d->store, &u->who, NULL, u->request_id, "file.upload", u->sandbox_id, r < 0 ? err->code : "ok",
        json_pack("{s:s,s:I,s:s}", "path", u->rel, "size", (json_int_t)size, "via", "e2b"));
    if (r < 0)
        return r;
    const char *slash = strrchr(u->rel, '/');
    _cleanup_free_ char *path = e2b_ws_to_path(u->rel);
    json_array_append_new(u->results, json_pack("{s:s,s:s,s:s}", "name", slash ? slash + 1 : u->rel,
                                                "type", "file", "path", path));
    return 0;
}

static int form_value(void *data, const char *field, const char *filename, uint64_t off,
                      const char *buf, size_t len)
{
    struct upload *u = data;
    if (!field || strcmp(field, "file"))
        return 0;
    const char *name = u->query_path ? u->query_path : filename;
    bool fresh = off == 0 && (!u->open || u->w.written > 0 || !u->filename || !filename ||
                              strcmp(u->filename, filename));
    if (fresh) {
        if (file_commit(u, &u->err) < 0)
            return -EIO;
        if (!name || !*name) {
            sbx_err_set(&u->err, EINVAL, "invalid_request", "a file part needs a filename");
            return -EINVAL;
        }
        free(u->filename);
        u->filename = filename ? sbx_xstrdup(filename) : NULL;
        if (file_open(u, name, &u->err) < 0)
            return -EIO;
    }
    return len ? (file_write(u, buf, len, &u->err) < 0 ? -EIO : 0) : 0;
}

/* An upload that failed still reads its body (dropping it), so that the SDK, which is
 * still sending, gets the error instead of a reset connection. */
static void upload_fail(struct upload *u, const struct sbx_err *err)
{
    if (!u->failed && err)
        u->err = *err;
    else if (!u->failed)
        sbx_err_set(&u->err, EINVAL, "invalid_request", "the multipart body is malformed");
    u->failed = true;
    if (u->open)
        ws_writer_close(&u->w);
    u->open = false;
}

static int upload_data(struct http_req *req, const char *buf, size_t len, void *data,
                       struct sbx_err *err)
{
    struct upload *u = data;
    if (u->failed)
        return 0;
    if (!u->form) {
        if (file_write(u, buf, len, err) < 0)
            upload_fail(u, err);
    } else if (http_form_feed(u->form, buf, len) < 0) {
        upload_fail(u, u->err.code[0] ? &u->err : NULL);
    }
    return 0;
}

static void upload_answer(struct http_req *req, struct upload *u)
{
    if (u->failed)
        envd_sbx_error(req, &u->err, u->query_path ? u->query_path : u->rel);
    else if (json_array_size(u->results) == 0)
        envd_error(req, 400, "no file in the upload");
    else
        http_respond_json(req, 200, json_incref(u->results));
    upload_free(u);
}

static void move_next(struct upload *u);

static void move_done(json_t *ok, const uint8_t *raw, size_t len, const struct sbx_err *err,
                      void *data)
{
    struct upload *u = data;
    json_t *m = json_array_get(u->moves, 0);
    const char *target = json_string_value(json_array_get(m, 1));
    u->f = NULL;
    audit_record(
        u->d->store, &u->who, NULL, u->request_id, "file.upload", u->sandbox_id,
        err ? err->code : "ok",
        json_pack("{s:s,s:O,s:s}", "path", target, "size", json_array_get(m, 2), "via", "e2b"));
    if (err) {
        u->err = *err;
        snprintf(u->rel, sizeof(u->rel), "%s", target); /* the path the error names */
        u->failed = true;
    } else {
        const char *slash = strrchr(target, '/');
        json_array_set_new(
            u->results, (size_t)json_integer_value(json_array_get(m, 3)),
            json_pack("{s:s,s:s,s:s}", "name", slash + 1, "type", "file", "path", target));
    }
    move_drop(u);
    if (u->failed || !json_array_size(u->moves))
        upload_answer(u->req, u);
    else
        move_next(u);
}

static void move_gone(struct http_req *req, void *data)
{
    struct upload *u = data;
    if (u->f)
        agentfs_cancel(u->f);
    upload_free(u);
}

/* The next temporary file to its target, by the agent as the request's user. */
static void move_next(struct upload *u)
{
    struct sbx_err err = {0};
    struct sandbox *sb = manager_find_live(u->d->mgr, u->sandbox_id);
    json_t *m = json_array_get(u->moves, 0);
    _cleanup_free_ char *from = e2b_ws_to_path(json_string_value(json_array_get(m, 0)));
    if (!sb) {
        sbx_err_set(&err, ENOENT, "sandbox_not_running", "the sandbox has ended");
    } else if (agentfs_start(sb, u->user,
                             json_pack("{s:s,s:O,s:s}", "op", "write", "path", json_array_get(m, 1),
                                       "from", from),
                             move_done, u, &u->f, &err) == 0) {
        return;
    }
    move_done(NULL, NULL, 0, &err, u);
}

static void upload_end(struct http_req *req, void *data)
{
    struct upload *u = data;
    struct sbx_err err = {0};
    if (!u->failed && u->form && http_form_finish(u->form) < 0)
        upload_fail(u, u->err.code[0] ? &u->err : NULL);
    if (!u->failed && file_commit(u, &err) < 0)
        upload_fail(u, &err);
    if (u->failed || !json_array_size(u->moves)) {
        upload_answer(req, u);
        return;
    }
    u->req = req;
    http_req_suspend(req, move_gone, u);
    move_next(u);
}

/* The body failed or the client left: what was written is dropped. */
static void upload_drop(struct http_req *req, void *data)
{
    upload_free(data);
}

static const struct http_body_sink upload_sink = {
    .on_data = upload_data,
    .on_end = upload_end,
    .on_failed = upload_drop,
};

void envd_files_post(const struct envd_ctx *c)
{
    struct sbx_err err = {0};
    const char *type = http_req_header(c->req, "Content-Type");
    const char *enc = http_req_header(c->req, "Content-Encoding");
    const char *path = http_req_query(c->req, "path");
    uint64_t len;
    if (http_req_content_length(c->req, &len) && len > E2B_UPLOAD_MAX) {
        envd_error(c->req, 413, "the upload is too large");
        return;
    }
    bool multipart = type && !strncasecmp(type, "multipart/form-data", 19);
    struct upload *u = sbx_xcalloc(1, sizeof(*u));
    u->d = c->d;
    u->who = c->who;
    u->root = -1;
    snprintf(u->sandbox_id, sizeof(u->sandbox_id), "%s", c->sb->rec.id);
    snprintf(u->request_id, sizeof(u->request_id), "%s", http_req_id(c->req) ?: "");
    u->results = json_array();
    u->moves = json_array();
    u->query_path = path && *path ? sbx_xstrdup(path) : NULL;
    if (enc && *enc && strcasecmp(enc, "identity"))
        sbx_err_set(&err, EINVAL, "invalid_request", "compressed uploads are not supported");
    else if (e2b_user(c->req, c->sb, &u->user, &err) < 0)
        ;
    else if (!multipart && !u->query_path)
        sbx_err_set(&err, EINVAL, "invalid_request",
                    "path query parameter is required for raw body upload");
    else if (ws_open_root(c->sb->workspace, &u->root, &err) < 0)
        ;
    else if (multipart && !(u->form = http_form_new(c->req, form_value, u)))
        sbx_err_set(&err, EINVAL, "invalid_request", "unreadable multipart Content-Type");
    else if (!multipart)
        (void)file_open(u, path, &err);
    if (err.code[0])
        upload_fail(u, &err);
    http_req_stream_body(c->req, &upload_sink, u, upload_drop);
}
