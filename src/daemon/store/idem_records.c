/* Idempotency keys: (user, key) -> the request's hash and, once it is answered, the
 * response to replay for 24 hours. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

const char *const store_idem_schema =
    "CREATE TABLE IF NOT EXISTS idempotency("
    "  user TEXT NOT NULL, key TEXT NOT NULL, request_hash TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL, status INTEGER, response TEXT,"
    "  PRIMARY KEY(user, key));";

static int run(struct store *s, sqlite3_stmt *st, struct sbx_err *err, const char *what)
{
    int r = sqlite3_step(st) == SQLITE_DONE ? 0 : store_db_err(s, err, what);
    sqlite3_finalize(st);
    return r;
}

int store_idem_begin(struct store *s, const char *user, const char *key, const char *request_hash,
                     long long now_s, struct store_idem *out, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "DELETE FROM idempotency WHERE user=? AND key=? AND created_at<?",
                          &st, err, "tti", user, key, now_s - STORE_IDEM_TTL_S);
    if (r < 0 || (r = run(s, st, err, "expire idempotency key")) < 0)
        return r;
    r = store_prepare(s,
                      "INSERT OR IGNORE INTO idempotency(user,key,request_hash,created_at) "
                      "VALUES(?,?,?,?)",
                      &st, err, "ttti", user, key, request_hash, now_s);
    if (r < 0 || (r = run(s, st, err, "claim idempotency key")) < 0)
        return r;
    memset(out, 0, sizeof(*out));
    if (sqlite3_changes(s->db) == 1) {
        out->state = STORE_IDEM_NEW;
        return 0;
    }
    r = store_prepare(s,
                      "SELECT request_hash,status,response FROM idempotency WHERE user=? AND key=?",
                      &st, err, "tt", user, key);
    if (r < 0)
        return r;
    if (sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return store_db_err(s, err, "read idempotency key");
    }
    const char *hash = (const char *)sqlite3_column_text(st, 0);
    if (!hash || strcmp(hash, request_hash)) {
        out->state = STORE_IDEM_MISMATCH;
    } else if (sqlite3_column_type(st, 1) == SQLITE_NULL) {
        out->state = STORE_IDEM_IN_PROGRESS;
    } else {
        out->state = STORE_IDEM_REPLAY;
        out->status = sqlite3_column_int(st, 1);
        const unsigned char *resp = sqlite3_column_text(st, 2);
        out->response = sbx_xstrdup(resp ? (const char *)resp : "");
    }
    sqlite3_finalize(st);
    return 0;
}

int store_idem_finish(struct store *s, const char *user, const char *key, int status,
                      const char *response, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "UPDATE idempotency SET status=?, response=? WHERE user=? AND key=?",
                          &st, err, "ittt", (long long)status, response, user, key);
    return r < 0 ? r : run(s, st, err, "save idempotent response");
}

int store_idem_release(struct store *s, const char *user, const char *key, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "DELETE FROM idempotency WHERE user=? AND key=? AND status IS NULL",
                          &st, err, "tt", user, key);
    return r < 0 ? r : run(s, st, err, "release idempotency key");
}

int store_idem_release_in_progress(struct store *s, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "DELETE FROM idempotency WHERE status IS NULL", &st, err, "");
    return r < 0 ? r : run(s, st, err, "release idempotency keys");
}

void store_idem_clear(struct store_idem *i)
{
    if (!i)
        return;
    free(i->response);
    memset(i, 0, sizeof(*i));
}
