/* Egress: each sandbox's policy (so it survives restarts and forks can copy it) and the
 * log of every connection its proxy saw. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

int store_egress_policy_set(struct store *s, const char *sandbox_id, const char *policy_json,
                            long long now, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO egress_policies(sandbox_id,policy,updated_at) VALUES(?,?,?) "
                     "ON CONFLICT(sandbox_id) DO UPDATE SET policy=excluded.policy,"
                     " updated_at=excluded.updated_at",
                     "tti", sandbox_id, policy_json, now);
    return r < 0 ? r : db_run(st, err);
}

int store_egress_policy_get(struct store *s, const char *sandbox_id, char **out,
                            struct sbx_err *err)
{
    struct db_stmt *st;
    *out = NULL;
    int r = db_query(s->conn, &st, err, "SELECT policy FROM egress_policies WHERE sandbox_id=?",
                     "t", sandbox_id);
    if (r < 0)
        return r;
    if ((r = db_step(st, err)) == DB_ROW)
        *out = db_col_dup(st, 0);
    db_finalize(st);
    return r < 0 ? r : 0;
}

int store_egress_policy_copy(struct store *s, const char *from_id, const char *to_id, long long now,
                             struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO egress_policies(sandbox_id,policy,updated_at) "
                     "SELECT ?,policy,? FROM egress_policies WHERE sandbox_id=? "
                     "ON CONFLICT(sandbox_id) DO UPDATE SET policy=excluded.policy,"
                     " updated_at=excluded.updated_at",
                     "tit", to_id, now, from_id);
    return r < 0 ? r : db_run(st, err);
}

int store_egress_log_insert(struct store *s, const struct store_egress_conn *c, long long *id,
                            struct sbx_err *err)
{
    struct db_stmt *st;
    /* A NULL end (NULLIF): the connection is still open. */
    int r =
        db_query(s->conn, &st, err,
                 "INSERT INTO egress_log(sandbox_id,method,host,address,port,bytes_up,"
                 "bytes_down,started_at_ms,ended_at_ms,verdict,reason) "
                 "VALUES(?,?,?,?,?,?,?,?,NULLIF(?,0),?,?) RETURNING id",
                 "ttttiiiiitt", c->sandbox_id, c->method, c->host,
                 c->address && c->address[0] ? c->address : NULL, (long long)c->port, c->bytes_up,
                 c->bytes_down, c->started_at_ms, c->ended_at_ms, c->verdict, c->reason);
    if (r < 0)
        return r;
    if ((r = db_step(st, err)) == DB_ROW)
        *id = db_col_int64(st, 0);
    db_finalize(st);
    if (r < 0)
        return r;
    r = db_query(s->conn, &st, err, "DELETE FROM egress_log WHERE sandbox_id=? AND id<=?", "ti",
                 c->sandbox_id, *id - STORE_EGRESS_LOG_KEEP);
    return r < 0 ? r : db_run(st, err);
}

int store_egress_log_finish(struct store *s, long long id, long long bytes_up, long long bytes_down,
                            long long ended_at_ms, const char *verdict, const char *reason,
                            struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "UPDATE egress_log SET bytes_up=?,bytes_down=?,ended_at_ms=?,verdict=?,"
                     "reason=? WHERE id=?",
                     "iiitti", bytes_up, bytes_down, ended_at_ms, verdict, reason, id);
    return r < 0 ? r : db_run(st, err);
}

int store_egress_log_interrupt(struct store *s, long long now_ms, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "UPDATE egress_log SET ended_at_ms=?, reason='interrupted' "
                     "WHERE ended_at_ms IS NULL",
                     "i", now_ms);
    return r < 0 ? r : db_run(st, err);
}

int store_egress_log_prune(struct store *s, long long before_ms, int batch, long long *removed,
                           struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "DELETE FROM egress_log WHERE id IN (SELECT id FROM egress_log "
                     "WHERE started_at_ms < ? AND ended_at_ms IS NOT NULL ORDER BY id "
                     "LIMIT ?)",
                     "ii", before_ms, (long long)batch);
    return r < 0 ? r : db_run_changes(st, removed, err);
}

int store_egress_log_query(struct store *s, const char *sandbox_id, long long before_id, int limit,
                           store_egress_cb cb, void *data, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT id,sandbox_id,method,host,address,port,bytes_up,bytes_down,"
                     "started_at_ms,ended_at_ms,verdict,reason FROM egress_log "
                     "WHERE sandbox_id=?1 AND (?2=0 OR id<?2) ORDER BY id DESC LIMIT ?3",
                     "tii", sandbox_id, before_id, (long long)limit);
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_egress_conn c = {
            .id = db_col_int64(st, 0),
            .sandbox_id = db_col_text(st, 1),
            .method = db_col_text(st, 2),
            .host = db_col_text(st, 3),
            .address = db_col_text(st, 4),
            .port = (unsigned)db_col_int64(st, 5),
            .bytes_up = db_col_int64(st, 6),
            .bytes_down = db_col_int64(st, 7),
            .started_at_ms = db_col_int64(st, 8),
            .ended_at_ms = db_col_int64(st, 9),
            .verdict = db_col_text(st, 10),
            .reason = db_col_text(st, 11),
        };
        cb(&c, data);
    }
    db_finalize(st);
    return r;
}
