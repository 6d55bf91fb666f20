/* The store's schema as numbered migrations, applied at open under the store-wide write
 * lock (so nodes starting together apply each once) and recorded in schema_version.
 * This is the one place that knows how SQLite's and PostgreSQL's DDL differ. */
#ifndef SBX_STORE_MIGRATE_H
#define SBX_STORE_MIGRATE_H

#include "db.h"

/* Apply what the store lacks. A store whose version is newer than this sbxd knows is
 * refused (store_schema_newer): an older binary must not write a newer schema. */
int store_migrate(struct db *db, struct sbx_err *err);
/* The highest version this binary knows, and the store's (0: none applied). */
int store_schema_latest(void);
int store_schema_version(struct db *db, int *out, struct sbx_err *err);

#endif
