/* Shared by the store's parts (store.c, execs.c, idempotency.c, audit.c); not for
 * anything outside src/daemon/store/. */
#ifndef SBX_STORE_INTERNAL_H
#define SBX_STORE_INTERNAL_H

#include <sqlite3.h>
#include <stddef.h>

#include "store.h"

struct store {
    sqlite3 *db;
};

extern const char *const store_exec_schema;
extern const char *const store_idem_schema;
extern const char *const store_audit_schema;
extern const char *const store_egress_schema;
extern const char *const store_meta_schema;
extern const char *const store_skill_schema;
extern const char *const store_usage_schema;
extern const char *const store_config_schema;
extern const char *const store_chat_schema;

int store_db_err(struct store *s, struct sbx_err *err, const char *what);
/* Prepare sql and bind arguments by types: 't' text (NULL binds NULL), 'i' int64. */
int store_prepare(struct store *s, const char *sql, sqlite3_stmt **st, struct sbx_err *err,
                  const char *types, ...);
void store_col_text(sqlite3_stmt *st, int col, char *dst, size_t cap);
/* Step a statement that returns no rows, finalize it, and say whether it ran. */
int store_step_done(struct store *s, sqlite3_stmt *st, struct sbx_err *err, const char *what);

#endif
