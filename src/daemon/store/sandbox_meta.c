/* Facts about a sandbox that only some sandboxes have, kept beside its row: the agent's
 * boot id (restores are measured against it), the parent of a fork, why a sandbox got
 * another backend than the default. And the counts that pause, resume and fork check. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

int store_meta_set(struct store *s, const char *sandbox_id, const char *name, const char *value,
                   struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO sandbox_meta(sandbox_id,name,value) VALUES(?,?,?) "
                     "ON CONFLICT(sandbox_id,name) DO UPDATE SET value=excluded.value",
                     "ttt", sandbox_id, name, value);
    return r < 0 ? r : db_run(st, err);
}

int store_meta_get(struct store *s, const char *sandbox_id, const char *name, char *out, size_t cap,
                   struct sbx_err *err)
{
    struct db_stmt *st;
    out[0] = '\0';
    int r =
        db_query(s->conn, &st, err, "SELECT value FROM sandbox_meta WHERE sandbox_id=? AND name=?",
                 "tt", sandbox_id, name);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_ROW)
        db_col_copy(st, 0, out, cap);
    db_finalize(st);
    return r == DB_DONE ? -ENOENT : r < 0 ? r : 0;
}

int store_meta_each_running(struct store *s, const char *name, store_meta_cb cb, void *data,
                            struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT m.sandbox_id, m.value FROM sandbox_meta m JOIN sandboxes s "
                     "ON s.id=m.sandbox_id WHERE m.name=? AND s.status='running'",
                     "t", name);
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW)
        cb(db_col_text(st, 0), db_col_text(st, 1), data);
    db_finalize(st);
    return r < 0 ? r : 0;
}

int store_sandbox_counts(struct store *s, const char *user, const char *key_id,
                         struct store_sandbox_counts *out, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT coalesce(sum(CASE WHEN status IN ('creating','running') THEN 1 "
                     "ELSE 0 END),0),"
                     " coalesce(sum(CASE WHEN status='paused' THEN 1 ELSE 0 END),0),"
                     " coalesce(sum(CASE WHEN key_id=?2 THEN 1 ELSE 0 END),0) FROM sandboxes"
                     " WHERE status IN ('creating','running','paused') AND \"user\"=?1",
                     "tt", user, key_id);
    if (r < 0)
        return r;
    if ((r = db_step(st, err)) == DB_ROW) {
        out->user_running = db_col_int64(st, 0);
        out->user_paused = db_col_int64(st, 1);
        out->key_active = db_col_int64(st, 2);
    }
    db_finalize(st);
    return r < 0 ? r : 0;
}
