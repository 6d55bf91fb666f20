/* Usage events, metering marks, wallets, the ledger and the billing watermark. */
#include "usage.h"

#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

/* The first column of the one row st returns; -ENOENT when there is none. */
static int one_int(struct db_stmt *st, long long *out, struct sbx_err *err)
{
    int r = db_step(st, err);
    if (r == DB_ROW)
        *out = db_col_int64(st, 0);
    db_finalize(st);
    return r == DB_DONE ? -ENOENT : r < 0 ? r : 0;
}

int store_usage_add(struct store *s, const struct store_usage_event *e, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO usage_events(ts_ms,\"user\",key_id,sandbox_id,backend,kind,"
                     "amount) VALUES(?,?,?,?,?,?,?)",
                     "ittttti", e->ts_ms, e->user, e->key_id ? e->key_id : "", e->sandbox_id,
                     e->backend ? e->backend : "", e->kind, e->amount);
    return r < 0 ? r : db_run(st, err);
}

int store_usage_sum(struct store *s, const char *user, const char *key_id, const char *kind,
                    const char *backend, long long from_ms, long long to_ms, long long *out,
                    struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT coalesce(sum(amount),0) FROM usage_events WHERE kind=?1 "
                     "AND ts_ms>=?2 AND ts_ms<?3 AND (?4 IS NULL OR \"user\"=?4) "
                     "AND (?5 IS NULL OR key_id=?5) AND (?6 IS NULL OR backend=?6)",
                     "tiittt", kind, from_ms, to_ms, user, key_id, backend);
    if (r < 0)
        return r;
    *out = 0;
    r = one_int(st, out, err);
    return r == -ENOENT ? 0 : r;
}

int store_usage_report(struct store *s, const char *user, long long from_ms, long long to_ms,
                       store_usage_cb cb, void *data, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT \"user\",key_id,kind,sum(amount) FROM usage_events "
                     "WHERE ts_ms>=?1 AND ts_ms<?2 AND (?3 IS NULL OR \"user\"=?3) "
                     "GROUP BY \"user\",key_id,kind ORDER BY \"user\",key_id,kind",
                     "iit", from_ms, to_ms, user);
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW)
        cb(db_col_text(st, 0), db_col_text(st, 1), db_col_text(st, 2), db_col_int64(st, 3), data);
    db_finalize(st);
    return r;
}

int store_usage_users(struct store *s, long long from_ms, long long to_ms, store_user_cb cb,
                      void *data, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT DISTINCT \"user\" FROM usage_events WHERE ts_ms>=? AND ts_ms<? "
                     "ORDER BY \"user\"",
                     "ii", from_ms, to_ms);
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW)
        cb(db_col_text(st, 0), data);
    db_finalize(st);
    return r;
}

int store_usage_mark_get(struct store *s, const char *sandbox_id, const char *kind,
                         long long *upto_ms, struct sbx_err *err)
{
    struct db_stmt *st;
    int r =
        db_query(s->conn, &st, err, "SELECT upto_ms FROM usage_marks WHERE sandbox_id=? AND kind=?",
                 "tt", sandbox_id, kind);
    if (r < 0)
        return r;
    *upto_ms = 0;
    r = one_int(st, upto_ms, err);
    return r == -ENOENT ? 0 : r;
}

int store_usage_mark_set(struct store *s, const char *sandbox_id, const char *kind,
                         long long upto_ms, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO usage_marks(sandbox_id,kind,upto_ms) VALUES(?,?,?) "
                     "ON CONFLICT(sandbox_id,kind) DO UPDATE SET upto_ms=excluded.upto_ms",
                     "tti", sandbox_id, kind, upto_ms);
    return r < 0 ? r : db_run(st, err);
}

int store_wallet_balance(struct store *s, const char *user, long long *out, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err, "SELECT balance FROM wallets WHERE \"user\"=?", "t", user);
    if (r < 0)
        return r;
    *out = 0;
    r = one_int(st, out, err);
    return r == -ENOENT ? 0 : r;
}

int store_wallet_post(struct store *s, struct store_ledger_entry *e, struct sbx_err *err)
{
    int r = store_tx_begin(s, err);
    if (r < 0)
        return r;
    struct db_stmt *st;
    if ((r = db_query(s->conn, &st, err,
                      "INSERT INTO wallets(\"user\",balance,updated_at_ms) VALUES(?1,?2,?3) "
                      "ON CONFLICT(\"user\") DO UPDATE SET balance=wallets.balance+?2, "
                      "updated_at_ms=?3 RETURNING balance",
                      "tii", e->user, e->amount, e->ts_ms)) < 0 ||
        (r = one_int(st, &e->balance_after, err)) < 0)
        goto out;
    if ((r = db_query(s->conn, &st, err,
                      "INSERT INTO wallet_ledger(\"user\",ts_ms,source,amount,interval_start_ms,"
                      "interval_end_ms,balance_after,details) VALUES(?,?,?,?,?,?,?,?) "
                      "RETURNING id",
                      "titiiiit", e->user, e->ts_ms, e->source, e->amount, e->interval_start_ms,
                      e->interval_end_ms, e->balance_after, e->details)) < 0 ||
        (r = one_int(st, &e->id, err)) < 0)
        goto out;
out:
    if (r < 0) {
        (void)store_tx_end(s, false, NULL);
        return r;
    }
    return store_tx_end(s, true, err);
}

int store_ledger_query(struct store *s, const char *user, long long before_id, int limit,
                       store_ledger_cb cb, void *data, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT id,\"user\",ts_ms,source,amount,interval_start_ms,interval_end_ms,"
                     "balance_after,details FROM wallet_ledger WHERE \"user\"=?1 "
                     "AND (?2=0 OR id<?2) ORDER BY id DESC LIMIT ?3",
                     "tii", user, before_id, (long long)limit);
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_ledger_entry e = {
            .id = db_col_int64(st, 0),
            .user = db_col_text(st, 1),
            .ts_ms = db_col_int64(st, 2),
            .source = db_col_text(st, 3),
            .amount = db_col_int64(st, 4),
            .interval_start_ms = db_col_int64(st, 5),
            .interval_end_ms = db_col_int64(st, 6),
            .balance_after = db_col_int64(st, 7),
            .details = db_col_text(st, 8),
        };
        cb(&e, data);
    }
    db_finalize(st);
    return r;
}

int store_billing_get(struct store *s, const char *name, long long *out, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err, "SELECT value FROM billing_state WHERE name=?", "t", name);
    return r < 0 ? r : one_int(st, out, err);
}

int store_billing_set(struct store *s, const char *name, long long value, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO billing_state(name,value) VALUES(?,?) "
                     "ON CONFLICT(name) DO UPDATE SET value=excluded.value",
                     "ti", name, value);
    return r < 0 ? r : db_run(st, err);
}

int store_tx_begin(struct store *s, struct sbx_err *err)
{
    return db_tx_begin(s->conn, DB_TX_PLAIN, err);
}

int store_tx_begin_locked(struct store *s, struct sbx_err *err)
{
    return db_tx_begin(s->conn, DB_TX_LOCKED, err);
}

int store_tx_end(struct store *s, bool commit, struct sbx_err *err)
{
    return db_tx_end(s->conn, commit, err);
}

int store_sandbox_count_by_state(struct store *s, store_count_cb cb, void *data,
                                 struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT status,backend,count(*) FROM sandboxes "
                     "WHERE status IN ('creating','running','paused') "
                     "GROUP BY status,backend ORDER BY status,backend",
                     "");
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW)
        cb(db_col_text(st, 0), db_col_text(st, 1), db_col_int64(st, 2), data);
    db_finalize(st);
    return r;
}

void store_set_profile(struct store *s, store_profile_fn fn, void *data)
{
    db_set_profile(s->conn, fn, data);
}
