"""sbxd on a PostgreSQL store (SBX_STORE=postgres://..., docs/scale-out.md), through a real
sbxd, a real sandbox and a throwaway PostgreSQL that scripts/pg.sh starts on 127.0.0.1.

What is on PostgreSQL is checked there with psql, not only through the API: keys,
sandboxes, configurations, idempotency, usage and wallets. One daemon and one sandbox.
"""

import glob
import os
import sqlite3
import subprocess

import harness
from harness import assert_error

PG = {}
D = harness.Shared()


def pg_url():
    if "url" not in PG:
        PG["dir"], PG["url"] = harness.pg_start()
        D.kw["extra_env"] = {"SBX_STORE": PG["url"]}
    return PG["url"]


def teardown_module():
    D.close()
    if "dir" in PG:
        harness.pg_stop(PG.pop("dir"))
    PG.clear()


def psql(sql):
    """Rows of sql run on the store's database, as lists of strings."""
    binary = (sorted(glob.glob("/usr/lib/postgresql/*/bin/psql")) or ["psql"])[-1]
    r = subprocess.run([binary, pg_url(), "-XAt", "-F", "\t", "-c", sql],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return [line.split("\t") for line in r.stdout.splitlines()]


def admin():
    pg_url()
    return D.client()


def member():
    pg_url()
    return D.client("pg-alice")


def sandbox():
    return D.once("sb", lambda d: member().create_sandbox())["id"]


def test_the_schema_is_migrated_on_postgres_once():
    admin().ok("GET", "/v1/keys")
    port = pg_url().split(":")[2].split("/")[0]
    assert "store: PostgreSQL 15." in D.get().log_text(), "the log says which store"
    assert "127.0.0.1:%s, database sbx" % port in D.get().log_text()
    # Each migration once, none missing.
    n, distinct, top = psql("SELECT count(*), count(DISTINCT version), max(version) "
                            "FROM schema_version")[0]
    assert n == distinct == top and int(n) >= 1, (n, distinct, top)
    PG["versions"] = n
    tables = {r[0] for r in psql("SELECT tablename FROM pg_tables WHERE schemaname='public'")}
    assert {"keys", "nodes", "sandboxes", "sandbox_configs", "usage_events", "wallet_ledger",
            "idempotency", "sandbox_meta", "execs", "workspace_gen", "egress_policies",
            "egress_log", "audit", "audit_head", "audit_anchor", "skill_catalog",
            "skill_installs", "skill_config_snapshots", "chat_sessions"} <= tables, tables
    assert not os.path.exists(os.path.join(D.get().data_dir, "sbx.db")), "no local SQLite file"


def test_a_key_lives_in_postgres_and_the_audit_chain_too():
    c = admin()
    k = c.create_key("pg-bob")
    rows = psql("SELECT \"user\", role, deleted_at IS NULL FROM keys WHERE id='%s'" % k["id"])
    assert rows == [["pg-bob", "member", "t"]], rows
    assert any(x["id"] == k["id"] for x in c.list_keys())
    # Its creation is in the one audit chain, on PostgreSQL, and the chain verifies.
    rows = psql("SELECT action, outcome FROM audit WHERE details LIKE '%%%s%%'" % k["id"])
    assert ["key.create", "ok"] in rows, rows
    assert c.ok("GET", "/v1/audit/verify")["ok"] is True
    c.delete_key(k["id"])
    assert psql("SELECT deleted_at IS NOT NULL FROM keys WHERE id='%s'" % k["id"]) == [["t"]]
    r = D.get().client(k["key"]).request("GET", "/v1/sandboxes")
    assert_error(r, 401, "invalid_api_key")


def test_a_sandbox_runs_and_its_row_is_in_postgres():
    c, sid = member(), sandbox()
    assert c.sh(sid, "echo on-postgres") == "on-postgres\n"
    assert c.get_sandbox(sid)["status"] == "running"
    rows = psql("SELECT \"user\", status, backend FROM sandboxes WHERE id='%s'" % sid)
    assert rows == [["pg-alice", "running", c.get_sandbox(sid)["backend"]]], rows
    boot = psql("SELECT value FROM sandbox_meta WHERE sandbox_id='%s' AND name='boot_id'" % sid)
    assert len(boot) == 1 and boot[0][0], boot


def test_configurations_on_postgres():
    c = admin()
    cfg = c.ok("POST", "/v1/sandbox-configs", {"name": "pg-web", "config": {
        "env_vars": {"TOKEN": "pg-secret-91"}}}, status=201)
    assert c.ok("GET", "/v1/sandbox-configs/" + cfg["id"])["name"] == "pg-web"
    r = c.request("POST", "/v1/sandbox-configs", {"name": "pg-web", "config": {}})
    assert_error(r, 409, "sandbox_config_exists")
    rows = psql("SELECT name, config FROM sandbox_configs WHERE id='%s'" % cfg["id"])
    assert len(rows) == 1 and rows[0][0] == "pg-web", rows
    assert "pg-secret-91" not in rows[0][1], "the secret is stored encrypted"
    c.ok("DELETE", "/v1/sandbox-configs/" + cfg["id"])
    assert psql("SELECT count(*) FROM sandbox_configs WHERE id='%s'" % cfg["id"]) == [["0"]]


def test_idempotent_exec_replays_from_postgres():
    c, sid = member(), sandbox()
    h = {"Idempotency-Key": "pg-once"}
    body = {"shell": "echo x >> /workspace/n; wc -l < /workspace/n"}
    r1 = c.request("POST", "/v1/sandboxes/%s/exec" % sid, body, headers=h)
    r2 = c.request("POST", "/v1/sandboxes/%s/exec" % sid, body, headers=h)
    assert r1.status == r2.status == 200 and r1.body == r2.body, (r1, r2)
    assert r2.headers.get("x-sbx-idempotent-replay") == "true"
    rows = psql("SELECT status FROM idempotency WHERE \"user\"='pg-alice' AND key='pg-once'")
    assert rows == [["200"]], rows


def test_usage_and_the_wallet_read_from_postgres():
    c, sid = member(), sandbox()
    c.sh(sid, "sleep 0.2")
    u = admin().ok("GET", "/v1/usage?user=pg-alice")
    assert u["total"]["exec_ms"] > 0, u
    ms = psql("SELECT coalesce(sum(amount),0) FROM usage_events WHERE \"user\"='pg-alice' "
              "AND kind='exec_ms'")
    assert int(ms[0][0]) == u["total"]["exec_ms"], (ms, u)
    w = admin().ok("POST", "/v1/wallet/top-up", {"user": "pg-alice", "amount_micro_eur": 2500000})
    assert w["balance_micro_eur"] >= 2500000 - 10 ** 9, w
    rows = psql("SELECT source, amount FROM wallet_ledger WHERE \"user\"='pg-alice' "
                "AND source='top_up'")
    assert rows == [["top_up", "2500000"]], rows
    led = admin().ok("GET", "/v1/wallet/ledger?user=pg-alice")
    assert any(e["source"] == "top_up" and e["amount_micro_eur"] == 2500000 for e in led["data"])


def test_a_restart_keeps_keys_sandboxes_and_the_schema():
    c, sid = member(), sandbox()
    D.get().restart()
    assert c.get_sandbox(sid)["status"] == "running"
    out = c.exec(sid, shell="cat /workspace/n")
    assert out["exit_code"] == 0 and out["stdout"] == "x\n", out
    assert psql("SELECT count(*) FROM schema_version") == [[PG["versions"]]], "not again"


def refused_start(env):
    """The log of an sbxd that must stop at start with env."""
    d = harness.Daemon(extra_env=env)
    try:
        try:
            d.start(timeout=30)
        except AssertionError:
            return d.log_text()
        raise AssertionError("sbxd started with %r" % env)
    finally:
        d.cleanup()


def test_a_store_that_cannot_be_reached_stops_sbxd_with_a_clear_message():
    log = refused_start({"SBX_STORE": "postgres://sbx:pw-never-shown@127.0.0.1:1/x"})
    assert "connecting to PostgreSQL" in log, log[-2000:]
    assert "pw-never-shown" not in log


def test_sbx_store_naming_another_database_is_refused():
    log = refused_start({"SBX_STORE": "mysql://127.0.0.1/x"})
    assert "SBX_STORE must be a postgres://" in log, log[-2000:]


def test_a_second_sbxd_as_the_same_node_is_refused():
    d = D.get()
    with open(os.path.join(d.data_dir, "node.id")) as f:
        node = f.read().strip()
    log = refused_start({"SBX_STORE": pg_url(), "SBX_NODE_ID": node})
    assert "another sbxd runs as node %s" % node in log, log[-2000:]
    assert member().get_sandbox(sandbox())["status"] == "running", "the first is untouched"
    assert psql("SELECT node_id FROM sandboxes WHERE id='%s'" % sandbox()) == [[node]]


def test_sbxd_backup_points_to_pg_dump():
    d = D.get()
    env = harness.sanitizer_env({k: v for k, v in os.environ.items() if not k.startswith("SBX_")})
    env["SBX_STORE"] = pg_url()
    dest = os.path.join(d.tmp, "copy.db")
    p = subprocess.run([d.binary, "backup", "--data-dir", d.data_dir, dest], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0 and "pg_dump" in p.stderr, (p.returncode, p.stderr)
    assert not os.path.exists(dest)


def test_a_sqlite_data_dir_from_before_migration_2_takes_it_as_it_is():
    """SQLite: a data dir whose store is at version 1 with the other tables as the files
    created them before they moved into migration 2 (the same CREATE text, so dropping what
    migration 2 added gives that state back) keeps its rows and its audit chain."""
    d = harness.Daemon(extra_env={"SBX_STORE": ""})
    try:
        d.start()
        c = d.client()
        k = c.create_key("old-dir")
        d.stop()
        db = sqlite3.connect(os.path.join(d.data_dir, "sbx.db"))
        db.execute("DELETE FROM schema_version WHERE version >= 2")
        db.execute("DROP INDEX execs_started")
        # And what migration 3 (nodes) added.
        db.execute("DROP TABLE nodes")
        db.execute("DROP INDEX sandboxes_node")
        db.execute("ALTER TABLE sandboxes DROP COLUMN node_id")
        db.execute("ALTER TABLE idempotency DROP COLUMN node_id")
        # And what migration 4 (volumes) added.
        db.execute("DROP TABLE volume_mounts")
        db.execute("DROP TABLE volumes")
        db.commit()
        db.close()
        d.start()
        assert any(x["id"] == k["id"] for x in c.list_keys())
        v = c.ok("GET", "/v1/audit/verify")
        assert v["ok"] is True and v["checked"] >= 1, v
        db = sqlite3.connect(os.path.join(d.data_dir, "sbx.db"))
        try:
            versions = [r[0] for r in db.execute("SELECT version FROM schema_version ORDER BY 1")]
            idx = db.execute("SELECT count(*) FROM sqlite_master WHERE name='execs_started'")
            assert versions == [1, 2, 3, 4] and idx.fetchone()[0] == 1, versions
            assert db.execute("SELECT count(*) FROM nodes").fetchone()[0] == 1
        finally:
            db.close()
    finally:
        d.cleanup()
