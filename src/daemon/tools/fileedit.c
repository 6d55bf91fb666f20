#include "fileedit.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
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

struct text {
    char *buf;
    size_t len;
    mode_t mode;
    bool exists;
};

static int read_text(int root, const char *path, struct text *t, struct sbx_err *err)
{
    _cleanup_close_ int fd = -1;
    uint64_t size;
    struct sbx_err e = {0};
    memset(t, 0, sizeof(*t));
    t->mode = 0644;
    if (ws_open_file(root, path, &fd, &size, &e) < 0) {
        if (!strcmp(e.code, "file_not_found"))
            return 0;
        *err = e;
        return sbx_err_ret(err);
    }
    if (size > FILEEDIT_FILE_MAX)
        return sbx_err_set(err, EFBIG, "file_too_large",
                           "%s is %llu bytes; edit_file handles files up to %u bytes", path,
                           (unsigned long long)size, FILEEDIT_FILE_MAX);
    struct stat st;
    if (fstat(fd, &st) == 0)
        t->mode = st.st_mode & 07777;
    t->buf = sbx_xmalloc(size + 1);
    int r = sbx_read_upto(fd, t->buf, size, &t->len);
    if (r < 0)
        return sbx_err_sys(err, -r, "reading %s", path);
    t->buf[t->len] = 0;
    t->exists = true;
    if (!sbx_utf8_valid(t->buf, t->len))
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "%s is not a UTF-8 text file; edit_file edits text", path);
    return 0;
}

static void sha256_hex(const char *buf, size_t len, char out[WS_SHA256_HEX_LEN + 1])
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)buf, len, md);
    sbx_hex(md, sizeof(md), out);
}

/* Write the new content and answer what changed. */
static int commit(int root, const char *path, const struct text *old, const char *buf, size_t len,
                  json_t **out, struct sbx_err *err)
{
    if (len > FILEEDIT_FILE_MAX)
        return sbx_err_set(err, EFBIG, "file_too_large",
                           "the edited file would be %zu bytes; edit_file writes up to %u", len,
                           FILEEDIT_FILE_MAX);
    if (ws_write_file(root, path, buf, len, old->mode, err) < 0)
        return sbx_err_ret(err);
    char sha[WS_SHA256_HEX_LEN + 1];
    sha256_hex(buf, len, sha);
    _cleanup_free_ char *diff =
        edit_unified_diff(path, old->buf ? old->buf : "", old->len, buf, len);
    *out = json_pack("{s:s,s:s,s:I,s:s,s:b}", "path", path, "sha256", sha, "size", (json_int_t)len,
                     "diff", diff, "created", !old->exists);
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

static int replace(int root, const char *path, const char *old_s, const char *new_s, bool all,
                   bool create, json_t **out, json_t **details, struct sbx_err *err)
{
    struct text t;
    int r = read_text(root, path, &t, err);
    if (r == 0 && !t.exists && !create)
        r = sbx_err_set(err, ENOENT, "file_not_found", "%s does not exist (set create to make it)",
                        path);
    if (r == 0 && !t.exists) {
        if (*old_s)
            r = sbx_err_set(err, EINVAL, "invalid_request", "creating %s: old_string must be empty",
                            path);
        else
            r = commit(root, path, &t, new_s, strlen(new_s), out, err);
    } else if (r == 0 && !*old_s) {
        r = sbx_err_set(err, EEXIST, "invalid_request",
                        "%s exists: old_string must name the text to replace", path);
    } else if (r == 0) {
        struct edit_match m;
        r = edit_replace(t.buf, t.len, old_s, new_s, all, &m, err);
        if (r < 0 && m.ncand)
            *details = candidates_json(&m);
        if (r == 0)
            r = commit(root, path, &t, m.text, m.len, out, err);
        if (r == 0) {
            json_object_set_new(*out, "strategy", json_string(edit_strategy_name(m.strategy)));
            json_object_set_new(*out, "score", json_real(m.score));
            json_object_set_new(*out, "replacements", json_integer((json_int_t)m.replacements));
            json_object_set_new(*out, "first_line", json_integer((json_int_t)m.first_line));
        }
        edit_match_clear(&m);
    }
    free(t.buf);
    return r;
}

static int list_entry(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    json_array_append_new(data, json_pack("{s:s,s:s,s:I}", "path", e->path, "type",
                                          ws_type_name(e->type), "size", (json_int_t)e->size));
    return 0;
}

/* The text-editor tool's view: a file's lines numbered (cat -n), or a directory's entries. */
static int view(int root, const char *path, json_t *args, json_t **out, struct sbx_err *err)
{
    _cleanup_close_ int dfd = -1;
    struct stat st;
    if (ws_open(root, path, O_PATH, &dfd, err) < 0)
        return sbx_err_ret(err);
    if (fstat(dfd, &st) == 0 && S_ISDIR(st.st_mode)) {
        json_t *list = json_array();
        bool truncated = false;
        if (ws_walk(root, path, false, 1000, list_entry, list, &truncated, err) < 0) {
            json_decref(list);
            return sbx_err_ret(err);
        }
        *out = json_pack("{s:s,s:s,s:o,s:b}", "path", path, "type", "dir", "entries", list,
                         "truncated", truncated);
        return 0;
    }
    struct text t;
    if (read_text(root, path, &t, err) < 0) {
        free(t.buf);
        return sbx_err_ret(err);
    }
    long long from = 1, to = -1;
    json_t *range = json_object_get(args, "view_range");
    if (range && !json_is_null(range)) {
        if (!json_is_array(range) || json_array_size(range) != 2 ||
            !json_is_integer(json_array_get(range, 0)) ||
            !json_is_integer(json_array_get(range, 1))) {
            free(t.buf);
            return sbx_err_set(err, EINVAL, "invalid_request",
                               "view_range must be [first_line, last_line] (last -1: the end)");
        }
        from = json_integer_value(json_array_get(range, 0));
        to = json_integer_value(json_array_get(range, 1));
    }
    FILE *f;
    char *buf = NULL;
    size_t len = 0;
    bool truncated = false;
    long long line = 1;
    if (!(f = open_memstream(&buf, &len)))
        abort();
    for (size_t i = 0; i < t.len; line++) {
        const char *nl = memchr(t.buf + i, '\n', t.len - i);
        size_t e = nl ? (size_t)(nl - t.buf) : t.len;
        if (line >= from && (to < 0 || line <= to)) {
            if (ftell(f) > (long)FILEEDIT_VIEW_MAX) {
                truncated = true;
                break;
            }
            fprintf(f, "%6lld\t%.*s\n", line, (int)(e - i), t.buf + i);
        }
        i = e + 1;
    }
    fclose(f);
    free(t.buf);
    char *valid = buf;
    size_t vlen = sbx_utf8_prefix(buf, len);
    *out = json_pack("{s:s,s:s,s:s%,s:I,s:b}", "path", path, "type", "file", "content", valid, vlen,
                     "lines", (json_int_t)(line - 1), "truncated", truncated);
    free(buf);
    return 0;
}

static int insert(int root, const char *path, json_t *args, json_t **out, struct sbx_err *err)
{
    const char *new_s;
    json_t *at = json_object_get(args, "insert_line");
    if (get_string(args, "new_str", true, &new_s, err) < 0)
        return sbx_err_ret(err);
    if (!json_is_integer(at) || json_integer_value(at) < 0)
        return sbx_err_set(err, EINVAL, "invalid_request",
                           "insert_line must be a line number >= 0 (0: before the first line)");
    struct text t;
    int r = read_text(root, path, &t, err);
    if (r == 0 && !t.exists)
        r = sbx_err_set(err, ENOENT, "file_not_found", "%s does not exist", path);
    size_t off = 0;
    for (json_int_t n = json_integer_value(at); r == 0 && n > 0; n--) {
        const char *nl = off < t.len ? memchr(t.buf + off, '\n', t.len - off) : NULL;
        if (!nl && off >= t.len)
            r = sbx_err_set(err, EINVAL, "invalid_request", "%s has fewer than %lld lines", path,
                            (long long)json_integer_value(at));
        off = nl ? (size_t)(nl - t.buf) + 1 : t.len;
    }
    if (r == 0) {
        size_t nlen = strlen(new_s);
        bool need_nl = nlen && new_s[nlen - 1] != '\n';
        bool need_lead = off == t.len && t.len && t.buf[t.len - 1] != '\n';
        size_t len = t.len + nlen + need_nl + need_lead;
        _cleanup_free_ char *buf = sbx_xmalloc(len + 1);
        size_t o = 0;
        memcpy(buf, t.buf, off);
        o = off;
        if (need_lead)
            buf[o++] = '\n';
        memcpy(buf + o, new_s, nlen);
        o += nlen;
        if (need_nl)
            buf[o++] = '\n';
        memcpy(buf + o, t.buf + off, t.len - off);
        r = commit(root, path, &t, buf, len, out, err);
    }
    free(t.buf);
    return r;
}

int fileedit_run(int root, json_t *args, json_t **out, json_t **details, struct sbx_err *err)
{
    const char *path, *cmd;
    *out = NULL;
    *details = NULL;
    if (!json_is_object(args))
        return sbx_err_set(err, EINVAL, "invalid_request", "the arguments must be an object");
    if (get_string(args, "path", true, &path, err) < 0 ||
        get_string(args, "command", false, &cmd, err) < 0)
        return sbx_err_ret(err);
    path = fileedit_rel_path(path);
    bool is_view = cmd && !strcmp(cmd, "view");
    if (ws_path_check(path, is_view, err) < 0)
        return sbx_err_ret(err);
    if (!cmd) {
        const char *old_s, *new_s;
        bool all, create;
        if (get_string(args, "old_string", true, &old_s, err) < 0 ||
            get_string(args, "new_string", true, &new_s, err) < 0 ||
            get_bool(args, "replace_all", &all, err) < 0 ||
            get_bool(args, "create", &create, err) < 0)
            return sbx_err_ret(err);
        return replace(root, path, old_s, new_s, all, create, out, details, err);
    }
    if (is_view)
        return view(root, path, args, out, err);
    if (!strcmp(cmd, "create")) {
        const char *text;
        struct text t;
        if (get_string(args, "file_text", true, &text, err) < 0)
            return sbx_err_ret(err);
        int r = read_text(root, path, &t, err);
        if (r == 0 || !strcmp(err->code, "invalid_request")) {
            if (r < 0) { /* a binary file is replaced whole; its diff shows only the new text */
                free(t.buf);
                t.buf = NULL;
                t.len = 0;
            }
            sbx_err_clear(err);
            r = commit(root, path, &t, text, strlen(text), out, err);
        }
        free(t.buf);
        return r;
    }
    if (!strcmp(cmd, "str_replace")) {
        const char *old_s, *new_s;
        if (get_string(args, "old_str", true, &old_s, err) < 0 ||
            get_string(args, "new_str", false, &new_s, err) < 0)
            return sbx_err_ret(err);
        return replace(root, path, old_s, new_s ? new_s : "", false, false, out, details, err);
    }
    if (!strcmp(cmd, "insert"))
        return insert(root, path, args, out, err);
    return sbx_err_set(err, EINVAL, "invalid_request",
                       "command must be view, create, str_replace or insert");
}
