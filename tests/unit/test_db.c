/* db.h against both drivers: SQLite in a temp file, and PostgreSQL started by
 * scripts/pg.sh (skipped, saying so, only when that server cannot start). Then the store
 * itself (migrations, keys, sandboxes, configurations, wallets, execs, egress, the audit
 * chain, skills, chat sessions) on each. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/common/util.h"
#include "../../src/daemon/store/db.h"
#include "../../src/daemon/store/db_driver.h"
#include "../../src/daemon/store/migrate.h"
#include "../../src/daemon/store/nodes.h"
#include "../../src/daemon/store/store.h"
#include "../../src/daemon/store/usage.h"
#include "check.h"

static const char *name_of(struct db *db)
{
    return db_dialect(db) == DB_POSTGRES ? "postgres" : "sqlite";
}

static void test_placeholders(void)
{
    struct sbx_err err = {0};
    char *out;
    int n;
    CHECK(db_sql_dollar("SELECT ?, ?5, ?, '?', \"a?\" -- ?\n, ?1", &out, &n, &err) == 0 &&
              !strcmp(out, "SELECT $1, $5, $6, '?', \"a?\" -- ?\n, $1") && n == 6,
          "? numbers on from the highest so far, ?N is N, quotes and comments are kept");
    free(out);
    CHECK(db_sql_dollar("SELECT 'it''s ?', ?", &out, &n, &err) == 0 &&
              !strcmp(out, "SELECT 'it''s ?', $1") && n == 1,
          "a doubled quote stays inside its string");
    free(out);
    CHECK(db_sql_dollar("SELECT ?33", &out, &n, &err) == -EINVAL, "?N past the maximum is refused");
}

/* One row's worth of every type, read back as written. */
static void test_types(struct db *db)
{
    const char *nm = name_of(db);
    struct sbx_err err = {0};
    const char *blob_type = db_dialect(db) == DB_POSTGRES ? "BYTEA" : "BLOB";
    _cleanup_free_ char *ddl = sbx_xasprintf(
        "DROP TABLE IF EXISTS t; CREATE TABLE t(id TEXT PRIMARY KEY, n BIGINT, b %s, note TEXT)",
        blob_type);
    CHECK(db_exec(db, ddl, &err) == 0, "%s: a table is made: %.100s", nm, err.msg);

    static const unsigned char bytes[] = {0, 1, 2, 0xff, 0, 'x'};
    struct db_stmt *st;
    CHECK(db_prepare(db, "INSERT INTO t(id,n,b,note) VALUES(?,?,?,?)", &st, &err) == 0,
          "%s: insert prepared", nm);
    db_bind_text(st, 1, "a");
    db_bind_int64(st, 2, 1LL << 42);
    db_bind_blob(st, 3, bytes, sizeof(bytes));
    db_bind_null(st, 4);
    CHECK(db_step(st, &err) == DB_DONE && db_changes(st) == 1, "%s: one row inserted: %.100s", nm,
          err.msg);
    db_finalize(st);

    CHECK(db_query(db, &st, &err, "SELECT id,n,b,note FROM t WHERE id=?", "t", "a") == 0 &&
              db_step(st, &err) == DB_ROW,
          "%s: the row reads back", nm);
    size_t n = 0;
    const void *b = db_col_blob(st, 2, &n);
    CHECK(!strcmp(db_col_text(st, 0), "a") && db_col_int64(st, 1) == 1LL << 42,
          "%s: text and a 64-bit integer survive", nm);
    CHECK(n == sizeof(bytes) && b && !memcmp(b, bytes, n), "%s: a blob with NULs survives", nm);
    CHECK(db_col_null(st, 3) && db_col_text(st, 3) == NULL && db_col_int64(st, 3) == 0,
          "%s: NULL reads NULL (and 0)", nm);
    CHECK(db_step(st, &err) == DB_DONE, "%s: then the rows end", nm);
    db_finalize(st);

    CHECK(db_query(db, &st, &err, "INSERT INTO t(id,n) VALUES(?,?)", "ti", "a", 1LL) == 0 &&
              db_step(st, &err) == -EEXIST && !strcmp(err.code, "store_conflict"),
          "%s: a duplicate key is store_conflict (-EEXIST): %s", nm, err.code);
    db_finalize(st);

    CHECK(db_query(db, &st, &err, "INSERT INTO t(id,n) VALUES(?,?)", "ti", "b", 7LL) == 0 &&
              db_run(st, &err) == 0,
          "%s: a second row", nm);
    CHECK(db_query(db, &st, &err, "UPDATE t SET note=? WHERE n>?", "ti", "x", 0LL) == 0 &&
              db_step(st, &err) == DB_DONE && db_changes(st) == 2,
          "%s: an update says how many rows it changed", nm);
    db_finalize(st);

    long long hits[2] = {-1, -1};
    for (int i = 0; i < 2; i++) {
        CHECK(db_query(db, &st, &err, "SELECT count(*) FROM t WHERE (?1 IS NULL OR id=?1)", "t",
                       i ? "b" : NULL) == 0 &&
                  db_step(st, &err) == DB_ROW,
              "%s: ?1 used twice", nm);
        hits[i] = db_col_int64(st, 0);
        db_finalize(st);
    }
    CHECK(hits[0] == 2 && hits[1] == 1, "%s: a NULL filter matches all, a value one", nm);

    CHECK(db_query(db, &st, &err,
                   "INSERT INTO t(id,n) VALUES(?,?) ON CONFLICT(id) DO UPDATE SET n=t.n+?2 "
                   "RETURNING n",
                   "ti", "b", 5LL) == 0 &&
              db_step(st, &err) == DB_ROW && db_col_int64(st, 0) == 12,
          "%s: an upsert adds to the row it hit and returns it: %.100s", nm, err.msg);
    db_finalize(st);

    CHECK(db_query(db, &st, &err, "SELECT '?', ?", "t", "v") == 0 && db_step(st, &err) == DB_ROW &&
              !strcmp(db_col_text(st, 0), "?") && !strcmp(db_col_text(st, 1), "v"),
          "%s: a ? inside a string is not a placeholder", nm);
    db_finalize(st);

    CHECK(db_prepare(db, "SELECT nosuchcolumn FROM t", &st, &err) < 0 ||
              (db_step(st, &err) < 0 && !strcmp(err.code, "store_error")),
          "%s: bad SQL is store_error", nm);
    db_finalize(st);
}

static long long count_rows(struct db *db)
{
    struct db_stmt *st;
    struct sbx_err err = {0};
    long long n = -1;
    if (db_query(db, &st, &err, "SELECT count(*) FROM t", "") == 0 && db_step(st, &err) == DB_ROW)
        n = db_col_int64(st, 0);
    db_finalize(st);
    return n;
}

static int insert(struct db *db, const char *id)
{
    struct db_stmt *st;
    struct sbx_err err = {0};
    int r = db_query(db, &st, &err, "INSERT INTO t(id,n) VALUES(?,0)", "t", id);
    return r < 0 ? r : db_run(st, &err);
}

static void test_transactions(struct db *db)
{
    const char *nm = name_of(db);
    struct sbx_err err = {0};
    long long before = count_rows(db);
    CHECK(db_tx_begin(db, DB_TX_PLAIN, &err) == 0 && insert(db, "tx1") == 0 &&
              db_tx_end(db, false, &err) == 0 && count_rows(db) == before,
          "%s: a rolled back transaction leaves nothing", nm);
    CHECK(db_tx_begin(db, DB_TX_PLAIN, &err) == 0 && insert(db, "tx2") == 0 &&
              db_tx_begin(db, DB_TX_PLAIN, &err) == 0 && insert(db, "tx3") == 0 &&
              db_tx_end(db, false, &err) == 0 && db_tx_end(db, true, &err) == 0 &&
              count_rows(db) == before + 1,
          "%s: an inner transaction rolls back alone, the outer commits", nm);
    CHECK(db_tx_begin(db, DB_TX_LOCKED, &err) == 0 && insert(db, "tx4") == 0 &&
              db_tx_end(db, true, &err) == 0 && count_rows(db) == before + 2,
          "%s: a locked transaction commits: %.100s", nm, err.msg);
    CHECK(db_tx_end(db, true, &err) == -EINVAL, "%s: ending no transaction is an error", nm);
}

/* While one connection holds the locked transaction, another cannot take it. */
static void test_lock_excludes(struct db *a, struct db *b)
{
    const char *nm = name_of(a);
    struct sbx_err err = {0};
    CHECK(db_tx_begin(a, DB_TX_LOCKED, &err) == 0, "%s: connection A takes the write lock", nm);
    bool excluded;
    if (db_dialect(a) == DB_POSTGRES) {
        struct db_stmt *st;
        excluded =
            db_query(b, &st, &err, "SELECT pg_try_advisory_xact_lock(5456728065)", "") == 0 &&
            db_step(st, &err) == DB_ROW && !strcmp(db_col_text(st, 0), "f");
        db_finalize(st);
    } else {
        (void)db_exec(b, "PRAGMA busy_timeout=0", &err);
        int r = db_tx_begin(b, DB_TX_LOCKED, &err);
        excluded = r == -EAGAIN && !strcmp(err.code, "store_busy");
        if (r == 0)
            (void)db_tx_end(b, false, NULL);
    }
    CHECK(excluded, "%s: connection B cannot have it meanwhile (%s)", nm, err.code);
    if (db_dialect(a) == DB_POSTGRES) {
        struct db_stmt *st;
        int r = db_tx_begin(b, DB_TX_PLAIN, &err);
        if (r == 0 && (r = db_query(b, &st, &err, "SET LOCAL lock_timeout = 200", "")) == 0)
            r = db_run(st, &err);
        CHECK(r == 0 && db_tx_begin(b, DB_TX_LOCKED, &err) == -EAGAIN &&
                  !strcmp(err.code, "store_busy"),
              "postgres: waiting past lock_timeout for it is store_busy: %.100s", err.msg);
        CHECK(db_tx_end(b, false, &err) == 0, "postgres: B gives up its transaction");
    }
    CHECK(db_tx_end(a, true, &err) == 0, "%s: A lets it go", nm);
    CHECK(db_tx_begin(b, DB_TX_LOCKED, &err) == 0 && db_tx_end(b, true, &err) == 0,
          "%s: then B takes it", nm);
}

static void test_pg_only(struct db *db, struct db *other)
{
    struct sbx_err err = {0};
    struct db_stmt *sh;
    CHECK(db_query(db, &sh, &err,
                   "SELECT current_setting('lock_timeout'), "
                   "current_setting('statement_timeout')",
                   "") == 0 &&
              db_step(sh, &err) == DB_ROW && !strcmp(db_col_text(sh, 0), "5s") &&
              !strcmp(db_col_text(sh, 1), "1min"),
          "postgres: sbxd's session waits 5 s for a lock and 1 min for a statement");
    db_finalize(sh);
    CHECK(db_tx_begin(db, DB_TX_PLAIN, &err) == 0 && insert(db, "a") == -EEXIST,
          "postgres: a failed statement inside a transaction");
    CHECK(db_tx_end(db, true, &err) < 0, "postgres: its commit is an error, not a silent rollback");

    /* The server ends our session: the next statement fails as store_unavailable at worst,
     * and the one after runs on a new connection. */
    struct db_stmt *st;
    long long pid = 0;
    if (db_query(db, &st, &err, "SELECT pg_backend_pid()", "") == 0 && db_step(st, &err) == DB_ROW)
        pid = db_col_int64(st, 0);
    db_finalize(st);
    CHECK(db_query(other, &st, &err, "SELECT pg_terminate_backend(CAST(? AS INTEGER))", "i", pid) ==
                  0 &&
              db_step(st, &err) == DB_ROW,
          "postgres: the server is told to end connection %lld", pid);
    db_finalize(st);
    int r = insert(db, "after1");
    bool first_ok = r == 0;
    struct sbx_err e2 = {0};
    if (!first_ok) {
        (void)db_query(db, &st, &e2, "SELECT 1", "");
        (void)db_step(st, &e2);
        db_finalize(st);
    }
    CHECK(insert(db, "after2") == 0, "postgres: after a lost connection the store reconnects");
    CHECK(db_backup(db, "/tmp/never", &err) == -ENOTSUP, "postgres: sbxd backup says pg_dump");
}

static void sum_cb(const char *user, const char *key_id, const char *kind, long long amount,
                   void *data)
{
    *(long long *)data += amount;
}

/* The store on a driver: what the converted parts do, the same on both. */
static void audit_count_cb(const struct store_audit_entry *e, void *data)
{
    (void)e;
    (*(int *)data)++;
}

static void egress_cb(const struct store_egress_conn *c, void *data)
{
    long long *ended = data;
    *ended = c->ended_at_ms;
}

/* The parts that moved onto db.h last (migration 2): exec records, workspace generations,
 * egress, the audit chain with retention, skills and installs, chat sessions. */
static void test_store_rest(struct store *s, const char *nm)
{
    struct sbx_err err = {0};
    struct store_exec e;
    long long removed = -1;
    CHECK(store_exec_insert(s, "ex_a", "sb_1", "alice", 1000, &err) == 0 &&
              store_exec_finish(s, "ex_a", EXEC_EXITED, "{\"exit_code\":0}", 2000, &err) == 0 &&
              store_exec_insert(s, "ex_b", "sb_1", "alice", 3000, &err) == 0 &&
              store_exec_finish(s, "ex_b", EXEC_EXITED, "{}", 4000, &err) == 0 &&
              store_exec_insert(s, "ex_c", "sb_1", "alice", 5000, &err) == 0 &&
              store_exec_get(s, "sb_1", "ex_a", "alice", &e, &err) == 0 && e.ended_at_ms == 2000 &&
              !strcmp(e.result_json, "{\"exit_code\":0}"),
          "%s: exec records: %.100s", nm, err.msg);
    store_exec_clear(&e);
    struct store_prune p = {.before_ms = 0, .keep = 1, .batch = 100};
    CHECK(store_exec_prune(s, &p, &removed, &err) == 0 && removed == 2 &&
              store_exec_get(s, "sb_1", "ex_b", "alice", &e, &err) == -ENOENT &&
              store_exec_get(s, "sb_1", "ex_c", "alice", &e, &err) == 0,
          "%s: exec retention by count keeps the newest and the running (%lld): %.100s", nm,
          removed, err.msg);
    store_exec_clear(&e);
    long long gen = 0;
    char fp[65];
    CHECK(store_ws_set(s, "sb_1", 1, "f1", &err) == 0 &&
              store_ws_set(s, "sb_1", 2, "f2", &err) == 0 &&
              store_ws_get(s, "sb_1", &gen, fp, &err) == 0 && gen == 2 && !strcmp(fp, "f2"),
          "%s: the workspace generation is upserted: %.100s", nm, err.msg);

    _cleanup_free_ char *pol = NULL;
    CHECK(store_egress_policy_set(s, "sb_1", "{\"a\":1}", 1, &err) == 0 &&
              store_egress_policy_copy(s, "sb_1", "sb_2", 2, &err) == 0 &&
              store_egress_policy_copy(s, "sb_1", "sb_2", 3, &err) == 0 &&
              store_egress_policy_get(s, "sb_2", &pol, &err) == 0 && pol &&
              !strcmp(pol, "{\"a\":1}"),
          "%s: an egress policy copies onto another sandbox, twice: %.100s", nm, err.msg);
    struct store_egress_conn c = {.sandbox_id = "sb_1",
                                  .method = "CONNECT",
                                  .host = "a.test",
                                  .port = 443,
                                  .verdict = "allowed",
                                  .reason = "ok",
                                  .started_at_ms = 1000};
    long long id1 = 0, id2 = 0, ended = -1;
    CHECK(store_egress_log_insert(s, &c, &id1, &err) == 0 &&
              store_egress_log_insert(s, &c, &id2, &err) == 0 && id1 > 0 && id2 > id1 &&
              store_egress_log_query(s, "sb_1", 0, 1, egress_cb, &ended, &err) == 0 && ended == 0,
          "%s: egress log ids come from RETURNING, an open one has no end: %.100s", nm, err.msg);
    CHECK(store_egress_log_interrupt(s, 1500, &err) == 0 &&
              store_egress_log_prune(s, 5000, 100, &removed, &err) == 0 && removed == 2,
          "%s: interrupted connections end and are pruned (%lld): %.100s", nm, removed, err.msg);

    static const struct store_anchor_key key = {{1, 2, 3}};
    for (int i = 0; i < 3; i++) {
        struct store_audit_entry a = {.ts_ms = 100 + i,
                                      .user = i ? "bob" : "alice",
                                      .key_id = "key_1",
                                      .action = "sandbox.create",
                                      .outcome = "ok"};
        CHECK(store_audit_append(s, &a, &err) == 0, "%s: audit entry %d: %.100s", nm, i, err.msg);
    }
    int n = 0;
    struct store_audit_filter f = {.user = "bob", .limit = 10};
    struct store_audit_verdict v;
    CHECK(store_audit_query(s, &f, audit_count_cb, &n, &err) == 0 && n == 2 &&
              store_audit_verify(s, &key, &v, &err) == 0 && v.ok && v.checked == 3,
          "%s: the audit chain filters by \"user\" and verifies (%d): %.100s", nm, n, err.msg);
    struct store_prune ap = {.before_ms = 0, .keep = 1, .batch = 100};
    CHECK(store_audit_prune(s, &ap, 1000, &key, &removed, &err) == 0 && removed == 2 &&
              store_audit_verify(s, &key, &v, &err) == 0 && v.ok && v.checked == 1 &&
              v.anchor.present && v.anchor.seq == 2,
          "%s: audit retention leaves a signed anchor the rest verifies from: %.100s", nm, err.msg);

    struct store_skill k = {.id = "sk_1",
                            .name = "pdf",
                            .version = "1.0.0",
                            .bundle_sha256 = "ab",
                            .source = "upload",
                            .owner = "alice",
                            .description = "d",
                            .envs_json = "[]",
                            .created_at = 1};
    CHECK(store_skill_insert(s, &k, &err) == 0, "%s: a skill: %.100s", nm, err.msg);
    snprintf(k.id, sizeof(k.id), "sk_2");
    CHECK(store_skill_insert(s, &k, &err) == -EEXIST && !strcmp(err.code, "skill_exists"),
          "%s: the same name and version again is skill_exists", nm);
    struct store_skill_install in = {.id = "si_1",
                                     .config_id = "cfg_1",
                                     .catalog_id = "sk_1",
                                     .name = "pdf",
                                     .version = "1.0.0",
                                     .status = "ready",
                                     .snapshot_id = "snap_1",
                                     .owner = "alice"};
    bool used = false;
    CHECK(store_skill_install_put(s, &in, &err) == 0 &&
              store_skill_install_put(s, &in, &err) == 0 &&
              store_skill_config_snapshot_set(s, "cfg_1", "snap_2", &err) == 0 &&
              store_skill_snapshot_used(s, "snap_1", &used, &err) == 0 && used,
          "%s: a skill install is upserted by id and its snapshot in use: %.100s", nm, err.msg);
    snprintf(in.id, sizeof(in.id), "si_2");
    CHECK(store_skill_install_put(s, &in, &err) == -EEXIST && !strcmp(err.code, "skill_installed"),
          "%s: a second install of the name is skill_installed", nm);
    char sb[STORE_ID_MAX + 1];
    CHECK(store_chat_session_set(s, "alice", "conv", "sb_1", 1, &err) == 0 &&
              store_chat_session_set(s, "alice", "conv", "sb_2", 2, &err) == 0 &&
              store_chat_session_get(s, "alice", "conv", sb, &err) == 0 && !strcmp(sb, "sb_2") &&
              store_chat_session_get(s, "bob", "conv", sb, &err) == -ENOENT,
          "%s: a chat session moves to its new sandbox and is per user: %.100s", nm, err.msg);
}

/* Nodes (store/nodes.c), limits claimed under the write lock and a paused sandbox moved
 * between nodes; sb (alice's, running, on node-1) is in the store already. */
static void test_store_nodes(struct store *s, const char *nm, const struct store_sandbox *sb)
{
    struct sbx_err err = {0};
    struct store_sandbox back;
    CHECK(store_sandbox_get(s, sb->id, &back, &err) == 0 && !strcmp(back.node_id, "node-1"),
          "%s: a new sandbox is on the node that claimed the store: %s", nm, back.node_id);
    store_sandbox_clear(&back);
    struct store_node n = {.id = "node-1", .url = "http://127.0.0.1:1", .capacity = 5,
                           .templates = "base,office", .backends = "gvisor",
                           .key_fingerprint = "ab", .started_at_ms = 10, .heartbeat_ms = 10};
    struct store_node got;
    CHECK(store_node_register(s, &n, &err) == 0 && store_node_register(s, &n, &err) == 0 &&
              store_node_heartbeat(s, "node-1", 99, "base", &err) == 0 &&
              store_node_get(s, "node-1", &got, &err) == 0 && got.heartbeat_ms == 99 &&
              !strcmp(got.templates, "base") && got.capacity == 5 && got.running == 1 &&
              !strcmp(got.key_fingerprint, "ab"),
          "%s: a node registers twice, heartbeats, and counts its running sandbox: %.100s", nm,
          err.msg);
    CHECK(store_node_get(s, "node-9", &got, &err) == -ENOENT && !strcmp(err.code, "node_not_found"),
          "%s: an unknown node is node_not_found", nm);

    struct store_sandbox_limits lim = {.per_user = 2, .per_key = 2};
    struct store_sandbox two = *sb;
    snprintf(two.id, sizeof(two.id), "sb_2");
    snprintf(two.node_id, sizeof(two.node_id), "node-2");
    struct store_sandbox three = two;
    snprintf(three.id, sizeof(three.id), "sb_3");
    CHECK(store_sandbox_claim(s, &two, false, &lim, &err) == 0 &&
              store_sandbox_claim(s, &three, false, &lim, &err) == -EAGAIN &&
              !strcmp(err.code, "sandbox_concurrency_limit") &&
              store_sandbox_get(s, "sb_3", &back, &err) == -ENOENT,
          "%s: a claim past the limit, counted on every node, writes nothing", nm);
    CHECK(store_sandbox_move(s, "sb_2", "node-2", "node-1", &err) == -EBUSY &&
              !strcmp(err.code, "sandbox_moved"),
          "%s: a running sandbox does not move", nm);
    CHECK(store_sandbox_set_status(s, "sb_2", SANDBOX_PAUSED, NULL, 0, &err) == 0 &&
              store_sandbox_move(s, "sb_2", "node-3", "node-1", &err) == -EBUSY &&
              store_sandbox_move(s, "sb_2", "node-2", "node-1", &err) == 0 &&
              store_sandbox_move(s, "sb_2", "node-2", "node-3", &err) == -EBUSY &&
              store_sandbox_get(s, "sb_2", &back, &err) == 0 && !strcmp(back.node_id, "node-1"),
          "%s: a paused sandbox moves once, from the node it is on: %.100s", nm, err.msg);
    store_sandbox_clear(&back);
    CHECK(store_sandbox_set_status(s, "sb_2", SANDBOX_DESTROYED, "deleted", 1, &err) == 0,
          "%s: cleaned up", nm);
}

static void test_store(const char *url, const char *path)
{
    const char *nm = url ? "postgres" : "sqlite";
    struct store *s = NULL;
    struct sbx_err err = {0};
    CHECK(store_open_at(url, path, &s, &err) == 0, "%s: the store opens: %.100s", nm, err.msg);
    if (!s)
        return;
    CHECK(store_is_postgres(s) == (url != NULL), "%s: on the driver asked for", nm);
    CHECK(!strcmp(store_node(s), STORE_NODE_LOCAL), "%s: no node claimed yet", nm);
    CHECK(store_claim_node(s, "node-1", &err) == 0 && !strcmp(store_node(s), "node-1"),
          "%s: the store is claimed as a node: %.100s", nm, err.msg);
    if (url) {
        struct store *twice = NULL, *other = NULL;
        CHECK(store_open_at(url, path, &twice, &err) == 0, "postgres: a second node opens it");
        CHECK(store_claim_node(twice, "node-1", &err) == -EBUSY && !strcmp(err.code, "node_in_use"),
              "postgres: a second process as the same node is refused: %.100s", err.msg);
        store_free(twice);
        CHECK(store_open_at(url, path, &other, &err) == 0 &&
                  store_claim_node(other, "node-2", &err) == 0,
              "postgres: another node shares the store: %.100s", err.msg);
        store_free(other);
    }
    struct store_key k = {.id = "key_1",
                          .user = "alice",
                          .role = AUTH_ROLE_MEMBER,
                          .tool_level = AUTH_TOOL_SANDBOX,
                          .scope = AUTH_SCOPE_FULL,
                          .hash = "h",
                          .created_at = 1700000000};
    struct store_key got;
    long long n = 0;
    CHECK(store_key_insert(s, &k, &err) == 0 && store_key_get(s, "key_1", &got, &err) == 0 &&
              !strcmp(got.user, "alice") && got.tool_level == AUTH_TOOL_SANDBOX &&
              store_key_count(s, &n, &err) == 0 && n == 1,
          "%s: a key is stored and read: %.100s", nm, err.msg);
    CHECK(store_key_delete(s, "key_1", &err) == 0 &&
              store_key_get(s, "key_1", &got, &err) == -ENOENT &&
              !strcmp(err.code, "key_not_found") && store_key_delete(s, "key_1", &err) == -ENOENT,
          "%s: a deleted key is gone", nm);

    struct store_sandbox sb = {.id = "sb_1",
                               .user = "alice",
                               .key_id = "key_1",
                               .status = SANDBOX_RUNNING,
                               .backend = "v1",
                               .runtime = "gvisor",
                               .template_name = "base",
                               .template_digest = "d",
                               .env_json = "{\"A\":\"1\"}",
                               .ttl_seconds = 600,
                               .created_at = 1700000000,
                               .expires_at = 1700000600,
                               .memory_mb = 2048,
                               .pids = 512,
                               .cpu_millicores = 1000,
                               .enable_default_session = true};
    long long pu = -1, pk = -1;
    struct store_sandbox_counts c = {0};
    CHECK(store_sandbox_insert(s, &sb, &err) == 0 &&
              store_sandbox_count_live(s, "alice", "key_1", &pu, &pk, &err) == 0 && pu == 1 &&
              pk == 1 && store_sandbox_counts(s, "alice", "key_2", &c, &err) == 0 &&
              c.user_running == 1 && c.key_active == 0,
          "%s: a sandbox counts against its user and key: %.100s", nm, err.msg);
    test_store_nodes(s, nm, &sb);
    char v[64];
    CHECK(store_meta_set(s, "sb_1", STORE_META_BOOT_ID, "b1", &err) == 0 &&
              store_meta_set(s, "sb_1", STORE_META_BOOT_ID, "b2", &err) == 0 &&
              store_meta_get(s, "sb_1", STORE_META_BOOT_ID, v, sizeof(v), &err) == 0 &&
              !strcmp(v, "b2") &&
              store_meta_get(s, "sb_1", STORE_META_PARENT, v, sizeof(v), &err) == -ENOENT,
          "%s: sandbox meta is upserted", nm);

    struct store_config cf = {.id = "cfg_1",
                              .name = "web",
                              .description = "",
                              .config_json = "{}",
                              .created_at = 1,
                              .updated_at = 1};
    struct store_config cf2 = cf;
    snprintf(cf2.id, sizeof(cf2.id), "cfg_2");
    CHECK(store_config_insert(s, &cf, &err) == 0 && store_config_insert(s, &cf2, &err) == -EEXIST &&
              !strcmp(err.code, "sandbox_config_exists"),
          "%s: a configuration's name is unique: %s", nm, err.code);
    CHECK(store_config_lock(s, "cfg_1", "r1", 1000, 5000, &err) == 0 &&
              store_config_lock(s, "cfg_1", "r2", 2000, 6000, &err) == -EBUSY &&
              store_config_lock(s, "cfg_9", "r2", 2000, 6000, &err) == -ENOENT,
          "%s: a configuration's lease holds against another owner", nm);

    struct store_idem idem = {0};
    CHECK(store_idem_begin(s, "alice", "k1", "h1", 100, &idem, &err) == 0 &&
              idem.state == STORE_IDEM_NEW &&
              store_idem_begin(s, "alice", "k1", "h1", 101, &idem, &err) == 0 &&
              idem.state == STORE_IDEM_IN_PROGRESS &&
              store_idem_finish(s, "alice", "k1", 201, "{}", &err) == 0 &&
              store_idem_begin(s, "alice", "k1", "h1", 102, &idem, &err) == 0 &&
              idem.state == STORE_IDEM_REPLAY && idem.status == 201,
          "%s: an idempotency key is claimed, then replayed", nm);
    store_idem_clear(&idem);

    struct store_usage_event ev = {.ts_ms = 1700000000123LL,
                                   .user = "alice",
                                   .key_id = "key_1",
                                   .sandbox_id = "sb_1",
                                   .backend = "v1",
                                   .kind = USAGE_EXEC_MS,
                                   .amount = 1500};
    long long sum = 0, rep = 0;
    CHECK(store_usage_add(s, &ev, &err) == 0 && store_usage_add(s, &ev, &err) == 0 &&
              store_usage_sum(s, "alice", NULL, USAGE_EXEC_MS, NULL, 0, 1LL << 62, &sum, &err) ==
                  0 &&
              sum == 3000 && store_usage_report(s, NULL, 0, 1LL << 62, sum_cb, &rep, &err) == 0 &&
              rep == 3000,
          "%s: usage adds up (millisecond times): %.100s", nm, err.msg);
    struct store_ledger_entry
        e1 = {.user = "alice", .ts_ms = 1, .source = LEDGER_TOP_UP, .amount = 5000000},
        e2 = {.user = "alice", .ts_ms = 2, .source = LEDGER_SANDBOX_CHARGE, .amount = -1500};
    CHECK(store_wallet_post(s, &e1, &err) == 0 && store_wallet_post(s, &e2, &err) == 0 &&
              e2.balance_after == 4998500 && e2.id > e1.id && e1.id > 0,
          "%s: a wallet moves with its ledger: %.100s", nm, err.msg);
    test_store_rest(s, nm);
    store_free(s);

    /* The schema is recorded; a newer one than this binary knows is refused. */
    struct db *db = NULL;
    int ver = -1;
    CHECK(db_open(url ? url : path, &db, &err) == 0 && store_schema_version(db, &ver, &err) == 0 &&
              ver == store_schema_latest(),
          "%s: the store is at schema version %d", nm, ver);
    CHECK(db_exec(db, "UPDATE wallet_ledger SET amount=0", &err) < 0,
          "%s: the ledger refuses an update: %.100s", nm, err.msg);
    CHECK(store_migrate(db, &err) == 0 && store_schema_version(db, &ver, &err) == 0 &&
              ver == store_schema_latest(),
          "%s: migrating again changes nothing", nm);
    CHECK(db_exec(db, "INSERT INTO schema_version(version,name,applied_at) VALUES(999,'x',0)",
                  &err) == 0,
          "%s: a future version is recorded", nm);
    db_close(db);
    s = NULL;
    CHECK(store_open_at(url, path, &s, &err) < 0 && !strcmp(err.code, "store_schema_newer"),
          "%s: a store from a newer sbxd is refused: %.100s", nm, err.msg);
    store_free(s);
}

/* The first line scripts/pg.sh prints (a URL), or NULL when it fails. */
static char *pg_sh(const char *args)
{
    _cleanup_free_ char *cmd = sbx_xasprintf("scripts/pg.sh %s", args);
    FILE *p = popen(cmd, "r");
    char line[256] = "";
    if (!p)
        return NULL;
    if (!fgets(line, sizeof(line), p))
        line[0] = '\0';
    int rc = pclose(p);
    line[strcspn(line, "\n")] = '\0';
    return rc == 0 && line[0] ? sbx_xstrdup(line) : NULL;
}

int main(void)
{
    struct sbx_err err = {0};
    test_placeholders();
    CHECK(!db_target_is_postgres("/tmp/x.db") && db_target_is_postgres("postgres://h/d") &&
              db_target_is_postgres("postgresql://h/d"),
          "a URL names PostgreSQL, anything else a SQLite file");
    struct store *none = NULL;
    CHECK(store_open_at("mysql://x", "/tmp/x", &none, &err) == -EINVAL &&
              !strcmp(err.code, "invalid_config"),
          "SBX_STORE naming another database is invalid_config");

    char dir[] = "/tmp/sbx-db-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "a temp dir");
    _cleanup_free_ char *lite = sbx_xasprintf("%s/t.db", dir);
    struct db *a = NULL, *b = NULL;
    CHECK(db_open(lite, &a, &err) == 0 && db_open(lite, &b, &err) == 0, "sqlite: two connections");
    if (a && b) {
        test_types(a);
        test_transactions(a);
        test_lock_excludes(a, b);
    }
    db_close(a);
    db_close(b);
    _cleanup_free_ char *slite = sbx_xasprintf("%s/store.db", dir);
    test_store(NULL, slite);

    char pgdir[] = "/tmp/sbx-pg-XXXXXX";
    CHECK(mkdtemp(pgdir) != NULL, "a temp dir for PostgreSQL");
    _cleanup_free_ char *start = sbx_xasprintf("start %s 2>%s/pg.err", pgdir, pgdir);
    _cleanup_free_ char *url = pg_sh(start);
    if (!url) {
        _cleanup_free_ char *why = sbx_xasprintf("%s/pg.err", pgdir);
        SKIP("postgres: scripts/pg.sh could not start a server (see %s)", why);
    } else {
        a = b = NULL;
        CHECK(db_open(url, &a, &err) == 0 && db_open(url, &b, &err) == 0,
              "postgres: two connections: %.100s", err.msg);
        if (a && b) {
            test_types(a);
            test_transactions(a);
            test_lock_excludes(a, b);
            test_pg_only(a, b);
        }
        db_close(a);
        db_close(b);
        _cleanup_free_ char *mk = sbx_xasprintf("createdb %s store", pgdir);
        _cleanup_free_ char *surl = pg_sh(mk);
        _cleanup_free_ char *local = sbx_xasprintf("%s/local.db", dir);
        CHECK(surl != NULL, "postgres: a database for the store");
        if (surl)
            test_store(surl, local);
        struct db *bad = NULL;
        CHECK(db_open("postgres://sbx:secretpw@127.0.0.1:1/none", &bad, &err) < 0 &&
                  !strcmp(err.code, "store_unavailable") && !strstr(err.msg, "secretpw"),
              "postgres: no server is store_unavailable, without the password: %.100s", err.msg);
        _cleanup_free_ char *stop = sbx_xasprintf("scripts/pg.sh stop %s", pgdir);
        CHECK(system(stop) == 0, "postgres: stopped");
    }
    _cleanup_free_ char *rm = sbx_xasprintf("rm -rf %s %s", dir, pgdir);
    (void)system(rm);
    return CHECK_DONE();
}
