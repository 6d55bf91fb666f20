/* envd's filesystem.Filesystem service. Stat, ListDir, MakeDir, Move and Remove run inside
 * the sandbox as the request's user (agentfs.c), on any path that user can reach, with the
 * user's own permission errors; WatchDir watches the workspace from the host (e2b_watch.c). */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "../../common/util.h"
#include "../files/agentfs.h"
#include "../http/server.h"
#include "../sbxd.h"
#include "e2b.h"
#include "e2b_connect.h"
#include "envd.h"

#define FS_DEPTH_MAX 16

/* envd's EntryInfo of one helper entry [path, mode, size, mtime_ns, uid, gid, target]. */
static json_t *agentfs_entry(json_t *row)
{
    struct stat st = {0};
    st.st_mode = (mode_t)json_integer_value(json_array_get(row, 1));
    st.st_size = (off_t)json_integer_value(json_array_get(row, 2));
    long long ns = json_integer_value(json_array_get(row, 3));
    st.st_mtim.tv_sec = (time_t)(ns / 1000000000);
    st.st_mtim.tv_nsec = (long)(ns % 1000000000);
    long long uid = json_integer_value(json_array_get(row, 4));
    char owner[24];
    snprintf(owner, sizeof(owner), "%s", uid == 0 ? "root" : uid == 1000 ? "user" : "");
    if (!*owner)
        snprintf(owner, sizeof(owner), "%lld", uid);
    return e2b_entry_at(json_string_value(json_array_get(row, 0)) ?: "", &st,
                        json_string_value(json_array_get(row, 6)), owner);
}

struct fscall {
    struct http_req *req;
    struct agentfs *f;
    char method[16];
};

static void fs_done(json_t *ok, const uint8_t *raw, size_t len, const struct sbx_err *err,
                    void *data)
{
    struct fscall *x = data;
    json_t *answer = NULL;
    if (err) {
        rpc_reply_sbx_error(x->req, err);
    } else if (!strcmp(x->method, "ListDir")) {
        answer = json_pack("{s:[]}", "entries");
        size_t i;
        json_t *row;
        json_array_foreach(ok, i, row)
            json_array_append_new(json_object_get(answer, "entries"), agentfs_entry(row));
    } else if (!strcmp(x->method, "Remove")) {
        answer = json_object();
    } else {
        answer = json_pack("{s:o}", "entry", agentfs_entry(ok));
    }
    if (answer)
        rpc_reply(x->req, answer);
    free(x);
}

static void fs_gone(struct http_req *req, void *data)
{
    struct fscall *x = data;
    agentfs_cancel(x->f);
    free(x);
}

/* The helper's request for method and the RPC's message. */
static int fs_request(const char *method, json_t *msg, json_t **out, struct sbx_err *err)
{
    static const struct {
        const char *method, *op;
    } ops[] = {{"Stat", "stat"},   {"ListDir", "list"}, {"MakeDir", "mkdir"},
               {"Move", "move"},   {"Remove", "remove"}};
    const char *op = NULL;
    for (size_t i = 0; i < SBX_ARRAY_SIZE(ops); i++)
        if (!strcmp(method, ops[i].method))
            op = ops[i].op;
    if (!op)
        return sbx_err_set(err, ENOSYS, "unimplemented", "no such method of filesystem.Filesystem");
    bool move = !strcmp(op, "move");
    const char *path = json_string_value(json_object_get(msg, move ? "source" : "path"));
    const char *to = json_string_value(json_object_get(msg, "destination"));
    if (!path || !*path || (move && (!to || !*to)))
        return sbx_err_set(err, EINVAL, "invalid_request", "%s is required",
                           move ? "source and destination" : "path");
    if (strlen(path) > 4096 || (to && strlen(to) > 4096))
        return sbx_err_set(err, ENAMETOOLONG, "invalid_path", "the path is too long");
    *out = json_pack("{s:s,s:s}", "op", op, "path", path);
    if (move)
        json_object_set_new(*out, "to", json_string(to));
    if (!strcmp(op, "list")) {
        json_t *d = json_object_get(msg, "depth");
        long long depth = json_is_integer(d) ? json_integer_value(d) : 1;
        json_object_set_new(*out, "depth",
                            json_integer(depth < 1 ? 1 : depth > FS_DEPTH_MAX ? FS_DEPTH_MAX : depth));
    }
    return 0;
}

void envd_fs(const struct envd_ctx *c, const char *method)
{
    struct sbx_err err = {0};
    json_t *msg = NULL, *req = NULL;
    const char *user;
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
    if (rpc_read(c->req, false, &msg, &err) < 0 || fs_request(method, msg, &req, &err) < 0 ||
        e2b_user(c->req, c->sb, &user, &err) < 0)
        goto fail;
    json_decref(msg);
    struct fscall *x = sbx_xcalloc(1, sizeof(*x));
    x->req = c->req;
    snprintf(x->method, sizeof(x->method), "%s", method);
    if (agentfs_start(c->sb, user, TAKE_PTR(req), fs_done, x, &x->f, &err) < 0) {
        free(x);
        rpc_reply_sbx_error(c->req, &err);
        return;
    }
    http_req_suspend(c->req, fs_gone, x);
    return;
fail:
    json_decref(msg);
    json_decref(req);
    rpc_reply_sbx_error(c->req, &err);
}
