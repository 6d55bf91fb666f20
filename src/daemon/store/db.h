/* The store's driver layer: one small prepared-statement interface with two
 * implementations, SQLite (embedded, the default: db_sqlite.c) and PostgreSQL (libpq, a
 * store shared by many nodes: db_pg.c). The store's files write portable SQL against
 * it; the dialect differences that remain (column types, identity columns, triggers)
 * live in the migrations (migrate.c) and nowhere else.
 *
 * Errors: a negative errno and a struct sbx_err whose code is one of
 *   store_conflict    (-EEXIST) a unique or primary key constraint refused the row
 *   store_busy        (-EAGAIN) a lock or serialization conflict outlasted the wait
 *   store_unavailable (-EIO)    the server cannot be reached
 *   store_error       (-EIO)    anything else the database refused
 * so callers can tell "that name is taken" from "the store is down". */
#ifndef SBX_STORE_DB_H
#define SBX_STORE_DB_H

#include <stdbool.h>
#include <stddef.h>

#include "../../common/err.h"

enum db_dialect { DB_SQLITE, DB_POSTGRES };

/* What db_step returns besides a negative errno. */
#define DB_DONE 0
#define DB_ROW 1

/* The most parameters one statement binds; ?N beyond it is refused at prepare. */
#define DB_PARAMS_MAX 32

struct db;
struct db_stmt;

/* postgres:// or postgresql:// (libpq's URI form); anything else is a SQLite file path. */
bool db_target_is_postgres(const char *target);
int db_open(const char *target, struct db **out, struct sbx_err *err);
void db_close(struct db *db);
enum db_dialect db_dialect(const struct db *db);

/* ';'-separated statements without parameters or rows (schemas, migrations). */
int db_exec(struct db *db, const char *sql, struct sbx_err *err);

/* Placeholders are ? (the next number) and ?N (number N), SQLite's rules; PostgreSQL
 * gets them as $N. Binds are 1-based and copied; a binding mistake is reported by the
 * next db_step. */
int db_prepare(struct db *db, const char *sql, struct db_stmt **out, struct sbx_err *err);
void db_bind_text(struct db_stmt *st, int i, const char *v); /* NULL binds NULL */
void db_bind_int64(struct db_stmt *st, int i, long long v);
void db_bind_blob(struct db_stmt *st, int i, const void *p, size_t n);
void db_bind_null(struct db_stmt *st, int i);
/* Prepare and bind by types: 't' text (NULL binds NULL), 'i' long long. */
int db_query(struct db *db, struct db_stmt **out, struct sbx_err *err, const char *sql,
             const char *types, ...);

/* DB_ROW while rows come, DB_DONE at the end, or a negative errno (err filled). */
int db_step(struct db_stmt *st, struct sbx_err *err);
/* Column getters for the current row: text is NULL for NULL and valid until the next
 * step; integers read 0 for NULL. */
const char *db_col_text(struct db_stmt *st, int col);
long long db_col_int64(struct db_stmt *st, int col);
bool db_col_null(struct db_stmt *st, int col);
const void *db_col_blob(struct db_stmt *st, int col, size_t *n);
/* Copies: into a buffer (truncated, "" for NULL), or a new string (NULL for NULL). */
void db_col_copy(struct db_stmt *st, int col, char *dst, size_t cap);
char *db_col_dup(struct db_stmt *st, int col);
/* Rows the statement's last step inserted, updated or deleted. */
long long db_changes(struct db_stmt *st);
void db_finalize(struct db_stmt *st);
/* Step a statement that returns no rows, then finalize it. */
int db_run(struct db_stmt *st, struct sbx_err *err);
/* The same, saying how many rows it changed. */
int db_run_changes(struct db_stmt *st, long long *changes, struct sbx_err *err);

/* Transactions nest (inner ones are savepoints). DB_TX_LOCKED also takes the store-wide
 * write lock before anything is read, so read-then-write sequences (the audit chain's
 * head) are serial across every connection and node: SQLite's BEGIN IMMEDIATE, a
 * PostgreSQL transaction-scoped advisory lock. */
enum db_tx { DB_TX_PLAIN, DB_TX_LOCKED };
int db_tx_begin(struct db *db, enum db_tx kind, struct sbx_err *err);
int db_tx_end(struct db *db, bool commit, struct sbx_err *err);

/* What the store is, for the log: "SQLite <path>" or "PostgreSQL <version> at
 * <host>:<port>, database <name>" (never the password). */
void db_describe(struct db *db, char *buf, size_t cap);

/* Hold name (a node's id) for this connection alone until db_close: -EBUSY (node_in_use)
 * while another connection holds it. PostgreSQL: a session advisory lock, taken again
 * after a reconnect; SQLite: nothing (the data dir is the process's own). Two processes
 * running as one node would each take the other's sandboxes for lost ones. */
int db_hold_exclusive(struct db *db, const char *name, struct sbx_err *err);

/* An online copy into dest (a new file); SQLite only (PostgreSQL: pg_dump). */
int db_backup(struct db *db, const char *dest, struct sbx_err *err);

/* Every statement's run time, for the store latency metric. fn NULL: off. */
typedef void (*db_profile_fn)(long long ns, void *data);
void db_set_profile(struct db *db, db_profile_fn fn, void *data);

#endif
