/* db.h on SQLite: the embedded default, one file in WAL mode under the data dir. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../common/util.h"
#include "db_driver.h"

/* How deep transactions nest; deeper is a programming error. */
#define SQLITE_TX_DEPTH_MAX 16

struct sqlite_db {
    struct db base;
    sqlite3 *h;
    db_profile_fn profile;
    void *profile_data;
    int depth;
    bool locked_outer[SQLITE_TX_DEPTH_MAX]; /* the level began with BEGIN IMMEDIATE */
};

struct sqlite_stmt {
    struct db_stmt base;
    sqlite3_stmt *st;
    int bind_rc;
    long long changes;
};

static struct sqlite_db *D(struct db *db)
{
    return (struct sqlite_db *)db;
}

static struct sqlite_stmt *S(struct db_stmt *st)
{
    return (struct sqlite_stmt *)st;
}

static int fail(struct sqlite_db *d, int rc, struct sbx_err *err, const char *what)
{
    int ext = sqlite3_extended_errcode(d->h);
    const char *msg = sqlite3_errmsg(d->h);
    if (ext == SQLITE_CONSTRAINT_UNIQUE || ext == SQLITE_CONSTRAINT_PRIMARYKEY)
        return sbx_err_set(err, EEXIST, "store_conflict", "store: %s: %s", what, msg);
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
        return sbx_err_set(err, EAGAIN, "store_busy", "store: %s: %s", what, msg);
    /* SQLite rolls the statement back on a full disk: the store stays as it was. */
    int sys = sqlite3_system_errno(d->h);
    if (rc == SQLITE_FULL || sys == ENOSPC || sys == EDQUOT)
        return sbx_err_set(err, ENOSPC, "insufficient_storage",
                           "the data directory is full: %s was not saved", what);
    return sbx_err_set(err, EIO, "store_error", "store: %s: %s", what, msg);
}

static void sq_close(struct db *db)
{
    sqlite3_close_v2(D(db)->h);
    free(db);
}

static int sq_exec(struct db *db, const char *sql, struct sbx_err *err)
{
    char *msg = NULL;
    int rc = sqlite3_exec(D(db)->h, sql, NULL, NULL, &msg);
    if (rc == SQLITE_OK)
        return 0;
    int r = fail(D(db), rc, err, msg ? msg : "exec");
    sqlite3_free(msg);
    return r;
}

static int sq_prepare(struct db *db, const char *sql, struct db_stmt **out, struct sbx_err *err)
{
    sqlite3_stmt *h;
    int rc = sqlite3_prepare_v2(D(db)->h, sql, -1, &h, NULL);
    if (rc != SQLITE_OK)
        return fail(D(db), rc, err, "prepare");
    struct sqlite_stmt *st = sbx_xcalloc(1, sizeof(*st));
    st->base.db = db;
    st->st = h;
    *out = &st->base;
    return 0;
}

static void sq_bind(struct db_stmt *st, int i, const struct db_value *v)
{
    sqlite3_stmt *h = S(st)->st;
    int rc;
    switch (v->type) {
    case DB_T_TEXT:
        rc = v->p ? sqlite3_bind_text(h, i, v->p, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(h, i);
        break;
    case DB_T_INT:
        rc = sqlite3_bind_int64(h, i, v->i);
        break;
    case DB_T_BLOB:
        rc = sqlite3_bind_blob64(h, i, v->p, v->n, SQLITE_TRANSIENT);
        break;
    default:
        rc = sqlite3_bind_null(h, i);
    }
    if (rc != SQLITE_OK && S(st)->bind_rc == SQLITE_OK)
        S(st)->bind_rc = rc;
}

static int sq_step(struct db_stmt *st, struct sbx_err *err)
{
    struct sqlite_stmt *s = S(st);
    struct sqlite_db *d = D(st->db);
    if (s->bind_rc != SQLITE_OK)
        return sbx_err_set(err, EINVAL, "store_error", "store: bind: %s",
                           sqlite3_errstr(s->bind_rc));
    int rc = sqlite3_step(s->st);
    if (rc == SQLITE_ROW)
        return DB_ROW;
    if (rc == SQLITE_DONE) {
        s->changes = sqlite3_changes(d->h);
        return DB_DONE;
    }
    return fail(d, rc, err, "step");
}

static const char *sq_col_text(struct db_stmt *st, int col)
{
    return (const char *)sqlite3_column_text(S(st)->st, col);
}

static long long sq_col_int64(struct db_stmt *st, int col)
{
    return sqlite3_column_int64(S(st)->st, col);
}

static bool sq_col_null(struct db_stmt *st, int col)
{
    return sqlite3_column_type(S(st)->st, col) == SQLITE_NULL;
}

static const void *sq_col_blob(struct db_stmt *st, int col, size_t *n)
{
    const void *p = sqlite3_column_blob(S(st)->st, col);
    *n = (size_t)sqlite3_column_bytes(S(st)->st, col);
    return p;
}

static long long sq_changes(struct db_stmt *st)
{
    return S(st)->changes;
}

static void sq_finalize(struct db_stmt *st)
{
    sqlite3_finalize(S(st)->st);
    free(st);
}

/* A plain level is a savepoint, which also opens a (deferred) transaction when none is
 * open; a locked outermost level is BEGIN IMMEDIATE, SQLite's write lock taken up front. */
static int sq_tx_begin(struct db *db, enum db_tx kind, struct sbx_err *err)
{
    struct sqlite_db *d = D(db);
    if (d->depth >= SQLITE_TX_DEPTH_MAX)
        return sbx_err_set(err, EINVAL, "store_error", "store: transactions nest too deep");
    bool immediate = kind == DB_TX_LOCKED && sqlite3_get_autocommit(d->h);
    int r = sq_exec(db, immediate ? "BEGIN IMMEDIATE" : "SAVEPOINT sbx_tx", err);
    if (r < 0)
        return r;
    d->locked_outer[d->depth++] = immediate;
    return 0;
}

static int sq_tx_end(struct db *db, bool commit, struct sbx_err *err)
{
    struct sqlite_db *d = D(db);
    if (d->depth == 0)
        return sbx_err_set(err, EINVAL, "store_error", "store: no transaction to end");
    bool immediate = d->locked_outer[--d->depth];
    const char *sql = immediate
                          ? (commit ? "COMMIT" : "ROLLBACK")
                          : (commit ? "RELEASE sbx_tx" : "ROLLBACK TO sbx_tx; RELEASE sbx_tx");
    return sq_exec(db, sql, err);
}

static void sq_describe(struct db *db, char *buf, size_t cap)
{
    const char *f = sqlite3_db_filename(D(db)->h, "main");
    snprintf(buf, cap, "SQLite %s at %s", sqlite3_libversion(), f && f[0] ? f : "(memory)");
}

static int sq_hold_exclusive(struct db *db, const char *name, struct sbx_err *err)
{
    return 0;
}

static int sq_backup(struct db *db, const char *dest, struct sbx_err *err)
{
    if (access(dest, F_OK) == 0)
        return sbx_err_set(err, EEXIST, "invalid_request", "%s exists: name a new file", dest);
    _cleanup_free_ char *tmp = sbx_xasprintf("%s.tmp", dest);
    (void)unlink(tmp);
    sqlite3 *out = NULL;
    int rc = sqlite3_open_v2(tmp, &out, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    sqlite3_backup *b = rc == SQLITE_OK ? sqlite3_backup_init(out, "main", D(db)->h, "main") : NULL;
    if (b) {
        /* Page by page, so sbxd's own writes (WAL) go on between the steps. */
        while ((rc = sqlite3_backup_step(b, 256)) == SQLITE_OK || rc == SQLITE_BUSY ||
               rc == SQLITE_LOCKED)
            if (rc != SQLITE_OK)
                sqlite3_sleep(20);
        rc = sqlite3_backup_finish(b) == SQLITE_OK && rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    int r = 0;
    if (!b || rc != SQLITE_OK)
        r = sbx_err_set(err, EIO, "internal", "backing up to %s: %s", dest,
                        out ? sqlite3_errmsg(out) : sqlite3_errstr(rc));
    sqlite3_close_v2(out);
    if (r == 0 && rename(tmp, dest) < 0)
        r = sbx_err_sys(err, errno, "renaming %s to %s", tmp, dest);
    if (r < 0)
        (void)unlink(tmp);
    return r;
}

static int on_trace(unsigned type, void *ctx, void *p, void *x)
{
    struct sqlite_db *d = ctx;
    if (type == SQLITE_TRACE_PROFILE && d->profile)
        d->profile(*(const sqlite3_int64 *)x, d->profile_data);
    return 0;
}

static void sq_set_profile(struct db *db, db_profile_fn fn, void *data)
{
    struct sqlite_db *d = D(db);
    d->profile = fn;
    d->profile_data = data;
    sqlite3_trace_v2(d->h, fn ? SQLITE_TRACE_PROFILE : 0, fn ? on_trace : NULL, d);
}

static const struct db_ops sqlite_ops = {
    .close = sq_close,
    .exec = sq_exec,
    .prepare = sq_prepare,
    .bind = sq_bind,
    .step = sq_step,
    .col_text = sq_col_text,
    .col_int64 = sq_col_int64,
    .col_null = sq_col_null,
    .col_blob = sq_col_blob,
    .changes = sq_changes,
    .finalize = sq_finalize,
    .tx_begin = sq_tx_begin,
    .tx_end = sq_tx_end,
    .describe = sq_describe,
    .hold_exclusive = sq_hold_exclusive,
    .backup = sq_backup,
    .set_profile = sq_set_profile,
};

/* A store damaged by a crash or a full disk is refused at start, not written on. */
static int check_integrity(struct sqlite_db *d, const char *path, struct sbx_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(d->h, "PRAGMA integrity_check(1)", -1, &st, NULL) != SQLITE_OK)
        return fail(d, SQLITE_ERROR, err, "checking the store");
    int r = 0;
    if (sqlite3_step(st) != SQLITE_ROW) {
        r = fail(d, SQLITE_ERROR, err, "checking the store");
    } else {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        if (!v || strcmp(v, "ok"))
            r = sbx_err_set(err, EIO, "store_damaged",
                            "the store %s is damaged (%.200s): restore a copy made with "
                            "`sbxd backup`",
                            path, v ? v : "no answer");
    }
    sqlite3_finalize(st);
    return r;
}

int db_sqlite_open(const char *path, struct db **out, struct sbx_err *err)
{
    struct sqlite_db *d = sbx_xcalloc(1, sizeof(*d));
    d->base = (struct db){.ops = &sqlite_ops, .dialect = DB_SQLITE};
    int rc = sqlite3_open_v2(
        path, &d->h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
    if (rc != SQLITE_OK) {
        int r = sbx_err_set(err, EIO, "store_error", "opening %s: %s", path,
                            d->h ? sqlite3_errmsg(d->h) : sqlite3_errstr(rc));
        sq_close(&d->base);
        return r;
    }
    int r = sq_exec(&d->base,
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                    "PRAGMA busy_timeout=5000; PRAGMA foreign_keys=ON;",
                    err);
    if (r == 0)
        r = check_integrity(d, path, err);
    if (r < 0) {
        sq_close(&d->base);
        return r;
    }
    *out = &d->base;
    return 0;
}
