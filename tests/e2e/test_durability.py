"""Durability (docs/reliability.md): a full data directory answers 507
insufficient_storage, never a 500 and never a damaged store, and everything works again
once space returns; kill -9 of sbxd at awkward moments leaves a store that opens clean
with every sandbox accounted for."""

import concurrent.futures
import os
import sqlite3
import subprocess
import tempfile
import threading
import time

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
    # Always SQLite, also under SBX_TEST_PG: what fills up is the data dir's own store.
    FULL["d"] = harness.Daemon(data_dir=os.path.join(mnt, "data"),
                               extra_env={"SBX_WORKSPACE_MB": "0", "SBX_STORE": ""})
    FULL["d"].start()
    return FULL["d"]


def teardown_module():
    K.close()
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
    if harness.on_postgres(d):
        # PostgreSQL has no integrity_check; a store that answers is what it promises.
        return harness.store_db(d).execute("SELECT 1 AS one").fetchone() == (1,)
    con = sqlite3.connect("file:%s?mode=ro" % os.path.join(d.data_dir, "sbx.db"), uri=True)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()


def truncate_wal(d, room=64 * 1024):
    """Checkpoint sbxd's SQLite WAL into the store and truncate it to nothing; True when done
    (not blocked by a reader) and the store file has less than room bytes of free pages."""
    con = sqlite3.connect(os.path.join(d.data_dir, "sbx.db"), timeout=5)
    try:
        busy, _, _ = con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        free = (con.execute("PRAGMA freelist_count").fetchone()[0] *
                con.execute("PRAGMA page_size").fetchone()[0])
    finally:
        con.close()
    assert free < room, "the store has %d bytes of free pages: a result would fit" % free
    return busy == 0 and os.path.getsize(os.path.join(d.data_dir, "sbx.db-wal")) == 0


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


def test_an_exec_that_ends_on_a_full_disk_is_recorded_once_there_is_room():
    d = full_daemon()
    c = d.client()
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    big = 1000000  # its result needs new pages of the store, which a full disk refuses
    answer = {}
    # It says it started (its record is in the store by then), waits until the data dir's
    # disk, which its workspace is on, is full, and only then writes its output.
    cmd = ("touch started; until [ $(stat -f -c %%a /workspace) -lt 16 ]; do sleep 0.05; done; "
           "head -c %d /dev/zero | tr '\\0' a" % big)
    t = threading.Thread(target=lambda: answer.update(c.exec(sid, shell=cmd,
                                                             timeout_seconds=60)))
    t.start()
    wait_for(lambda: os.path.exists(os.path.join(d.sandbox_dir(sid), "workspace", "started")),
             60, what="the exec to start")
    # The store's WAL file keeps its size after a checkpoint and SQLite writes over it from
    # the start, so a WAL grown by earlier tests would take the result without a new block
    # (the record then lands on the full disk and the test proves nothing). Truncate it
    # first, and check the file holds too few free pages for the result.
    # The sandboxes the earlier tests deleted are removed by their shims off the daemon's
    # path; one removed after the disk is filled gives back the room the result needs.
    sandboxes = os.path.dirname(d.sandbox_dir(sid))
    wait_for(lambda: set(os.listdir(sandboxes)) <= {x["id"] for x in c.list_sandboxes()},
             60, 0.2, "the earlier tests' deleted sandboxes to be removed from the disk")
    wait_for(lambda: truncate_wal(d), 10, 0.1, "the store's WAL to be truncated")
    filler = fill(d)
    try:
        t.join(60)
        assert answer.get("exit_code") == 0 and len(answer["stdout"]) == big, answer.keys()
        path = "/v1/sandboxes/%s/execs/%s" % (sid, answer["id"])
        rec = c.ok("GET", path)
        assert rec["status"] == "running", rec["status"]  # not written yet: no room
    finally:
        os.unlink(filler)
    rec = wait_for(lambda: (lambda r: r if r["status"] != "running" else None)(c.ok("GET", path)),
                   10, 0.2, "the exec's end to be recorded")
    assert rec["status"] == "exited" and rec["exit_code"] == 0, rec["status"]
    assert rec["stdout"] == "a" * big
    c.delete_sandbox(sid)


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
    db = harness.store_db(d)
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


# --- kill -9 at awkward moments ----------------------------------------------------------

# Room for a parent, its two copies and the module's long-lived sandbox.
K = harness.Shared(extra_env={"SBX_MAX_PER_KEY": "8", "SBX_MAX_PER_USER": "8"})


def accounted_for(c, ids):
    """After a restart every sandbox is live (running or paused) or has ended with a
    reason; none is left "creating". One whose machine outlived the kill (a fork's copy
    half way through its restore) is "creating" until its agent answers, or fails after
    the daemon's ready timeout (60 s)."""
    def settled():
        live = {s["id"]: s["status"] for s in c.list_sandboxes()}
        return None if "creating" in live.values() else (live,)
    live, = wait_for(settled, 75, what="no sandbox left creating")
    assert all(st in ("running", "paused") for st in live.values()), live
    d = K.get()
    con = harness.store_db(d)
    try:
        rows = dict(con.execute("SELECT id, status FROM sandboxes"))
    finally:
        con.close()
    for sid in ids:
        assert rows.get(sid) in ("running", "paused", "failed", "destroyed"), (sid, rows)
        assert (rows[sid] in ("running", "paused")) == (sid in live), (sid, rows[sid], live)
    assert all(rows[sid] == live[sid] for sid in live), (rows, live)
    return live


def usable(c, sid, want):
    if c.get_sandbox(sid)["status"] == "paused":
        r = c.request("POST", "/v1/sandboxes/%s/resume" % sid, timeout=120)
        assert r.status == 200, r
    assert c.exec(sid, shell="cat /workspace/keep.txt")["stdout"] == want


def test_kill9_mid_upload_leaves_no_temporary_name():
    d = K.get()
    c = d.client()
    sid = K.once("sb", lambda d: c.create_sandbox(ttl_seconds=1800)["id"])
    # What a kill between an upload's link and its rename leaves: a temporary name.
    ws = os.path.join(d.sandbox_dir(sid), "workspace")
    c.sh(sid, "mkdir -p /workspace/deep/er && echo user > /workspace/.sbx-upload-mine")
    for rel in (".sbx-upload-0123456789abcdef", "deep/er/.sbx-upload-fedcba9876543210"):
        with open(os.path.join(ws, rel), "wb") as f:
            f.write(b"half")
    d.kill9()
    d.start()
    out = c.sh(sid, "cd /workspace && find . -name '.sbx-upload*' | sort")
    assert out == "./.sbx-upload-mine\n", out  # only names of that exact shape go


def kill9_during(op, body, delays, check):
    """For each delay: a sandbox with a file, op (pause or fork) requested, sbxd killed that
    long after, restarted; then check(client, sandbox id, ids live before, file content)."""
    d = K.get()
    c = d.client()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        for delay in delays:
            sid = c.create_sandbox(ttl_seconds=1800)["id"]
            want = "%s%s\n" % (op, delay)
            c.sh(sid, "printf '%s' > /workspace/keep.txt" % want)
            before = {s["id"] for s in c.list_sandboxes()}
            fut = pool.submit(c.request, "POST", "/v1/sandboxes/%s/%s" % (sid, op), body,
                              timeout=120)
            time.sleep(delay)
            d.kill9()
            fut.exception()  # the answer, or the connection the kill cut
            d.start()
            try:
                assert store_ok(d)
                live = accounted_for(c, [sid])
                assert sid in live, "lost the sandbox"
                usable(c, sid, want)
                check(c, sid, set(live) - before - {sid}, want)
            except Exception as e:
                raise AssertionError("kill -9 %gs into a %s of %s: %s: %s" % (
                    delay, op, sid, type(e).__name__, e)) from e
            c.delete_sandbox(sid)
    # Nothing of a sandbox that did not make it is left on disk (a delete finishes off the
    # request path).
    wait_for(lambda: set(os.listdir(os.path.join(d.data_dir, "sandboxes"))) <=
             {s["id"] for s in c.list_sandboxes()}, 20, what="no leftover sandbox dirs")


def test_kill9_during_pause():
    def check(c, sid, new, want):
        assert not new, new
    kill9_during("pause", None, (0.05, 0.15, 0.3), check)


def test_kill9_during_fork():
    def check(c, sid, kids, want):
        for kid in kids:  # a copy that made it is a whole copy
            usable(c, kid, want)
            c.delete_sandbox(kid)
    kill9_during("fork", {"count": 2}, (0.1, 0.3, 0.5, 0.7), check)


def test_kill9_while_a_fork_holds_its_parent():
    """A fork holds its parent paused between its checkpoint and the copies' workspaces
    (docs/snapshots.md); an sbxd killed then leaves it paused, and the next start resumes
    it. The held state is set up by hand (runsc pause and the marker), so the kill lands
    in it every time."""
    d = K.get()
    c = d.client()
    sid = c.create_sandbox(ttl_seconds=1800)["id"]
    c.sh(sid, "printf held > /workspace/keep.txt; sleep 100000 > /dev/null 2>&1 &")
    pid = c.sh(sid, "pgrep -x sleep").split()[0]
    subprocess.run(["runsc", "--root", os.path.join(d.data_dir, "runsc"), "pause", sid],
                   check=True, capture_output=True)
    marker = os.path.join(d.sandbox_dir(sid), "state", "held")
    open(marker, "w").close()
    d.kill9()
    d.start()
    usable(c, sid, "held")
    assert c.get_sandbox(sid)["status"] == "running"
    assert c.sh(sid, "pgrep -x sleep").split()[0] == pid, "resumed, not restarted"
    assert not os.path.exists(marker)
    c.delete_sandbox(sid)


def test_kill9_during_a_burst_of_store_writes():
    d = K.get()
    c = d.client()
    sid = K.once("sb", lambda d: c.create_sandbox(ttl_seconds=1800)["id"])
    acked, lock, stop = [], threading.Lock(), threading.Event()

    def writer(n):
        cl = harness.Client(d.port, d.admin_key, timeout=10)
        i = 0
        while not stop.is_set():
            try:
                r = cl.request("POST", "/v1/keys", {"user": "burst%d_%d" % (n, i),
                                                   "role": "member", "tool_level": "sandbox"},
                               check_request_id=False)
            except Exception:
                return
            if r.status == 201:
                with lock:
                    acked.append(r.body["id"])
            i += 1

    def execer():
        cl = harness.Client(d.port, d.admin_key, timeout=30)
        while not stop.is_set():
            try:
                cl.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true"},
                           check_request_id=False)
            except Exception:
                return
    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    threads.append(threading.Thread(target=execer))
    for t in threads:
        t.start()
    wait_for(lambda: len(acked) >= 50, 60, what="50 keys written")
    d.kill9()
    stop.set()
    for t in threads:
        t.join()
    d.start()
    assert store_ok(d)
    c = d.client()
    have = {k["id"] for k in c.list_keys()}
    lost = [k for k in acked if k not in have]
    assert not lost, "%d acknowledged keys lost: %r" % (len(lost), lost[:5])
    accounted_for(c, [sid])
    assert c.exec(sid, shell="echo alive")["stdout"] == "alive\n"
