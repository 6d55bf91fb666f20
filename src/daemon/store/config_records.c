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

void store_config_clear(struct store_config *c)
{
    if (!c)
        return;
    free(c->name);
    free(c->description);
    free(c->config_json);
    memset(c, 0, sizeof(*c));
}

static int name_taken(int r, const struct store_config *c, struct sbx_err *err)
{
    return r == -EEXIST ? sbx_err_set(err, EEXIST, "sandbox_config_exists",
                                      "a configuration named %.64s exists", c->name)
                        : r;
}

int store_config_insert(struct store *s, const struct store_config *c, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO sandbox_configs(id,name,description,config,created_at,"
                     "updated_at) VALUES(?,?,?,?,?,?)",
                     "ttttii", c->id, c->name, c->description, c->config_json, c->created_at,
                     c->updated_at);
    return r < 0 ? r : name_taken(db_run(st, err), c, err);
}

int store_config_update(struct store *s, const struct store_config *c, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "UPDATE sandbox_configs SET name=?,description=?,config=?,updated_at=? "
                     "WHERE id=?",
                     "tttit", c->name, c->description, c->config_json, c->updated_at, c->id);
    if (r < 0)
        return r;
    r = name_taken(db_step(st, err), c, err);
    if (r == DB_DONE && db_changes(st) == 0)
        r = sbx_err_set(err, ENOENT, "sandbox_config_not_found", "no configuration %.64s", c->id);
    db_finalize(st);
    return r < 0 ? r : 0;
}

#define CONFIG_COLS "id,name,description,config,created_at,updated_at"

static void row_to_config(struct db_stmt *st, struct store_config *c)
{
    memset(c, 0, sizeof(*c));
    db_col_copy(st, 0, c->id, sizeof(c->id));
    c->name = db_col_dup(st, 1);
    c->description = db_col_dup(st, 2);
    c->config_json = db_col_dup(st, 3);
    c->created_at = db_col_int64(st, 4);
    c->updated_at = db_col_int64(st, 5);
}

int store_config_get(struct store *s, const char *id, struct store_config *out, struct sbx_err *err)
{
    struct db_stmt *st;
    memset(out, 0, sizeof(*out));
    int r = db_query(s->conn, &st, err, "SELECT " CONFIG_COLS " FROM sandbox_configs WHERE id=?",
                     "t", id);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_ROW)
        row_to_config(st, out);
    else if (r == DB_DONE)
        r = sbx_err_set(err, ENOENT, "sandbox_config_not_found", "no configuration %.64s", id);
    db_finalize(st);
    return r < 0 ? r : 0;
}

int store_config_each(struct store *s, store_config_cb cb, void *data, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT " CONFIG_COLS " FROM sandbox_configs ORDER BY created_at, id", "");
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_config c;
        row_to_config(st, &c);
        cb(&c, data);
        store_config_clear(&c);
    }
    db_finalize(st);
    return r;
}

int store_config_delete(struct store *s, const char *id, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err, "DELETE FROM sandbox_configs WHERE id=?", "t", id);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_DONE && db_changes(st) == 0)
        r = sbx_err_set(err, ENOENT, "sandbox_config_not_found", "no configuration %.64s", id);
    db_finalize(st);
    if (r < 0)
        return r;
    r = db_query(s->conn, &st, err, "DELETE FROM personal_env WHERE scope='sandbox' AND target=?",
                 "t", id);
    if (r < 0 || (r = db_run(st, err)) < 0)
        return r;
    return store_skill_installs_forget(s, id, err);
}

int store_config_lock(struct store *s, const char *id, const char *owner, long long now_ms,
                      long long until_ms, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "UPDATE sandbox_configs SET lock_owner=?, lock_until_ms=? "
                     "WHERE id=? AND (lock_owner IS NULL OR lock_until_ms<?)",
                     "titi", owner, until_ms, id, now_ms);
    if (r < 0)
        return r;
    r = db_step(st, err);
    long long taken = r == DB_DONE ? db_changes(st) : 0;
    db_finalize(st);
    if (r < 0 || taken)
        return r < 0 ? r : 0;
    struct store_config c;
    if ((r = store_config_get(s, id, &c, err)) < 0)
        return r;
    store_config_clear(&c);
    return sbx_err_set(err, EBUSY, "sandbox_config_locked",
                       "configuration %s is being changed by another request", id);
}

int store_config_unlock(struct store *s, const char *id, const char *owner, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "UPDATE sandbox_configs SET lock_owner=NULL, lock_until_ms=0 "
                     "WHERE id=? AND lock_owner=?",
                     "tt", id, owner);
    return r < 0 ? r : db_run(st, err);
}

/* --- which configuration a sandbox came from ------------------------------------------ */

int store_sandbox_config_set(struct store *s, const char *sandbox_id, const char *config_id,
                             const char *network_json, const char *sealed_env, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO sandbox_config_of(sandbox_id,config_id,network,env) "
                     "VALUES(?,?,?,?) ON CONFLICT(sandbox_id) DO UPDATE SET "
                     "config_id=excluded.config_id, network=excluded.network, env=excluded.env",
                     "tttt", sandbox_id, config_id, network_json, sealed_env);
    return r < 0 ? r : db_run(st, err);
}

int store_sandbox_config_get(struct store *s, const char *sandbox_id,
                             char config_id[STORE_ID_MAX + 1], char **network_json,
                             char **sealed_env, struct sbx_err *err)
{
    struct db_stmt *st;
    config_id[0] = '\0';
    if (network_json)
        *network_json = NULL;
    if (sealed_env)
        *sealed_env = NULL;
    int r = db_query(s->conn, &st, err,
                     "SELECT config_id,network,env FROM sandbox_config_of WHERE sandbox_id=?", "t",
                     sandbox_id);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_ROW) {
        db_col_copy(st, 0, config_id, STORE_ID_MAX + 1);
        if (network_json)
            *network_json = db_col_dup(st, 1);
        if (sealed_env)
            *sealed_env = db_col_dup(st, 2);
    }
    db_finalize(st);
    return r == DB_DONE ? -ENOENT : r < 0 ? r : 0;
}

int store_sandbox_config_copy(struct store *s, const char *from_id, const char *to_id,
                              struct sbx_err *err)
{
    struct db_stmt *st;
    /* The SELECT's WHERE also keeps SQLite from reading ON CONFLICT as a join's ON. */
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO sandbox_config_of(sandbox_id,config_id,network,env) "
                     "SELECT ?,config_id,network,env FROM sandbox_config_of WHERE sandbox_id=? "
                     "ON CONFLICT(sandbox_id) DO UPDATE SET config_id=excluded.config_id, "
                     "network=excluded.network, env=excluded.env",
                     "tt", to_id, from_id);
    return r < 0 ? r : db_run(st, err);
}

int store_config_live_sandboxes(struct store *s, const char *config_id, store_sandbox_cb cb,
                                void *data, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT sb.id, sb.\"user\", sb.status FROM sandboxes sb "
                     "JOIN sandbox_config_of c ON c.sandbox_id=sb.id "
                     "WHERE c.config_id=? AND sb.status IN ('creating','running','paused') "
                     "ORDER BY sb.created_at, sb.id",
                     "t", config_id);
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_sandbox sb = {0};
        db_col_copy(st, 0, sb.id, sizeof(sb.id));
        db_col_copy(st, 1, sb.user, sizeof(sb.user));
        db_col_copy(st, 2, sb.status, sizeof(sb.status));
        cb(&sb, data);
    }
    db_finalize(st);
    return r;
}

/* --- workspace settings ----------------------------------------------------------------- */

int store_setting_set(struct store *s, const char *name, const char *value, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO workspace_settings(name,value) VALUES(?,?) "
                     "ON CONFLICT(name) DO UPDATE SET value=excluded.value",
                     "tt", name, value);
    return r < 0 ? r : db_run(st, err);
}

int store_setting_get(struct store *s, const char *name, char *out, size_t cap, struct sbx_err *err)
{
    struct db_stmt *st;
    out[0] = '\0';
    int r =
        db_query(s->conn, &st, err, "SELECT value FROM workspace_settings WHERE name=?", "t", name);
    if (r < 0)
        return r;
    if ((r = db_step(st, err)) == DB_ROW)
        db_col_copy(st, 0, out, cap);
    db_finalize(st);
    return r < 0 ? r : 0;
}

/* --- personal variables and skill declarations ------------------------------------------ */

int store_personal_env_set(struct store *s, const struct store_env_var *v, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO personal_env(\"user\",scope,target,name,value,updated_at) "
                     "VALUES(?,?,?,?,?,?) ON CONFLICT(\"user\",scope,target,name) DO UPDATE SET "
                     "value=excluded.value, updated_at=excluded.updated_at",
                     "ttttti", v->user, v->scope, v->target, v->name, v->value, v->updated_at);
    return r < 0 ? r : db_run(st, err);
}

int store_personal_env_delete(struct store *s, const struct store_env_var *v, struct sbx_err *err)
{
    struct db_stmt *st;
    int r =
        db_query(s->conn, &st, err,
                 "DELETE FROM personal_env WHERE \"user\"=? AND scope=? AND target=? AND name=?",
                 "tttt", v->user, v->scope, v->target, v->name);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_DONE && db_changes(st) == 0)
        r = sbx_err_set(err, ENOENT, "env_var_not_found", "%.128s is not set", v->name);
    db_finalize(st);
    return r < 0 ? r : 0;
}

int store_personal_env_each(struct store *s, const char *user, const char *scope,
                            const char *target, store_env_var_cb cb, void *data,
                            struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT \"user\",scope,target,name,value,updated_at FROM personal_env "
                     "WHERE \"user\"=?1 AND scope=?2 AND (?3 IS NULL OR target=?3) "
                     "ORDER BY target, name",
                     "ttt", user, scope, target);
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_env_var v = {
            .user = db_col_text(st, 0),
            .scope = db_col_text(st, 1),
            .target = db_col_text(st, 2),
            .name = db_col_text(st, 3),
            .value = db_col_text(st, 4),
            .updated_at = db_col_int64(st, 5),
        };
        cb(&v, data);
    }
    db_finalize(st);
    return r;
}

int store_skill_env_declare(struct store *s, const struct store_skill_env *d, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO skill_env_decls(skill_id,name,description,required,value,"
                     "updated_at) VALUES(?,?,?,?,?,?) ON CONFLICT(skill_id,name) DO UPDATE "
                     "SET description=excluded.description, required=excluded.required",
                     "tttiti", d->skill_id, d->name, d->description, (long long)d->required,
                     d->value, d->updated_at);
    return r < 0 ? r : db_run(st, err);
}

int store_skill_env_each(struct store *s, const char *skill_id, store_skill_env_cb cb, void *data,
                         struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT skill_id,name,description,required,value,updated_at "
                     "FROM skill_env_decls WHERE ?1 IS NULL OR skill_id=?1 "
                     "ORDER BY skill_id, name",
                     "t", skill_id);
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_skill_env d = {
            .skill_id = db_col_text(st, 0),
            .name = db_col_text(st, 1),
            .description = db_col_text(st, 2),
            .required = db_col_int64(st, 3) != 0,
            .value = db_col_text(st, 4),
            .updated_at = db_col_int64(st, 5),
        };
        cb(&d, data);
    }
    db_finalize(st);
    return r;
}
