/* Usage events, metering marks, wallets, the ledger and the billing watermark. */
#include "usage.h"

#include <errno.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

const char *const store_usage_schema =
    "CREATE TABLE IF NOT EXISTS usage_events("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT, ts_ms INTEGER NOT NULL, user TEXT NOT NULL,"
    "  key_id TEXT NOT NULL, sandbox_id TEXT, backend TEXT NOT NULL, kind TEXT NOT NULL, amount "
    "INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS usage_events_user ON usage_events(user, kind, ts_ms);"
    "CREATE INDEX IF NOT EXISTS usage_events_ts ON usage_events(ts_ms);"
    "CREATE TABLE IF NOT EXISTS usage_marks("
    "  sandbox_id TEXT NOT NULL, kind TEXT NOT NULL, upto_ms INTEGER NOT NULL,"
    "  PRIMARY KEY(sandbox_id, kind));"
    "CREATE TABLE IF NOT EXISTS wallets("
    "  user TEXT PRIMARY KEY, balance INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS wallet_ledger("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT, user TEXT NOT NULL, ts_ms INTEGER NOT NULL,"
    "  source TEXT NOT NULL CHECK(source IN ('sandbox_charge','top_up','adjustment')),"
    "  amount INTEGER NOT NULL, interval_start_ms INTEGER NOT NULL,"
    "  interval_end_ms INTEGER NOT NULL, balance_after INTEGER NOT NULL, details TEXT);"
    "CREATE INDEX IF NOT EXISTS wallet_ledger_user ON wallet_ledger(user, id);"
    /* The ledger is never updated in place: the database refuses it. */
    "CREATE TRIGGER IF NOT EXISTS wallet_ledger_append_only BEFORE UPDATE ON wallet_ledger "
    "  BEGIN SELECT RAISE(ABORT, 'wallet_ledger is append-only'); END;"
    "CREATE TRIGGER IF NOT EXISTS wallet_ledger_no_delete BEFORE DELETE ON wallet_ledger "
    "  BEGIN SELECT RAISE(ABORT, 'wallet_ledger is append-only'); END;"
    "CREATE TABLE IF NOT EXISTS billing_state(name TEXT PRIMARY KEY, value INTEGER NOT NULL);";

static int one_int(struct store *s, sqlite3_stmt *st, long long *out, struct sbx_err *err,
                   const char *what)
{
    int rc = sqlite3_step(st), r = 0;
    if (rc == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else if (rc == SQLITE_DONE)
        r = -ENOENT;
    else
        r = store_db_err(s, err, what);
    sqlite3_finalize(st);
    return r;
}

int store_usage_add(struct store *s, const struct store_usage_event *e, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r =
        store_prepare(s,
                      "INSERT INTO usage_events(ts_ms,user,key_id,sandbox_id,backend,kind,amount) "
                      "VALUES(?,?,?,?,?,?,?)",
                      &st, err, "ittttti", e->ts_ms, e->user, e->key_id ? e->key_id : "",
                      e->sandbox_id, e->backend ? e->backend : "", e->kind, e->amount);
    return r < 0 ? r : store_step_done(s, st, err, "add usage");
}

int store_usage_sum(struct store *s, const char *user, const char *key_id, const char *kind,
                    const char *backend, long long from_ms, long long to_ms, long long *out,
                    struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "SELECT coalesce(sum(amount),0) FROM usage_events WHERE kind=?1 "
                          "AND ts_ms>=?2 AND ts_ms<?3 AND (?4 IS NULL OR user=?4) "
                          "AND (?5 IS NULL OR key_id=?5) AND (?6 IS NULL OR backend=?6)",
                          &st, err, "tiittt", kind, from_ms, to_ms, user, key_id, backend);
    if (r < 0)
        return r;
    *out = 0;
    r = one_int(s, st, out, err, "sum usage");
    return r == -ENOENT ? 0 : r;
}

int store_usage_report(struct store *s, const char *user, long long from_ms, long long to_ms,
                       store_usage_cb cb, void *data, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "SELECT user,key_id,kind,sum(amount) FROM usage_events "
                          "WHERE ts_ms>=?1 AND ts_ms<?2 AND (?3 IS NULL OR user=?3) "
                          "GROUP BY user,key_id,kind ORDER BY user,key_id,kind",
                          &st, err, "iit", from_ms, to_ms, user);
    if (r < 0)
        return r;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        cb((const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1),
           (const char *)sqlite3_column_text(st, 2), sqlite3_column_int64(st, 3), data);
    r = rc == SQLITE_DONE ? 0 : store_db_err(s, err, "usage report");
    sqlite3_finalize(st);
    return r;
}

int store_usage_users(struct store *s, long long from_ms, long long to_ms, store_user_cb cb,
                      void *data, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "SELECT DISTINCT user FROM usage_events WHERE ts_ms>=? AND ts_ms<? "
                          "ORDER BY user",
                          &st, err, "ii", from_ms, to_ms);
    if (r < 0)
        return r;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        cb((const char *)sqlite3_column_text(st, 0), data);
    r = rc == SQLITE_DONE ? 0 : store_db_err(s, err, "usage users");
    sqlite3_finalize(st);
    return r;
}

int store_usage_mark_get(struct store *s, const char *sandbox_id, const char *kind,
                         long long *upto_ms, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "SELECT upto_ms FROM usage_marks WHERE sandbox_id=? AND kind=?", &st,
                          err, "tt", sandbox_id, kind);
    if (r < 0)
        return r;
    *upto_ms = 0;
    r = one_int(s, st, upto_ms, err, "get usage mark");
    return r == -ENOENT ? 0 : r;
}

int store_usage_mark_set(struct store *s, const char *sandbox_id, const char *kind,
                         long long upto_ms, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT INTO usage_marks(sandbox_id,kind,upto_ms) VALUES(?,?,?) "
                          "ON CONFLICT(sandbox_id,kind) DO UPDATE SET upto_ms=excluded.upto_ms",
                          &st, err, "tti", sandbox_id, kind, upto_ms);
    return r < 0 ? r : store_step_done(s, st, err, "set usage mark");
}

int store_wallet_balance(struct store *s, const char *user, long long *out, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "SELECT balance FROM wallets WHERE user=?", &st, err, "t", user);
    if (r < 0)
        return r;
    *out = 0;
    r = one_int(s, st, out, err, "get wallet");
    return r == -ENOENT ? 0 : r;
}

int store_wallet_post(struct store *s, struct store_ledger_entry *e, struct sbx_err *err)
{
    int r = store_tx_begin(s, err);
    if (r < 0)
        return r;
    sqlite3_stmt *st;
    if ((r = store_prepare(s,
                           "INSERT INTO wallets(user,balance,updated_at_ms) VALUES(?1,?2,?3) "
                           "ON CONFLICT(user) DO UPDATE SET balance=balance+?2, updated_at_ms=?3 "
                           "RETURNING balance",
                           &st, err, "tii", e->user, e->amount, e->ts_ms)) < 0 ||
        (r = one_int(s, st, &e->balance_after, err, "move wallet")) < 0)
        goto out;
    if ((r = store_prepare(s,
                           "INSERT INTO wallet_ledger(user,ts_ms,source,amount,interval_start_ms,"
                           "interval_end_ms,balance_after,details) VALUES(?,?,?,?,?,?,?,?)",
                           &st, err, "titiiiit", e->user, e->ts_ms, e->source, e->amount,
                           e->interval_start_ms, e->interval_end_ms, e->balance_after,
                           e->details)) < 0 ||
        (r = store_step_done(s, st, err, "append ledger")) < 0)
        goto out;
    e->id = sqlite3_last_insert_rowid(s->db);
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
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "SELECT id,user,ts_ms,source,amount,interval_start_ms,interval_end_ms,"
                          "balance_after,details FROM wallet_ledger WHERE user=?1 "
                          "AND (?2=0 OR id<?2) ORDER BY id DESC LIMIT ?3",
                          &st, err, "tii", user, before_id, (long long)limit);
    if (r < 0)
        return r;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_ledger_entry e = {
            .id = sqlite3_column_int64(st, 0),
            .user = (const char *)sqlite3_column_text(st, 1),
            .ts_ms = sqlite3_column_int64(st, 2),
            .source = (const char *)sqlite3_column_text(st, 3),
            .amount = sqlite3_column_int64(st, 4),
            .interval_start_ms = sqlite3_column_int64(st, 5),
            .interval_end_ms = sqlite3_column_int64(st, 6),
            .balance_after = sqlite3_column_int64(st, 7),
            .details = (const char *)sqlite3_column_text(st, 8),
        };
        cb(&e, data);
    }
    r = rc == SQLITE_DONE ? 0 : store_db_err(s, err, "query ledger");
    sqlite3_finalize(st);
    return r;
}

int store_billing_get(struct store *s, const char *name, long long *out, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "SELECT value FROM billing_state WHERE name=?", &st, err, "t", name);
    return r < 0 ? r : one_int(s, st, out, err, "get billing state");
}

int store_billing_set(struct store *s, const char *name, long long value, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT INTO billing_state(name,value) VALUES(?,?) "
                          "ON CONFLICT(name) DO UPDATE SET value=excluded.value",
                          &st, err, "ti", name, value);
    return r < 0 ? r : store_step_done(s, st, err, "set billing state");
}

int store_tx_begin(struct store *s, struct sbx_err *err)
{
    if (sqlite3_exec(s->db, "SAVEPOINT sbx_tx", NULL, NULL, NULL) != SQLITE_OK)
        return store_db_err(s, err, "begin");
    return 0;
}

int store_tx_end(struct store *s, bool commit, struct sbx_err *err)
{
    const char *sql = commit ? "RELEASE sbx_tx" : "ROLLBACK TO sbx_tx; RELEASE sbx_tx";
    if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return store_db_err(s, err, commit ? "commit" : "rollback");
    return 0;
}

int store_sandbox_count_by_state(struct store *s, store_count_cb cb, void *data,
                                 struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "SELECT status,backend,count(*) FROM sandboxes "
                          "WHERE status IN ('creating','running','paused') "
                          "GROUP BY status,backend ORDER BY status,backend",
                          &st, err, "");
    if (r < 0)
        return r;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        cb((const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1),
           sqlite3_column_int64(st, 2), data);
    r = rc == SQLITE_DONE ? 0 : store_db_err(s, err, "count sandboxes by state");
    sqlite3_finalize(st);
    return r;
}

struct profile_ctx {
    store_profile_fn fn;
    void *data;
};
/* One store per process: its statement profile hook. */
static struct profile_ctx profile;

static int on_trace(unsigned type, void *ctx, void *p, void *x)
{
    const struct profile_ctx *pc = ctx;
    if (type == SQLITE_TRACE_PROFILE && pc->fn)
        pc->fn(*(const sqlite3_int64 *)x, pc->data);
    return 0;
}

void store_set_profile(struct store *s, store_profile_fn fn, void *data)
{
    profile = (struct profile_ctx){fn, data};
    sqlite3_trace_v2(s->db, fn ? SQLITE_TRACE_PROFILE : 0, fn ? on_trace : NULL, &profile);
}
