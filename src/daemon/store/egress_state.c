/* Egress: each sandbox's policy (so it survives restarts and forks can copy it) and the
 * log of every connection its proxy saw. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

const char *const store_egress_schema =
    "CREATE TABLE IF NOT EXISTS egress_policies("
    "  sandbox_id TEXT PRIMARY KEY, policy TEXT NOT NULL, updated_at INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS egress_log("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT, sandbox_id TEXT NOT NULL, method TEXT NOT NULL,"
    "  host TEXT NOT NULL, address TEXT, port INTEGER NOT NULL, bytes_up INTEGER NOT NULL,"
    "  bytes_down INTEGER NOT NULL, started_at_ms INTEGER NOT NULL, ended_at_ms INTEGER,"
    "  verdict TEXT NOT NULL, reason TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS egress_log_sandbox ON egress_log(sandbox_id, id);";

int store_egress_policy_set(struct store *s, const char *sandbox_id, const char *policy_json,
                            long long now, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT INTO egress_policies(sandbox_id,policy,updated_at) VALUES(?,?,?) "
                          "ON CONFLICT(sandbox_id) DO UPDATE SET policy=excluded.policy,"
                          " updated_at=excluded.updated_at",
                          &st, err, "tti", sandbox_id, policy_json, now);
    return r < 0 ? r : store_step_done(s, st, err, "set egress policy");
}

int store_egress_policy_get(struct store *s, const char *sandbox_id, char **out,
                            struct sbx_err *err)
{
    sqlite3_stmt *st;
    *out = NULL;
    int r = store_prepare(s, "SELECT policy FROM egress_policies WHERE sandbox_id=?", &st, err, "t",
                          sandbox_id);
    if (r < 0)
        return r;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = sbx_xstrdup((const char *)sqlite3_column_text(st, 0));
    else if (rc != SQLITE_DONE)
        r = store_db_err(s, err, "get egress policy");
    sqlite3_finalize(st);
    return r;
}

int store_egress_policy_copy(struct store *s, const char *from_id, const char *to_id,
                             long long now, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT OR REPLACE INTO egress_policies(sandbox_id,policy,updated_at) "
                          "SELECT ?,policy,? FROM egress_policies WHERE sandbox_id=?",
                          &st, err, "tit", to_id, now, from_id);
    return r < 0 ? r : store_step_done(s, st, err, "copy egress policy");
}

int store_egress_log_insert(struct store *s, const struct store_egress_conn *c, long long *id,
                            struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT INTO egress_log(sandbox_id,method,host,address,port,bytes_up,"
                          "bytes_down,started_at_ms,ended_at_ms,verdict,reason) "
                          "VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                          &st, err, "ttttiiiiitt", c->sandbox_id, c->method, c->host,
                          c->address && c->address[0] ? c->address : NULL, (long long)c->port,
                          c->bytes_up, c->bytes_down, c->started_at_ms, c->ended_at_ms,
                          c->verdict, c->reason);
    if (r < 0)
        return r;
    /* A NULL end: the connection is still open. */
    if (!c->ended_at_ms)
        sqlite3_bind_null(st, 9);
    r = store_step_done(s, st, err, "insert egress log");
    if (r < 0)
        return r;
    *id = sqlite3_last_insert_rowid(s->db);
    r = store_prepare(s, "DELETE FROM egress_log WHERE sandbox_id=? AND id<=?", &st, err, "ti",
                      c->sandbox_id, *id - STORE_EGRESS_LOG_KEEP);
    return r < 0 ? r : store_step_done(s, st, err, "trim egress log");
}

int store_egress_log_finish(struct store *s, long long id, long long bytes_up,
                            long long bytes_down, long long ended_at_ms, const char *verdict,
                            const char *reason, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "UPDATE egress_log SET bytes_up=?,bytes_down=?,ended_at_ms=?,verdict=?,"
                          "reason=? WHERE id=?",
                          &st, err, "iiitti", bytes_up, bytes_down, ended_at_ms, verdict, reason,
                          id);
    return r < 0 ? r : store_step_done(s, st, err, "finish egress log");
}

int store_egress_log_interrupt(struct store *s, long long now_ms, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "UPDATE egress_log SET ended_at_ms=?, reason='interrupted' "
                          "WHERE ended_at_ms IS NULL",
                          &st, err, "i", now_ms);
    return r < 0 ? r : store_step_done(s, st, err, "interrupt egress log");
}

int store_egress_log_prune(struct store *s, long long before_ms, int batch, long long *removed,
                           struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "DELETE FROM egress_log WHERE id IN (SELECT id FROM egress_log "
                          "WHERE started_at_ms < ? AND ended_at_ms IS NOT NULL ORDER BY id "
                          "LIMIT ?)",
                          &st, err, "ii", before_ms, (long long)batch);
    if (r < 0 || (r = store_step_done(s, st, err, "prune egress log")) < 0)
        return r;
    *removed = sqlite3_changes(s->db);
    return 0;
}

int store_egress_log_query(struct store *s, const char *sandbox_id, long long before_id,
                           int limit, store_egress_cb cb, void *data, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "SELECT id,sandbox_id,method,host,address,port,bytes_up,bytes_down,"
                          "started_at_ms,ended_at_ms,verdict,reason FROM egress_log "
                          "WHERE sandbox_id=? AND (?=0 OR id<?) ORDER BY id DESC LIMIT ?",
                          &st, err, "tiii", sandbox_id, before_id, before_id, (long long)limit);
    if (r < 0)
        return r;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_egress_conn c = {
            .id = sqlite3_column_int64(st, 0),
            .sandbox_id = (const char *)sqlite3_column_text(st, 1),
            .method = (const char *)sqlite3_column_text(st, 2),
            .host = (const char *)sqlite3_column_text(st, 3),
            .address = (const char *)sqlite3_column_text(st, 4),
            .port = (unsigned)sqlite3_column_int64(st, 5),
            .bytes_up = sqlite3_column_int64(st, 6),
            .bytes_down = sqlite3_column_int64(st, 7),
            .started_at_ms = sqlite3_column_int64(st, 8),
            .ended_at_ms = sqlite3_column_int64(st, 9),
            .verdict = (const char *)sqlite3_column_text(st, 10),
            .reason = (const char *)sqlite3_column_text(st, 11),
        };
        cb(&c, data);
    }
    r = rc == SQLITE_DONE ? 0 : store_db_err(s, err, "query egress log");
    sqlite3_finalize(st);
    return r;
}
