/* Facts about a sandbox that only some sandboxes have, kept beside its row: the agent's
 * boot id (restores are measured against it), the parent of a fork, why a sandbox got
 * another backend than the default. And the counts that pause, resume and fork check. */
#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

const char *const store_meta_schema =
    "CREATE TABLE IF NOT EXISTS sandbox_meta("
    "  sandbox_id TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL,"
    "  PRIMARY KEY(sandbox_id, name));";

int store_meta_set(struct store *s, const char *sandbox_id, const char *name, const char *value,
                   struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT INTO sandbox_meta(sandbox_id,name,value) VALUES(?,?,?) "
                          "ON CONFLICT(sandbox_id,name) DO UPDATE SET value=excluded.value",
                          &st, err, "ttt", sandbox_id, name, value);
    if (r < 0)
        return r;
    r = sqlite3_step(st) == SQLITE_DONE ? 0 : store_db_err(s, err, "set sandbox meta");
    sqlite3_finalize(st);
    return r;
}

int store_meta_get(struct store *s, const char *sandbox_id, const char *name, char *out,
                   size_t cap, struct sbx_err *err)
{
    sqlite3_stmt *st;
    out[0] = '\0';
    int r = store_prepare(s, "SELECT value FROM sandbox_meta WHERE sandbox_id=? AND name=?", &st,
                          err, "tt", sandbox_id, name);
    if (r < 0)
        return r;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        store_col_text(st, 0, out, cap);
    else if (rc == SQLITE_DONE)
        r = -ENOENT;
    else
        r = store_db_err(s, err, "get sandbox meta");
    sqlite3_finalize(st);
    return r;
}

int store_sandbox_counts(struct store *s, const char *user, const char *key_id,
                         struct store_sandbox_counts *out, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "SELECT coalesce(sum(status IN ('creating','running')),0),"
                          " coalesce(sum(status='paused'),0),"
                          " coalesce(sum(key_id=?2),0) FROM sandboxes"
                          " WHERE status IN ('creating','running','paused') AND user=?1",
                          &st, err, "tt", user, key_id);
    if (r < 0)
        return r;
    if (sqlite3_step(st) == SQLITE_ROW) {
        out->user_running = sqlite3_column_int64(st, 0);
        out->user_paused = sqlite3_column_int64(st, 1);
        out->key_active = sqlite3_column_int64(st, 2);
    } else {
        r = store_db_err(s, err, "count sandboxes");
    }
    sqlite3_finalize(st);
    return r;
}
