/* envd's filesystem.Filesystem service on the host side of the workspace (files/workspace.c:
 * every path is resolved beneath the workspace fd, as for /v1/.../files). E2B's home
 * /home/user is the workspace; other absolute paths are refused (invalid_argument). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../files/workspace.h"
#include "../http/server.h"
#include "../sbxd.h"
#include "e2b.h"
#include "e2b_connect.h"
#include "envd.h"

#define FS_LIST_MAX 10000
#define FS_DEPTH_MAX 16

/* The workspace-relative path of msg[key], with the workspace's fd. */
static int fs_path(const struct envd_ctx *c, json_t *msg, const char *key, char *rel, size_t cap,
                   int *root, struct sbx_err *err)
{
    const char *p = json_string_value(json_object_get(msg, key));
    if (!p || !*p)
        return sbx_err_set(err, EINVAL, "invalid_request", "%s is required", key);
    int r = e2b_path_to_ws(p, rel, cap, err);
    if (r < 0)
        return r;
    return *root >= 0 ? 0 : ws_open_root(c->sb->workspace, root, err);
}

static json_t *stat_entry(int root, const char *rel, struct sbx_err *err)
{
    struct stat st;
    char target[WS_PATH_MAX + 1];
    if (ws_lstat(root, rel, &st, target, sizeof(target), err) < 0)
        return NULL;
    return e2b_entry_json(rel, &st, target);
}

struct list_ctx {
    json_t *entries;
    size_t base_depth;
    unsigned depth;
};

static unsigned depth_of(const char *p)
{
    unsigned n = *p ? 1 : 0;
    for (; *p; p++)
        n += *p == '/';
    return n;
}

static int list_one(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    struct list_ctx *l = data;
    if (depth_of(e->path) - l->base_depth > l->depth)
        return 0;
    char target[WS_PATH_MAX + 1] = "";
    if (e->type == WS_SYMLINK) {
        ssize_t n = readlinkat(e->dir, e->name, target, sizeof(target) - 1);
        target[n > 0 ? n : 0] = '\0';
    }
    json_array_append_new(l->entries, e2b_entry_json(e->path, e->st, target));
    return 0;
}

static int fs_list(int root, const char *rel, json_t *msg, json_t **out, struct sbx_err *err)
{
    json_t *d = json_object_get(msg, "depth");
    long long depth = json_is_integer(d) ? json_integer_value(d) : 1;
    if (depth < 1)
        depth = 1;
    if (depth > FS_DEPTH_MAX)
        depth = FS_DEPTH_MAX;
    struct stat st;
    if (ws_lstat(root, rel, &st, NULL, 0, err) < 0)
        return -ENOENT;
    if (!S_ISDIR(st.st_mode))
        return sbx_err_set(err, ENOTDIR, "invalid_request", "path is not a directory");
    struct list_ctx l = {
        .entries = json_array(), .base_depth = depth_of(rel), .depth = (unsigned)depth};
    bool truncated;
    if (ws_walk(root, rel, depth > 1, FS_LIST_MAX, list_one, &l, &truncated, err) < 0) {
        json_decref(l.entries);
        return -EIO;
    }
    *out = json_pack("{s:o}", "entries", l.entries);
    return 0;
}

void envd_fs(const struct envd_ctx *c, const char *method)
{
    struct sbx_err err = {0};
    json_t *msg = NULL, *answer = NULL;
    char rel[WS_PATH_MAX + 1], to[WS_PATH_MAX + 1];
    _cleanup_close_ int root = -1;
    if (!strcmp(method, "WatchDir")) {
        if (rpc_read(c->req, true, &msg, &err) < 0) {
            /* The SDK reads a stream call's errors from its end-stream message. */
            struct rpc_stream *s =
                rpc_stream_begin(c->req, c->d->loop, false, json_object(), NULL, NULL);
            rpc_stream_end(s, rpc_code(&err), err.msg);
            return;
        }
        envd_watch(c, msg);
        json_decref(msg);
        return;
    }
    if (!strcmp(method, "CreateWatcher") || !strcmp(method, "GetWatcherEvents") ||
        !strcmp(method, "RemoveWatcher")) {
        rpc_reply_error(c->req, "unimplemented", "polled watchers are not supported by sbx");
        return;
    }
    if (rpc_read(c->req, false, &msg, &err) < 0)
        goto fail;
    bool created;
    if (!strcmp(method, "Stat")) {
        json_t *e;
        if (fs_path(c, msg, "path", rel, sizeof(rel), &root, &err) < 0 ||
            !(e = stat_entry(root, rel, &err)))
            goto fail;
        answer = json_pack("{s:o}", "entry", e);
    } else if (!strcmp(method, "ListDir")) {
        if (fs_path(c, msg, "path", rel, sizeof(rel), &root, &err) < 0 ||
            fs_list(root, rel, msg, &answer, &err) < 0)
            goto fail;
    } else if (!strcmp(method, "MakeDir")) {
        json_t *e;
        if (fs_path(c, msg, "path", rel, sizeof(rel), &root, &err) < 0 ||
            ws_mkdirs(root, rel, &created, &err) < 0)
            goto fail;
        if (!created) {
            sbx_err_set(&err, EEXIST, "dir_exists", "directory %.200s already exists",
                        json_string_value(json_object_get(msg, "path")));
            goto fail;
        }
        if (!(e = stat_entry(root, rel, &err)))
            goto fail;
        answer = json_pack("{s:o}", "entry", e);
    } else if (!strcmp(method, "Move")) {
        json_t *e;
        if (fs_path(c, msg, "source", rel, sizeof(rel), &root, &err) < 0 ||
            fs_path(c, msg, "destination", to, sizeof(to), &root, &err) < 0 ||
            ws_rename(root, rel, to, &err) < 0 || !(e = stat_entry(root, to, &err)))
            goto fail;
        answer = json_pack("{s:o}", "entry", e);
    } else if (!strcmp(method, "Remove")) {
        if (fs_path(c, msg, "path", rel, sizeof(rel), &root, &err) < 0)
            goto fail;
        /* envd removes with os.RemoveAll: a missing path is no error. */
        if (ws_remove(root, rel, &err) < 0 && strcmp(err.code, "file_not_found"))
            goto fail;
        answer = json_object();
    } else {
        sbx_err_set(&err, ENOSYS, "unimplemented", "no such method of filesystem.Filesystem");
        goto fail;
    }
    json_decref(msg);
    rpc_reply(c->req, answer);
    return;
fail:
    json_decref(msg);
    rpc_reply_sbx_error(c->req, &err);
}
