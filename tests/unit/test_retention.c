/* Retention in the store: exec records, egress log entries and audit entries pruned by
 * age, the audit chain still verifying from its signed anchor, and any change to the
 * anchor (or a broken chain) refused. */
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/common/util.h"
#include "../../src/daemon/store/store.h"
#include "check.h"

static struct store_anchor_key key = {.k = "0123456789abcdef0123456789abcdef"};

static void append(struct store *s, long long ts_ms, const char *action)
{
    struct sbx_err err = {0};
    struct store_audit_entry e = {
        .ts_ms = ts_ms, .user = "alice", .key_id = "k1", .action = action, .outcome = "ok"};
    CHECK(store_audit_append(s, &e, &err) == 0, "audit entry %s at %lld: %.80s", action, ts_ms,
          err.msg);
}

static int audit_prune(struct store *s, long long before_ms, long long keep, int batch,
                       long long now_ms, long long *removed, struct sbx_err *err)
{
    struct store_prune p = {.before_ms = before_ms, .keep = keep, .batch = batch};
    return store_audit_prune(s, &p, now_ms, &key, removed, err);
}

static int exec_prune(struct store *s, long long before_ms, long long keep, long long *removed,
                      struct sbx_err *err)
{
    struct store_prune p = {.before_ms = before_ms, .keep = keep, .batch = 500};
    return store_exec_prune(s, &p, removed, err);
}

static struct store_audit_verdict verify(struct store *s, const struct store_anchor_key *k)
{
    struct store_audit_verdict v;
    struct sbx_err err = {0};
    CHECK(store_audit_verify(s, k, &v, &err) == 0, "verify runs: %.80s", err.msg);
    return v;
}

static void sql(const char *db, const char *q)
{
    sqlite3 *c = NULL;
    char *msg = NULL;
    CHECK(sqlite3_open(db, &c) == SQLITE_OK && sqlite3_exec(c, q, NULL, NULL, &msg) == SQLITE_OK,
          "sql %.60s: %s", q, msg ? msg : "");
    sqlite3_free(msg);
    sqlite3_close(c);
}

static void test_audit(struct store *s, const char *db)
{
    struct sbx_err err = {0};
    for (int i = 1; i <= 10; i++)
        append(s, i * 1000, "old");
    for (int i = 11; i <= 13; i++)
        append(s, i * 1000, "new");
    struct store_audit_verdict v = verify(s, &key);
    CHECK(v.ok && v.checked == 13 && !v.anchor.present, "13 entries verify, no anchor yet");

    long long removed = -1;
    CHECK(audit_prune(s, 4500, 0, 500, 99, &removed, &err) == 0 && removed == 4,
          "the 4 entries older than 4.5 s are pruned (%lld)", removed);
    v = verify(s, &key);
    CHECK(v.ok && v.checked == 9 && v.anchor.seq == 4 && v.anchor.pruned_at_ms == 99,
          "the rest verifies from the anchor at seq 4 (%lld checked)", v.checked);
    /* In batches: at most 3 a call, oldest first. */
    CHECK(audit_prune(s, 10500, 0, 3, 100, &removed, &err) == 0 && removed == 3, "a batch of 3");
    CHECK(audit_prune(s, 10500, 0, 3, 100, &removed, &err) == 0 && removed == 3,
          "and 3 more: up to seq 10");
    CHECK(audit_prune(s, 10500, 0, 3, 100, &removed, &err) == 0 && removed == 0,
          "nothing is left that old");
    v = verify(s, &key);
    CHECK(v.ok && v.checked == 3 && v.anchor.seq == 10, "3 kept entries verify from seq 10");
    append(s, 14000, "after");
    v = verify(s, &key);
    CHECK(v.ok && v.checked == 4, "an entry appended after pruning chains on");

    /* Another key, or any change to the anchor, and the chain does not verify. */
    struct store_anchor_key other = key;
    other.k[0] ^= 1;
    v = verify(s, &other);
    CHECK(!v.ok && v.bad_seq == 10 && strstr(v.reason, "anchor"),
          "an anchor signed with another key fails at seq 10: %s", v.reason);
    sql(db, "CREATE TABLE saved AS SELECT * FROM audit_anchor");
    sql(db, "UPDATE audit_anchor SET seq = 0");
    v = verify(s, &key);
    CHECK(!v.ok && strstr(v.reason, "anchor"), "an anchor moved to 0 fails: %s", v.reason);
    sql(db, "UPDATE audit_anchor SET seq = 9");
    v = verify(s, &key);
    CHECK(!v.ok && strstr(v.reason, "anchor"), "a moved anchor fails: %s", v.reason);
    sql(db, "UPDATE audit_anchor SET seq = 10, hash = (SELECT hash FROM audit WHERE seq = 11)");
    v = verify(s, &key);
    CHECK(!v.ok && strstr(v.reason, "anchor"), "an anchor with another hash fails: %s", v.reason);
    sql(db, "DELETE FROM audit_anchor");
    v = verify(s, &key);
    CHECK(!v.ok && v.bad_seq == 1, "no anchor: the pruned entries are missing: %s", v.reason);
    sql(db, "INSERT INTO audit_anchor SELECT * FROM saved; DROP TABLE saved");
    v = verify(s, &key);
    CHECK(v.ok && v.checked == 4, "the anchor put back verifies again");

    /* A broken chain is not pruned: the anchor never vouches for what does not verify. */
    sql(db, "UPDATE audit SET details = '{\"x\":1}' WHERE seq = 12");
    CHECK(audit_prune(s, 20000, 0, 500, 101, &removed, &err) < 0 && removed == 0 &&
              strstr(err.msg, "12"),
          "pruning over a changed entry is refused: %.120s", err.msg);
    v = verify(s, &key);
    CHECK(!v.ok && v.bad_seq == 12 && v.anchor.seq == 10, "and the evidence stays at seq 12");
}

static void test_execs_and_egress(struct store *s)
{
    struct sbx_err err = {0};
    CHECK(store_exec_insert(s, "ex_old", "sb_1", "alice", 1000, &err) == 0 &&
              store_exec_finish(s, "ex_old", EXEC_EXITED, "{}", 2000, &err) == 0 &&
              store_exec_insert(s, "ex_new", "sb_1", "alice", 1000, &err) == 0 &&
              store_exec_finish(s, "ex_new", EXEC_EXITED, "{}", 9000, &err) == 0 &&
              store_exec_insert(s, "ex_run", "sb_1", "alice", 1000, &err) == 0,
          "three exec records");
    long long removed = -1;
    CHECK(exec_prune(s, 5000, 0, &removed, &err) == 0 && removed == 1,
          "the one that ended before 5 s is pruned (%lld)", removed);
    struct store_exec e;
    CHECK(store_exec_get(s, "sb_1", "ex_old", "alice", &e, &err) == -ENOENT,
          "it is exec_not_found");
    CHECK(store_exec_get(s, "sb_1", "ex_new", "alice", &e, &err) == 0, "the newer one stays");
    store_exec_clear(&e);
    CHECK(store_exec_get(s, "sb_1", "ex_run", "alice", &e, &err) == 0, "a running one stays");
    store_exec_clear(&e);

    long long id;
    struct store_egress_conn c = {.sandbox_id = "sb_1",
                                  .method = "CONNECT",
                                  .host = "a.test",
                                  .port = 443,
                                  .verdict = "allowed",
                                  .reason = "ok"};
    c.started_at_ms = 1000, c.ended_at_ms = 1500;
    CHECK(store_egress_log_insert(s, &c, &id, &err) == 0, "an old connection");
    c.started_at_ms = 2000, c.ended_at_ms = 0;
    CHECK(store_egress_log_insert(s, &c, &id, &err) == 0, "an old one still open");
    c.started_at_ms = 8000, c.ended_at_ms = 8500;
    CHECK(store_egress_log_insert(s, &c, &id, &err) == 0, "a new one");
    CHECK(store_egress_log_prune(s, 5000, 500, &removed, &err) == 0 && removed == 1,
          "only the old ended connection is pruned (%lld)", removed);

    /* By count: the newest keep stay, whatever their age. */
    char xid[16];
    for (int i = 0; i < 5; i++) {
        snprintf(xid, sizeof(xid), "ex_c%d", i);
        CHECK(store_exec_insert(s, xid, "sb_1", "alice", 10000 + i, &err) == 0 &&
                  store_exec_finish(s, xid, EXEC_EXITED, "{}", 20000 + i, &err) == 0,
              "exec %s", xid);
    }
    CHECK(exec_prune(s, 0, 3, &removed, &err) == 0 && removed == 3,
          "past the newest 3 rows the older finished ones go: ex_new, ex_c0, ex_c1 (%lld)",
          removed);
    CHECK(store_exec_get(s, "sb_1", "ex_c2", "alice", &e, &err) == 0, "ex_c2 stays");
    store_exec_clear(&e);
    CHECK(store_exec_get(s, "sb_1", "ex_c1", "alice", &e, &err) == -ENOENT, "ex_c1 went");
    CHECK(store_exec_get(s, "sb_1", "ex_run", "alice", &e, &err) == 0, "the running one stays");
    store_exec_clear(&e);
}

static void test_audit_by_count(struct store *s)
{
    struct sbx_err err = {0};
    long long now = 100000000;
    for (int i = 0; i < 6; i++)
        append(s, now + i, "recent");
    long long removed = -1;
    CHECK(audit_prune(s, 0, 4, 500, now, &removed, &err) == 0 && removed == 2,
          "recent entries past the newest 4 are pruned (%lld)", removed);
    struct store_audit_verdict v = verify(s, &key);
    CHECK(v.ok && v.checked == 4 && v.anchor.seq == 2, "4 entries verify from the anchor at 2");
    CHECK(audit_prune(s, 0, 4, 500, now, &removed, &err) == 0 && removed == 0, "then nothing more");
}

int main(void)
{
    char dir[] = "/tmp/sbx-retention-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "a temp dir");
    char *db = sbx_xasprintf("%s/sbx.db", dir);
    struct store *s = NULL;
    struct sbx_err err = {0};
    CHECK(store_open(db, &s, &err) == 0, "the store opens: %.100s", err.msg);
    test_audit(s, db);
    test_execs_and_egress(s);
    store_free(s);
    char *db2 = sbx_xasprintf("%s/count.db", dir);
    CHECK(store_open(db2, &s, &err) == 0, "a second store opens");
    test_audit_by_count(s);
    store_free(s);
    free(db2);
    char *rm = sbx_xasprintf("rm -rf %s", dir);
    CHECK(system(rm) == 0, "cleaned up");
    free(rm);
    free(db);
    return CHECK_DONE();
}
