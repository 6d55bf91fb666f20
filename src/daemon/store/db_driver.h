/* What a driver of db.h implements (db_sqlite.c, db_pg.c); db.c dispatches to it.
 * Not for anything but the drivers and db.c. */
#ifndef SBX_STORE_DB_DRIVER_H
#define SBX_STORE_DB_DRIVER_H

#include "db.h"

enum db_type { DB_T_NULL, DB_T_TEXT, DB_T_INT, DB_T_BLOB };

/* A bound value, borrowed for the length of the bind call. */
struct db_value {
    enum db_type type;
    const void *p; /* text (NUL-terminated; NULL: a NULL of type text) or blob bytes */
    size_t n;      /* blob length */
    long long i;
};

struct db_ops {
    void (*close)(struct db *db);
    int (*exec)(struct db *db, const char *sql, struct sbx_err *err);
    int (*prepare)(struct db *db, const char *sql, struct db_stmt **out, struct sbx_err *err);
    void (*bind)(struct db_stmt *st, int i, const struct db_value *v);
    int (*step)(struct db_stmt *st, struct sbx_err *err);
    const char *(*col_text)(struct db_stmt *st, int col);
    long long (*col_int64)(struct db_stmt *st, int col);
    bool (*col_null)(struct db_stmt *st, int col);
    const void *(*col_blob)(struct db_stmt *st, int col, size_t *n);
    long long (*changes)(struct db_stmt *st);
    void (*finalize)(struct db_stmt *st);
    int (*tx_begin)(struct db *db, enum db_tx kind, struct sbx_err *err);
    int (*tx_end)(struct db *db, bool commit, struct sbx_err *err);
    void (*describe)(struct db *db, char *buf, size_t cap);
    int (*hold_exclusive)(struct db *db, const char *name, struct sbx_err *err);
    int (*backup)(struct db *db, const char *dest, struct sbx_err *err);
    void (*set_profile)(struct db *db, db_profile_fn fn, void *data);
};

/* The first member of each driver's connection and statement. */
struct db {
    const struct db_ops *ops;
    enum db_dialect dialect;
};
struct db_stmt {
    struct db *db;
};

int db_sqlite_open(const char *path, struct db **out, struct sbx_err *err);
int db_pg_open(const char *url, struct db **out, struct sbx_err *err);

/* sql with ?/?N placeholders as PostgreSQL's $N (a new string); *nparams: the highest
 * number used. Quoted strings, quoted names and -- comments are copied as they are. */
int db_sql_dollar(const char *sql, char **out, int *nparams, struct sbx_err *err);

#endif
