/* db.h's calls, dispatched to the driver; and what both drivers share. */
#include "db.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "db_driver.h"

bool db_target_is_postgres(const char *target)
{
    return target && (!strncmp(target, "postgres://", 11) || !strncmp(target, "postgresql://", 13));
}

int db_open(const char *target, struct db **out, struct sbx_err *err)
{
    *out = NULL;
    if (!target || !target[0])
        return sbx_err_set(err, EINVAL, "store_error", "no store named");
    return db_target_is_postgres(target) ? db_pg_open(target, out, err)
                                         : db_sqlite_open(target, out, err);
}

void db_close(struct db *db)
{
    if (db)
        db->ops->close(db);
}

enum db_dialect db_dialect(const struct db *db)
{
    return db->dialect;
}

int db_exec(struct db *db, const char *sql, struct sbx_err *err)
{
    return db->ops->exec(db, sql, err);
}

int db_prepare(struct db *db, const char *sql, struct db_stmt **out, struct sbx_err *err)
{
    *out = NULL;
    return db->ops->prepare(db, sql, out, err);
}

void db_bind_text(struct db_stmt *st, int i, const char *v)
{
    /* A NULL text is still text: PostgreSQL cannot type "? IS NULL" by itself. */
    st->db->ops->bind(st, i, &(struct db_value){.type = DB_T_TEXT, .p = v});
}

void db_bind_int64(struct db_stmt *st, int i, long long v)
{
    st->db->ops->bind(st, i, &(struct db_value){.type = DB_T_INT, .i = v});
}

void db_bind_blob(struct db_stmt *st, int i, const void *p, size_t n)
{
    st->db->ops->bind(st, i, &(struct db_value){.type = DB_T_BLOB, .p = p ? p : "", .n = n});
}

void db_bind_null(struct db_stmt *st, int i)
{
    st->db->ops->bind(st, i, &(struct db_value){.type = DB_T_NULL});
}

int db_query(struct db *db, struct db_stmt **out, struct sbx_err *err, const char *sql,
             const char *types, ...)
{
    int r = db_prepare(db, sql, out, err);
    if (r < 0)
        return r;
    va_list ap;
    va_start(ap, types);
    for (int i = 0; types[i]; i++) {
        if (types[i] == 't')
            db_bind_text(*out, i + 1, va_arg(ap, const char *));
        else
            db_bind_int64(*out, i + 1, va_arg(ap, long long));
    }
    va_end(ap);
    return 0;
}

int db_step(struct db_stmt *st, struct sbx_err *err)
{
    return st->db->ops->step(st, err);
}

const char *db_col_text(struct db_stmt *st, int col)
{
    return st->db->ops->col_text(st, col);
}

long long db_col_int64(struct db_stmt *st, int col)
{
    return st->db->ops->col_int64(st, col);
}

bool db_col_null(struct db_stmt *st, int col)
{
    return st->db->ops->col_null(st, col);
}

const void *db_col_blob(struct db_stmt *st, int col, size_t *n)
{
    return st->db->ops->col_blob(st, col, n);
}

void db_col_copy(struct db_stmt *st, int col, char *dst, size_t cap)
{
    const char *v = db_col_text(st, col);
    snprintf(dst, cap, "%s", v ? v : "");
}

char *db_col_dup(struct db_stmt *st, int col)
{
    const char *v = db_col_text(st, col);
    return v ? sbx_xstrdup(v) : NULL;
}

long long db_changes(struct db_stmt *st)
{
    return st->db->ops->changes(st);
}

void db_finalize(struct db_stmt *st)
{
    if (st)
        st->db->ops->finalize(st);
}

int db_run(struct db_stmt *st, struct sbx_err *err)
{
    int r = db_step(st, err);
    db_finalize(st);
    return r < 0 ? r : 0;
}

int db_run_changes(struct db_stmt *st, long long *changes, struct sbx_err *err)
{
    int r = db_step(st, err);
    if (r == DB_DONE)
        *changes = db_changes(st);
    db_finalize(st);
    return r < 0 ? r : 0;
}

int db_tx_begin(struct db *db, enum db_tx kind, struct sbx_err *err)
{
    return db->ops->tx_begin(db, kind, err);
}

int db_tx_end(struct db *db, bool commit, struct sbx_err *err)
{
    return db->ops->tx_end(db, commit, err);
}

void db_describe(struct db *db, char *buf, size_t cap)
{
    db->ops->describe(db, buf, cap);
}

int db_hold_exclusive(struct db *db, const char *name, struct sbx_err *err)
{
    return db->ops->hold_exclusive(db, name, err);
}

int db_backup(struct db *db, const char *dest, struct sbx_err *err)
{
    return db->ops->backup(db, dest, err);
}

void db_set_profile(struct db *db, db_profile_fn fn, void *data)
{
    db->ops->set_profile(db, fn, data);
}
