/* Exec records: every command run through the API has a row, so its result outlives
 * the request that started it and a restart never makes one vanish. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

const char *const store_exec_schema =
    "CREATE TABLE IF NOT EXISTS execs("
    "  id TEXT PRIMARY KEY, sandbox_id TEXT NOT NULL, user TEXT NOT NULL,"
    "  status TEXT NOT NULL, started_at_ms INTEGER NOT NULL, ended_at_ms INTEGER,"
    "  result TEXT);"
    "CREATE INDEX IF NOT EXISTS execs_running ON execs(status);"
    "CREATE INDEX IF NOT EXISTS execs_ended ON execs(ended_at_ms);"
    "CREATE TABLE IF NOT EXISTS workspace_gen("
    "  sandbox_id TEXT PRIMARY KEY, generation INTEGER NOT NULL, fingerprint TEXT NOT NULL);";

int store_exec_insert(struct store *s, const char *id, const char *sandbox_id, const char *user,
                      long long started_at_ms, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT INTO execs(id,sandbox_id,user,status,started_at_ms) "
                          "VALUES(?,?,?,'running',?)",
                          &st, err, "ttti", id, sandbox_id, user, started_at_ms);
    return r < 0 ? r : store_step_done(s, st, err, "insert exec");
}

int store_exec_finish(struct store *s, const char *id, const char *status, const char *result_json,
                      long long ended_at_ms, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "UPDATE execs SET status=?, result=?, ended_at_ms=? WHERE id=?", &st,
                          err, "ttit", status, result_json, ended_at_ms, id);
    return r < 0 ? r : store_step_done(s, st, err, "finish exec");
}

int store_exec_get(struct store *s, const char *sandbox_id, const char *id, const char *user,
                   struct store_exec *out, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "SELECT id,sandbox_id,status,started_at_ms,ended_at_ms,result FROM execs "
                          "WHERE id=? AND sandbox_id=? AND user=?",
                          &st, err, "ttt", id, sandbox_id, user);
    if (r < 0)
        return r;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        memset(out, 0, sizeof(*out));
        store_col_text(st, 0, out->id, sizeof(out->id));
        store_col_text(st, 1, out->sandbox_id, sizeof(out->sandbox_id));
        store_col_text(st, 2, out->status, sizeof(out->status));
        out->started_at_ms = sqlite3_column_int64(st, 3);
        out->ended_at_ms = sqlite3_column_int64(st, 4);
        const unsigned char *res = sqlite3_column_text(st, 5);
        out->result_json = res ? sbx_xstrdup((const char *)res) : NULL;
    } else if (rc == SQLITE_DONE) {
        r = sbx_err_set(err, ENOENT, "exec_not_found", "no exec %s in sandbox %s", id, sandbox_id);
    } else {
        r = store_db_err(s, err, "get exec");
    }
    sqlite3_finalize(st);
    return r;
}

int store_exec_interrupt_running(struct store *s, long long now_ms, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "UPDATE execs SET status='interrupted', ended_at_ms=? "
                          "WHERE status='running'",
                          &st, err, "i", now_ms);
    return r < 0 ? r : store_step_done(s, st, err, "interrupt execs");
}

int store_exec_prune(struct store *s, const struct store_prune *p, long long *removed,
                     struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "DELETE FROM execs WHERE rowid IN (SELECT rowid FROM execs "
                          "WHERE status != 'running' AND (ended_at_ms < ?1 OR (?2 > 0 AND "
                          "rowid <= (SELECT max(rowid) FROM execs) - ?2)) LIMIT ?3)",
                          &st, err, "iii", p->before_ms, p->keep, (long long)p->batch);
    if (r < 0 || (r = store_step_done(s, st, err, "prune execs")) < 0)
        return r;
    *removed = sqlite3_changes(s->db);
    return 0;
}

void store_exec_clear(struct store_exec *e)
{
    if (!e)
        return;
    free(e->result_json);
    memset(e, 0, sizeof(*e));
}

int store_ws_get(struct store *s, const char *sandbox_id, long long *generation,
                 char fingerprint[65], struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "SELECT generation, fingerprint FROM workspace_gen WHERE sandbox_id=?",
                          &st, err, "t", sandbox_id);
    if (r < 0)
        return r;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        *generation = sqlite3_column_int64(st, 0);
        store_col_text(st, 1, fingerprint, 65);
    } else if (rc == SQLITE_DONE) {
        *generation = 0;
        fingerprint[0] = '\0';
    } else {
        r = store_db_err(s, err, "read workspace generation");
    }
    sqlite3_finalize(st);
    return r;
}

int store_ws_set(struct store *s, const char *sandbox_id, long long generation,
                 const char *fingerprint, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT OR REPLACE INTO workspace_gen(sandbox_id,generation,fingerprint) "
                          "VALUES(?,?,?)",
                          &st, err, "tit", sandbox_id, generation, fingerprint);
    return r < 0 ? r : store_step_done(s, st, err, "save workspace generation");
}
