"""The store's safety at rest (docs/operations.md, "Backups and a damaged store"):
`sbxd backup` takes an online copy while sbxd runs and writes, and a damaged store is refused
at start with a message that says so, instead of being written on."""

import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading

import harness
from harness import build_dir, free_port

# `sbxd backup` is SQLite's online copy: this suite keeps SQLite even in a run on PostgreSQL
# (SBX_STORE empty is the embedded store; docs/scale-out.md).
D = harness.Shared(extra_env={"SBX_STORE": ""})


def teardown_module():
    D.close()


def sbxd(*args, env=None, timeout=60):
    e = dict(os.environ)
    harness.sanitizer_env(e)
    e.update(env or {})
    return subprocess.run([os.path.join(build_dir(), "sbxd")] + list(args), env=e,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)


def test_an_online_backup_while_the_daemon_writes():
    d = D.get()
    c = d.client()
    keys = [c.create_key("b%d" % i)["id"] for i in range(3)]
    stop = threading.Event()

    def write():  # the daemon keeps writing (audit entries, keys) during the copy
        i = 0
        while not stop.is_set():
            c.create_key("w%d" % i)
            i += 1

    t = threading.Thread(target=write)
    t.start()
    out = tempfile.mkdtemp(prefix="sbx-backup-")
    dest = os.path.join(out, "copy.db")
    try:
        p = sbxd("backup", "--data-dir", d.data_dir, dest)
        assert p.returncode == 0, p.stderr.decode()
        assert b"copied to" in p.stdout, p.stdout
    finally:
        stop.set()
        t.join()
    db = sqlite3.connect(dest)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        have = {r[0] for r in db.execute("SELECT id FROM keys")}
        assert set(keys) <= have, (keys, have)
        assert db.execute("SELECT count(*) FROM audit").fetchone()[0] > 0
    finally:
        db.close()
    # Never over an existing file, and a clear refusal.
    p = sbxd("backup", "--data-dir", d.data_dir, dest)
    assert p.returncode == 1 and b"exists" in p.stderr, p.stderr
    shutil.rmtree(out)


def test_a_damaged_store_is_refused_at_start():
    d = D.get()
    work = tempfile.mkdtemp(prefix="sbx-damaged-")
    try:
        data = os.path.join(work, "data")
        os.makedirs(data)
        dest = os.path.join(data, "sbx.db")
        assert sbxd("backup", "--data-dir", d.data_dir, dest).returncode == 0
        size = os.path.getsize(dest)
        assert size > 8192
        with open(dest, "r+b") as f:  # scribble over every page but the header's
            f.seek(4096)
            f.write(os.urandom(size - 4096))
        p = sbxd("--listen", "127.0.0.1:%d" % free_port(), "--data-dir", data,
                 env={"SBX_PREVIEW_LISTEN": "127.0.0.1:%d" % free_port()})
        assert p.returncode != 0, p
        text = (p.stdout + p.stderr).decode("utf-8", "replace")
        assert "damaged" in text or "malformed" in text or "not a database" in text, text
    finally:
        shutil.rmtree(work)
