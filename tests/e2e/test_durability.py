"""Durability (docs/reliability.md): a full data directory answers 507
insufficient_storage, never a 500 and never a damaged store, and everything works again
once space returns; kill -9 of sbxd at awkward moments leaves a store that opens clean
with every sandbox accounted for."""

import os
import sqlite3
import subprocess
import tempfile

import harness
from harness import assert_error, wait_for

FULL = {}


def full_daemon():
    """A daemon whose data dir is a 48 MB tmpfs (made once; tests/run.py has no setup hook)."""
    if "d" in FULL:
        return FULL["d"]
    mnt = tempfile.mkdtemp(prefix="sbx-full-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m,mode=0700", "sbxfull", mnt],
                   check=True)
    FULL["mnt"] = mnt
    FULL["d"] = harness.Daemon(data_dir=os.path.join(mnt, "data"),
                               extra_env={"SBX_WORKSPACE_MB": "0"})
    FULL["d"].start()
    return FULL["d"]


def teardown_module():
    R.close()
    d = FULL.get("d")
    try:
        if d:
            d.cleanup()
    finally:
        if "mnt" in FULL:
            subprocess.run(["umount", "-l", FULL["mnt"]], check=False)
            os.rmdir(FULL["mnt"])


def fill(d):
    """Take every free block of the data dir's filesystem; returns the filler's path."""
    path = os.path.join(d.data_dir, "filler")
    chunk = b"\0" * (1 << 20)
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass
    return path


def store_ok(d):
    con = sqlite3.connect("file:%s?mode=ro" % os.path.join(d.data_dir, "sbx.db"), uri=True)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()


def test_a_full_data_dir_answers_507_and_recovers():
    d = full_daemon()
    c = d.client()
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    assert c.request("PUT", "/v1/sandboxes/%s/files/before.txt" % sid, raw=b"kept").status == 200
    filler = fill(d)
    try:
        # Each answer while full is a 507 or a success (SQLite may still have room in pages
        # it holds), never a 500.
        r = c.request("PUT", "/v1/sandboxes/%s/files/big.bin" % sid, raw=os.urandom(1 << 20))
        assert_error(r, 507, "insufficient_storage")
        r = c.request("POST", "/v1/sandboxes", {"ttl_seconds": 60}, timeout=120)
        assert_error(r, 507, "insufficient_storage")
        r = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "echo hi"})
        assert_error(r, 507, "insufficient_storage")
        made = []
        for i in range(30):
            r = c.request("POST", "/v1/keys", {"user": "full%d" % i, "role": "member",
                                              "tool_level": "sandbox"})
            if r.status == 201:
                made.append(r.body["id"])
            else:
                assert_error(r, 507, "insufficient_storage")
        assert len(made) < 30, "30 keys were saved on a full disk"
        assert c.get_sandbox(sid)["status"] == "running"  # reads still work
    finally:
        os.unlink(filler)
    assert store_ok(d)
    # Space is back: the same requests succeed, nothing needs a restart.
    assert c.request("GET", "/v1/sandboxes/%s/files/before.txt" % sid).raw == b"kept"
    big = os.urandom(1 << 20)
    assert c.request("PUT", "/v1/sandboxes/%s/files/big.bin" % sid, raw=big).status == 200
    assert c.request("GET", "/v1/sandboxes/%s/files/big.bin" % sid).raw == big
    assert c.exec(sid, shell="echo hi")["stdout"] == "hi\n"
    other = c.create_sandbox(ttl_seconds=60)["id"]
    assert c.ok("POST", "/v1/keys", {"user": "after", "role": "member",
                                     "tool_level": "sandbox"}, status=201)
    # And the store opens clean after a kill -9 taken right after.
    d.kill9()
    d.start()
    c = d.client()
    assert {sid, other} <= {x["id"] for x in c.list_sandboxes()}
    assert c.exec(sid, shell="cat /workspace/before.txt")["stdout"] == "kept"
    c.delete_sandbox(other)


# --- retention -------------------------------------------------------------------------

# A "day" of 1.5 s and a prune every 200 ms: records older than 1.5 s go.
R = harness.Shared(extra_env={"SBX_RETAIN_EXEC_DAYS": "1", "SBX_RETAIN_AUDIT_DAYS": "1",
                              "SBX_RETAIN_EGRESS_DAYS": "1", "SBX_TEST_RETAIN_DAY_MS": "1500",
                              "SBX_TEST_RETAIN_EVERY_MS": "200"})


def verify(c):
    return c.ok("GET", "/v1/audit/verify")


def test_retention_prunes_execs_and_audit_and_the_chain_still_verifies():
    d = R.get()
    c = d.client()
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    ex = c.exec(sid, shell="echo kept for a while")
    path = "/v1/sandboxes/%s/execs/%s" % (sid, ex["id"])
    assert c.request("GET", path).status == 200
    first = verify(c)
    assert first["ok"], first
    # The exec record and the old audit entries go; verify now walks from the anchor.
    wait_for(lambda: c.request("GET", path).status == 404, 20, what="the exec record pruned")
    assert_error(c.request("GET", path), 404, "exec_not_found")
    v = wait_for(lambda: (lambda v: v if v.get("anchor") else None)(verify(c)), 20,
                 what="an anchor")
    assert v["ok"] and v["anchor"]["seq"] >= 1 and len(v["anchor"]["hash"]) == 64, v
    # New entries chain on after pruning.
    c.exec(sid, shell="true")
    wait_for(lambda: c.ok("GET", "/v1/audit")["data"] == [], 20, what="every entry pruned")
    v = verify(c)
    assert v["ok"] and v["checked"] == 0 and v["anchor"]["seq"] > first["checked"], v
    c.delete_sandbox(sid)


def test_a_changed_anchor_fails_verification():
    d = R.get()
    c = d.client()
    c.ok("POST", "/v1/keys", {"user": "anch", "role": "member", "tool_level": "sandbox"},
         status=201)
    wait_for(lambda: (lambda v: v.get("anchor") and c.ok("GET", "/v1/audit")["data"] == [])(
        verify(c)), 20, what="everything pruned")
    good = verify(c)
    assert good["ok"], good
    db = sqlite3.connect(os.path.join(d.data_dir, "sbx.db"), timeout=10)
    try:
        seq, h, sig = db.execute("SELECT seq, hash, signature FROM audit_anchor").fetchone()
        for change in ("UPDATE audit_anchor SET hash = '%s'" % ("0" * 64),
                       "UPDATE audit_anchor SET seq = seq - 1",
                       "UPDATE audit_anchor SET signature = '%s'" % ("ab" * 32)):
            db.execute(change)
            db.commit()
            bad = verify(c)
            assert not bad["ok"] and "anchor" in bad["reason"], (change, bad)
            db.execute("UPDATE audit_anchor SET seq=?, hash=?, signature=?", (seq, h, sig))
            db.commit()
            assert verify(c)["ok"]
        # Without its anchor the kept chain starts with a gap.
        db.execute("DELETE FROM audit_anchor")
        db.commit()
        bad = verify(c)
        assert not bad["ok"] and bad["first_bad_seq"] == 1, bad
        db.execute("INSERT INTO audit_anchor(id,seq,hash,pruned_at_ms,signature) "
                   "VALUES(1,?,?,0,?)", (seq, h, sig))
        db.commit()
    finally:
        db.close()
    assert verify(c)["ok"]
