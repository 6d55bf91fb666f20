/* Sandbox configurations (docs/configs.md): the configurations themselves, which
 * configuration each sandbox was made from with the network policy it got, the
 * workspace's settings, personal variables and the skills' variable declarations.
 * Secret values arrive here already encrypted (configs/secrets.c); the store never
 * sees them in clear. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

const char *const store_config_schema =
    "CREATE TABLE IF NOT EXISTS sandbox_configs("
    "  id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, description TEXT NOT NULL,"
    "  config TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
    "  lock_owner TEXT, lock_until_ms INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE IF NOT EXISTS sandbox_config_of("
    "  sandbox_id TEXT PRIMARY KEY, config_id TEXT NOT NULL, network TEXT, env TEXT);"
    "CREATE INDEX IF NOT EXISTS sandbox_config_of_config ON sandbox_config_of(config_id);"
    "CREATE TABLE IF NOT EXISTS workspace_settings(name TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS personal_env("
    "  user TEXT NOT NULL, scope TEXT NOT NULL, target TEXT NOT NULL, name TEXT NOT NULL,"
    "  value TEXT NOT NULL, updated_at INTEGER NOT NULL,"
    "  PRIMARY KEY(user, scope, target, name));"
    "CREATE TABLE IF NOT EXISTS skill_env_decls("
    "  skill_id TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL,"
    "  required INTEGER NOT NULL, value TEXT, updated_at INTEGER NOT NULL,"
    "  PRIMARY KEY(skill_id, name));";

static char *col_dup(sqlite3_stmt *st, int col)
{
    const unsigned char *v = sqlite3_column_text(st, col);
    return v ? sbx_xstrdup((const char *)v) : NULL;
}

void store_config_clear(struct store_config *c)
{
    if (!c)
        return;
    free(c->name);
    free(c->description);
    free(c->config_json);
    memset(c, 0, sizeof(*c));
}

static bool is_unique_violation(struct store *s)
{
    return sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_UNIQUE ||
           sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_PRIMARYKEY;
}

int store_config_insert(struct store *s, const struct store_config *c, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT INTO sandbox_configs(id,name,description,config,created_at,"
                          "updated_at) VALUES(?,?,?,?,?,?)",
                          &st, err, "ttttii", c->id, c->name, c->description, c->config_json,
                          c->created_at, c->updated_at);
    if (r < 0)
        return r;
    if (sqlite3_step(st) != SQLITE_DONE)
        r = is_unique_violation(s) ? sbx_err_set(err, EEXIST, "sandbox_config_exists",
                                                 "a configuration named %.64s exists", c->name)
                                   : store_db_err(s, err, "insert configuration");
    sqlite3_finalize(st);
    return r;
}

int store_config_update(struct store *s, const struct store_config *c, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "UPDATE sandbox_configs SET name=?,description=?,config=?,updated_at=? "
                          "WHERE id=?",
                          &st, err, "tttit", c->name, c->description, c->config_json, c->updated_at,
                          c->id);
    if (r < 0)
        return r;
    if (sqlite3_step(st) != SQLITE_DONE)
        r = is_unique_violation(s) ? sbx_err_set(err, EEXIST, "sandbox_config_exists",
                                                 "a configuration named %.64s exists", c->name)
                                   : store_db_err(s, err, "update configuration");
    else if (sqlite3_changes(s->db) == 0)
        r = sbx_err_set(err, ENOENT, "sandbox_config_not_found", "no configuration %.64s", c->id);
    sqlite3_finalize(st);
    return r;
}

#define CONFIG_COLS "id,name,description,config,created_at,updated_at"

static void row_to_config(sqlite3_stmt *st, struct store_config *c)
{
    memset(c, 0, sizeof(*c));
    store_col_text(st, 0, c->id, sizeof(c->id));
    c->name = col_dup(st, 1);
    c->description = col_dup(st, 2);
    c->config_json = col_dup(st, 3);
    c->created_at = sqlite3_column_int64(st, 4);
    c->updated_at = sqlite3_column_int64(st, 5);
}

int store_config_get(struct store *s, const char *id, struct store_config *out, struct sbx_err *err)
{
    sqlite3_stmt *st;
    memset(out, 0, sizeof(*out));
    int r = store_prepare(s, "SELECT " CONFIG_COLS " FROM sandbox_configs WHERE id=?", &st, err,
                          "t", id);
    if (r < 0)
        return r;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        row_to_config(st, out);
    else if (rc == SQLITE_DONE)
        r = sbx_err_set(err, ENOENT, "sandbox_config_not_found", "no configuration %.64s", id);
    else
        r = store_db_err(s, err, "get configuration");
    sqlite3_finalize(st);
    return r;
}

int store_config_each(struct store *s, store_config_cb cb, void *data, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "SELECT " CONFIG_COLS " FROM sandbox_configs ORDER BY created_at, id",
                          &st, err, "");
    if (r < 0)
        return r;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_config c;
        row_to_config(st, &c);
        cb(&c, data);
        store_config_clear(&c);
    }
    r = rc == SQLITE_DONE ? 0 : store_db_err(s, err, "list configurations");
    sqlite3_finalize(st);
    return r;
}

int store_config_delete(struct store *s, const char *id, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "DELETE FROM sandbox_configs WHERE id=?", &st, err, "t", id);
    if (r < 0)
        return r;
    if (sqlite3_step(st) != SQLITE_DONE)
        r = store_db_err(s, err, "delete configuration");
    else if (sqlite3_changes(s->db) == 0)
        r = sbx_err_set(err, ENOENT, "sandbox_config_not_found", "no configuration %.64s", id);
    sqlite3_finalize(st);
    if (r < 0)
        return r;
    r = store_prepare(s, "DELETE FROM personal_env WHERE scope='sandbox' AND target=?", &st, err,
                      "t", id);
    if (r < 0 || (r = store_step_done(s, st, err, "delete personal variables")) < 0)
        return r;
    return store_skill_installs_forget(s, id, err);
}

int store_config_lock(struct store *s, const char *id, const char *owner, long long now_ms,
                      long long until_ms, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "UPDATE sandbox_configs SET lock_owner=?, lock_until_ms=? "
                          "WHERE id=? AND (lock_owner IS NULL OR lock_until_ms<?)",
                          &st, err, "titi", owner, until_ms, id, now_ms);
    if (r < 0)
        return r;
    if (sqlite3_step(st) != SQLITE_DONE) {
        r = store_db_err(s, err, "lock configuration");
    } else if (sqlite3_changes(s->db) == 0) {
        struct store_config c;
        struct sbx_err e2 = {0};
        if (store_config_get(s, id, &c, &e2) < 0) {
            *err = e2;
            r = sbx_err_ret(err);
        } else {
            r = sbx_err_set(err, EBUSY, "sandbox_config_locked",
                            "configuration %s is being changed by another request", id);
            store_config_clear(&c);
        }
    }
    sqlite3_finalize(st);
    return r;
}

int store_config_unlock(struct store *s, const char *id, const char *owner, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "UPDATE sandbox_configs SET lock_owner=NULL, lock_until_ms=0 "
                          "WHERE id=? AND lock_owner=?",
                          &st, err, "tt", id, owner);
    return r < 0 ? r : store_step_done(s, st, err, "unlock configuration");
}

/* --- which configuration a sandbox came from ------------------------------------------ */

int store_sandbox_config_set(struct store *s, const char *sandbox_id, const char *config_id,
                             const char *network_json, const char *sealed_env, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT OR REPLACE INTO sandbox_config_of(sandbox_id,config_id,network,"
                          "env) VALUES(?,?,?,?)",
                          &st, err, "tttt", sandbox_id, config_id, network_json, sealed_env);
    return r < 0 ? r : store_step_done(s, st, err, "set sandbox configuration");
}

int store_sandbox_config_get(struct store *s, const char *sandbox_id,
                             char config_id[STORE_ID_MAX + 1], char **network_json,
                             char **sealed_env, struct sbx_err *err)
{
    sqlite3_stmt *st;
    config_id[0] = '\0';
    if (network_json)
        *network_json = NULL;
    if (sealed_env)
        *sealed_env = NULL;
    int r =
        store_prepare(s, "SELECT config_id,network,env FROM sandbox_config_of WHERE sandbox_id=?",
                      &st, err, "t", sandbox_id);
    if (r < 0)
        return r;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        store_col_text(st, 0, config_id, STORE_ID_MAX + 1);
        if (network_json)
            *network_json = col_dup(st, 1);
        if (sealed_env)
            *sealed_env = col_dup(st, 2);
    } else if (rc == SQLITE_DONE) {
        r = -ENOENT;
    } else {
        r = store_db_err(s, err, "get sandbox configuration");
    }
    sqlite3_finalize(st);
    return r;
}

int store_sandbox_config_copy(struct store *s, const char *from_id, const char *to_id,
                              struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT OR REPLACE INTO sandbox_config_of(sandbox_id,config_id,network,"
                          "env) SELECT ?,config_id,network,env FROM sandbox_config_of "
                          "WHERE sandbox_id=?",
                          &st, err, "tt", to_id, from_id);
    return r < 0 ? r : store_step_done(s, st, err, "copy sandbox configuration");
}

int store_config_live_sandboxes(struct store *s, const char *config_id, store_sandbox_cb cb,
                                void *data, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "SELECT sb.id, sb.user, sb.status FROM sandboxes sb "
                          "JOIN sandbox_config_of c ON c.sandbox_id=sb.id "
                          "WHERE c.config_id=? AND sb.status IN ('creating','running','paused') "
                          "ORDER BY sb.created_at, sb.id",
                          &st, err, "t", config_id);
    if (r < 0)
        return r;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_sandbox sb = {0};
        store_col_text(st, 0, sb.id, sizeof(sb.id));
        store_col_text(st, 1, sb.user, sizeof(sb.user));
        store_col_text(st, 2, sb.status, sizeof(sb.status));
        cb(&sb, data);
    }
    r = rc == SQLITE_DONE ? 0 : store_db_err(s, err, "list a configuration's sandboxes");
    sqlite3_finalize(st);
    return r;
}

/* --- workspace settings ----------------------------------------------------------------- */

int store_setting_set(struct store *s, const char *name, const char *value, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "INSERT OR REPLACE INTO workspace_settings(name,value) VALUES(?,?)",
                          &st, err, "tt", name, value);
    return r < 0 ? r : store_step_done(s, st, err, "set workspace setting");
}

int store_setting_get(struct store *s, const char *name, char *out, size_t cap, struct sbx_err *err)
{
    sqlite3_stmt *st;
    out[0] = '\0';
    int r =
        store_prepare(s, "SELECT value FROM workspace_settings WHERE name=?", &st, err, "t", name);
    if (r < 0)
        return r;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        store_col_text(st, 0, out, cap);
    else if (rc != SQLITE_DONE)
        r = store_db_err(s, err, "get workspace setting");
    sqlite3_finalize(st);
    return r;
}

/* --- personal variables and skill declarations ------------------------------------------ */

int store_personal_env_set(struct store *s, const struct store_env_var *v, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT OR REPLACE INTO personal_env(user,scope,target,name,value,"
                          "updated_at) VALUES(?,?,?,?,?,?)",
                          &st, err, "ttttti", v->user, v->scope, v->target, v->name, v->value,
                          v->updated_at);
    return r < 0 ? r : store_step_done(s, st, err, "set personal variable");
}

int store_personal_env_delete(struct store *s, const struct store_env_var *v, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(
        s, "DELETE FROM personal_env WHERE user=? AND scope=? AND target=? AND name=?", &st, err,
        "tttt", v->user, v->scope, v->target, v->name);
    if (r < 0)
        return r;
    if (sqlite3_step(st) != SQLITE_DONE)
        r = store_db_err(s, err, "delete personal variable");
    else if (sqlite3_changes(s->db) == 0)
        r = sbx_err_set(err, ENOENT, "env_var_not_found", "%.128s is not set", v->name);
    sqlite3_finalize(st);
    return r;
}

int store_personal_env_each(struct store *s, const char *user, const char *scope,
                            const char *target, store_env_var_cb cb, void *data,
                            struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "SELECT user,scope,target,name,value,updated_at FROM personal_env "
                          "WHERE user=?1 AND scope=?2 AND (?3 IS NULL OR target=?3) "
                          "ORDER BY target, name",
                          &st, err, "ttt", user, scope, target);
    if (r < 0)
        return r;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_env_var v = {
            .user = (const char *)sqlite3_column_text(st, 0),
            .scope = (const char *)sqlite3_column_text(st, 1),
            .target = (const char *)sqlite3_column_text(st, 2),
            .name = (const char *)sqlite3_column_text(st, 3),
            .value = (const char *)sqlite3_column_text(st, 4),
            .updated_at = sqlite3_column_int64(st, 5),
        };
        cb(&v, data);
    }
    r = rc == SQLITE_DONE ? 0 : store_db_err(s, err, "list personal variables");
    sqlite3_finalize(st);
    return r;
}

int store_skill_env_declare(struct store *s, const struct store_skill_env *d, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT INTO skill_env_decls(skill_id,name,description,required,value,"
                          "updated_at) VALUES(?,?,?,?,?,?) ON CONFLICT(skill_id,name) DO UPDATE "
                          "SET description=excluded.description, required=excluded.required",
                          &st, err, "tttiti", d->skill_id, d->name, d->description,
                          (long long)d->required, d->value, d->updated_at);
    return r < 0 ? r : store_step_done(s, st, err, "declare skill variable");
}

int store_skill_env_each(struct store *s, const char *skill_id, store_skill_env_cb cb, void *data,
                         struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "SELECT skill_id,name,description,required,value,updated_at "
                          "FROM skill_env_decls WHERE ?1 IS NULL OR skill_id=?1 "
                          "ORDER BY skill_id, name",
                          &st, err, "t", skill_id);
    if (r < 0)
        return r;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_skill_env d = {
            .skill_id = (const char *)sqlite3_column_text(st, 0),
            .name = (const char *)sqlite3_column_text(st, 1),
            .description = (const char *)sqlite3_column_text(st, 2),
            .required = sqlite3_column_int64(st, 3) != 0,
            .value = (const char *)sqlite3_column_text(st, 4),
            .updated_at = sqlite3_column_int64(st, 5),
        };
        cb(&d, data);
    }
    r = rc == SQLITE_DONE ? 0 : store_db_err(s, err, "list skill variables");
    sqlite3_finalize(st);
    return r;
}
