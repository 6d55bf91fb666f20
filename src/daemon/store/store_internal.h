/* Shared by the store's parts; not for anything outside src/daemon/store/. */
#ifndef SBX_STORE_INTERNAL_H
#define SBX_STORE_INTERNAL_H

#include <sqlite3.h>
#include <stddef.h>

#include "db.h"
#include "store.h"

struct store {
    struct db *conn; /* the store: SQLite or PostgreSQL (db.h) */
    /* Transitional: the SQLite connection of the parts not yet on db.h (exec records,
     * egress, the audit chain, the skill catalog). With SQLite it is conn's own; with
     * PostgreSQL it is a local SQLite file beside it (local), until those parts move. */
    sqlite3 *db;
    struct db *local;
};

/* --- transitional: the raw SQLite helpers of the parts not yet on db.h ------------- */

/* Their tables, created on the SQLite connection (s->db) at open. Each moves into a
 * numbered migration (migrate.c) when its file moves to db.h. */
extern const char *const store_exec_schema;
extern const char *const store_audit_schema;
extern const char *const store_egress_schema;
extern const char *const store_skill_schema;
extern const char *const store_chat_schema;

int store_db_err(struct store *s, struct sbx_err *err, const char *what);
/* Prepare sql and bind arguments by types: 't' text (NULL binds NULL), 'i' int64. */
int store_prepare(struct store *s, const char *sql, sqlite3_stmt **st, struct sbx_err *err,
                  const char *types, ...);
void store_col_text(sqlite3_stmt *st, int col, char *dst, size_t cap);
/* Step a statement that returns no rows, finalize it, and say whether it ran. */
int store_step_done(struct store *s, sqlite3_stmt *st, struct sbx_err *err, const char *what);

#endif
