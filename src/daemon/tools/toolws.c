/* Import circle with tools.c: the tools' remote-workspace side runs here and hands back
 * there (toolcall.h) once the agent has answered. */
#include "toolws.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../common/jsonfind.h"
#include "../../common/text.h"
#include "../../common/util.h"
#include "../audit/audit.h"
#include "../files/agentfs.h"
#include "../files/agentws.h"
#include "../files/exportrd.h"
#include "../files/workspace.h"
#include "../sandbox/params.h"
#include "../sbxd.h"
#include "fileedit.h"
#include "toolcall.h"
#include "wschanges.h"

/* "<size>\n" before a "cat"'s bytes. */
#define TOOLWS_HEAD_MAX 24

typedef void (*step_fn)(struct toolws *w, const struct sbx_err *err);
typedef void (*small_fn)(struct toolws *w, json_t *ok, const struct sbx_err *err);

struct toolws {
    struct tool_call *c;
    struct agentfs *f;        /* the running helper, when it is not streamed */
    struct agentfs_stream *s; /* the running streamed one */
    small_fn small_then;
    step_fn then;
    const char *path; /* borrowed from the call's args, or own_path */
    char *own_path;
    /* "cat": the file's size, its bytes up to keep, or its digest */
    char head[TOOLWS_HEAD_MAX];
    size_t head_len;
    bool begun, hash;
    uint64_t size, got, keep;
    char *buf;
    size_t len;
    EVP_MD_CTX *md;
    /* "put": what is still to go in */
    char *out;
    size_t out_len, out_off;
    bool input_ended;
    /* edit_file */
    struct fileedit edit;
    struct fileedit_file file;
    /* sandbox_bash: its answer, the receipt's files, the changed files being hashed */
    json_t *o, *fallback, *files, *cur;
    struct export_reader reader;
    struct sbx_err rd_err;
};

void toolws_free(struct toolws *w)
{
    if (!w)
        return;
    free(w->own_path);
    free(w->buf);
    free(w->out);
    EVP_MD_CTX_free(w->md);
    fileedit_clear(&w->edit);
    json_decref(w->o);
    json_decref(w->fallback);
    json_decref(w->files);
    free(w);
}

void toolws_cancel(struct toolws *w)
{
    if (w && w->f)
        agentfs_cancel(TAKE_PTR(w->f));
    if (w && w->s)
        agentfs_stream_cancel(TAKE_PTR(w->s)); /* SIGTERM: a "put" drops its temporary file */
}

static struct toolws *ws_of(struct tool_call *c)
{
    if (!c->ws) {
        c->ws = sbx_xcalloc(1, sizeof(*c->ws));
        c->ws->c = c;
    }
    return c->ws;
}

/* The helper's error in the host path's words where they differ. */
static void host_words(const struct toolws *w, const struct sbx_err *in, struct sbx_err *out)
{
    *out = *in;
    if (!strcmp(out->code, "file_not_found"))
        snprintf(out->msg, sizeof(out->msg), "%.200s does not exist",
                 w->path && *w->path ? w->path : "/workspace");
}

/* ---- one helper run, answered whole ---- */

static void small_done(json_t *ok, const uint8_t *raw, size_t len, const struct sbx_err *err,
                       void *data)
{
    struct toolws *w = data;
    struct sbx_err e = {0};
    w->f = NULL;
    w->c->wait = WAIT_NONE;
    if (err)
        host_words(w, err, &e);
    w->small_then(w, ok, err ? &e : NULL);
}

/* req: {op, ...}, beneath /workspace (stolen). */
static int small(struct toolws *w, json_t *req, small_fn then, struct sbx_err *err)
{
    json_object_set_new(req, "root", json_string(AGENTWS_ROOT));
    if (!json_object_get(req, "path")) /* the helper resolves path first, whatever the op */
        json_object_set_new(req, "path", json_string(AGENTWS_ROOT));
    w->small_then = then;
    if (agentfs_start(w->c->sb, NULL, req, small_done, w, &w->f, err) < 0)
        return sbx_err_ret(err);
    w->c->wait = WAIT_AGENT;
    return 0;
}

static json_t *wsls(const char *path, int depth, int max)
{
    return json_pack("{s:s,s:s,s:i,s:i}", "op", "wsls", "path", path, "depth", depth, "max", max);
}

/* ---- "cat": a file's bytes (up to keep) or, past keep, its digest ---- */

static void cat_data(const uint8_t *buf, size_t len, void *data)
{
    struct toolws *w = data;
    size_t used = 0;
    while (!w->begun && used < len) {
        char ch = (char)buf[used++];
        if (ch == '\n') {
            w->head[w->head_len] = 0;
            w->size = strtoull(w->head, NULL, 10);
            w->begun = true;
            if (w->size <= w->keep)
                w->buf = sbx_xmalloc(w->size + 1);
            else if (w->hash && (!(w->md = EVP_MD_CTX_new()) ||
                                 EVP_DigestInit_ex(w->md, EVP_sha256(), NULL) != 1))
                abort();
        } else if (w->head_len + 1 < sizeof(w->head)) {
            w->head[w->head_len++] = ch;
        }
    }
    size_t n = len - used;
    if (w->buf && w->len + n <= w->size) {
        memcpy(w->buf + w->len, buf + used, n);
        w->len += n;
    } else if (w->md && n && EVP_DigestUpdate(w->md, buf + used, n) != 1) {
        abort();
    }
    w->got += n;
    agentfs_stream_credit(w->s, len);
}

static void stream_done(const struct sbx_err *err, void *data)
{
    struct toolws *w = data;
    struct sbx_err e = {0};
    w->s = NULL;
    w->c->wait = WAIT_NONE;
    if (err)
        host_words(w, err, &e);
    w->then(w, err ? &e : NULL);
}

static const struct agentfs_stream_ops cat_ops = {.on_data = cat_data, .on_done = stream_done};

/* Bytes up to keep are held (w->buf, w->len); a larger file is hashed when hash (w->md). */
static int cat(struct toolws *w, uint64_t keep, bool hash, step_fn then, struct sbx_err *err)
{
    w->keep = keep;
    w->hash = hash;
    w->then = then;
    json_t *req = json_pack("{s:s,s:s,s:s}", "op", "cat", "root", AGENTWS_ROOT, "path", w->path);
    if (agentfs_stream_start(w->c->sb, req, false, &cat_ops, w, &w->s, err) < 0)
        return sbx_err_ret(err);
    w->c->wait = WAIT_AGENT;
    return 0;
}

/* ---- "put": bytes to a temporary name beside the file, renamed over it ---- */

static void put_room(void *data)
{
    struct toolws *w = data;
    struct sbx_err err = {0};
    size_t room = w->s ? agentfs_stream_room(w->s) : 0, n = w->out_len - w->out_off;
    if (n > room)
        n = room;
    if (n && agentfs_stream_write(w->s, w->out + w->out_off, n, &err) == 0)
        w->out_off += n;
    /* A failed write leaves the helper short of its size: it fails and says so. */
    if (w->out_off == w->out_len && !w->input_ended && w->s) {
        w->input_ended = true;
        (void)agentfs_stream_end_input(w->s, &err);
    }
}

static void put_stdout(const uint8_t *buf, size_t len, void *data)
{
    struct toolws *w = data;
    agentfs_stream_credit(w->s, len); /* {"ok": n}: the length is all it says */
}

static const struct agentfs_stream_ops put_ops = {
    .on_data = put_stdout, .on_room = put_room, .on_done = stream_done};

/* buf (taken); keep_mode: an existing file keeps its mode (else 0644, as ws_write_file). */
static int put(struct toolws *w, char *buf, size_t len, bool keep_mode, step_fn then,
               struct sbx_err *err)
{
    w->out = buf;
    w->out_len = len;
    w->then = then;
    json_t *req = json_pack("{s:s,s:s,s:s,s:I,s:b}", "op", "put", "root", AGENTWS_ROOT, "path",
                            w->path, "size", (json_int_t)len, "keep_mode", keep_mode);
    if (agentfs_stream_start(w->c->sb, req, true, &put_ops, w, &w->s, err) < 0)
        return sbx_err_ret(err);
    w->c->wait = WAIT_AGENT;
    return 0;
}

/* ---- edit_file ---- */

/* The audit entry (every edit but a view, as on the host) and the answer. */
static void edit_end(struct toolws *w, const struct sbx_err *err, json_t *details)
{
    struct tool_call *c = w->c;
    if (!fileedit_is_view(&w->edit))
        audit_record(
            c->d->store, &c->who, NULL, c->request_id, "file.edit", c->sandbox_id,
            err ? err->code : "ok",
            json_pack("{s:s,s:s}", "path",
                      fileedit_rel_path(json_string_value(json_object_get(c->args, "path")) ?: ""),
                      "via", "agent"));
    tools_finish(c, err ? NULL : TAKE_PTR(w->edit.answer), err, details);
}

static void edit_put_done(struct toolws *w, const struct sbx_err *err)
{
    edit_end(w, err, NULL);
}

static void edit_apply(struct toolws *w)
{
    struct sbx_err err = {0};
    json_t *details = NULL;
    if (fileedit_apply(&w->edit, &w->file, &details, &err) < 0) {
        edit_end(w, &err, details);
        return;
    }
    if (!w->edit.write) { /* a view */
        edit_end(w, NULL, NULL);
        return;
    }
    if (put(w, TAKE_PTR(w->edit.text), w->edit.len, true, edit_put_done, &err) < 0)
        edit_end(w, &err, NULL);
}

/* A helper that ended well without its "<size>\n" is not one to trust. */
static const struct sbx_err *cat_checked(struct toolws *w, const struct sbx_err *err,
                                         struct sbx_err *e)
{
    if (!err && !w->begun) {
        sbx_err_set(e, EPROTO, "internal", "the file helper answered no size");
        return e;
    }
    return err;
}

static void edit_dir_done(struct toolws *w, json_t *ok, const struct sbx_err *err);

static void edit_read_done(struct toolws *w, const struct sbx_err *err)
{
    struct sbx_err e = {0};
    err = cat_checked(w, err, &e);
    /* A view of a symlink to a folder lists the folder, as the host path's O_PATH open does. */
    if (err && err->errnum == EISDIR && fileedit_is_view(&w->edit)) {
        if (small(w, wsls(w->path, 1, FILEEDIT_VIEW_ENTRIES_MAX), edit_dir_done, &e) < 0)
            edit_end(w, &e, NULL);
        return;
    }
    if (err && strcmp(err->code, "file_not_found")) {
        edit_end(w, err, NULL);
        return;
    }
    if (!err) {
        w->file.exists = true;
        w->file.size = w->size;
        w->file.buf = w->buf && w->len == w->size ? w->buf : NULL; /* grew past keep: too large */
        w->file.len = w->len;
        if (w->buf)
            w->buf[w->len] = 0;
    }
    edit_apply(w);
}

static void edit_dir_done(struct toolws *w, json_t *ok, const struct sbx_err *err)
{
    if (err) {
        edit_end(w, err, NULL);
        return;
    }
    w->edit.answer = fileedit_dir_answer(w->path, agentws_rows(ok, fileedit_dir_entry),
                                         json_is_true(json_object_get(ok, "truncated")));
    edit_end(w, NULL, NULL);
}

static void edit_stat_done(struct toolws *w, json_t *ok, const struct sbx_err *err)
{
    struct sbx_err e = {0};
    w->file.mode = 0644;
    if (err && !strcmp(err->code, "file_not_found")) {
        edit_apply(w); /* a missing file: created, or file_not_found, as the edit says */
        return;
    }
    if (err) {
        edit_end(w, err, NULL);
        return;
    }
    mode_t m = (mode_t)json_integer_value(json_array_get(ok, 1));
    uint64_t size = (uint64_t)json_integer_value(json_array_get(ok, 2));
    int r = 0;
    if (S_ISDIR(m) && fileedit_is_view(&w->edit))
        r = small(w, wsls(w->path, 1, FILEEDIT_VIEW_ENTRIES_MAX), edit_dir_done, &e);
    else if (S_ISREG(m) && size > FILEEDIT_FILE_MAX) { /* refused without reading it */
        w->file.exists = true;
        w->file.size = size;
        edit_apply(w);
        return;
    } else /* a folder or other is refused by the read itself, as on the host */
        r = cat(w, FILEEDIT_FILE_MAX, false, edit_read_done, &e);
    if (r < 0)
        edit_end(w, &e, NULL);
}

int toolws_edit(struct tool_call *c, struct sbx_err *err)
{
    struct toolws *w = ws_of(c);
    struct sbx_err e = {0};
    if (fileedit_parse(c->args, &w->edit, &e) < 0) {
        edit_end(w, &e, NULL);
        return 0;
    }
    w->path = w->edit.path;
    if (small(w, json_pack("{s:s,s:s}", "op", "wsstat", "path", w->path), edit_stat_done, &e) < 0)
        edit_end(w, &e, NULL);
    return 0;
}

/* ---- sandbox_files ---- */

static void list_done(struct toolws *w, json_t *ok, const struct sbx_err *err)
{
    if (err) {
        tools_fail(w->c, err);
        return;
    }
    tools_list_answer(w->c, w->path, agentws_rows(ok, tools_list_entry),
                      json_is_true(json_object_get(ok, "truncated")));
}

int toolws_list(struct tool_call *c, const char *path, bool recursive, struct sbx_err *err)
{
    struct toolws *w = ws_of(c);
    w->path = path;
    return small(w, wsls(path, recursive ? WS_WALK_DEPTH_MAX : 1, TOOLS_FILES_LIST_MAX), list_done,
                 err);
}

static void read_done(struct toolws *w, const struct sbx_err *err)
{
    struct tool_call *c = w->c;
    struct sbx_err e = {0};
    err = cat_checked(w, err, &e);
    if (w->begun) /* as on the host: once the file is open */
        audit_record(c->d->store, &c->who, NULL, c->request_id, "file.download", c->sandbox_id,
                     "ok",
                     json_pack("{s:s,s:I,s:s}", "path", w->path, "size", (json_int_t)w->size, "via",
                               "agent"));
    if (err) {
        tools_fail(c, err);
        return;
    }
    if (!w->md) {
        tools_read_inline(c, w->path, w->buf, w->len);
        return;
    }
    char sha[WS_SHA256_HEX_LEN + 1];
    if (ws_sha256_final(w->md, sha, &e) < 0) {
        tools_fail(c, &e);
        return;
    }
    tools_read_large(c, w->path, w->got, sha);
}

int toolws_read(struct tool_call *c, const char *path, struct sbx_err *err)
{
    struct toolws *w = ws_of(c);
    w->path = path;
    return cat(w, TOOLS_READ_INLINE_MAX, true, read_done, err);
}

static void write_done(struct toolws *w, const struct sbx_err *err)
{
    tools_write_done(w->c, w->path, w->out_len, err);
}

int toolws_write(struct tool_call *c, const char *path, const char *buf, size_t len,
                 struct sbx_err *err)
{
    struct toolws *w = ws_of(c);
    w->path = path;
    char *copy = sbx_xmalloc(len + 1);
    memcpy(copy, buf, len);
    if (put(w, copy, len, false, write_done, err) < 0) /* audited, as on the host */
        tools_write_done(c, path, len, err);
    return 0;
}

/* ---- bsl_check ---- */

static void bsl_stat_done(struct toolws *w, json_t *ok, const struct sbx_err *err)
{
    struct sbx_err e = {0};
    mode_t m = (mode_t)json_integer_value(json_array_get(ok, 1));
    if (err) {
        tools_fail(w->c, err);
    } else if (!S_ISDIR(m) && !S_ISREG(m)) {
        sbx_err_set(&e, EINVAL, "invalid_path", "%.200s is not a file or a folder", w->path);
        tools_fail(w->c, &e);
    } else {
        tools_bsl_exec(w->c);
    }
}

int toolws_bsl_check(struct tool_call *c, const char *path, struct sbx_err *err)
{
    struct toolws *w = ws_of(c);
    w->path = w->own_path = sbx_xstrdup(path);
    return small(w, json_pack("{s:s,s:s}", "op", "wsstat", "path", path), bsl_stat_done, err);
}

/* ---- sandbox_bash's files ---- */

/* {op: wsscan, files: true}: every regular file's [path, size, mtime_ns, ctime_ns, ino]. */
static json_t *scan_req(void)
{
    return json_pack("{s:s,s:s,s:i,s:b}", "op", "wsscan", "out", SANDBOX_OUT_DIR, "max",
                     WSCHANGES_WALK_MAX, "files", 1);
}

static struct ws_listing *scan_listing(json_t *ok)
{
    json_t *rows = json_object_get(ok, "files"), *row;
    if (!json_is_array(rows))
        return NULL;
    struct ws_listing *l = ws_listing_new();
    size_t i;
    json_array_foreach(rows, i, row)
    {
        const char *path = json_string_value(json_array_get(row, 0));
        if (path && json_array_size(row) == 5)
            ws_listing_add(l, path, (uint64_t)json_integer_value(json_array_get(row, 1)),
                           json_integer_value(json_array_get(row, 2)),
                           json_integer_value(json_array_get(row, 3)),
                           (uint64_t)json_integer_value(json_array_get(row, 4)));
    }
    if (json_is_true(json_object_get(ok, "truncated")))
        ws_listing_set_truncated(l);
    return l;
}

static void before_done(struct toolws *w, json_t *ok, const struct sbx_err *err)
{
    if (!err) /* without it: the receipt's files */
        w->c->before = scan_listing(ok);
    tools_exec_begin(w->c);
}

void toolws_bash_before(struct tool_call *c)
{
    struct sbx_err err = {0};
    if (small(ws_of(c), scan_req(), before_done, &err) < 0)
        tools_exec_begin(c);
}

static void bash_answer(struct toolws *w, json_t *files)
{
    json_decref(w->files);
    w->files = NULL;
    tools_bash_answer(w->c, TAKE_PTR(w->o), files);
}

static int hash_file(json_t *head, const char *path, void *data, struct sbx_err *err)
{
    struct toolws *w = data;
    w->cur = sbx_json_find(w->files, "path", path);
    if (!w->md && !(w->md = EVP_MD_CTX_new()))
        abort();
    if (EVP_DigestInit_ex(w->md, EVP_sha256(), NULL) != 1)
        return sbx_err_set(err, EIO, "internal", "SHA-256 is not available");
    w->got = 0;
    return 0;
}

static int hash_bytes(const uint8_t *buf, size_t len, void *data, struct sbx_err *err)
{
    struct toolws *w = data;
    w->got += len;
    if (EVP_DigestUpdate(w->md, buf, len) != 1)
        return sbx_err_set(err, EIO, "internal", "SHA-256 failed");
    return 0;
}

static int hash_end(void *data, struct sbx_err *err)
{
    struct toolws *w = data;
    char sha[WS_SHA256_HEX_LEN + 1];
    if (ws_sha256_final(w->md, sha, err) < 0)
        return sbx_err_ret(err);
    if (w->cur) {
        json_object_set_new(w->cur, "sha256", json_string(sha));
        json_object_set_new(w->cur, "size", json_integer((json_int_t)w->got));
    }
    w->cur = NULL;
    return 0;
}

static const struct export_reader_ops hash_reader = {
    .on_file = hash_file, .on_bytes = hash_bytes, .on_end = hash_end};

static void export_data(const uint8_t *buf, size_t len, void *data)
{
    struct toolws *w = data;
    /* After a malformed chunk the rest is dropped: those files have no sha256. */
    if (!w->rd_err.code[0])
        (void)export_reader_feed(&w->reader, buf, len, &w->rd_err);
    agentfs_stream_credit(w->s, len);
}

static void export_done(const struct sbx_err *err, void *data)
{
    struct toolws *w = data;
    w->s = NULL;
    w->c->wait = WAIT_NONE;
    /* A failed or short read back leaves the files it did not finish without sha256, as
     * the host path lists a file it could not hash. */
    bash_answer(w, json_incref(w->files));
}

static const struct agentfs_stream_ops export_ops = {.on_data = export_data,
                                                     .on_done = export_done};

static void after_done(struct toolws *w, json_t *ok, const struct sbx_err *err)
{
    struct sbx_err e = {0};
    struct ws_listing *now = err ? NULL : scan_listing(ok);
    if (!now) {
        bash_answer(w, TAKE_PTR(w->fallback));
        return;
    }
    bool cut = false;
    w->files = ws_listing_diff(w->c->before, now, &cut);
    ws_listing_free(now);
    if (cut)
        json_object_set_new(w->o, "files_truncated", json_true());
    json_t *paths = json_array(), *f;
    size_t i;
    json_array_foreach(w->files, i, f) json_array_append(paths, json_object_get(f, "path"));
    if (!json_array_size(paths)) {
        json_decref(paths);
        bash_answer(w, json_incref(w->files));
        return;
    }
    /* Read back and hashed here, within the host path's budget: the digests are sbxd's. */
    export_reader_init(&w->reader, &hash_reader, w);
    json_t *req = json_pack("{s:s,s:s,s:s,s:i,s:I,s:o}", "op", "export", "root", AGENTWS_ROOT,
                            "path", "", "max", WSCHANGES_FILES_MAX, "bytes",
                            (json_int_t)WSCHANGES_HASH_BUDGET, "paths", paths);
    if (agentfs_stream_start(w->c->sb, req, false, &export_ops, w, &w->s, &e) < 0) {
        bash_answer(w, json_incref(w->files));
        return;
    }
    w->c->wait = WAIT_AGENT;
}

void toolws_bash_after(struct tool_call *c, json_t *o, json_t *outputs)
{
    struct toolws *w = ws_of(c);
    struct sbx_err err = {0};
    w->o = o;
    w->fallback = outputs ? json_deep_copy(outputs) : json_array();
    if (!c->before || c->sb->ended || small(w, scan_req(), after_done, &err) < 0)
        bash_answer(w, TAKE_PTR(w->fallback));
}
