/* Exec records: every command run through the API has a row, so its result outlives
 * the request that started it and a restart never makes one vanish. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

int store_exec_insert(struct store *s, const char *id, const char *sandbox_id, const char *user,
                      long long started_at_ms, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO execs(id,sandbox_id,\"user\",status,started_at_ms) "
                     "VALUES(?,?,?,'running',?)",
                     "ttti", id, sandbox_id, user, started_at_ms);
    return r < 0 ? r : db_run(st, err);
}

int store_exec_finish(struct store *s, const char *id, const char *status, const char *result_json,
                      long long ended_at_ms, struct sbx_err *err)
{
    struct db_stmt *st;
    int r =
        db_query(s->conn, &st, err, "UPDATE execs SET status=?, result=?, ended_at_ms=? WHERE id=?",
                 "ttit", status, result_json, ended_at_ms, id);
    return r < 0 ? r : db_run(st, err);
}

int store_exec_get(struct store *s, const char *sandbox_id, const char *id, const char *user,
                   struct store_exec *out, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT id,sandbox_id,status,started_at_ms,ended_at_ms,result FROM execs "
                     "WHERE id=? AND sandbox_id=? AND \"user\"=?",
                     "ttt", id, sandbox_id, user);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_ROW) {
        memset(out, 0, sizeof(*out));
        db_col_copy(st, 0, out->id, sizeof(out->id));
        db_col_copy(st, 1, out->sandbox_id, sizeof(out->sandbox_id));
        db_col_copy(st, 2, out->status, sizeof(out->status));
        out->started_at_ms = db_col_int64(st, 3);
        out->ended_at_ms = db_col_int64(st, 4);
        out->result_json = db_col_dup(st, 5);
    } else if (r == DB_DONE) {
        r = sbx_err_set(err, ENOENT, "exec_not_found", "no exec %s in sandbox %s", id, sandbox_id);
    }
    db_finalize(st);
    return r < 0 ? r : 0;
}

int store_exec_interrupt_running(struct store *s, long long now_ms, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "UPDATE execs SET status='interrupted', ended_at_ms=? "
                     "WHERE status='running' AND sandbox_id IN "
                     "(SELECT id FROM sandboxes WHERE node_id=? OR node_id IS NULL)",
                     "it", now_ms, s->node_id);
    return r < 0 ? r : db_run(st, err);
}

int store_exec_prune(struct store *s, const struct store_prune *p, long long *removed,
                     struct sbx_err *err)
{
    struct db_stmt *st;
    /* By count: all but the newest keep rows by start, running or not, are candidates. */
    int r = db_query(s->conn, &st, err,
                     "DELETE FROM execs WHERE id IN (SELECT id FROM execs "
                     "WHERE status != 'running' AND (ended_at_ms < ?1 OR (?2 > 0 AND id NOT IN "
                     "(SELECT id FROM execs ORDER BY started_at_ms DESC, id DESC LIMIT ?2))) "
                     "LIMIT ?3)",
                     "iii", p->before_ms, p->keep, (long long)p->batch);
    return r < 0 ? r : db_run_changes(st, removed, err);
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
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT generation, fingerprint FROM workspace_gen WHERE sandbox_id=?", "t",
                     sandbox_id);
    if (r < 0)
        return r;
    *generation = 0;
    fingerprint[0] = '\0';
    if ((r = db_step(st, err)) == DB_ROW) {
        *generation = db_col_int64(st, 0);
        db_col_copy(st, 1, fingerprint, 65);
    }
    db_finalize(st);
    return r < 0 ? r : 0;
}

int store_ws_set(struct store *s, const char *sandbox_id, long long generation,
                 const char *fingerprint, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO workspace_gen(sandbox_id,generation,fingerprint) VALUES(?,?,?) "
                     "ON CONFLICT(sandbox_id) DO UPDATE SET generation=excluded.generation, "
                     "fingerprint=excluded.fingerprint",
                     "tit", sandbox_id, generation, fingerprint);
    return r < 0 ? r : db_run(st, err);
}
