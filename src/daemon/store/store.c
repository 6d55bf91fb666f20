#include "store.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/util.h"
#include "store_internal.h"

static const char schema[] =
    "CREATE TABLE IF NOT EXISTS keys("
    "  id TEXT PRIMARY KEY, user TEXT NOT NULL, role TEXT NOT NULL, tool_level TEXT NOT NULL,"
    "  hash TEXT NOT NULL, created_at INTEGER NOT NULL, deleted_at INTEGER);"
    "CREATE TABLE IF NOT EXISTS sandboxes("
    "  id TEXT PRIMARY KEY, user TEXT NOT NULL, key_id TEXT NOT NULL, status TEXT NOT NULL,"
    "  backend TEXT NOT NULL, runtime TEXT NOT NULL, template TEXT NOT NULL,"
    "  template_digest TEXT NOT NULL, env TEXT NOT NULL, ttl_seconds INTEGER NOT NULL,"
    "  created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, ended_at INTEGER,"
    "  end_reason TEXT, memory_mb INTEGER NOT NULL, pids INTEGER NOT NULL,"
    "  cpu_millicores INTEGER NOT NULL, enable_default_session INTEGER NOT NULL DEFAULT 1);"
    "CREATE INDEX IF NOT EXISTS sandboxes_live ON sandboxes(status, user);";

/* Each part of the store brings its own tables; all are created on open. */
static const char *const *const store_schemas[] = {
    (const char *const[]){schema}, &store_exec_schema,   &store_idem_schema,
    &store_audit_schema,           &store_egress_schema, &store_meta_schema,
    &store_skill_schema,           &store_usage_schema,  &store_config_schema,
};

int store_db_err(struct store *s, struct sbx_err *err, const char *what)
{
    /* SQLite rolls the statement back on a full disk: the store stays as it was. */
    int sys = sqlite3_system_errno(s->db);
    if (sqlite3_errcode(s->db) == SQLITE_FULL || sys == ENOSPC || sys == EDQUOT)
        return sbx_err_set(err, ENOSPC, "insufficient_storage",
                           "the data directory is full: %s was not saved", what);
    return sbx_err_set(err, EIO, "internal", "store: %s: %s", what, sqlite3_errmsg(s->db));
}

/* Columns added after a table's first release: CREATE TABLE IF NOT EXISTS leaves an
 * existing table as it is, so a data dir from before gets them here. */
static const struct {
    const char *table, *column, *decl;
} added_columns[] = {
    {"sandboxes", "enable_default_session", "INTEGER NOT NULL DEFAULT 1"},
    {"keys", "scope", "TEXT NOT NULL DEFAULT 'full_access'"},
};

static int add_missing_columns(struct store *s, char **msg)
{
    for (size_t i = 0; i < SBX_ARRAY_SIZE(added_columns); i++) {
        sqlite3_stmt *st;
        _cleanup_free_ char *q =
            sbx_xasprintf("SELECT 1 FROM pragma_table_info('%s') WHERE name='%s'",
                          added_columns[i].table, added_columns[i].column);
        int rc = sqlite3_prepare_v2(s->db, q, -1, &st, NULL);
        if (rc != SQLITE_OK)
            return rc;
        rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc == SQLITE_ROW)
            continue;
        if (rc != SQLITE_DONE)
            return rc;
        _cleanup_free_ char *alter =
            sbx_xasprintf("ALTER TABLE %s ADD COLUMN %s %s", added_columns[i].table,
                          added_columns[i].column, added_columns[i].decl);
        rc = sqlite3_exec(s->db, alter, NULL, NULL, msg);
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

/* A store damaged by a crash or a full disk is refused at start, not written on. */
static int check_integrity(struct store *s, const char *path, struct sbx_err *err)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(s->db, "PRAGMA integrity_check(1)", -1, &st, NULL) != SQLITE_OK)
        return store_db_err(s, err, "checking the store");
    int r = 0;
    if (sqlite3_step(st) != SQLITE_ROW) {
        r = store_db_err(s, err, "checking the store");
    } else {
        const char *v = (const char *)sqlite3_column_text(st, 0);
        if (!v || strcmp(v, "ok"))
            r = sbx_err_set(err, EIO, "store_damaged",
                            "the store %s is damaged (%.200s): restore a copy made with "
                            "`sbxd backup`",
                            path, v ? v : "no answer");
    }
    sqlite3_finalize(st);
    return r;
}

int store_backup(struct store *s, const char *dest, struct sbx_err *err)
{
    if (access(dest, F_OK) == 0)
        return sbx_err_set(err, EEXIST, "invalid_request", "%s exists: name a new file", dest);
    _cleanup_free_ char *tmp = sbx_xasprintf("%s.tmp", dest);
    (void)unlink(tmp);
    sqlite3 *out = NULL;
    int rc = sqlite3_open_v2(tmp, &out, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    sqlite3_backup *b = rc == SQLITE_OK ? sqlite3_backup_init(out, "main", s->db, "main") : NULL;
    if (b) {
        /* Page by page, so sbxd's own writes (WAL) go on between the steps. */
        while ((rc = sqlite3_backup_step(b, 256)) == SQLITE_OK || rc == SQLITE_BUSY ||
               rc == SQLITE_LOCKED)
            if (rc != SQLITE_OK)
                sqlite3_sleep(20);
        rc = sqlite3_backup_finish(b) == SQLITE_OK && rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    int r = 0;
    if (!b || rc != SQLITE_OK)
        r = sbx_err_set(err, EIO, "internal", "backing up to %s: %s", dest,
                        out ? sqlite3_errmsg(out) : sqlite3_errstr(rc));
    sqlite3_close_v2(out);
    if (r == 0 && rename(tmp, dest) < 0)
        r = sbx_err_sys(err, errno, "renaming %s to %s", tmp, dest);
    if (r < 0)
        (void)unlink(tmp);
    return r;
}

int store_open(const char *path, struct store **out, struct sbx_err *err)
{
    struct store *s = sbx_xcalloc(1, sizeof(*s));
    int rc = sqlite3_open_v2(
        path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL);
    if (rc != SQLITE_OK) {
        int r = sbx_err_set(err, EIO, "internal", "opening %s: %s", path,
                            s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
        store_free(s);
        return r;
    }
    char *msg = NULL;
    rc = sqlite3_exec(s->db,
                      "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                      "PRAGMA busy_timeout=5000; PRAGMA foreign_keys=ON;",
                      NULL, NULL, &msg);
    if (rc == SQLITE_OK) {
        int r = check_integrity(s, path, err);
        if (r < 0) {
            store_free(s);
            return r;
        }
    }
    for (size_t i = 0; rc == SQLITE_OK && i < SBX_ARRAY_SIZE(store_schemas); i++)
        rc = sqlite3_exec(s->db, *store_schemas[i], NULL, NULL, &msg);
    if (rc == SQLITE_OK)
        rc = add_missing_columns(s, &msg);
    if (rc != SQLITE_OK) {
        int r = sbx_err_set(err, EIO, "internal", "initialising %s: %s", path,
                            msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        store_free(s);
        return r;
    }
    *out = s;
    return 0;
}

void store_free(struct store *s)
{
    if (!s)
        return;
    sqlite3_close_v2(s->db);
    free(s);
}

/* Prepare, bind text/int arguments from a format ("t" text, "i" int64), step once. */
int store_prepare(struct store *s, const char *sql, sqlite3_stmt **st, struct sbx_err *err,
                  const char *types, ...)
{
    if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK)
        return store_db_err(s, err, "prepare");
    va_list ap;
    va_start(ap, types);
    for (int i = 0; types[i]; i++) {
        int rc;
        if (types[i] == 't') {
            const char *v = va_arg(ap, const char *);
            rc = v ? sqlite3_bind_text(*st, i + 1, v, -1, SQLITE_TRANSIENT)
                   : sqlite3_bind_null(*st, i + 1);
        } else {
            rc = sqlite3_bind_int64(*st, i + 1, va_arg(ap, long long));
        }
        if (rc != SQLITE_OK) {
            va_end(ap);
            sqlite3_finalize(*st);
            *st = NULL;
            return store_db_err(s, err, "bind");
        }
    }
    va_end(ap);
    return 0;
}

int store_step_done(struct store *s, sqlite3_stmt *st, struct sbx_err *err, const char *what)
{
    int r = sqlite3_step(st) == SQLITE_DONE ? 0 : store_db_err(s, err, what);
    sqlite3_finalize(st);
    return r;
}

void store_col_text(sqlite3_stmt *st, int col, char *dst, size_t cap)
{
    const unsigned char *v = sqlite3_column_text(st, col);
    snprintf(dst, cap, "%s", v ? (const char *)v : "");
}

int store_key_insert(struct store *s, const struct store_key *k, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "INSERT INTO keys(id,user,role,tool_level,hash,created_at,scope) "
                          "VALUES(?,?,?,?,?,?,?)",
                          &st, err, "tttttit", k->id, k->user, auth_role_name(k->role),
                          auth_tool_level_name(k->tool_level), k->hash, k->created_at,
                          auth_scope_name(k->scope));
    if (r < 0)
        return r;
    r = sqlite3_step(st) == SQLITE_DONE ? 0 : store_db_err(s, err, "insert key");
    sqlite3_finalize(st);
    return r;
}

static void row_to_key(sqlite3_stmt *st, struct store_key *k)
{
    memset(k, 0, sizeof(*k));
    store_col_text(st, 0, k->id, sizeof(k->id));
    store_col_text(st, 1, k->user, sizeof(k->user));
    k->role = AUTH_ROLE_MEMBER;
    (void)auth_role_parse((const char *)sqlite3_column_text(st, 2), &k->role);
    k->tool_level = AUTH_TOOL_NONE;
    (void)auth_tool_level_parse((const char *)sqlite3_column_text(st, 3), &k->tool_level);
    store_col_text(st, 4, k->hash, sizeof(k->hash));
    k->created_at = sqlite3_column_int64(st, 5);
    k->scope = AUTH_SCOPE_RESTRICTED;
    (void)auth_scope_parse((const char *)sqlite3_column_text(st, 6), &k->scope);
}

#define KEY_COLS "id,user,role,tool_level,hash,created_at,scope"

int store_key_get(struct store *s, const char *id, struct store_key *out, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "SELECT " KEY_COLS " FROM keys WHERE id=? AND deleted_at IS NULL", &st,
                          err, "t", id);
    if (r < 0)
        return r;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        row_to_key(st, out);
        r = 0;
    } else if (rc == SQLITE_DONE) {
        r = sbx_err_set(err, ENOENT, "key_not_found", "no key with id %s", id);
    } else {
        r = store_db_err(s, err, "get key");
    }
    sqlite3_finalize(st);
    return r;
}

int store_key_delete(struct store *s, const char *id, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "UPDATE keys SET deleted_at=strftime('%s','now') "
                          "WHERE id=? AND deleted_at IS NULL",
                          &st, err, "t", id);
    if (r < 0)
        return r;
    if (sqlite3_step(st) != SQLITE_DONE)
        r = store_db_err(s, err, "delete key");
    else if (sqlite3_changes(s->db) == 0)
        r = sbx_err_set(err, ENOENT, "key_not_found", "no key with id %s", id);
    sqlite3_finalize(st);
    return r;
}

int store_key_each(struct store *s, store_key_cb cb, void *data, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(
        s, "SELECT " KEY_COLS " FROM keys WHERE deleted_at IS NULL ORDER BY created_at, id", &st,
        err, "");
    if (r < 0)
        return r;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_key k;
        row_to_key(st, &k);
        cb(&k, data);
    }
    r = rc == SQLITE_DONE ? 0 : store_db_err(s, err, "list keys");
    sqlite3_finalize(st);
    return r;
}

int store_key_count(struct store *s, long long *out, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "SELECT count(*) FROM keys", &st, err, "");
    if (r < 0)
        return r;
    if (sqlite3_step(st) == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else
        r = store_db_err(s, err, "count keys");
    sqlite3_finalize(st);
    return r;
}

void store_sandbox_clear(struct store_sandbox *sb)
{
    if (!sb)
        return;
    free(sb->env_json);
    memset(sb, 0, sizeof(*sb));
}

#define SB_COLS                                                                                    \
    "id,user,key_id,status,backend,runtime,template,template_digest,env,ttl_seconds,created_at,"   \
    "expires_at,ended_at,end_reason,memory_mb,pids,cpu_millicores,enable_default_session"

static void row_to_sandbox(sqlite3_stmt *st, struct store_sandbox *sb)
{
    memset(sb, 0, sizeof(*sb));
    store_col_text(st, 0, sb->id, sizeof(sb->id));
    store_col_text(st, 1, sb->user, sizeof(sb->user));
    store_col_text(st, 2, sb->key_id, sizeof(sb->key_id));
    store_col_text(st, 3, sb->status, sizeof(sb->status));
    store_col_text(st, 4, sb->backend, sizeof(sb->backend));
    store_col_text(st, 5, sb->runtime, sizeof(sb->runtime));
    store_col_text(st, 6, sb->template_name, sizeof(sb->template_name));
    store_col_text(st, 7, sb->template_digest, sizeof(sb->template_digest));
    const unsigned char *env = sqlite3_column_text(st, 8);
    sb->env_json = sbx_xstrdup(env ? (const char *)env : "{}");
    sb->ttl_seconds = sqlite3_column_int64(st, 9);
    sb->created_at = sqlite3_column_int64(st, 10);
    sb->expires_at = sqlite3_column_int64(st, 11);
    sb->ended_at = sqlite3_column_int64(st, 12);
    store_col_text(st, 13, sb->end_reason, sizeof(sb->end_reason));
    sb->memory_mb = sqlite3_column_int64(st, 14);
    sb->pids = sqlite3_column_int64(st, 15);
    sb->cpu_millicores = sqlite3_column_int64(st, 16);
    sb->enable_default_session = sqlite3_column_int64(st, 17) != 0;
}

int store_sandbox_insert(struct store *s, const struct store_sandbox *sb, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(
        s, "INSERT INTO sandboxes(" SB_COLS ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", &st,
        err, "tttttttttiiiitiiii", sb->id, sb->user, sb->key_id, sb->status, sb->backend,
        sb->runtime, sb->template_name, sb->template_digest, sb->env_json ? sb->env_json : "{}",
        sb->ttl_seconds, sb->created_at, sb->expires_at, sb->ended_at,
        sb->end_reason[0] ? sb->end_reason : NULL, sb->memory_mb, sb->pids, sb->cpu_millicores,
        (long long)sb->enable_default_session);
    if (r < 0)
        return r;
    r = sqlite3_step(st) == SQLITE_DONE ? 0 : store_db_err(s, err, "insert sandbox");
    sqlite3_finalize(st);
    return r;
}

int store_sandbox_get(struct store *s, const char *id, struct store_sandbox *out,
                      struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "SELECT " SB_COLS " FROM sandboxes WHERE id=?", &st, err, "t", id);
    if (r < 0)
        return r;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        row_to_sandbox(st, out);
        r = 0;
    } else if (rc == SQLITE_DONE) {
        r = sbx_err_set(err, ENOENT, "sandbox_not_found", "no sandbox with id %s", id);
    } else {
        r = store_db_err(s, err, "get sandbox");
    }
    sqlite3_finalize(st);
    return r;
}

int store_sandbox_set_status(struct store *s, const char *id, const char *status,
                             const char *reason, long long now, struct sbx_err *err)
{
    bool ended = !strcmp(status, SANDBOX_DESTROYED) || !strcmp(status, SANDBOX_FAILED);
    sqlite3_stmt *st;
    int r = store_prepare(s, "UPDATE sandboxes SET status=?, ended_at=?, end_reason=? WHERE id=?",
                          &st, err, "titt", status, ended ? now : 0, reason, id);
    if (r < 0)
        return r;
    r = sqlite3_step(st) == SQLITE_DONE ? 0 : store_db_err(s, err, "update sandbox");
    sqlite3_finalize(st);
    return r;
}

int store_sandbox_set_expiry(struct store *s, const char *id, long long expires_at,
                             struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s, "UPDATE sandboxes SET expires_at=? WHERE id=?", &st, err, "it",
                          expires_at, id);
    if (r < 0)
        return r;
    r = sqlite3_step(st) == SQLITE_DONE ? 0 : store_db_err(s, err, "update sandbox expiry");
    sqlite3_finalize(st);
    return r;
}

int store_sandbox_assign(struct store *s, const struct store_sandbox *sb, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "UPDATE sandboxes SET user=?, key_id=?, env=?, ttl_seconds=?, "
                          "created_at=?, expires_at=?, enable_default_session=? WHERE id=?",
                          &st, err, "tttiiiit", sb->user, sb->key_id,
                          sb->env_json ? sb->env_json : "{}", sb->ttl_seconds, sb->created_at,
                          sb->expires_at, (long long)sb->enable_default_session, sb->id);
    if (r < 0)
        return r;
    r = sqlite3_step(st) == SQLITE_DONE ? 0 : store_db_err(s, err, "assign sandbox");
    sqlite3_finalize(st);
    return r;
}

int store_sandbox_each_live(struct store *s, const char *user, store_sandbox_cb cb, void *data,
                            struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "SELECT " SB_COLS " FROM sandboxes "
                          "WHERE status IN ('creating','running','paused') "
                          "AND (?1 IS NULL OR user=?1) ORDER BY created_at, id",
                          &st, err, "t", user);
    if (r < 0)
        return r;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct store_sandbox sb;
        row_to_sandbox(st, &sb);
        cb(&sb, data);
        store_sandbox_clear(&sb);
    }
    r = rc == SQLITE_DONE ? 0 : store_db_err(s, err, "list sandboxes");
    sqlite3_finalize(st);
    return r;
}

int store_sandbox_count_live(struct store *s, const char *user, const char *key_id,
                             long long *per_user, long long *per_key, struct sbx_err *err)
{
    sqlite3_stmt *st;
    int r = store_prepare(s,
                          "SELECT count(*), coalesce(sum(key_id=?2),0) FROM sandboxes "
                          "WHERE status IN ('creating','running') AND user=?1",
                          &st, err, "tt", user, key_id);
    if (r < 0)
        return r;
    if (sqlite3_step(st) == SQLITE_ROW) {
        *per_user = sqlite3_column_int64(st, 0);
        *per_key = sqlite3_column_int64(st, 1);
    } else {
        r = store_db_err(s, err, "count sandboxes");
    }
    sqlite3_finalize(st);
    return r;
}
