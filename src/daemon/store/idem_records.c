/* Idempotency keys: (user, key) -> the request's hash and, once it is answered, the
 * response to replay for 24 hours. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

int store_idem_begin(struct store *s, const char *user, const char *key, const char *request_hash,
                     long long now_s, struct store_idem *out, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "DELETE FROM idempotency WHERE \"user\"=? AND key=? AND created_at<?", "tti",
                     user, key, now_s - STORE_IDEM_TTL_S);
    if (r < 0 || (r = db_run(st, err)) < 0)
        return r;
    r = db_query(s->conn, &st, err,
                 "INSERT INTO idempotency(\"user\",key,request_hash,created_at,node_id) "
                 "VALUES(?,?,?,?,?) ON CONFLICT(\"user\",key) DO NOTHING",
                 "tttit", user, key, request_hash, now_s, s->node_id);
    if (r < 0 || (r = db_step(st, err)) < 0) {
        db_finalize(st);
        return r;
    }
    long long claimed = db_changes(st);
    db_finalize(st);
    memset(out, 0, sizeof(*out));
    if (claimed == 1) {
        out->state = STORE_IDEM_NEW;
        return 0;
    }
    r = db_query(s->conn, &st, err,
                 "SELECT request_hash,status,response FROM idempotency WHERE \"user\"=? AND key=?",
                 "tt", user, key);
    if (r < 0)
        return r;
    if ((r = db_step(st, err)) != DB_ROW) {
        db_finalize(st);
        /* Gone between the claim and the read: released by its own request. */
        return r < 0 ? r
                     : sbx_err_set(err, EAGAIN, "store_busy",
                                   "the idempotency key was released meanwhile: retry");
    }
    const char *hash = db_col_text(st, 0);
    if (!hash || strcmp(hash, request_hash)) {
        out->state = STORE_IDEM_MISMATCH;
    } else if (db_col_null(st, 1)) {
        out->state = STORE_IDEM_IN_PROGRESS;
    } else {
        out->state = STORE_IDEM_REPLAY;
        out->status = (int)db_col_int64(st, 1);
        const char *resp = db_col_text(st, 2);
        out->response = sbx_xstrdup(resp ? resp : "");
    }
    db_finalize(st);
    return 0;
}

int store_idem_finish(struct store *s, const char *user, const char *key, int status,
                      const char *response, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "UPDATE idempotency SET status=?, response=? WHERE \"user\"=? AND key=?",
                     "ittt", (long long)status, response, user, key);
    return r < 0 ? r : db_run(st, err);
}

int store_idem_release(struct store *s, const char *user, const char *key, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "DELETE FROM idempotency WHERE \"user\"=? AND key=? AND status IS NULL", "tt",
                     user, key);
    return r < 0 ? r : db_run(st, err);
}

int store_idem_release_in_progress(struct store *s, struct sbx_err *err)
{
    struct db_stmt *st;
    /* Only this node's: another node's claims may belong to requests it is running. */
    int r = db_query(s->conn, &st, err,
                     "DELETE FROM idempotency WHERE status IS NULL AND "
                     "(node_id IS NULL OR node_id=?)",
                     "t", s->node_id);
    return r < 0 ? r : db_run(st, err);
}

void store_idem_clear(struct store_idem *i)
{
    if (!i)
        return;
    free(i->response);
    memset(i, 0, sizeof(*i));
}
