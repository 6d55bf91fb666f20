/* Volumes' rows and their mounts (store/volumes.h). */
#include "volumes.h"

#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

#define VOL_COLS "id,\"user\",name,size_mb,node_id,created_at"
/* A sandbox that still holds its mounts: store_sandbox_each_live's rule. */
#define LIVE_SANDBOX                                                                           \
    "(s.status IN ('creating','running','paused') OR (s.status='failed' AND s.ended_at=0))"

int store_volume_insert(struct store *s, const struct store_volume *v, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO volumes(" VOL_COLS ") VALUES(?,?,?,?,?,?)", "tttiti", v->id,
                     v->user, v->name, v->size_mb, v->node_id[0] ? v->node_id : s->node_id,
                     v->created_at);
    if (r < 0)
        return r;
    r = db_run(st, err);
    return r == -EEXIST ? sbx_err_set(err, EEXIST, "volume_exists",
                                      "you already have a volume named %s", v->name)
                        : r;
}

static void vol_row(struct db_stmt *st, struct store_volume *v)
{
    db_col_copy(st, 0, v->id, sizeof(v->id));
    db_col_copy(st, 1, v->user, sizeof(v->user));
    db_col_copy(st, 2, v->name, sizeof(v->name));
    v->size_mb = db_col_int64(st, 3);
    db_col_copy(st, 4, v->node_id, sizeof(v->node_id));
    v->created_at = db_col_int64(st, 5);
}

int store_volume_get(struct store *s, const char *user, const char *id_or_name,
                     struct store_volume *out, struct sbx_err *err)
{
    struct db_stmt *st;
    /* An id wins over a name: ids have a prefix names may share, never the same text in
     * one user's list (vol_ ids are random). */
    int r = db_query(s->conn, &st, err,
                     "SELECT " VOL_COLS " FROM volumes WHERE (?1 IS NULL OR \"user\"=?1) AND "
                     "(id=?2 OR name=?2) ORDER BY CASE WHEN id=?2 THEN 0 ELSE 1 END LIMIT 1",
                     "tt", user, id_or_name);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_ROW)
        vol_row(st, out);
    else if (r == DB_DONE)
        r = sbx_err_set(err, ENOENT, "volume_not_found", "no volume %.64s", id_or_name);
    db_finalize(st);
    return r < 0 ? r : 0;
}

int store_volume_each(struct store *s, const char *user, store_volume_cb cb, void *data,
                      struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT " VOL_COLS " FROM volumes WHERE (?1 IS NULL OR \"user\"=?1) "
                     "ORDER BY created_at, id",
                     "t", user);
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_volume v = {0};
        vol_row(st, &v);
        cb(&v, data);
    }
    db_finalize(st);
    return r;
}

static int count_mounted(struct store *s, const char *volume_id, long long *n,
                         struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT count(*) FROM volume_mounts m JOIN sandboxes s ON s.id=m.sandbox_id "
                     "WHERE m.volume_id=? AND " LIVE_SANDBOX,
                     "t", volume_id);
    if (r < 0)
        return r;
    if ((r = db_step(st, err)) == DB_ROW)
        *n = db_col_int64(st, 0);
    db_finalize(st);
    return r < 0 ? r : 0;
}

int store_volume_delete(struct store *s, const char *id, struct sbx_err *err)
{
    int r = db_tx_begin(s->conn, DB_TX_LOCKED, err);
    if (r < 0)
        return r;
    long long n = 0;
    struct db_stmt *st;
    if ((r = count_mounted(s, id, &n, err)) == 0 && n > 0)
        r = sbx_err_set(err, EBUSY, "volume_in_use",
                        "volume %s is mounted in %lld sandbox(es): delete them first", id, n);
    if (r == 0 && (r = db_query(s->conn, &st, err, "DELETE FROM volumes WHERE id=?", "t", id)) == 0)
        r = db_run(st, err);
    if (r < 0) {
        (void)db_tx_end(s->conn, false, NULL);
        return r;
    }
    return db_tx_end(s->conn, true, err);
}

int store_volume_mount_add(struct store *s, const struct store_volume_mount *m,
                           struct sbx_err *err)
{
    struct db_stmt *st;
    long long changed = 0;
    /* Only while the volume exists: a delete between the check and here loses. */
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO volume_mounts(sandbox_id,volume_id,path,read_only) "
                     "SELECT ?1,?2,?3,?4 WHERE EXISTS (SELECT 1 FROM volumes WHERE id=?2)",
                     "ttti", m->sandbox_id, m->volume_id, m->path, (long long)m->read_only);
    if (r < 0)
        return r;
    if ((r = db_run_changes(st, &changed, err)) < 0)
        return r;
    return changed ? 0
                   : sbx_err_set(err, ENOENT, "volume_not_found", "volume %s is gone",
                                 m->volume_id);
}

static int each_mount(struct db_stmt *st, store_volume_mount_cb cb, void *data,
                      struct sbx_err *err)
{
    int r;
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_volume_mount m = {0};
        db_col_copy(st, 0, m.sandbox_id, sizeof(m.sandbox_id));
        db_col_copy(st, 1, m.volume_id, sizeof(m.volume_id));
        db_col_copy(st, 2, m.path, sizeof(m.path));
        m.read_only = db_col_int64(st, 3) != 0;
        cb(&m, data);
    }
    db_finalize(st);
    return r;
}

int store_volume_mounts_of(struct store *s, const char *sandbox_id, store_volume_mount_cb cb,
                           void *data, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT sandbox_id,volume_id,path,read_only FROM volume_mounts "
                     "WHERE sandbox_id=? ORDER BY path",
                     "t", sandbox_id);
    return r < 0 ? r : each_mount(st, cb, data, err);
}

int store_volume_mounted_in(struct store *s, const char *volume_id, store_volume_mount_cb cb,
                            void *data, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT m.sandbox_id,m.volume_id,m.path,m.read_only FROM volume_mounts m "
                     "JOIN sandboxes s ON s.id=m.sandbox_id WHERE m.volume_id=? AND " LIVE_SANDBOX
                     " ORDER BY m.sandbox_id, m.path",
                     "t", volume_id);
    return r < 0 ? r : each_mount(st, cb, data, err);
}

int store_volume_mounts_copy(struct store *s, const char *from, const char *to,
                             struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO volume_mounts(sandbox_id,volume_id,path,read_only) "
                     "SELECT ?2,volume_id,path,read_only FROM volume_mounts WHERE sandbox_id=?1",
                     "tt", from, to);
    return r < 0 ? r : db_run(st, err);
}
