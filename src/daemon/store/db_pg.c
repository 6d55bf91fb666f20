/* db.h on PostgreSQL (libpq): the store many sbxd nodes share. One connection per
 * store, used under a mutex; each distinct statement (SQL text and parameter types) is
 * prepared once on the server and reused by name. Results are fetched whole, so a
 * statement's rows never hold the connection between steps. */
#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../common/util.h"
#include "db_driver.h"

/* Server-side prepared statements kept per connection; past this, statements run
 * unnamed (prepared afresh each time) rather than grow the cache. */
#define PG_STMT_CACHE_MAX 1024
#define PG_CACHE_BUCKETS 256
#define PG_TX_DEPTH_MAX 16
/* The store-wide write lock of DB_TX_LOCKED ("SBX" and 1), a bigint key. A node's lock
 * (db_hold_exclusive) is the two-int form, a separate key space: this class and the
 * hash of the node's id. */
#define PG_WRITE_LOCK_KEY "5456728065"
#define PG_NODE_LOCK_CLASS "5456728"
/* PostgreSQL's type oids (catalog/pg_type.h): what a bound value is sent as. */
#define PG_OID_BYTEA 17
#define PG_OID_INT8 20
#define PG_OID_TEXT 25

struct pg_cached {
    char *key; /* parameter types, '\n', the SQL */
    char name[24];
    struct pg_cached *next;
};

struct pg_db {
    struct db base;
    PGconn *c;
    pthread_mutex_t mu;
    struct pg_cached *cache[PG_CACHE_BUCKETS];
    unsigned ncached, serial;
    int depth;
    char *exclusive; /* the name db_hold_exclusive was asked to hold, or NULL */
    bool held;       /* the session holds its lock */
    db_profile_fn profile;
    void *profile_data;
};

struct pg_stmt {
    struct db_stmt base;
    char *sql; /* with $N placeholders */
    int nparams;
    char *vals[DB_PARAMS_MAX];
    int lens[DB_PARAMS_MAX], fmts[DB_PARAMS_MAX];
    char types[DB_PARAMS_MAX]; /* 'n' untyped null, 't' text, 'i' int8, 'b' bytea */
    char bind_err[96];
    PGresult *res;
    int row, nrows;
    long long changes;
    unsigned char *blob; /* the last blob column read, unescaped */
};

static struct pg_db *D(struct db *db)
{
    return (struct pg_db *)db;
}

static struct pg_stmt *S(struct db_stmt *st)
{
    return (struct pg_stmt *)st;
}

/* libpq's messages end in a newline; ours do not. */
static const char *trimmed(char *buf, size_t cap, const char *msg)
{
    snprintf(buf, cap, "%s", msg && msg[0] ? msg : "no answer");
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return buf;
}

static int res_fail(struct pg_db *d, const PGresult *res, struct sbx_err *err, const char *what)
{
    char msg[256];
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    trimmed(msg, sizeof(msg), res ? PQresultErrorMessage(res) : PQerrorMessage(d->c));
    if (state && !strcmp(state, "23505"))
        return sbx_err_set(err, EEXIST, "store_conflict", "store: %s: %s", what, msg);
    /* Serialization failure, deadlock, lock_timeout, statement_timeout. */
    if (state && (!strcmp(state, "40001") || !strcmp(state, "40P01") || !strcmp(state, "55P03") ||
                  !strcmp(state, "57014")))
        return sbx_err_set(err, EAGAIN, "store_busy", "store: %s: %s", what, msg);
    /* disk_full (SQLSTATE 53100) on the server. */
    if (state && !strcmp(state, "53100"))
        return sbx_err_set(err, ENOSPC, "insufficient_storage",
                           "the store's server is out of disk space: %s was not saved", what);
    if (PQstatus(d->c) != CONNECTION_OK || (state && !strncmp(state, "08", 2)))
        return sbx_err_set(err, EIO, "store_unavailable", "store: %s: PostgreSQL: %s", what, msg);
    return sbx_err_set(err, EIO, "store_error", "store: %s: %s", what, msg);
}

static void cache_clear(struct pg_db *d)
{
    for (size_t i = 0; i < PG_CACHE_BUCKETS; i++)
        while (d->cache[i]) {
            struct pg_cached *c = d->cache[i];
            d->cache[i] = c->next;
            free(c->key);
            free(c);
        }
    d->ncached = 0;
}

static int take_exclusive(struct pg_db *d, struct sbx_err *err)
{
    const char *name = d->exclusive;
    PGresult *res = PQexecParams(
        d->c, "SELECT pg_try_advisory_lock(" PG_NODE_LOCK_CLASS ", hashtext($1))", 1, NULL, &name,
        NULL, NULL, 0);
    int r = 0;
    if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
        r = res_fail(d, res, err, "taking the node's lock");
    else if (strcmp(PQgetvalue(res, 0, 0), "t"))
        r = sbx_err_set(err, EBUSY, "node_in_use",
                        "another sbxd runs as node %.64s on this PostgreSQL store: one process "
                        "per node id (SBX_NODE_ID, docs/scale-out.md)",
                        name);
    PQclear(res);
    d->held = r == 0;
    return r;
}

/* A connection lost outside a transaction is made again; its prepared statements and
 * its session lock went with it. Inside one, the transaction is lost too: that is the
 * caller's error to see. */
static int ensure_connected(struct pg_db *d, struct sbx_err *err)
{
    if (PQstatus(d->c) == CONNECTION_OK)
        return d->exclusive && !d->held ? take_exclusive(d, err) : 0;
    if (d->depth > 0)
        return res_fail(d, NULL, err, "the connection was lost inside a transaction");
    cache_clear(d);
    d->held = false;
    PQreset(d->c);
    if (PQstatus(d->c) != CONNECTION_OK)
        return res_fail(d, NULL, err, "reconnecting");
    return d->exclusive ? take_exclusive(d, err) : 0;
}

static void pg_close(struct db *db)
{
    struct pg_db *d = D(db);
    cache_clear(d);
    PQfinish(d->c);
    pthread_mutex_destroy(&d->mu);
    free(d->exclusive);
    free(d);
}

static int exec_locked(struct pg_db *d, const char *sql, struct sbx_err *err, const char *what)
{
    int r = ensure_connected(d, err);
    if (r < 0)
        return r;
    PGresult *res = PQexec(d->c, sql);
    ExecStatusType s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    r = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK ? 0 : res_fail(d, res, err, what);
    /* COMMIT of a transaction an error already aborted answers ROLLBACK, not an error. */
    if (r == 0 && !strcmp(sql, "COMMIT") && !strcmp(PQcmdStatus(res), "ROLLBACK"))
        r = sbx_err_set(err, EIO, "store_error",
                        "store: the transaction was rolled back after an earlier error");
    PQclear(res);
    return r;
}

static int pg_exec(struct db *db, const char *sql, struct sbx_err *err)
{
    struct pg_db *d = D(db);
    pthread_mutex_lock(&d->mu);
    int r = exec_locked(d, sql, err, "exec");
    pthread_mutex_unlock(&d->mu);
    return r;
}

static int pg_prepare(struct db *db, const char *sql, struct db_stmt **out, struct sbx_err *err)
{
    char *q;
    int n;
    int r = db_sql_dollar(sql, &q, &n, err);
    if (r < 0)
        return r;
    struct pg_stmt *st = sbx_xcalloc(1, sizeof(*st));
    st->base.db = db;
    st->sql = q;
    st->nparams = n;
    memset(st->types, 'n', sizeof(st->types));
    st->row = -1;
    *out = &st->base;
    return 0;
}

static void pg_bind(struct db_stmt *stmt, int i, const struct db_value *v)
{
    struct pg_stmt *st = S(stmt);
    if (i < 1 || i > st->nparams) {
        if (!st->bind_err[0])
            snprintf(st->bind_err, sizeof(st->bind_err), "parameter %d of %d", i, st->nparams);
        return;
    }
    int k = i - 1;
    free(st->vals[k]);
    st->vals[k] = NULL;
    st->lens[k] = st->fmts[k] = 0;
    switch (v->type) {
    case DB_T_TEXT:
        st->vals[k] = v->p ? sbx_xstrdup(v->p) : NULL;
        st->types[k] = 't';
        break;
    case DB_T_INT:
        st->vals[k] = sbx_xasprintf("%lld", v->i);
        st->types[k] = 'i';
        break;
    case DB_T_BLOB:
        st->vals[k] = sbx_xmalloc(v->n ? v->n : 1);
        memcpy(st->vals[k], v->p, v->n);
        st->lens[k] = (int)v->n;
        st->fmts[k] = 1; /* binary: bytes as they are */
        st->types[k] = 'b';
        break;
    default:
        st->types[k] = 'n';
    }
}

static unsigned hash_key(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h % PG_CACHE_BUCKETS;
}

/* The name of a server-side statement for st's SQL with its bound types, preparing it
 * the first time; "" (unnamed) when the cache is full. */
static int prepared_name(struct pg_db *d, struct pg_stmt *st, const char **name,
                         struct sbx_err *err)
{
    _cleanup_free_ char *key = sbx_xasprintf("%.*s\n%s", st->nparams, st->types, st->sql);
    unsigned b = hash_key(key);
    for (struct pg_cached *c = d->cache[b]; c; c = c->next)
        if (!strcmp(c->key, key)) {
            *name = c->name;
            return 0;
        }
    Oid oids[DB_PARAMS_MAX];
    for (int i = 0; i < st->nparams; i++)
        oids[i] = st->types[i] == 't'   ? PG_OID_TEXT
                  : st->types[i] == 'i' ? PG_OID_INT8
                  : st->types[i] == 'b' ? PG_OID_BYTEA
                                        : 0; /* NULL: the server infers the type */
    struct pg_cached *c = NULL;
    const char *nm = "";
    if (d->ncached < PG_STMT_CACHE_MAX) {
        c = sbx_xcalloc(1, sizeof(*c));
        snprintf(c->name, sizeof(c->name), "sbx_%u", ++d->serial);
        nm = c->name;
    }
    PGresult *res = PQprepare(d->c, nm, st->sql, st->nparams, oids);
    int r = res && PQresultStatus(res) == PGRES_COMMAND_OK ? 0 : res_fail(d, res, err, "prepare");
    PQclear(res);
    if (r < 0) {
        free(c);
        return r;
    }
    if (c) {
        c->key = TAKE_PTR(key);
        c->next = d->cache[b];
        d->cache[b] = c;
        d->ncached++;
        nm = c->name;
    }
    *name = nm;
    return 0;
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int run_locked(struct pg_db *d, struct pg_stmt *st, struct sbx_err *err)
{
    int r = ensure_connected(d, err);
    const char *name;
    if (r < 0 || (r = prepared_name(d, st, &name, err)) < 0)
        return r;
    long long t0 = d->profile ? now_ns() : 0;
    PGresult *res = PQexecPrepared(d->c, name, st->nparams, (const char *const *)st->vals, st->lens,
                                   st->fmts, 0);
    if (d->profile)
        d->profile(now_ns() - t0, d->profile_data);
    ExecStatusType s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
        r = res_fail(d, res, err, "step");
        PQclear(res);
        return r;
    }
    st->res = res;
    st->nrows = s == PGRES_TUPLES_OK ? PQntuples(res) : 0;
    st->changes = strtoll(PQcmdTuples(res), NULL, 10);
    return 0;
}

static int pg_step(struct db_stmt *stmt, struct sbx_err *err)
{
    struct pg_stmt *st = S(stmt);
    struct pg_db *d = D(stmt->db);
    if (st->bind_err[0])
        return sbx_err_set(err, EINVAL, "store_error", "store: bind: %s", st->bind_err);
    PQfreemem(st->blob);
    st->blob = NULL;
    if (!st->res) {
        pthread_mutex_lock(&d->mu);
        int r = run_locked(d, st, err);
        pthread_mutex_unlock(&d->mu);
        if (r < 0)
            return r;
    }
    return ++st->row < st->nrows ? DB_ROW : DB_DONE;
}

static bool in_row(const struct pg_stmt *st, int col)
{
    return st->res && st->row >= 0 && st->row < st->nrows && col >= 0 && col < PQnfields(st->res);
}

static const char *pg_col_text(struct db_stmt *stmt, int col)
{
    struct pg_stmt *st = S(stmt);
    if (!in_row(st, col) || PQgetisnull(st->res, st->row, col))
        return NULL;
    return PQgetvalue(st->res, st->row, col);
}

static long long pg_col_int64(struct db_stmt *stmt, int col)
{
    const char *v = pg_col_text(stmt, col);
    return v ? strtoll(v, NULL, 10) : 0;
}

static bool pg_col_null(struct db_stmt *stmt, int col)
{
    return pg_col_text(stmt, col) == NULL;
}

static const void *pg_col_blob(struct db_stmt *stmt, int col, size_t *n)
{
    struct pg_stmt *st = S(stmt);
    const char *v = pg_col_text(stmt, col);
    *n = 0;
    if (!v)
        return NULL;
    PQfreemem(st->blob);
    st->blob = PQunescapeBytea((const unsigned char *)v, n);
    return st->blob;
}

static long long pg_changes(struct db_stmt *stmt)
{
    return S(stmt)->changes;
}

static void pg_finalize(struct db_stmt *stmt)
{
    struct pg_stmt *st = S(stmt);
    for (int i = 0; i < DB_PARAMS_MAX; i++)
        free(st->vals[i]);
    PQclear(st->res);
    PQfreemem(st->blob);
    free(st->sql);
    free(st);
}

static int pg_tx_begin(struct db *db, enum db_tx kind, struct sbx_err *err)
{
    struct pg_db *d = D(db);
    if (d->depth >= PG_TX_DEPTH_MAX)
        return sbx_err_set(err, EINVAL, "store_error", "store: transactions nest too deep");
    char sql[64];
    if (d->depth == 0)
        snprintf(sql, sizeof(sql), "BEGIN");
    else
        snprintf(sql, sizeof(sql), "SAVEPOINT sbx_t%d", d->depth);
    pthread_mutex_lock(&d->mu);
    int r = exec_locked(d, sql, err, "begin");
    if (r == 0) {
        d->depth++;
        if (kind == DB_TX_LOCKED &&
            (r = exec_locked(d, "SELECT pg_advisory_xact_lock(" PG_WRITE_LOCK_KEY ")", err,
                             "take the write lock")) < 0) {
            d->depth--;
            if (d->depth == 0)
                snprintf(sql, sizeof(sql), "ROLLBACK");
            else
                snprintf(sql, sizeof(sql), "ROLLBACK TO SAVEPOINT sbx_t%d", d->depth);
            (void)exec_locked(d, sql, NULL, "rollback");
        }
    }
    pthread_mutex_unlock(&d->mu);
    return r;
}

static int pg_tx_end(struct db *db, bool commit, struct sbx_err *err)
{
    struct pg_db *d = D(db);
    if (d->depth == 0)
        return sbx_err_set(err, EINVAL, "store_error", "store: no transaction to end");
    char sql[96];
    int level = --d->depth;
    if (level == 0)
        snprintf(sql, sizeof(sql), commit ? "COMMIT" : "ROLLBACK");
    else if (commit)
        snprintf(sql, sizeof(sql), "RELEASE SAVEPOINT sbx_t%d", level);
    else
        snprintf(sql, sizeof(sql), "ROLLBACK TO SAVEPOINT sbx_t%d; RELEASE SAVEPOINT sbx_t%d",
                 level, level);
    pthread_mutex_lock(&d->mu);
    int r = PQstatus(d->c) == CONNECTION_OK
                ? exec_locked(d, sql, err, commit ? "commit" : "rollback")
                : res_fail(d, NULL, err, "the connection was lost inside a transaction");
    pthread_mutex_unlock(&d->mu);
    return r;
}

static void pg_describe(struct db *db, char *buf, size_t cap)
{
    struct pg_db *d = D(db);
    pthread_mutex_lock(&d->mu);
    int v = PQserverVersion(d->c);
    snprintf(buf, cap, "PostgreSQL %d.%d at %s:%s, database %s", v / 10000, v % 10000, PQhost(d->c),
             PQport(d->c), PQdb(d->c));
    pthread_mutex_unlock(&d->mu);
}

static int pg_hold_exclusive(struct db *db, const char *name, struct sbx_err *err)
{
    struct pg_db *d = D(db);
    pthread_mutex_lock(&d->mu);
    free(d->exclusive);
    d->exclusive = sbx_xstrdup(name);
    d->held = false;
    int r = ensure_connected(d, err);
    pthread_mutex_unlock(&d->mu);
    return r;
}

static int pg_backup(struct db *db, const char *dest, struct sbx_err *err)
{
    return sbx_err_set(err, ENOTSUP, "invalid_request",
                       "the store is PostgreSQL: back it up with pg_dump (or the server's own "
                       "backups), not `sbxd backup`");
}

static void pg_set_profile(struct db *db, db_profile_fn fn, void *data)
{
    struct pg_db *d = D(db);
    pthread_mutex_lock(&d->mu);
    d->profile = fn;
    d->profile_data = data;
    pthread_mutex_unlock(&d->mu);
}

static const struct db_ops pg_ops = {
    .close = pg_close,
    .exec = pg_exec,
    .prepare = pg_prepare,
    .bind = pg_bind,
    .step = pg_step,
    .col_text = pg_col_text,
    .col_int64 = pg_col_int64,
    .col_null = pg_col_null,
    .col_blob = pg_col_blob,
    .changes = pg_changes,
    .finalize = pg_finalize,
    .tx_begin = pg_tx_begin,
    .tx_end = pg_tx_end,
    .describe = pg_describe,
    .hold_exclusive = pg_hold_exclusive,
    .backup = pg_backup,
    .set_profile = pg_set_profile,
};

/* The server's notices (CREATE ... IF NOT EXISTS skipping) are not ours to print. */
static void quiet(void *arg, const char *message)
{
}

int db_pg_open(const char *url, struct db **out, struct sbx_err *err)
{
    struct pg_db *d = sbx_xcalloc(1, sizeof(*d));
    d->base = (struct db){.ops = &pg_ops, .dialect = DB_POSTGRES};
    pthread_mutex_init(&d->mu, NULL);
    /* Defaults the URL may override (it is expanded last): a bounded connect, a dead
     * server noticed within a minute (keepalives), a lock waited for 5 s as SQLite's busy
     * timeout (then store_busy), no statement running past a minute, a name in
     * pg_stat_activity. */
    const char *const keys[] = {"connect_timeout",
                                "keepalives_idle",
                                "keepalives_interval",
                                "keepalives_count",
                                "options",
                                "application_name",
                                "dbname",
                                NULL};
    const char *const vals[] = {
        "10",   "30", "10", "3", "-c lock_timeout=5000 -c statement_timeout=60000",
        "sbxd", url,  NULL};
    d->c = PQconnectdbParams(keys, vals, 1);
    if (!d->c || PQstatus(d->c) != CONNECTION_OK) {
        char msg[256];
        /* The URL may hold a password: it is never part of the message. */
        int r = sbx_err_set(err, EIO, "store_unavailable", "connecting to PostgreSQL: %s",
                            trimmed(msg, sizeof(msg), d->c ? PQerrorMessage(d->c) : "no memory"));
        pg_close(&d->base);
        return r;
    }
    PQsetNoticeProcessor(d->c, quiet, NULL);
    *out = &d->base;
    return 0;
}
