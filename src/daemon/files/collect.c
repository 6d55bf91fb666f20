#include "collect.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/text.h"
#include "../../common/util.h"
#include "../sandbox/manager.h"
#include "../sbxd.h"
#include "agentfs.h"
#include "agentws.h"

enum stage_state { S_HEAD, S_LEN, S_DATA };

struct stage {
    struct sbxd *d;
    struct agentfs_stream *s;
    char sandbox_id[STORE_ID_MAX + 1];
    char name[64];   /* the staging directory's name in <data>/artifacts */
    char *dir;       /* ... and its path */
    int root;        /* its fd */
    artifacts_ready_fn cb;
    void *data;
    enum stage_state state;
    char head[COLLECT_HEAD_MAX];
    size_t head_len;
    uint64_t left; /* S_LEN: hex digits read; S_DATA: bytes of the chunk still to come */
    bool open;
    struct ws_writer w;
    struct sbx_err err; /* the first failure of the stream's parsing or writing */
};

static void stage_free(struct stage *st)
{
    struct sbx_err err = {0};
    if (st->open)
        ws_writer_close(&st->w);
    _cleanup_free_ char *top = sbx_xasprintf("%s/artifacts", st->d->cfg.data_dir);
    _cleanup_close_ int root = -1;
    /* The staged copies are in the store now (or not wanted). */
    if (ws_open_root(top, &root, &err) == 0)
        (void)ws_remove(root, st->name, &err);
    if (st->root >= 0)
        close(st->root);
    free(st->dir);
    free(st);
}

static int head_done(struct stage *st, struct sbx_err *err)
{
    st->head[st->head_len] = '\0';
    st->head_len = 0;
    json_t *h = json_loads(st->head, 0, NULL);
    const char *path = json_string_value(json_object_get(h, "path"));
    int r;
    if (!path || strncmp(path, ARTIFACTS_DIR "/", sizeof(ARTIFACTS_DIR)) ||
        ws_path_check(path, false, err) < 0)
        r = sbx_err_set(err, EPROTO, "internal", "the file helper sent a bad header");
    else
        r = ws_writer_open(st->root, path, 0644, &st->w, err);
    json_decref(h);
    if (r == 0)
        st->open = true;
    return r;
}

static int file_done(struct stage *st, struct sbx_err *err)
{
    int r = ws_writer_commit(&st->w, false, err);
    ws_writer_close(&st->w);
    st->open = false;
    return r;
}

static int feed(struct stage *st, const uint8_t *buf, size_t len, struct sbx_err *err)
{
    size_t i = 0;
    while (i < len) {
        if (st->state == S_HEAD) {
            char ch = (char)buf[i++];
            if (ch != '\n') {
                if (st->head_len + 1 >= sizeof(st->head))
                    return sbx_err_set(err, EPROTO, "internal", "a header line is too long");
                st->head[st->head_len++] = ch;
                continue;
            }
            if (head_done(st, err) < 0)
                return -EPROTO;
            st->state = S_LEN;
        } else if (st->state == S_LEN) {
            st->head[st->head_len++] = (char)buf[i++];
            if (st->head_len < 8)
                continue;
            st->head[8] = '\0';
            st->head_len = 0;
            char *end;
            st->left = strtoull(st->head, &end, 16);
            if (*end)
                return sbx_err_set(err, EPROTO, "internal", "a chunk length is not hex");
            if (st->left == 0) {
                if (file_done(st, err) < 0)
                    return -EIO;
                st->state = S_HEAD;
            } else {
                st->state = S_DATA;
            }
        } else {
            size_t n = len - i < st->left ? len - i : (size_t)st->left;
            if (ws_writer_write(&st->w, buf + i, n, err) < 0)
                return -EIO;
            i += n;
            st->left -= n;
            if (!st->left)
                st->state = S_LEN;
        }
    }
    return 0;
}

static void stage_data(const uint8_t *buf, size_t len, void *data)
{
    struct stage *st = data;
    if (!st->err.code[0])
        (void)feed(st, buf, len, &st->err);
    agentfs_stream_credit(st->s, len);
}

static void staged_ready(json_t *artifacts, const struct sbx_err *err, void *data)
{
    struct stage *st = data;
    st->cb(artifacts, err, st->data);
    stage_free(st);
}

static void stage_done(const struct sbx_err *err, void *data)
{
    struct stage *st = data;
    st->s = NULL;
    if (!err && !st->err.code[0] && (st->state != S_HEAD || st->head_len))
        sbx_err_set(&st->err, EPROTO, "internal", "the file helper's export ended midway");
    if (!err && st->err.code[0])
        err = &st->err;
    if (err) {
        st->cb(NULL, err, st->data);
        stage_free(st);
        return;
    }
    artifacts_collect_async(st->d->artifacts, st->d->jobs, st->dir, st->sandbox_id, staged_ready,
                            st);
}

static const struct agentfs_stream_ops stage_ops = {
    .on_data = stage_data,
    .on_done = stage_done,
};

void files_collect_artifacts(struct sbxd *d, struct sandbox *sb, artifacts_ready_fn cb,
                             void *data)
{
    struct sbx_err err = {0};
    if (!sandbox_workspace_remote(sb)) {
        artifacts_collect_async(d->artifacts, d->jobs, sb->workspace, sb->rec.id, cb, data);
        return;
    }
    struct stage *st = sbx_xcalloc(1, sizeof(*st));
    st->d = d;
    st->root = -1;
    st->w.dir = st->w.fd = -1;
    st->cb = cb;
    st->data = data;
    snprintf(st->sandbox_id, sizeof(st->sandbox_id), "%s", sb->rec.id);
    sbx_random_id(ARTIFACTS_STAGE_PREFIX, 8, st->name, sizeof(st->name));
    st->dir = sbx_xasprintf("%s/artifacts/%s", d->cfg.data_dir, st->name);
    int r = sbx_mkdir_p(st->dir, 0700);
    if (r < 0)
        sbx_err_sys(&err, -r, "creating %s", st->dir);
    else
        r = ws_open_root(st->dir, &st->root, &err);
    if (r == 0)
        r = agentfs_stream_start(
            sb,
            json_pack("{s:s,s:s,s:s,s:i,s:I}", "op", "export", "root", AGENTWS_ROOT, "path",
                      ARTIFACTS_DIR, "max", ARTIFACTS_MAX, "bytes",
                      (json_int_t)COLLECT_REMOTE_BYTES_MAX),
            false, &stage_ops, st, &st->s, &err);
    if (r < 0) {
        cb(NULL, &err, data);
        stage_free(st);
    }
}
