/* Skills installed into sandbox configurations and the workspace snapshot each
 * configuration's sandboxes start from (tables in skill_catalog.c's schema). Env values
 * arrive sealed (configs/secrets.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

void store_skill_install_clear(struct store_skill_install *i)
{
    if (!i)
        return;
    free(i->error);
    free(i->envs_json);
    memset(i, 0, sizeof(*i));
}

int store_skill_install_put(struct store *s, const struct store_skill_install *i,
                            struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(
        s->conn, &st, err,
        "INSERT INTO skill_installs(id,config_id,catalog_id,name,version,bundle_sha256,enabled,"
        "status,error,snapshot_id,served_catalog_id,served_version,session_id,message_id,envs,"
        "owner,created_at,updated_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
        "ON CONFLICT(id) DO UPDATE SET catalog_id=excluded.catalog_id, version=excluded.version,"
        " bundle_sha256=excluded.bundle_sha256, enabled=excluded.enabled,"
        " status=excluded.status, error=excluded.error, snapshot_id=excluded.snapshot_id,"
        " served_catalog_id=excluded.served_catalog_id, served_version=excluded.served_version,"
        " session_id=excluded.session_id, message_id=excluded.message_id, envs=excluded.envs,"
        " updated_at=excluded.updated_at",
        "ttttttitttttttttii", i->id, i->config_id, i->catalog_id, i->name, i->version,
        i->bundle_sha256, (long long)i->enabled, i->status, i->error, i->snapshot_id,
        i->served_catalog_id, i->served_version, i->session_id, i->message_id,
        i->envs_json ? i->envs_json : "{}", i->owner, i->created_at, i->updated_at);
    if (r < 0)
        return r;
    r = db_run(st, err);
    return r == -EEXIST
               ? sbx_err_set(err, EEXIST, "skill_installed",
                             "configuration %s already has a skill named %s", i->config_id, i->name)
               : r;
}

#define COLUMNS                                                                                    \
    "id,config_id,catalog_id,name,version,bundle_sha256,enabled,status,error,snapshot_id,"         \
    "served_catalog_id,served_version,session_id,message_id,envs,owner,created_at,updated_at"

static void row(struct db_stmt *st, struct store_skill_install *i)
{
    db_col_copy(st, 0, i->id, sizeof(i->id));
    db_col_copy(st, 1, i->config_id, sizeof(i->config_id));
    db_col_copy(st, 2, i->catalog_id, sizeof(i->catalog_id));
    db_col_copy(st, 3, i->name, sizeof(i->name));
    db_col_copy(st, 4, i->version, sizeof(i->version));
    db_col_copy(st, 5, i->bundle_sha256, sizeof(i->bundle_sha256));
    i->enabled = db_col_int64(st, 6) != 0;
    db_col_copy(st, 7, i->status, sizeof(i->status));
    i->error = db_col_dup(st, 8);
    db_col_copy(st, 9, i->snapshot_id, sizeof(i->snapshot_id));
    db_col_copy(st, 10, i->served_catalog_id, sizeof(i->served_catalog_id));
    db_col_copy(st, 11, i->served_version, sizeof(i->served_version));
    db_col_copy(st, 12, i->session_id, sizeof(i->session_id));
    db_col_copy(st, 13, i->message_id, sizeof(i->message_id));
    i->envs_json = db_col_dup(st, 14);
    db_col_copy(st, 15, i->owner, sizeof(i->owner));
    i->created_at = db_col_int64(st, 16);
    i->updated_at = db_col_int64(st, 17);
}

int store_skill_install_get(struct store *s, const char *config_id, const char *id,
                            struct store_skill_install *out, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT " COLUMNS
                     " FROM skill_installs WHERE id=?1 AND (?2 IS NULL OR config_id=?2)",
                     "tt", id, config_id);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_ROW)
        row(st, out);
    else if (r == DB_DONE)
        r = sbx_err_set(err, ENOENT, "skill_install_not_found",
                        "no skill %.64s installed in this configuration", id);
    db_finalize(st);
    return r < 0 ? r : 0;
}

int store_skill_install_each(struct store *s, const char *config_id, const char *catalog_id,
                             store_skill_install_cb cb, void *data, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT " COLUMNS " FROM skill_installs WHERE (?1 IS NULL OR config_id=?1)"
                     " AND (?2 IS NULL OR catalog_id=?2 OR served_catalog_id=?2)"
                     " ORDER BY created_at, id",
                     "tt", config_id, catalog_id);
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_skill_install i = {0};
        row(st, &i);
        cb(&i, data);
        store_skill_install_clear(&i);
    }
    db_finalize(st);
    return r;
}

int store_skill_install_delete(struct store *s, const char *id, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err, "DELETE FROM skill_installs WHERE id=?", "t", id);
    return r < 0 ? r : db_run(st, err);
}

int store_skill_install_interrupt(struct store *s, long long now, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "UPDATE skill_installs SET status='failed', error='interrupted: sbxd "
                     "stopped during the install', updated_at=? WHERE status='installing'",
                     "i", now);
    return r < 0 ? r : db_run(st, err);
}

int store_skill_config_snapshot_set(struct store *s, const char *config_id, const char *snapshot_id,
                                    struct sbx_err *err)
{
    struct db_stmt *st;
    int r = snapshot_id && *snapshot_id
                ? db_query(s->conn, &st, err,
                           "INSERT INTO skill_config_snapshots(config_id,snapshot_id) "
                           "VALUES(?,?) ON CONFLICT(config_id) DO UPDATE SET "
                           "snapshot_id=excluded.snapshot_id",
                           "tt", config_id, snapshot_id)
                : db_query(s->conn, &st, err,
                           "DELETE FROM skill_config_snapshots WHERE config_id=?", "t", config_id);
    return r < 0 ? r : db_run(st, err);
}

int store_skill_config_snapshot_get(struct store *s, const char *config_id,
                                    char out[STORE_ID_MAX + 1], struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT snapshot_id FROM skill_config_snapshots WHERE config_id=?", "t",
                     config_id);
    if (r < 0)
        return r;
    out[0] = '\0';
    if ((r = db_step(st, err)) == DB_ROW)
        db_col_copy(st, 0, out, STORE_ID_MAX + 1);
    db_finalize(st);
    return r < 0 ? r : 0;
}

int store_skill_installs_forget(struct store *s, const char *config_id, struct sbx_err *err)
{
    struct db_stmt *st;
    int r =
        db_query(s->conn, &st, err, "DELETE FROM skill_installs WHERE config_id=?", "t", config_id);
    if (r < 0 || (r = db_run(st, err)) < 0)
        return r;
    return store_skill_config_snapshot_set(s, config_id, NULL, err);
}

int store_skill_installs_repoint(struct store *s, const char *config_id, const char *snapshot_id,
                                 struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "UPDATE skill_installs SET snapshot_id=?1 WHERE config_id=?2 AND "
                     "snapshot_id!=''",
                     "tt", snapshot_id, config_id);
    return r < 0 ? r : db_run(st, err);
}

int store_skill_snapshot_used(struct store *s, const char *snapshot_id, bool *used,
                              struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT 1 FROM skill_config_snapshots WHERE snapshot_id=?1 UNION ALL "
                     "SELECT 1 FROM skill_installs WHERE snapshot_id=?1 LIMIT 1",
                     "t", snapshot_id);
    if (r < 0)
        return r;
    r = db_step(st, err);
    *used = r == DB_ROW;
    db_finalize(st);
    return r < 0 ? r : 0;
}
