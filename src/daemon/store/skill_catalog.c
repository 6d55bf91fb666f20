/* The skill catalog's rows; the bundles themselves are unpacked under <data>/skills/<id>. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

const char *const store_skill_schema =
    "CREATE TABLE IF NOT EXISTS skill_catalog("
    "  id TEXT PRIMARY KEY, name TEXT NOT NULL, version TEXT NOT NULL,"
    "  description TEXT NOT NULL, bundle_sha256 TEXT NOT NULL, source TEXT NOT NULL,"
    "  owner TEXT NOT NULL, envs TEXT NOT NULL, created_at INTEGER NOT NULL,"
    "  UNIQUE(name, version));"
    /* Skills installed into sandbox configurations (skill_installs.c). */
    "CREATE TABLE IF NOT EXISTS skill_installs("
    "  id TEXT PRIMARY KEY, config_id TEXT NOT NULL, catalog_id TEXT NOT NULL,"
    "  name TEXT NOT NULL, version TEXT NOT NULL, bundle_sha256 TEXT NOT NULL,"
    "  enabled INTEGER NOT NULL, status TEXT NOT NULL, error TEXT, snapshot_id TEXT NOT NULL,"
    "  served_catalog_id TEXT NOT NULL, served_version TEXT NOT NULL, session_id TEXT NOT NULL,"
    "  message_id TEXT NOT NULL, envs TEXT NOT NULL, owner TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, UNIQUE(config_id, name));"
    "CREATE TABLE IF NOT EXISTS skill_config_snapshots("
    "  config_id TEXT PRIMARY KEY, snapshot_id TEXT NOT NULL);";

void store_skill_clear(struct store_skill *k)
{
    free(k->description);
    free(k->envs_json);
    memset(k, 0, sizeof(*k));
}

int store_skill_insert(struct store *s, const struct store_skill *k, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT INTO skill_catalog(id,name,version,description,bundle_sha256,"
                          "source,owner,envs,created_at) VALUES(?,?,?,?,?,?,?,?,?)",
                          &st, err, "tttttttti", k->id, k->name, k->version, k->description,
                          k->bundle_sha256, k->source, k->owner, k->envs_json, k->created_at);
    if (r < 0)
        return r;
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc == SQLITE_CONSTRAINT)
        return sbx_err_set(err, EEXIST, "skill_exists", "the catalog already has %s version %s",
                           k->name, k->version);
    return rc == SQLITE_DONE ? 0 : store_db_err(s, err, "insert skill");
}

static void row(sqlite3_stmt *st, struct store_skill *k)
{
    store_col_text(st, 0, k->id, sizeof(k->id));
    store_col_text(st, 1, k->name, sizeof(k->name));
    store_col_text(st, 2, k->version, sizeof(k->version));
    k->description = sbx_xstrdup((const char *)sqlite3_column_text(st, 3));
    store_col_text(st, 4, k->bundle_sha256, sizeof(k->bundle_sha256));
    store_col_text(st, 5, k->source, sizeof(k->source));
    store_col_text(st, 6, k->owner, sizeof(k->owner));
    k->envs_json = sbx_xstrdup((const char *)sqlite3_column_text(st, 7));
    k->created_at = sqlite3_column_int64(st, 8);
}

#define COLUMNS "id,name,version,description,bundle_sha256,source,owner,envs,created_at"

int store_skill_get(struct store *s, const char *id, struct store_skill *out, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "SELECT " COLUMNS " FROM skill_catalog WHERE id=?", &st, err, "t", id);
    if (r < 0)
        return r;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        row(st, out);
    else if (rc == SQLITE_DONE)
        r = sbx_err_set(err, ENOENT, "skill_not_found", "no skill with id %.64s", id);
    else
        r = store_db_err(s, err, "get skill");
    sqlite3_finalize(st);
    return r;
}

int store_skill_find(struct store *s, const char *name, const char *version,
                     char id[STORE_SKILL_ID_MAX + 1], struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "SELECT id FROM skill_catalog WHERE name=? AND version=?", &st, err,
                          "tt", name, version);
    if (r < 0)
        return r;
    id[0] = '\0';
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        store_col_text(st, 0, id, STORE_SKILL_ID_MAX + 1);
    else if (rc != SQLITE_DONE)
        r = store_db_err(s, err, "find skill");
    sqlite3_finalize(st);
    return r;
}

int store_skill_each(struct store *s, store_skill_cb cb, void *data, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "SELECT " COLUMNS " FROM skill_catalog ORDER BY created_at, id", &st,
                          err, "");
    if (r < 0)
        return r;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_skill k = {0};
        row(st, &k);
        cb(&k, data);
        store_skill_clear(&k);
    }
    if (rc != SQLITE_DONE)
        r = store_db_err(s, err, "list skills");
    sqlite3_finalize(st);
    return r;
}

int store_skill_delete(struct store *s, const char *id, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "DELETE FROM skill_catalog WHERE id=?", &st, err, "t", id);
    if (r < 0)
        return r;
    return store_step_done(s, st, err, "delete skill");
}
