/* The files routes on a workspace that is not on this host (agentws.h): each is one helper
 * run inside the sandbox by the agent (agentfs.h). Downloads and uploads are streamed with
 * the agent's flow control both ways, so neither is held whole in sbxd's memory: a
 * download moves as fast as its client reads it, an upload's body is paused while the
 * agent's window is closed (AGENTWS_PENDING_MAX held at most). An upload is written to a
 * temporary name beside its target and renamed over it once whole, inside the sandbox. */
#include "agentws.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../common/util.h"
#include "../audit/audit.h"
#include "../http/server.h"
#include "../sandbox/manager.h"
#include "../sbxd.h"
#include "agentfs.h"
#include "listing.h"
#include "upload.h"

/* The helper's error in the host path's words where they differ (the helper's own message
 * is the sandbox's strerror). */
static void respond_error(struct http_req *req, const char *path, const struct sbx_err *err)
{
    struct sbx_err e = *err;
    if (!strcmp(e.code, "file_not_found"))
        snprintf(e.msg, sizeof(e.msg), "%.200s does not exist", *path ? path : "/workspace");
    http_respond_error(req, &e);
}

/* What every request here keeps for its answer and its audit entry. */
struct call {
    struct sbxd *d;
    struct http_req *req; /* NULL once the client is gone */
    char *path;
    char sandbox_id[STORE_ID_MAX + 1];
    struct auth_identity who;
    char req_id[HTTP_REQUEST_ID_LEN + 1];
};

static void call_init(struct call *c, struct sbxd *d, struct http_req *req, struct sandbox *sb,
                      const char *path)
{
    c->d = d;
    c->req = req;
    c->path = sbx_xstrdup(path);
    snprintf(c->sandbox_id, sizeof(c->sandbox_id), "%s", sb->rec.id);
    c->who = *http_req_identity(req);
    snprintf(c->req_id, sizeof(c->req_id), "%s", http_req_id(req));
}

static void call_audit(struct call *c, const char *action, const struct sbx_err *err,
                       json_t *details)
{
    audit_record(c->d->store, &c->who, NULL, c->req_id, action, c->sandbox_id,
                 err ? err->code : "ok", details);
}

/* --- download ----------------------------------------------------------------------------- */

/* "<size>\n" before the bytes. */
#define AGENTWS_HEAD_MAX 24

struct download {
    struct call c;
    struct agentfs_stream *s;
    char head[AGENTWS_HEAD_MAX];
    size_t head_len;
    bool begun; /* the size came: 200 and its length are sent */
    uint64_t size;
    size_t owed; /* credit held back while the client is behind */
};

static void download_free(struct download *x)
{
    free(x->c.path);
    free(x);
}

static void download_drained(struct http_req *req, void *data)
{
    struct download *x = data;
    agentfs_stream_credit(x->s, x->owed);
    x->owed = 0;
}

static void download_gone(struct http_req *req, void *data)
{
    struct download *x = data;
    agentfs_stream_cancel(x->s);
    download_free(x);
}

static void download_begin(struct download *x)
{
    call_audit(&x->c, "file.download", NULL,
               json_pack("{s:s,s:I,s:s}", "path", x->c.path, "size", (json_int_t)x->size, "via",
                         "agent"));
    x->begun = true;
    if (!x->size)
        return; /* answered at the end: an empty stream of known length is not one MHD sends */
    http_stream_set_length(x->c.req, x->size);
    http_stream_begin_as(x->c.req, 200, "application/octet-stream", download_gone, x);
}

static void download_data(const uint8_t *buf, size_t len, void *data)
{
    struct download *x = data;
    size_t used = 0;
    while (!x->begun && used < len) {
        char ch = (char)buf[used++];
        if (ch == '\n') {
            x->head[x->head_len] = '\0';
            x->size = strtoull(x->head, NULL, 10);
            download_begin(x);
        } else if (x->head_len + 1 < sizeof(x->head)) {
            x->head[x->head_len++] = ch;
        }
    }
    if (used < len && x->size)
        (void)http_stream_write(x->c.req, buf + used, len - used, NULL, 0);
    if (x->begun && x->size && http_stream_queued(x->c.req) > HTTP_STREAM_LOW) {
        x->owed += len;
        http_stream_on_drain(x->c.req, download_drained, x);
    } else {
        agentfs_stream_credit(x->s, len);
    }
}

static void download_done(const struct sbx_err *err, void *data)
{
    struct download *x = data;
    if (!x->begun) {
        respond_error(x->c.req, x->c.path, err);
    } else if (!x->size) {
        http_respond_bytes(x->c.req, 200, "", 0, "application/octet-stream");
    } else {
        /* A helper that failed midway ends the body short of its length: the client sees
         * the connection close, not a whole file. */
        http_stream_end(x->c.req);
    }
    download_free(x);
}

static const struct agentfs_stream_ops download_ops = {
    .on_data = download_data,
    .on_done = download_done,
};

void agentws_get(struct sbxd *d, struct http_req *req, struct sandbox *sb, const char *path)
{
    struct sbx_err err = {0};
    struct download *x = sbx_xcalloc(1, sizeof(*x));
    call_init(&x->c, d, req, sb, path);
    json_t *op = json_pack("{s:s,s:s,s:s}", "op", "cat", "root", AGENTWS_ROOT, "path", path);
    if (agentfs_stream_start(sb, op, false, &download_ops, x, &x->s, &err) < 0) {
        download_free(x);
        http_respond_error(req, &err);
        return;
    }
    if (!x->begun)
        http_req_suspend(req, download_gone, x);
}

/* --- upload ------------------------------------------------------------------------------- */

struct upload {
    struct call c;
    struct agentfs_stream *s;
    uint64_t received;
    char *pending; /* body bytes the agent's window has not taken yet */
    size_t pending_len;
    bool paused, body_done, input_ended, helper_done;
    struct sbx_err err; /* the first failure */
};

static void upload_free(struct upload *u)
{
    free(u->pending);
    free(u->c.path);
    free(u);
}

static void upload_answer(struct upload *u)
{
    bool ok = !u->err.code[0];
    call_audit(&u->c, "file.upload", ok ? NULL : &u->err,
               json_pack("{s:s,s:I,s:s}", "path", u->c.path, "size", (json_int_t)u->received,
                         "via", "agent"));
    if (u->c.req && ok)
        http_respond_json(u->c.req, 200,
                          json_pack("{s:s,s:s,s:I}", "object", "file", "path", u->c.path, "size",
                                    (json_int_t)u->received));
    else if (u->c.req)
        respond_error(u->c.req, u->c.path, &u->err);
    upload_free(u);
}

static void upload_fail(struct upload *u, const struct sbx_err *err)
{
    if (!u->err.code[0])
        u->err = *err;
}

/* Give the agent what its window takes; the body waits while bytes are held. */
static void upload_flush(struct upload *u)
{
    struct sbx_err err = {0};
    size_t room = u->s ? agentfs_stream_room(u->s) : 0;
    size_t n = u->pending_len < room ? u->pending_len : room;
    if (n && agentfs_stream_write(u->s, u->pending, n, &err) < 0) {
        upload_fail(u, &err);
        u->pending_len = 0;
    } else if (n) {
        memmove(u->pending, u->pending + n, u->pending_len - n);
        u->pending_len -= n;
    }
    if (u->pending_len == 0 && u->body_done && !u->input_ended && u->s) {
        u->input_ended = true;
        if (agentfs_stream_end_input(u->s, &err) < 0)
            upload_fail(u, &err);
    }
    bool full = u->pending_len > 0;
    if (u->c.req && !u->body_done && full != u->paused) {
        u->paused = full;
        if (full)
            http_req_pause(u->c.req);
        else
            http_req_unpause(u->c.req);
    }
}

static void upload_room(void *data)
{
    upload_flush(data);
}

static void upload_stdout(const uint8_t *buf, size_t len, void *data)
{
    struct upload *u = data;
    agentfs_stream_credit(u->s, len); /* {"ok": n}: the length is all it says */
}

static void upload_helper_done(const struct sbx_err *err, void *data)
{
    struct upload *u = data;
    u->s = NULL;
    u->helper_done = true;
    if (err)
        upload_fail(u, err);
    else if (!u->body_done)
        sbx_err_set(&u->err, EIO, "internal", "the file helper ended before the upload");
    /* Before the body is whole the rest of it is still read (and dropped) by on_data, and
     * on_end answers. */
    if (u->body_done)
        upload_answer(u);
    else if (u->paused && u->c.req)
        http_req_unpause(u->c.req);
}

static const struct agentfs_stream_ops upload_ops = {
    .on_data = upload_stdout,
    .on_room = upload_room,
    .on_done = upload_helper_done,
};

static int upload_data(struct http_req *req, const char *buf, size_t len, void *data,
                       struct sbx_err *err)
{
    struct upload *u = data;
    u->received += len;
    if (u->err.code[0] || u->helper_done)
        return 0;
    if (u->received > FILES_UPLOAD_MAX) {
        sbx_err_set(&u->err, EFBIG, "file_too_large", "uploads are limited to %llu bytes",
                    FILES_UPLOAD_MAX);
        agentfs_stream_cancel(TAKE_PTR(u->s));
        u->helper_done = true;
        return 0;
    }
    if (u->pending_len + len > AGENTWS_PENDING_MAX) {
        sbx_err_set(&u->err, ENOBUFS, "internal", "the agent took no input for too long");
        agentfs_stream_cancel(TAKE_PTR(u->s));
        u->helper_done = true;
        return 0;
    }
    u->pending = sbx_xrealloc(u->pending, u->pending_len + len);
    memcpy(u->pending + u->pending_len, buf, len);
    u->pending_len += len;
    upload_flush(u);
    return 0;
}

static void upload_gone(struct http_req *req, void *data)
{
    struct upload *u = data;
    u->c.req = NULL;
    if (u->s) {
        /* SIGTERM: the helper removes its temporary file; the old file stays. */
        agentfs_stream_cancel(TAKE_PTR(u->s));
        sbx_err_set(&u->err, ECONNRESET, "client_gone", "the client went away");
    }
    if (!u->helper_done || !u->body_done)
        upload_answer(u); /* the audit entry; no answer goes out */
}

static void upload_end(struct http_req *req, void *data)
{
    struct upload *u = data;
    u->body_done = true;
    if (u->helper_done) {
        upload_answer(u);
        return;
    }
    http_req_suspend(req, upload_gone, u);
    upload_flush(u);
}

static void upload_body_failed(struct http_req *req, void *data)
{
    upload_gone(req, data);
}

static const struct http_body_sink upload_sink = {
    .on_data = upload_data,
    .on_end = upload_end,
    .on_failed = upload_body_failed,
};

void agentws_put(struct sbxd *d, struct http_req *req, struct sandbox *sb, const char *path)
{
    struct sbx_err err = {0};
    uint64_t len = 0;
    bool has_len;
    if (!files_upload_length(req, &len, &has_len))
        return;
    struct upload *u = sbx_xcalloc(1, sizeof(*u));
    call_init(&u->c, d, req, sb, path);
    /* size -1: a chunked body; the helper then trusts the end of its input, which comes
     * only once the body is whole (a cut one gets SIGTERM instead). */
    json_t *op = json_pack("{s:s,s:s,s:s,s:I}", "op", "put", "root", AGENTWS_ROOT, "path", path,
                           "size", has_len ? (json_int_t)len : (json_int_t)-1);
    if (agentfs_stream_start(sb, op, true, &upload_ops, u, &u->s, &err) < 0) {
        upload_free(u);
        http_respond_error(req, &err);
        return;
    }
    http_req_stream_body(req, &upload_sink, u, upload_gone);
}

/* --- list, delete -------------------------------------------------------------------------- */

struct small {
    struct call c;
    struct agentfs *f;
    bool recursive;
};

static void small_free(struct small *x)
{
    free(x->c.path);
    free(x);
}

static void small_gone(struct http_req *req, void *data)
{
    struct small *x = data;
    agentfs_cancel(x->f);
    small_free(x);
}

json_t *agentws_rows(json_t *ok, ws_walk_fn fn)
{
    json_t *list = json_array(), *row;
    size_t i;
    json_array_foreach(json_object_get(ok, "entries"), i, row)
    {
        mode_t m = (mode_t)json_integer_value(json_array_get(row, 1));
        struct stat st = {.st_mode = m};
        struct ws_entry e = {
            .path = json_string_value(json_array_get(row, 0)) ?: "",
            .type = ws_type_of(m),
            .size = (uint64_t)json_integer_value(json_array_get(row, 2)),
            .mode = m & 07777,
            .mtime = json_integer_value(json_array_get(row, 3)) / 1000000000,
            .st = &st,
        };
        (void)fn(&e, list, NULL);
    }
    return list;
}

static void list_done(json_t *ok, const uint8_t *raw, size_t len, const struct sbx_err *err,
                      void *data)
{
    struct small *x = data;
    if (err) {
        respond_error(x->c.req, x->c.path, err);
    } else {
        json_t *list = agentws_rows(ok, files_list_entry);
        http_respond_json(x->c.req, 200,
                          json_pack("{s:s,s:s,s:b,s:o,s:b}", "object", "list", "path", x->c.path,
                                    "recursive", x->recursive, "data", list, "truncated",
                                    json_is_true(json_object_get(ok, "truncated"))));
    }
    small_free(x);
}

static void delete_done(json_t *ok, const uint8_t *raw, size_t len, const struct sbx_err *err,
                        void *data)
{
    struct small *x = data;
    if (err) {
        respond_error(x->c.req, x->c.path, err);
    } else {
        call_audit(&x->c, "file.delete", NULL,
                   json_pack("{s:s,s:s}", "path", x->c.path, "via", "agent"));
        http_respond_json(x->c.req, 200,
                          json_pack("{s:s,s:s,s:b}", "object", "file", "path", x->c.path,
                                    "deleted", 1));
    }
    small_free(x);
}

static void small_start(struct sbxd *d, struct http_req *req, struct sandbox *sb,
                        const char *path, json_t *op, agentfs_done_fn done, bool recursive)
{
    struct sbx_err err = {0};
    struct small *x = sbx_xcalloc(1, sizeof(*x));
    call_init(&x->c, d, req, sb, path);
    x->recursive = recursive;
    if (agentfs_start(sb, NULL, op, done, x, &x->f, &err) < 0) {
        small_free(x);
        http_respond_error(req, &err);
        return;
    }
    http_req_suspend(req, small_gone, x);
}

void agentws_list(struct sbxd *d, struct http_req *req, struct sandbox *sb, const char *path,
                  bool recursive)
{
    small_start(d, req, sb, path,
                json_pack("{s:s,s:s,s:s,s:i,s:i}", "op", "wsls", "root", AGENTWS_ROOT, "path",
                          path, "depth", recursive ? WS_WALK_DEPTH_MAX : 1, "max", FILES_LIST_MAX),
                list_done, recursive);
}

void agentws_delete(struct sbxd *d, struct http_req *req, struct sandbox *sb, const char *path)
{
    small_start(d, req, sb, path,
                json_pack("{s:s,s:s,s:s}", "op", "wsrm", "root", AGENTWS_ROOT, "path", path),
                delete_done, false);
}
