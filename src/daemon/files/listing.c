#include "listing.h"

#include <errno.h>
#include <string.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../http/server.h"

/* {path, type, size, mode, mtime}: an entry of a listing, and the core of a stat. */
static json_t *entry_json(const char *path, enum ws_type type, uint64_t size, mode_t mode,
                          int64_t mtime)
{
    char m[8];
    snprintf(m, sizeof(m), "%04o", (unsigned)(mode & 07777));
    json_t *o = json_object();
    files_path_set(o, path);
    json_t *rest = json_pack("{s:s,s:I,s:s,s:I}", "type", ws_type_name(type), "size",
                             (json_int_t)size, "mode", m, "mtime", (json_int_t)mtime);
    json_object_update(o, rest);
    json_decref(rest);
    return o;
}

void files_path_set(json_t *obj, const char *path)
{
    size_t n = strlen(path);
    if (sbx_utf8_valid(path, n)) {
        json_object_set_new(obj, "path", json_string(path));
        return;
    }
    _cleanup_free_ char *shown = sbx_utf8_lossy(path, n);
    _cleanup_free_ char *raw = sbx_base64_encode(path, n);
    json_object_set_new(obj, "path", json_string(shown));
    json_object_set_new(obj, "path_base64", json_string(raw));
}

int files_list_entry(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    json_array_append_new(data, entry_json(e->path, e->type, e->size, e->mode, e->mtime));
    return 0;
}

json_t *files_stat_json(const char *path, const struct stat *st, const char *target)
{
    enum ws_type type = ws_type_of(st->st_mode);
    json_t *j = json_pack("{s:s}", "object", "file"),
           *e = entry_json(path, type, (uint64_t)st->st_size, st->st_mode, (int64_t)st->st_mtime);
    json_object_update(j, e);
    json_decref(e);
    if (type == WS_SYMLINK)
        json_object_set_new(j, "target", json_string(target));
    return j;
}

int files_parse_bool(const char *v, bool *out)
{
    if (!v || !strcmp(v, "false") || !strcmp(v, "0") || !*v)
        *out = false;
    else if (!strcmp(v, "true") || !strcmp(v, "1"))
        *out = true;
    else
        return -EINVAL;
    return 0;
}

int files_list_query(struct http_req *req, const char **path, bool *recursive)
{
    *path = http_req_query(req, "path");
    if (!*path)
        *path = "";
    if (files_parse_bool(http_req_query(req, "recursive"), recursive) < 0) {
        http_respond_errorf(req, "invalid_request", "recursive must be true or false");
        return -1;
    }
    return 0;
}

void files_list_answer(struct http_req *req, int root, const char *path, bool recursive)
{
    struct sbx_err err = {0};
    bool truncated = false;
    json_t *list = json_array();
    if (ws_walk(root, path, recursive, FILES_LIST_MAX, files_list_entry, list, &truncated,
                &err) < 0) {
        json_decref(list);
        http_respond_error(req, &err);
        return;
    }
    http_respond_json(req, 200,
                      json_pack("{s:s,s:s,s:b,s:o,s:b}", "object", "list", "path", path,
                                "recursive", recursive, "data", list, "truncated", truncated));
}
