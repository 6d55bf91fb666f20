/* Numbered migrations in both dialects. A migration is never edited once released: a
 * change is a new number. Where the dialects agree the PostgreSQL text is NULL and the
 * SQLite text serves both.
 *
 * What differs: PostgreSQL's INTEGER is 32-bit, so every integer column is BIGINT there
 * (times are milliseconds); SQLite's AUTOINCREMENT is an identity column; SQLite's
 * RAISE triggers are a PL/pgSQL function; "user" is a reserved word in PostgreSQL and
 * is quoted (SQLite accepts the quotes too, so the store's queries quote it always). */
#include "migrate.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "../../common/util.h"

struct migration {
    int version;
    const char *name;
    const char *sqlite;
    const char *pg; /* NULL: the SQLite text */
    /* SQLite only, after the text: what CREATE TABLE IF NOT EXISTS cannot do to a table
     * a data dir from before migrations already has. */
    int (*sqlite_after)(struct db *db, struct sbx_err *err);
};

/* Columns added to tables before the store had migrations: a data dir from then has
 * the tables without them. */
static int v1_added_columns(struct db *db, struct sbx_err *err)
{
    static const struct {
        const char *table, *column, *decl;
    } added[] = {
        {"sandboxes", "enable_default_session", "INTEGER NOT NULL DEFAULT 1"},
        {"keys", "scope", "TEXT NOT NULL DEFAULT 'full_access'"},
    };
    for (size_t i = 0; i < SBX_ARRAY_SIZE(added); i++) {
        struct db_stmt *st;
        int r = db_query(db, &st, err, "SELECT 1 FROM pragma_table_info(?) WHERE name=?", "tt",
                         added[i].table, added[i].column);
        if (r < 0)
            return r;
        r = db_step(st, err);
        db_finalize(st);
        if (r < 0)
            return r;
        if (r == DB_ROW)
            continue;
        _cleanup_free_ char *alter = sbx_xasprintf("ALTER TABLE %s ADD COLUMN %s %s",
                                                   added[i].table, added[i].column, added[i].decl);
        if ((r = db_exec(db, alter, err)) < 0)
            return r;
    }
    return 0;
}

static const struct migration migrations[] = {
    {
        1,
        "keys, sandboxes, sandbox meta, idempotency, configurations, usage and wallets",
        /* The tables as they were created before migrations, so that an existing SQLite
         * store takes version 1 as it is. */
        "CREATE TABLE IF NOT EXISTS keys("
        "  id TEXT PRIMARY KEY, user TEXT NOT NULL, role TEXT NOT NULL, tool_level TEXT NOT NULL,"
        "  hash TEXT NOT NULL, created_at INTEGER NOT NULL, deleted_at INTEGER,"
        "  scope TEXT NOT NULL DEFAULT 'full_access');"
        "CREATE TABLE IF NOT EXISTS sandboxes("
        "  id TEXT PRIMARY KEY, user TEXT NOT NULL, key_id TEXT NOT NULL, status TEXT NOT NULL,"
        "  backend TEXT NOT NULL, runtime TEXT NOT NULL, template TEXT NOT NULL,"
        "  template_digest TEXT NOT NULL, env TEXT NOT NULL, ttl_seconds INTEGER NOT NULL,"
        "  created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, ended_at INTEGER,"
        "  end_reason TEXT, memory_mb INTEGER NOT NULL, pids INTEGER NOT NULL,"
        "  cpu_millicores INTEGER NOT NULL, enable_default_session INTEGER NOT NULL DEFAULT 1);"
        "CREATE INDEX IF NOT EXISTS sandboxes_live ON sandboxes(status, user);"
        "CREATE TABLE IF NOT EXISTS sandbox_meta("
        "  sandbox_id TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL,"
        "  PRIMARY KEY(sandbox_id, name));"
        "CREATE TABLE IF NOT EXISTS idempotency("
        "  user TEXT NOT NULL, key TEXT NOT NULL, request_hash TEXT NOT NULL,"
        "  created_at INTEGER NOT NULL, status INTEGER, response TEXT,"
        "  PRIMARY KEY(user, key));"
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
        "  PRIMARY KEY(skill_id, name));"
        "CREATE TABLE IF NOT EXISTS usage_events("
        "  id INTEGER PRIMARY KEY AUTOINCREMENT, ts_ms INTEGER NOT NULL, user TEXT NOT NULL,"
        "  key_id TEXT NOT NULL, sandbox_id TEXT, backend TEXT NOT NULL, kind TEXT NOT NULL,"
        "  amount INTEGER NOT NULL);"
        "CREATE INDEX IF NOT EXISTS usage_events_user ON usage_events(user, kind, ts_ms);"
        "CREATE INDEX IF NOT EXISTS usage_events_ts ON usage_events(ts_ms);"
        "CREATE TABLE IF NOT EXISTS usage_marks("
        "  sandbox_id TEXT NOT NULL, kind TEXT NOT NULL, upto_ms INTEGER NOT NULL,"
        "  PRIMARY KEY(sandbox_id, kind));"
        "CREATE TABLE IF NOT EXISTS wallets("
        "  user TEXT PRIMARY KEY, balance INTEGER NOT NULL, updated_at_ms INTEGER NOT NULL);"
        "CREATE TABLE IF NOT EXISTS wallet_ledger("
        "  id INTEGER PRIMARY KEY AUTOINCREMENT, user TEXT NOT NULL, ts_ms INTEGER NOT NULL,"
        "  source TEXT NOT NULL CHECK(source IN ('sandbox_charge','top_up','adjustment')),"
        "  amount INTEGER NOT NULL, interval_start_ms INTEGER NOT NULL,"
        "  interval_end_ms INTEGER NOT NULL, balance_after INTEGER NOT NULL, details TEXT);"
        "CREATE INDEX IF NOT EXISTS wallet_ledger_user ON wallet_ledger(user, id);"
        /* The ledger is never updated in place: the database refuses it. */
        "CREATE TRIGGER IF NOT EXISTS wallet_ledger_append_only BEFORE UPDATE ON wallet_ledger "
        "  BEGIN SELECT RAISE(ABORT, 'wallet_ledger is append-only'); END;"
        "CREATE TRIGGER IF NOT EXISTS wallet_ledger_no_delete BEFORE DELETE ON wallet_ledger "
        "  BEGIN SELECT RAISE(ABORT, 'wallet_ledger is append-only'); END;"
        "CREATE TABLE IF NOT EXISTS billing_state(name TEXT PRIMARY KEY, value INTEGER NOT NULL);",

        "CREATE TABLE keys("
        "  id TEXT PRIMARY KEY, \"user\" TEXT NOT NULL, role TEXT NOT NULL,"
        "  tool_level TEXT NOT NULL, hash TEXT NOT NULL, created_at BIGINT NOT NULL,"
        "  deleted_at BIGINT, scope TEXT NOT NULL DEFAULT 'full_access');"
        "CREATE TABLE sandboxes("
        "  id TEXT PRIMARY KEY, \"user\" TEXT NOT NULL, key_id TEXT NOT NULL,"
        "  status TEXT NOT NULL, backend TEXT NOT NULL, runtime TEXT NOT NULL,"
        "  template TEXT NOT NULL, template_digest TEXT NOT NULL, env TEXT NOT NULL,"
        "  ttl_seconds BIGINT NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL,"
        "  ended_at BIGINT, end_reason TEXT, memory_mb BIGINT NOT NULL, pids BIGINT NOT NULL,"
        "  cpu_millicores BIGINT NOT NULL, enable_default_session BIGINT NOT NULL DEFAULT 1);"
        "CREATE INDEX sandboxes_live ON sandboxes(status, \"user\");"
        "CREATE TABLE sandbox_meta("
        "  sandbox_id TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL,"
        "  PRIMARY KEY(sandbox_id, name));"
        "CREATE TABLE idempotency("
        "  \"user\" TEXT NOT NULL, key TEXT NOT NULL, request_hash TEXT NOT NULL,"
        "  created_at BIGINT NOT NULL, status BIGINT, response TEXT,"
        "  PRIMARY KEY(\"user\", key));"
        "CREATE TABLE sandbox_configs("
        "  id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, description TEXT NOT NULL,"
        "  config TEXT NOT NULL, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL,"
        "  lock_owner TEXT, lock_until_ms BIGINT NOT NULL DEFAULT 0);"
        "CREATE TABLE sandbox_config_of("
        "  sandbox_id TEXT PRIMARY KEY, config_id TEXT NOT NULL, network TEXT, env TEXT);"
        "CREATE INDEX sandbox_config_of_config ON sandbox_config_of(config_id);"
        "CREATE TABLE workspace_settings(name TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE personal_env("
        "  \"user\" TEXT NOT NULL, scope TEXT NOT NULL, target TEXT NOT NULL,"
        "  name TEXT NOT NULL, value TEXT NOT NULL, updated_at BIGINT NOT NULL,"
        "  PRIMARY KEY(\"user\", scope, target, name));"
        "CREATE TABLE skill_env_decls("
        "  skill_id TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL,"
        "  required BIGINT NOT NULL, value TEXT, updated_at BIGINT NOT NULL,"
        "  PRIMARY KEY(skill_id, name));"
        "CREATE TABLE usage_events("
        "  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, ts_ms BIGINT NOT NULL,"
        "  \"user\" TEXT NOT NULL, key_id TEXT NOT NULL, sandbox_id TEXT, backend TEXT NOT NULL,"
        "  kind TEXT NOT NULL, amount BIGINT NOT NULL);"
        "CREATE INDEX usage_events_user ON usage_events(\"user\", kind, ts_ms);"
        "CREATE INDEX usage_events_ts ON usage_events(ts_ms);"
        "CREATE TABLE usage_marks("
        "  sandbox_id TEXT NOT NULL, kind TEXT NOT NULL, upto_ms BIGINT NOT NULL,"
        "  PRIMARY KEY(sandbox_id, kind));"
        "CREATE TABLE wallets("
        "  \"user\" TEXT PRIMARY KEY, balance BIGINT NOT NULL, updated_at_ms BIGINT NOT NULL);"
        "CREATE TABLE wallet_ledger("
        "  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, \"user\" TEXT NOT NULL,"
        "  ts_ms BIGINT NOT NULL,"
        "  source TEXT NOT NULL CHECK(source IN ('sandbox_charge','top_up','adjustment')),"
        "  amount BIGINT NOT NULL, interval_start_ms BIGINT NOT NULL,"
        "  interval_end_ms BIGINT NOT NULL, balance_after BIGINT NOT NULL, details TEXT);"
        "CREATE INDEX wallet_ledger_user ON wallet_ledger(\"user\", id);"
        "CREATE FUNCTION sbx_wallet_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS"
        "  $$BEGIN RAISE EXCEPTION 'wallet_ledger is append-only'; END$$;"
        "CREATE TRIGGER wallet_ledger_append_only BEFORE UPDATE OR DELETE ON wallet_ledger"
        "  FOR EACH ROW EXECUTE FUNCTION sbx_wallet_ledger_append_only();"
        "CREATE TABLE billing_state(name TEXT PRIMARY KEY, value BIGINT NOT NULL);",
        v1_added_columns,
    },
    {
        2,
        "exec records, workspace generations, egress, the audit chain, skills, chat sessions",
        /* As the files created them before they moved here, so an existing SQLite store
         * takes version 2 as it is. */
        "CREATE TABLE IF NOT EXISTS execs("
        "  id TEXT PRIMARY KEY, sandbox_id TEXT NOT NULL, user TEXT NOT NULL,"
        "  status TEXT NOT NULL, started_at_ms INTEGER NOT NULL, ended_at_ms INTEGER,"
        "  result TEXT);"
        "CREATE INDEX IF NOT EXISTS execs_running ON execs(status);"
        "CREATE INDEX IF NOT EXISTS execs_ended ON execs(ended_at_ms);"
        /* Retention by count keeps the newest rows by start (the order rowid had). */
        "CREATE INDEX IF NOT EXISTS execs_started ON execs(started_at_ms, id);"
        "CREATE TABLE IF NOT EXISTS workspace_gen("
        "  sandbox_id TEXT PRIMARY KEY, generation INTEGER NOT NULL, fingerprint TEXT NOT NULL);"
        "CREATE TABLE IF NOT EXISTS egress_policies("
        "  sandbox_id TEXT PRIMARY KEY, policy TEXT NOT NULL, updated_at INTEGER NOT NULL);"
        "CREATE TABLE IF NOT EXISTS egress_log("
        "  id INTEGER PRIMARY KEY AUTOINCREMENT, sandbox_id TEXT NOT NULL, method TEXT NOT NULL,"
        "  host TEXT NOT NULL, address TEXT, port INTEGER NOT NULL, bytes_up INTEGER NOT NULL,"
        "  bytes_down INTEGER NOT NULL, started_at_ms INTEGER NOT NULL, ended_at_ms INTEGER,"
        "  verdict TEXT NOT NULL, reason TEXT NOT NULL);"
        "CREATE INDEX IF NOT EXISTS egress_log_sandbox ON egress_log(sandbox_id, id);"
        "CREATE TABLE IF NOT EXISTS audit("
        "  seq INTEGER PRIMARY KEY, ts_ms INTEGER NOT NULL, user TEXT NOT NULL,"
        "  key_id TEXT NOT NULL, action TEXT NOT NULL, sandbox_id TEXT, outcome TEXT NOT NULL,"
        "  request_id TEXT, details TEXT, prev_hash TEXT NOT NULL, hash TEXT NOT NULL);"
        "CREATE INDEX IF NOT EXISTS audit_user ON audit(user, seq);"
        "CREATE INDEX IF NOT EXISTS audit_sandbox ON audit(sandbox_id, seq);"
        "CREATE TABLE IF NOT EXISTS audit_head("
        "  id INTEGER PRIMARY KEY CHECK(id = 1), seq INTEGER NOT NULL, hash TEXT NOT NULL);"
        "CREATE TABLE IF NOT EXISTS audit_anchor("
        "  id INTEGER PRIMARY KEY CHECK(id = 1), seq INTEGER NOT NULL, hash TEXT NOT NULL,"
        "  pruned_at_ms INTEGER NOT NULL, signature TEXT NOT NULL);"
        "CREATE TABLE IF NOT EXISTS skill_catalog("
        "  id TEXT PRIMARY KEY, name TEXT NOT NULL, version TEXT NOT NULL,"
        "  description TEXT NOT NULL, bundle_sha256 TEXT NOT NULL, source TEXT NOT NULL,"
        "  owner TEXT NOT NULL, envs TEXT NOT NULL, created_at INTEGER NOT NULL,"
        "  UNIQUE(name, version));"
        "CREATE TABLE IF NOT EXISTS skill_installs("
        "  id TEXT PRIMARY KEY, config_id TEXT NOT NULL, catalog_id TEXT NOT NULL,"
        "  name TEXT NOT NULL, version TEXT NOT NULL, bundle_sha256 TEXT NOT NULL,"
        "  enabled INTEGER NOT NULL, status TEXT NOT NULL, error TEXT, snapshot_id TEXT NOT NULL,"
        "  served_catalog_id TEXT NOT NULL, served_version TEXT NOT NULL, session_id TEXT NOT NULL,"
        "  message_id TEXT NOT NULL, envs TEXT NOT NULL, owner TEXT NOT NULL,"
        "  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, UNIQUE(config_id, name));"
        "CREATE TABLE IF NOT EXISTS skill_config_snapshots("
        "  config_id TEXT PRIMARY KEY, snapshot_id TEXT NOT NULL);"
        "CREATE TABLE IF NOT EXISTS chat_sessions("
        "  user TEXT NOT NULL, session_id TEXT NOT NULL, sandbox_id TEXT NOT NULL,"
        "  updated_at INTEGER NOT NULL, PRIMARY KEY(user, session_id));",

        "CREATE TABLE execs("
        "  id TEXT PRIMARY KEY, sandbox_id TEXT NOT NULL, \"user\" TEXT NOT NULL,"
        "  status TEXT NOT NULL, started_at_ms BIGINT NOT NULL, ended_at_ms BIGINT, result TEXT);"
        "CREATE INDEX execs_running ON execs(status);"
        "CREATE INDEX execs_ended ON execs(ended_at_ms);"
        "CREATE INDEX execs_started ON execs(started_at_ms, id);"
        "CREATE TABLE workspace_gen("
        "  sandbox_id TEXT PRIMARY KEY, generation BIGINT NOT NULL, fingerprint TEXT NOT NULL);"
        "CREATE TABLE egress_policies("
        "  sandbox_id TEXT PRIMARY KEY, policy TEXT NOT NULL, updated_at BIGINT NOT NULL);"
        "CREATE TABLE egress_log("
        "  id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, sandbox_id TEXT NOT NULL,"
        "  method TEXT NOT NULL, host TEXT NOT NULL, address TEXT, port BIGINT NOT NULL,"
        "  bytes_up BIGINT NOT NULL, bytes_down BIGINT NOT NULL, started_at_ms BIGINT NOT NULL,"
        "  ended_at_ms BIGINT, verdict TEXT NOT NULL, reason TEXT NOT NULL);"
        "CREATE INDEX egress_log_sandbox ON egress_log(sandbox_id, id);"
        "CREATE TABLE audit("
        "  seq BIGINT PRIMARY KEY, ts_ms BIGINT NOT NULL, \"user\" TEXT NOT NULL,"
        "  key_id TEXT NOT NULL, action TEXT NOT NULL, sandbox_id TEXT, outcome TEXT NOT NULL,"
        "  request_id TEXT, details TEXT, prev_hash TEXT NOT NULL, hash TEXT NOT NULL);"
        "CREATE INDEX audit_user ON audit(\"user\", seq);"
        "CREATE INDEX audit_sandbox ON audit(sandbox_id, seq);"
        "CREATE TABLE audit_head("
        "  id BIGINT PRIMARY KEY CHECK(id = 1), seq BIGINT NOT NULL, hash TEXT NOT NULL);"
        "CREATE TABLE audit_anchor("
        "  id BIGINT PRIMARY KEY CHECK(id = 1), seq BIGINT NOT NULL, hash TEXT NOT NULL,"
        "  pruned_at_ms BIGINT NOT NULL, signature TEXT NOT NULL);"
        "CREATE TABLE skill_catalog("
        "  id TEXT PRIMARY KEY, name TEXT NOT NULL, version TEXT NOT NULL,"
        "  description TEXT NOT NULL, bundle_sha256 TEXT NOT NULL, source TEXT NOT NULL,"
        "  owner TEXT NOT NULL, envs TEXT NOT NULL, created_at BIGINT NOT NULL,"
        "  UNIQUE(name, version));"
        "CREATE TABLE skill_installs("
        "  id TEXT PRIMARY KEY, config_id TEXT NOT NULL, catalog_id TEXT NOT NULL,"
        "  name TEXT NOT NULL, version TEXT NOT NULL, bundle_sha256 TEXT NOT NULL,"
        "  enabled BIGINT NOT NULL, status TEXT NOT NULL, error TEXT, snapshot_id TEXT NOT NULL,"
        "  served_catalog_id TEXT NOT NULL, served_version TEXT NOT NULL, session_id TEXT NOT NULL,"
        "  message_id TEXT NOT NULL, envs TEXT NOT NULL, owner TEXT NOT NULL,"
        "  created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, UNIQUE(config_id, name));"
        "CREATE TABLE skill_config_snapshots("
        "  config_id TEXT PRIMARY KEY, snapshot_id TEXT NOT NULL);"
        "CREATE TABLE chat_sessions("
        "  \"user\" TEXT NOT NULL, session_id TEXT NOT NULL, sandbox_id TEXT NOT NULL,"
        "  updated_at BIGINT NOT NULL, PRIMARY KEY(\"user\", session_id));",
        NULL,
    },
    {
        3,
        "nodes, and the node each sandbox runs on",
        /* One text for both dialects. node_id NULL: a row from before nodes, which the
         * first node to claim the store takes (store_claim_node). */
        "CREATE TABLE nodes("
        "  id TEXT PRIMARY KEY, url TEXT NOT NULL, capacity BIGINT NOT NULL,"
        "  templates TEXT NOT NULL, backends TEXT NOT NULL, key_fingerprint TEXT NOT NULL,"
        "  started_at_ms BIGINT NOT NULL, heartbeat_ms BIGINT NOT NULL);"
        "ALTER TABLE sandboxes ADD COLUMN node_id TEXT;"
        "CREATE INDEX sandboxes_node ON sandboxes(node_id, status);"
        "ALTER TABLE idempotency ADD COLUMN node_id TEXT;",
        NULL,
        NULL,
    },
    {
        4,
        "volumes, and the volumes each sandbox mounts",
        /* One text for both dialects. A volume's name is unique per user; a mount row
         * stays with its sandbox's row (whether that sandbox still lives is the
         * sandboxes table's status). */
        "CREATE TABLE volumes("
        "  id TEXT PRIMARY KEY, \"user\" TEXT NOT NULL, name TEXT NOT NULL,"
        "  size_mb BIGINT NOT NULL, node_id TEXT NOT NULL, created_at BIGINT NOT NULL,"
        "  UNIQUE(\"user\", name));"
        "CREATE TABLE volume_mounts("
        "  sandbox_id TEXT NOT NULL, volume_id TEXT NOT NULL, path TEXT NOT NULL,"
        "  read_only BIGINT NOT NULL, PRIMARY KEY(sandbox_id, path));"
        "CREATE INDEX volume_mounts_volume ON volume_mounts(volume_id);",
        NULL,
        NULL,
    },
};

int store_schema_latest(void)
{
    return migrations[SBX_ARRAY_SIZE(migrations) - 1].version;
}

int store_schema_version(struct db *db, int *out, struct sbx_err *err)
{
    struct db_stmt *st;
    int r = db_query(db, &st, err, "SELECT coalesce(max(version),0) FROM schema_version", "");
    if (r < 0)
        return r;
    r = db_step(st, err);
    if (r == DB_ROW)
        *out = (int)db_col_int64(st, 0);
    db_finalize(st);
    return r < 0 ? r : 0;
}

static int apply(struct db *db, const struct migration *m, struct sbx_err *err)
{
    bool pg = db_dialect(db) == DB_POSTGRES;
    int r = db_exec(db, pg && m->pg ? m->pg : m->sqlite, err);
    if (r == 0 && !pg && m->sqlite_after)
        r = m->sqlite_after(db, err);
    struct db_stmt *st;
    if (r == 0 && (r = db_query(db, &st, err,
                                "INSERT INTO schema_version(version,name,applied_at) VALUES(?,?,?)",
                                "iti", (long long)m->version, m->name, (long long)time(NULL))) == 0)
        r = db_run(st, err);
    return r < 0 ? sbx_err_wrap(err, "migration %d (%s)", m->version, m->name) : 0;
}

int store_migrate(struct db *db, struct sbx_err *err)
{
    int r = db_tx_begin(db, DB_TX_LOCKED, err);
    if (r < 0)
        return r;
    int have = 0;
    r = db_exec(db,
                "CREATE TABLE IF NOT EXISTS schema_version(version INTEGER PRIMARY KEY,"
                " name TEXT NOT NULL, applied_at BIGINT NOT NULL)",
                err);
    if (r == 0)
        r = store_schema_version(db, &have, err);
    if (r == 0 && have > store_schema_latest())
        r = sbx_err_set(err, EPROTO, "store_schema_newer",
                        "the store's schema is version %d, newer than this sbxd knows (%d): "
                        "run the sbxd that wrote it, or a newer one",
                        have, store_schema_latest());
    for (size_t i = 0; r == 0 && i < SBX_ARRAY_SIZE(migrations); i++)
        if (migrations[i].version > have)
            r = apply(db, &migrations[i], err);
    if (r < 0) {
        (void)db_tx_end(db, false, NULL);
        return r;
    }
    return db_tx_end(db, true, err);
}
