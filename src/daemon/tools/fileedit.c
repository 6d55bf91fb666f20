#include "fileedit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../files/workspace.h"
#include "editmatch.h"

const char *fileedit_rel_path(const char *path)
{
    static const char prefix[] = "/workspace";
    if (!strncmp(path, prefix, sizeof(prefix) - 1) &&
        (path[sizeof(prefix) - 1] == '/' || !path[sizeof(prefix) - 1])) {
        path += sizeof(prefix) - 1;
        while (*path == '/')
            path++;
    }
    return path;
}

/* The file as text: a missing one is empty (exists false); one past FILEEDIT_FILE_MAX or not
 * UTF-8 is refused (t is filled either way, so create can replace a binary file whole). */
struct text {
    const char *buf;
    size_t len;
    mode_t mode;
    bool exists;
};

static int text_of(const struct fileedit_file *f, const char *path, struct text *t,
                   struct sbx_err *err)
{
    *t = (struct text){.mode = f->exists ? f->mode : 0644, .exists = f->exists};
    if (!f->exists)
        return 0;
    if (f->size > FILEEDIT_FILE_MAX || !f->buf)
        return sbx_err_set(err, EFBIG, "file_too_large",
                           "%s is %llu bytes; edit_file handles files up to %u bytes", path,
                           (unsigned long long)f->size, FILEEDIT_FILE_MAX);
    t->buf = f->buf;
    t->len = f->len;
    if (!sbx_utf8_valid(t->buf, t->len))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "%s is not a UTF-8 text file; edit_file edits text", path);
    return 0;
}

/* The new content is to be written; its answer says what changed. */
static int commit(struct fileedit *e, const struct text *old, const char *buf, size_t len,
                  struct sbx_err *err)
{
    if (len > FILEEDIT_FILE_MAX)
        return sbx_err_set(err, EFBIG, "file_too_large",
                           "the edited file would be %zu bytes; edit_file writes up to %u", len,
                           FILEEDIT_FILE_MAX);
    char sha[WS_SHA256_HEX_LEN + 1];
    ws_sha256_buf(buf, len, sha);
    _cleanup_free_ char *diff =
        edit_unified_diff(e->path, old->buf ? old->buf : "", old->len, buf, len);
    e->text = sbx_xmalloc(len + 1);
    memcpy(e->text, buf, len);
    e->text[len] = 0;
    e->len = len;
    e->mode = old->mode;
    e->write = true;
    e->answer = json_pack("{s:s,s:s,s:I,s:s,s:b}", "path", e->path, "sha256", sha, "size",
                          (json_int_t)len, "diff", diff, "created", !old->exists);
    return 0;
}

static int get_string(json_t *args, const char *name, bool required, const char **out,
                      struct sbx_err *err)
{
    json_t *v = json_object_get(args, name);
    *out = NULL;
    if (!v || json_is_null(v)) {
        if (required)
            return sbx_err_set(err, EINVAL, "invalid_request", "%s is required", name);
        return 0;
    }
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
        return sbx_err_set(err, EINVAL, "invalid_request", "%s must be a string without NUL", name);
    *out = json_string_value(v);
    return 0;
}

static int get_bool(json_t *args, const char *name, bool *out, struct sbx_err *err)
{
    json_t *v = json_object_get(args, name);
    *out = false;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_boolean(v))
        return sbx_err_set(err, EINVAL, "invalid_request", "%s must be true or false", name);
    *out = json_is_true(v);
    return 0;
}

static json_t *candidates_json(const struct edit_match *m)
{
    json_t *a = json_array();
    for (size_t i = 0; i < m->ncand; i++)
        json_array_append_new(a, json_pack("{s:I,s:f,s:s}", "line", (json_int_t)m->cand[i].line,
                                           "score", m->cand[i].score, "text", m->cand[i].snippet));
    return json_pack("{s:o}", "candidates", a);
}

static int replace(struct fileedit *e, const struct fileedit_file *f, json_t **details,
                   struct sbx_err *err)
{
    const char *path = e->path, *old_s = e->old_s, *new_s = e->new_s ? e->new_s : "";
    struct text t;
    int r = text_of(f, path, &t, err);
    if (r == 0 && !t.exists && !e->create)
        r = sbx_err_set(err, ENOENT, "file_not_found", "%s does not exist (set create to make it)",
                        path);
    if (r == 0 && !t.exists) {
        if (*old_s)
            r = sbx_err_set(err, EINVAL, "invalid_request", "creating %s: old_string must be empty",
                            path);
        else
            r = commit(e, &t, new_s, strlen(new_s), err);
    } else if (r == 0 && !*old_s) {
        r = sbx_err_set(err, EEXIST, "invalid_request",
                        "%s exists: old_string must name the text to replace", path);
    } else if (r == 0) {
        struct edit_match m;
        r = edit_replace(t.buf, t.len, old_s, new_s, e->all, &m, err);
        if (r < 0 && m.ncand)
            *details = candidates_json(&m);
        if (r == 0)
            r = commit(e, &t, m.text, m.len, err);
        if (r == 0) {
            json_object_set_new(e->answer, "strategy", json_string(edit_strategy_name(m.strategy)));
            json_object_set_new(e->answer, "score", json_real(m.score));
            json_object_set_new(e->answer, "replacements",
                                json_integer((json_int_t)m.replacements));
            json_object_set_new(e->answer, "first_line", json_integer((json_int_t)m.first_line));
        }
        edit_match_clear(&m);
    }
    return r;
}

json_t *fileedit_dir_answer(const char *path, json_t *entries, bool truncated)
{
    return json_pack("{s:s,s:s,s:o,s:b}", "path", path, "type", "dir", "entries", entries,
                     "truncated", truncated);
}

/* The text-editor tool's view of a file: its lines numbered (cat -n). */
static int view(struct fileedit *e, const struct fileedit_file *f, struct sbx_err *err)
{
    struct text t;
    if (!f->exists)
        return sbx_err_set(err, ENOENT, "file_not_found", "%s does not exist", e->path);
    if (text_of(f, e->path, &t, err) < 0)
        return sbx_err_ret(err);
    long long from = 1, to = -1;
    json_t *range = json_object_get(e->args, "view_range");
    if (range && !json_is_null(range)) {
        if (!json_is_array(range) || json_array_size(range) != 2 ||
            !json_is_integer(json_array_get(range, 0)) ||
            !json_is_integer(json_array_get(range, 1)))
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "view_range must be [first_line, last_line] (last -1: the end)");
        from = json_integer_value(json_array_get(range, 0));
        to = json_integer_value(json_array_get(range, 1));
    }
    FILE *mf;
    char *buf = NULL;
    size_t len = 0;
    bool truncated = false;
    long long line = 1;
    if (!(mf = open_memstream(&buf, &len)))
        abort();
    for (size_t i = 0; i < t.len; line++) {
        const char *nl = memchr(t.buf + i, '\n', t.len - i);
        size_t end = nl ? (size_t)(nl - t.buf) : t.len;
        if (line >= from && (to < 0 || line <= to)) {
            if (ftell(mf) > (long)FILEEDIT_VIEW_MAX) {
                truncated = true;
                break;
            }
            fprintf(mf, "%6lld\t%.*s\n", line, (int)(end - i), t.buf + i);
        }
        i = end + 1;
    }
    fclose(mf);
    size_t vlen = sbx_utf8_prefix(buf, len);
    e->answer = json_pack("{s:s,s:s,s:s%,s:I,s:b}", "path", e->path, "type", "file", "content", buf,
                          vlen, "lines", (json_int_t)(line - 1), "truncated", truncated);
    free(buf);
    return 0;
}

static int insert(struct fileedit *e, const struct fileedit_file *f, struct sbx_err *err)
{
    const char *path = e->path, *new_s = e->new_s;
    struct text t;
    int r = text_of(f, path, &t, err);
    if (r == 0 && !t.exists)
        r = sbx_err_set(err, ENOENT, "file_not_found", "%s does not exist", path);
    size_t off = 0;
    for (long long n = e->insert_line; r == 0 && n > 0; n--) {
        const char *nl = off < t.len ? memchr(t.buf + off, '\n', t.len - off) : NULL;
        if (!nl && off >= t.len)
            r = sbx_err_set(err, EINVAL, "invalid_request", "%s has fewer than %lld lines", path,
                            e->insert_line);
        off = nl ? (size_t)(nl - t.buf) + 1 : t.len;
    }
    if (r < 0)
        return r;
    size_t nlen = strlen(new_s);
    bool need_nl = nlen && new_s[nlen - 1] != '\n';
    bool need_lead = off == t.len && t.len && t.buf[t.len - 1] != '\n';
    size_t len = t.len + nlen + need_nl + need_lead;
    _cleanup_free_ char *buf = sbx_xmalloc(len + 1);
    size_t o = 0;
    if (off)
        memcpy(buf, t.buf, off);
    o = off;
    if (need_lead)
        buf[o++] = '\n';
    memcpy(buf + o, new_s, nlen);
    o += nlen;
    if (need_nl)
        buf[o++] = '\n';
    if (t.len > off)
        memcpy(buf + o, t.buf + off, t.len - off);
    return commit(e, &t, buf, len, err);
}

int fileedit_parse(json_t *args, struct fileedit *e, struct sbx_err *err)
{
    const char *path;
    memset(e, 0, sizeof(*e));
    e->args = args;
    if (!json_is_object(args))
        return sbx_err_set(err, EINVAL, "invalid_request", "the arguments must be an object");
    if (get_string(args, "path", true, &path, err) < 0 ||
        get_string(args, "command", false, &e->cmd, err) < 0)
        return sbx_err_ret(err);
    e->path = fileedit_rel_path(path);
    const char *cmd = e->cmd;
    if (ws_path_check(e->path, fileedit_is_view(e), err) < 0)
        return sbx_err_ret(err);
    if (!cmd) {
        if (get_string(args, "old_string", true, &e->old_s, err) < 0 ||
            get_string(args, "new_string", true, &e->new_s, err) < 0 ||
            get_bool(args, "replace_all", &e->all, err) < 0 ||
            get_bool(args, "create", &e->create, err) < 0)
            return sbx_err_ret(err);
        return 0;
    }
    if (!strcmp(cmd, "view"))
        return 0;
    if (!strcmp(cmd, "create"))
        return get_string(args, "file_text", true, &e->file_text, err);
    if (!strcmp(cmd, "str_replace"))
        return get_string(args, "old_str", true, &e->old_s, err) < 0 ||
                       get_string(args, "new_str", false, &e->new_s, err) < 0
                   ? sbx_err_ret(err)
                   : 0;
    if (!strcmp(cmd, "insert")) {
        json_t *at = json_object_get(args, "insert_line");
        if (get_string(args, "new_str", true, &e->new_s, err) < 0)
            return sbx_err_ret(err);
        if (!json_is_integer(at) || json_integer_value(at) < 0)
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "insert_line must be a line number >= 0 (0: before the first line)");
        e->insert_line = json_integer_value(at);
        return 0;
    }
    return sbx_err_set(err, EINVAL, "invalid_request",
                       "command must be view, create, str_replace or insert");
}

bool fileedit_is_view(const struct fileedit *e)
{
    return e->cmd && !strcmp(e->cmd, "view");
}

int fileedit_apply(struct fileedit *e, const struct fileedit_file *f, json_t **details,
                   struct sbx_err *err)
{
    *details = NULL;
    if (!e->cmd || !strcmp(e->cmd, "str_replace"))
        return replace(e, f, details, err);
    if (fileedit_is_view(e))
        return view(e, f, err);
    if (!strcmp(e->cmd, "insert"))
        return insert(e, f, err);
    /* create */
    struct text t;
    int r = text_of(f, e->path, &t, err);
    if (r < 0 && strcmp(err->code, "invalid_request"))
        return r;
    if (r < 0) { /* a binary file is replaced whole; its diff shows only the new text */
        t.buf = NULL;
        t.len = 0;
    }
    sbx_err_clear(err);
    return commit(e, &t, e->file_text, strlen(e->file_text), err);
}

void fileedit_clear(struct fileedit *e)
{
    free(e->text);
    json_decref(e->answer);
    e->text = NULL;
    e->answer = NULL;
}

/* ---- a workspace on this host ---- */

int fileedit_dir_entry(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    json_array_append_new(data, json_pack("{s:s,s:s,s:I}", "path", e->path, "type",
                                          ws_type_name(e->type), "size", (json_int_t)e->size));
    return 0;
}

/* A view of a folder lists it into *out (1); a file is left to fileedit_apply (0). */
static int view_dir(int root, const char *path, json_t **out, struct sbx_err *err)
{
    _cleanup_close_ int dfd = -1;
    struct stat st;
    if (ws_open(root, path, O_PATH, &dfd, err) < 0)
        return sbx_err_ret(err);
    if (fstat(dfd, &st) < 0 || !S_ISDIR(st.st_mode))
        return 0;
    json_t *list = json_array();
    bool truncated = false;
    if (ws_walk(root, path, false, FILEEDIT_VIEW_ENTRIES_MAX, fileedit_dir_entry, list, &truncated,
                err) < 0) {
        json_decref(list);
        return sbx_err_ret(err);
    }
    *out = fileedit_dir_answer(path, list, truncated);
    return 1;
}

/* The file beneath root into f (its bytes in *buf); a missing one is not an error. */
static int read_file(int root, const char *path, struct fileedit_file *f, char **buf,
                     struct sbx_err *err)
{
    _cleanup_close_ int fd = -1;
    struct sbx_err e = {0};
    struct stat st;
    *f = (struct fileedit_file){.mode = 0644};
    if (ws_open_file(root, path, &fd, &f->size, &e) < 0) {
        if (!strcmp(e.code, "file_not_found"))
            return 0;
        *err = e;
        return sbx_err_ret(err);
    }
    f->exists = true;
    if (fstat(fd, &st) == 0)
        f->mode = st.st_mode & 07777;
    if (f->size > FILEEDIT_FILE_MAX)
        return 0;
    *buf = sbx_xmalloc(f->size + 1);
    int r = sbx_read_upto(fd, *buf, f->size, &f->len);
    if (r < 0)
        return sbx_err_sys(err, -r, "reading %s", path);
    (*buf)[f->len] = 0;
    f->buf = *buf;
    return 0;
}

int fileedit_run(int root, json_t *args, json_t **out, json_t **details, struct sbx_err *err)
{
    struct fileedit e;
    struct fileedit_file f;
    _cleanup_free_ char *buf = NULL;
    *out = NULL;
    *details = NULL;
    int r = fileedit_parse(args, &e, err);
    if (r == 0 && fileedit_is_view(&e) && (r = view_dir(root, e.path, out, err)) == 1)
        return 0;
    if (r == 0)
        r = read_file(root, e.path, &f, &buf, err);
    if (r == 0)
        r = fileedit_apply(&e, &f, details, err);
    if (r == 0 && e.write)
        r = ws_write_file(root, e.path, e.text, e.len, e.mode, err);
    if (r == 0)
        *out = TAKE_PTR(e.answer);
    fileedit_clear(&e);
    return r;
}
