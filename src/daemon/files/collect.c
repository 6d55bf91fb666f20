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
#include "exportrd.h"

struct stage {
    struct sbxd *d;
    struct agentfs_stream *s;
    char sandbox_id[STORE_ID_MAX + 1];
    char name[64];   /* the staging directory's name in <data>/artifacts */
    char *dir;       /* ... and its path */
    int root;        /* its fd */
    artifacts_ready_fn cb;
    void *data;
    struct export_reader rd;
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

static int on_file(json_t *head, const char *path, void *data, struct sbx_err *err)
{
    struct stage *st = data;
    if (strncmp(path, ARTIFACTS_DIR "/", sizeof(ARTIFACTS_DIR)))
        return sbx_err_set(err, EPROTO, "internal", "the file helper sent a bad header");
    int r = ws_writer_open_any(st->root, path, 0644, &st->w, err);
    if (r == 0)
        st->open = true;
    return r;
}

static int on_bytes(const uint8_t *buf, size_t len, void *data, struct sbx_err *err)
{
    struct stage *st = data;
    return ws_writer_write(&st->w, buf, len, err) < 0 ? -EIO : 0;
}

static int on_end(void *data, struct sbx_err *err)
{
    struct stage *st = data;
    int r = ws_writer_commit(&st->w, false, err);
    ws_writer_close(&st->w);
    st->open = false;
    return r < 0 ? -EIO : 0;
}

static const struct export_reader_ops stage_reader = {
    .on_file = on_file, .on_bytes = on_bytes, .on_end = on_end};

static void stage_data(const uint8_t *buf, size_t len, void *data)
{
    struct stage *st = data;
    if (!st->err.code[0])
        (void)export_reader_feed(&st->rd, buf, len, &st->err);
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
    if (!err && !st->err.code[0] && !export_reader_complete(&st->rd))
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
    export_reader_init(&st->rd, &stage_reader, st);
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
