#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../common/util.h"
#include "migrate.h"
#include "store_internal.h"

int store_open_at(const char *url, const char *path, struct store **out, struct sbx_err *err)
{
    struct store *s = sbx_xcalloc(1, sizeof(*s));
    bool pg = url && url[0];
    if (pg && !db_target_is_postgres(url)) {
        free(s);
        return sbx_err_set(err, EINVAL, "invalid_config",
                           "SBX_STORE must be a postgres:// or postgresql:// URL");
    }
    snprintf(s->node_id, sizeof(s->node_id), "%s", STORE_NODE_LOCAL);
    int r = db_open(pg ? url : path, &s->conn, err);
    if (r == 0)
        r = store_migrate(s->conn, err);
    if (r < 0) {
        store_free(s);
        return sbx_err_wrap(err, "opening the store");
    }
    *out = s;
    return 0;
}

int store_open(const char *path, struct store **out, struct sbx_err *err)
{
    return store_open_at(NULL, path, out, err);
}

int store_claim_node(struct store *s, const char *node_id, struct sbx_err *err)
{
    int r = db_hold_exclusive(s->conn, node_id, err);
    if (r < 0)
        return r;
    snprintf(s->node_id, sizeof(s->node_id), "%s", node_id);
    /* Rows from before nodes existed are the first claimant's: a store that grows from
     * one node to many keeps its sandboxes where they run. */
    struct db_stmt *st;
    r = db_query(s->conn, &st, err, "UPDATE sandboxes SET node_id=? WHERE node_id IS NULL", "t",
                 node_id);
    return r < 0 ? r : db_run(st, err);
}

const char *store_node(const struct store *s)
{
    return s->node_id;
}

void store_describe(struct store *s, char *buf, size_t cap)
{
    db_describe(s->conn, buf, cap);
}

bool store_is_postgres(const struct store *s)
{
    return db_dialect(s->conn) == DB_POSTGRES;
}

int store_backup(struct store *s, const char *dest, struct sbx_err *err)
{
    return db_backup(s->conn, dest, err);
}

void store_free(struct store *s)
{
    if (!s)
        return;
    db_close(s->conn);
    free(s);
}

/* --- keys and sandboxes (db.h) ---------------------------------------------------- */

int store_key_insert(struct store *s, const struct store_key *k, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "INSERT INTO keys(id,\"user\",role,tool_level,hash,created_at,scope) "
                     "VALUES(?,?,?,?,?,?,?)",
                     "tttttit", k->id, k->user, auth_role_name(k->role),
                     auth_tool_level_name(k->tool_level), k->hash, k->created_at,
                     auth_scope_name(k->scope));
    return r < 0 ? r : db_run(st, err);
}

static void row_to_key(struct db_stmt *st, struct store_key *k)
{
    memset(k, 0, sizeof(*k));
    db_col_copy(st, 0, k->id, sizeof(k->id));
    db_col_copy(st, 1, k->user, sizeof(k->user));
    k->role = AUTH_ROLE_MEMBER;
    (void)auth_role_parse(db_col_text(st, 2), &k->role);
    k->tool_level = AUTH_TOOL_NONE;
    (void)auth_tool_level_parse(db_col_text(st, 3), &k->tool_level);
    db_col_copy(st, 4, k->hash, sizeof(k->hash));
    k->created_at = db_col_int64(st, 5);
    k->scope = AUTH_SCOPE_RESTRICTED;
    (void)auth_scope_parse(db_col_text(st, 6), &k->scope);
}

#define KEY_COLS "id,\"user\",role,tool_level,hash,created_at,scope"

int store_key_get(struct store *s, const char *id, struct store_key *out, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT " KEY_COLS " FROM keys WHERE id=? AND deleted_at IS NULL", "t", id);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_ROW) {
        row_to_key(st, out);
        r = 0;
    } else if (r == DB_DONE) {
        r = sbx_err_set(err, ENOENT, "key_not_found", "no key with id %s", id);
    }
    db_finalize(st);
    return r;
}

int store_key_delete(struct store *s, const char *id, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "UPDATE keys SET deleted_at=? WHERE id=? AND deleted_at IS NULL", "it",
                     (long long)time(NULL), id);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_DONE && db_changes(st) == 0)
        r = sbx_err_set(err, ENOENT, "key_not_found", "no key with id %s", id);
    db_finalize(st);
    return r < 0 ? r : 0;
}

int store_key_update(struct store *s, const struct store_key *k, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "UPDATE keys SET role=?, tool_level=?, scope=? WHERE id=? AND deleted_at IS "
                     "NULL",
                     "tttt", auth_role_name(k->role), auth_tool_level_name(k->tool_level),
                     auth_scope_name(k->scope), k->id);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_DONE && db_changes(st) == 0)
        r = sbx_err_set(err, ENOENT, "key_not_found", "no key with id %s", k->id);
    db_finalize(st);
    return r < 0 ? r : 0;
}

int store_key_each(struct store *s, store_key_cb cb, void *data, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(
        s->conn, &st, err,
        "SELECT " KEY_COLS " FROM keys WHERE deleted_at IS NULL ORDER BY created_at, id", "");
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_key k;
        row_to_key(st, &k);
        cb(&k, data);
    }
    db_finalize(st);
    return r;
}

int store_key_count(struct store *s, long long *out, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err, "SELECT count(*) FROM keys", "");
    if (r < 0)
        return r;
    if ((r = db_step(st, err)) == DB_ROW)
        *out = db_col_int64(st, 0);
    db_finalize(st);
    return r < 0 ? r : 0;
}

void store_sandbox_clear(struct store_sandbox *sb)
{
    if (!sb)
        return;
    free(sb->env_json);
    memset(sb, 0, sizeof(*sb));
}

#define SB_COLS                                                                                    \
    "id,\"user\",key_id,status,backend,runtime,template,template_digest,env,ttl_seconds,"          \
    "created_at,expires_at,ended_at,end_reason,memory_mb,pids,cpu_millicores,"                     \
    "enable_default_session,node_id"

static void row_to_sandbox(struct db_stmt *st, struct store_sandbox *sb)
{
    memset(sb, 0, sizeof(*sb));
    db_col_copy(st, 0, sb->id, sizeof(sb->id));
    db_col_copy(st, 1, sb->user, sizeof(sb->user));
    db_col_copy(st, 2, sb->key_id, sizeof(sb->key_id));
    db_col_copy(st, 3, sb->status, sizeof(sb->status));
    db_col_copy(st, 4, sb->backend, sizeof(sb->backend));
    db_col_copy(st, 5, sb->runtime, sizeof(sb->runtime));
    db_col_copy(st, 6, sb->template_name, sizeof(sb->template_name));
    db_col_copy(st, 7, sb->template_digest, sizeof(sb->template_digest));
    const char *env = db_col_text(st, 8);
    sb->env_json = sbx_xstrdup(env ? env : "{}");
    sb->ttl_seconds = db_col_int64(st, 9);
    sb->created_at = db_col_int64(st, 10);
    sb->expires_at = db_col_int64(st, 11);
    sb->ended_at = db_col_int64(st, 12);
    db_col_copy(st, 13, sb->end_reason, sizeof(sb->end_reason));
    sb->memory_mb = db_col_int64(st, 14);
    sb->pids = db_col_int64(st, 15);
    sb->cpu_millicores = db_col_int64(st, 16);
    sb->enable_default_session = db_col_int64(st, 17) != 0;
    db_col_copy(st, 18, sb->node_id, sizeof(sb->node_id));
}

int store_sandbox_insert(struct store *s, const struct store_sandbox *sb, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(
        s->conn, &st, err,
        "INSERT INTO sandboxes(" SB_COLS ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        "tttttttttiiiitiiiit", sb->id, sb->user, sb->key_id, sb->status, sb->backend,
        sb->runtime, sb->template_name, sb->template_digest, sb->env_json ? sb->env_json : "{}",
        sb->ttl_seconds, sb->created_at, sb->expires_at, sb->ended_at,
        sb->end_reason[0] ? sb->end_reason : NULL, sb->memory_mb, sb->pids, sb->cpu_millicores,
        (long long)sb->enable_default_session, sb->node_id[0] ? sb->node_id : s->node_id);
    return r < 0 ? r : db_run(st, err);
}

int store_sandbox_assign(struct store *s, const struct store_sandbox *sb, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "UPDATE sandboxes SET \"user\"=?, key_id=?, env=?, ttl_seconds=?, "
                     "created_at=?, expires_at=?, enable_default_session=? WHERE id=?",
                     "tttiiiit", sb->user, sb->key_id, sb->env_json ? sb->env_json : "{}",
                     sb->ttl_seconds, sb->created_at, sb->expires_at,
                     (long long)sb->enable_default_session, sb->id);
    return r < 0 ? r : db_run(st, err);
}

/* Count and write under the store-wide write lock: two nodes (or two creates on one)
 * that both saw room never both take the last slot. */
int store_sandbox_claim(struct store *s, const struct store_sandbox *sb, bool assign,
                        const struct store_sandbox_limits *lim, struct sbx_err *err)
{
    int r = db_tx_begin(s->conn, DB_TX_LOCKED, err);
    if (r < 0)
        return r;
    long long per_user = 0, per_key = 0;
    r = store_sandbox_count_live(s, sb->user, sb->key_id, &per_user, &per_key, err);
    if (r == 0 && (per_key >= lim->per_key || per_user >= lim->per_user)) {
        bool key = per_key >= lim->per_key;
        r = sbx_err_set(err, EAGAIN, "sandbox_concurrency_limit",
                        "at most %lld running sandboxes per %s (counted on every node); delete "
                        "or pause one first",
                        key ? lim->per_key : lim->per_user, key ? "key" : "user");
    }
    if (r == 0)
        r = assign ? store_sandbox_assign(s, sb, err) : store_sandbox_insert(s, sb, err);
    if (r < 0) {
        (void)db_tx_end(s->conn, false, NULL);
        return r;
    }
    return db_tx_end(s->conn, true, err);
}

int store_sandbox_get(struct store *s, const char *id, struct store_sandbox *out,
                      struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err, "SELECT " SB_COLS " FROM sandboxes WHERE id=?", "t", id);
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_ROW) {
        row_to_sandbox(st, out);
        r = 0;
    } else if (r == DB_DONE) {
        r = sbx_err_set(err, ENOENT, "sandbox_not_found", "no sandbox with id %s", id);
    }
    db_finalize(st);
    return r;
}

int store_sandbox_set_status(struct store *s, const char *id, const char *status,
                             const char *reason, long long now, struct sbx_err *err)
{
    bool ended = !strcmp(status, SANDBOX_DESTROYED) || !strcmp(status, SANDBOX_FAILED);
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "UPDATE sandboxes SET status=?, ended_at=?, end_reason=? WHERE id=?", "titt",
                     status, ended ? now : 0, reason, id);
    return r < 0 ? r : db_run(st, err);
}

int store_sandbox_set_failed(struct store *s, const char *id, const char *reason,
                             struct sbx_err *err)
{
    struct db_stmt *st;
    /* ended_at 0 is what tells a kept failure from a sandbox that ended failing. */
    int r = db_query(s->conn, &st, err,
                     "UPDATE sandboxes SET status='failed', ended_at=0, end_reason=? WHERE id=?",
                     "tt", reason, id);
    return r < 0 ? r : db_run(st, err);
}

int store_sandbox_set_expiry(struct store *s, const char *id, long long expires_at,
                             struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err, "UPDATE sandboxes SET expires_at=? WHERE id=?", "it",
                     expires_at, id);
    return r < 0 ? r : db_run(st, err);
}

int store_sandbox_move(struct store *s, const char *id, const char *from, const char *to,
                       struct sbx_err *err)
{
    int r = db_tx_begin(s->conn, DB_TX_LOCKED, err);
    if (r < 0)
        return r;
    struct db_stmt *st;
    long long changed = 0;
    if ((r = db_query(s->conn, &st, err,
                      "UPDATE sandboxes SET node_id=? WHERE id=? AND node_id=? AND status='paused'",
                      "ttt", to, id, from)) == 0)
        r = db_run_changes(st, &changed, err);
    if (r == 0 && changed != 1)
        r = sbx_err_set(err, EBUSY, "sandbox_moved",
                        "sandbox %s is no longer paused on node %s", id, from);
    if (r < 0) {
        (void)db_tx_end(s->conn, false, NULL);
        return r;
    }
    return db_tx_end(s->conn, true, err);
}

int store_sandbox_each_live(struct store *s, const char *user, const char *node,
                            store_sandbox_cb cb, void *data, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT " SB_COLS " FROM sandboxes "
                     "WHERE (status IN ('creating','running','paused') OR "
                     "(status='failed' AND ended_at=0)) "
                     "AND (?1 IS NULL OR \"user\"=?1) AND (?2 IS NULL OR node_id=?2) "
                     "ORDER BY created_at, id",
                     "tt", user, node);
    if (r < 0)
        return r;
    while ((r = db_step(st, err)) == DB_ROW) {
        struct store_sandbox sb;
        row_to_sandbox(st, &sb);
        cb(&sb, data);
        store_sandbox_clear(&sb);
    }
    db_finalize(st);
    return r;
}

int store_sandbox_count_live(struct store *s, const char *user, const char *key_id,
                             long long *per_user, long long *per_key, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(s->conn, &st, err,
                     "SELECT count(*), coalesce(sum(CASE WHEN key_id=?2 THEN 1 ELSE 0 END),0) "
                     "FROM sandboxes WHERE status IN ('creating','running') AND \"user\"=?1",
                     "tt", user, key_id);
    if (r < 0)
        return r;
    if ((r = db_step(st, err)) == DB_ROW) {
        *per_user = db_col_int64(st, 0);
        *per_key = db_col_int64(st, 1);
    }
    db_finalize(st);
    return r < 0 ? r : 0;
}
