"""Workspace paths against a hostile sandbox, through a real sbxd.

- traversal: "..", absolute paths, encoded dots and slashes, NUL, symlinks and
  /proc magic links planted by the sandbox that point out of the workspace: 400
  invalid_path for reads, writes, listings and deletes; nothing on the host is read,
  written or removed.
- the flip race: a process inside the sandbox turns a path into a symlink to a host file
  and back (and a directory into a symlink to a host directory and back) as fast as it
  can — at least 10 000 flips — while the test downloads and uploads through that path
  from several threads. The host files stay unchanged and their content is never served.
"""

import os
import shutil
import tempfile
import threading
import time

import harness
from harness import assert_error

D = harness.Shared()
SECRET = b"HOST-SECRET-" + os.urandom(8).hex().encode()
FLIPS = 10000

FLIPPER = r"""
import os, shutil, sys, time
os.chdir('/workspace/race')
secret, hostdir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])

def clear(name):
    try:
        os.unlink(name)
    except IsADirectoryError:
        shutil.rmtree(name, ignore_errors=True)
    except FileNotFoundError:
        pass

flips = 0
deadline = time.time() + 120
while flips < n and time.time() < deadline:
    for target in (secret, '../../../../../../../../..' + secret):
        clear('t')
        os.symlink(target, 't')
        os.rename('t', 'f')          # f is now a symlink out
        with open('t', 'w') as fh:
            fh.write('SAFE')
        os.rename('t', 'f')          # f is a plain file again
        # d: a symlink to a host directory, then a real one (uploads may recreate it
        # in between: that race is part of the test).
        clear('d')
        try:
            os.symlink(hostdir, 'd')
        except FileExistsError:
            pass
        clear('d')
        os.makedirs('d', exist_ok=True)
        flips += 4
open('/workspace/race/flips', 'w').write(str(flips))
"""


def teardown_module():
    host = D.cache.get("host")
    D.close()
    if host:
        shutil.rmtree(host[0], ignore_errors=True)


def client():
    return D.get().client(D.once("key", lambda d: d.client().create_key("mallory")["key"]))


def sandbox():
    c = client()
    return c, D.once("sb", lambda d: c.create_sandbox(ttl_seconds=3600))["id"]


def host_files():
    """A host file and a host directory that the sandbox will point at."""
    def make(_):
        top = tempfile.mkdtemp(prefix="sbx-hostside-")
        secret = os.path.join(top, "secret")
        with open(secret, "wb") as f:
            f.write(SECRET)
        hostdir = os.path.join(top, "dir")
        os.mkdir(hostdir)
        return top, secret, hostdir
    return D.once("host", make)


def snapshot(top):
    out = {}
    for dirpath, dirs, files in os.walk(top):
        for n in files + dirs:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            data = open(p, "rb").read() if os.path.isfile(p) else None
            out[p] = (st.st_mode, st.st_size, st.st_mtime_ns, data)
    return out


def fp(sid, path):
    return "/v1/sandboxes/%s/files/%s" % (sid, path)


def test_traversal_and_planted_links():
    c, sid = sandbox()
    top, secret, hostdir = host_files()
    before = snapshot(top)
    c.sh(sid, "mkdir -p /workspace/t && cd /workspace/t && "
              "ln -sf %s abs && ln -sf ../../../../../../../..%s rel && "
              "ln -sf /proc/self/root%s proc && ln -sf /proc/self/fd/0 fd0 && "
              "ln -sf /proc/self/cwd cwd && ln -sf %s dir && ln -sf /etc etc && "
              "ln -sf abs chain" % (secret, secret, secret, hostdir))
    paths = ["..", "../x", "t/../../x", "/etc/passwd", "%2e%2e/x", "%2E%2E%2Fx",
             "t%2f..%2f..%2fx", "a%00b", "t/abs", "t/rel", "t/proc", "t/fd0", "t/cwd/x",
             "t/dir/x", "t/etc/passwd", "t/chain", "t/cwd", ".", "t/./abs"]
    for p in paths:
        for method in ("GET", "PUT", "DELETE"):
            r = c.request(method, fp(sid, p), raw=b"PWNED" if method == "PUT" else None)
            if method != "GET" and p in ("t/abs", "t/rel", "t/proc", "t/fd0", "t/chain",
                                         "t/cwd", "t/./abs"):
                # Writing or deleting a name acts on the symlink itself, inside the
                # workspace, never on what it points to.
                assert r.status in (200, 400, 404), (p, r)
            else:
                assert r.status in (400, 404), (method, p, r)
                assert r.body["error"]["code"] in ("invalid_path", "file_not_found"), (p, r)
            assert SECRET not in r.raw, (method, p)
        r = c.request("GET", "/v1/sandboxes/%s/files?path=%s&recursive=true" % (sid, p))
        assert r.status in (400, 404), (p, r)
    c.sh(sid, "cd /workspace/t && ln -sfn %s dir && ln -sfn /etc etc && ln -sfn /proc/self/cwd cwd"
              % hostdir)
    for p in ("t/dir", "t/etc", "t/cwd"):
        assert_error(c.request("GET", "/v1/sandboxes/%s/files?path=%s" % (sid, p)), 400,
                     "invalid_path")
    assert snapshot(top) == before, "a host file or directory changed"
    assert open("/etc/passwd", "rb").read().startswith(b"root:")


def test_symlink_flip_race_downloads_and_uploads():
    c, sid = sandbox()
    top, secret, hostdir = host_files()
    before = snapshot(top)
    c.sh(sid, "rm -rf /workspace/race && mkdir -p /workspace/race && printf SAFE > "
              "/workspace/race/f && cat > /workspace/race/flip.py <<'EOF'\n%s\nEOF" % FLIPPER)
    c.sh(sid, "cd /workspace/race && (nohup python3 flip.py %s %s %d "
              ">/workspace/race/log 2>&1 &)" % (secret, hostdir, FLIPS))
    seen = {"ok": 0, "refused": 0, "put_ok": 0, "put_refused": 0}
    bad = []
    lock = threading.Lock()
    done = threading.Event()

    def worker(i):
        try:
            work(i)
        except Exception as e:  # a cut or stalled answer is a failure, not a dead thread
            with lock:
                bad.append(("worker %d" % i, repr(e)))

    def work(i):
        cl = harness.Client(D.get().port, c.key, timeout=30)
        while not done.is_set():
            r = cl.request("GET", fp(sid, "race/f"))
            with lock:
                if SECRET in r.raw:
                    bad.append(("GET f", r.status))
                elif r.status == 200:
                    assert r.raw in (b"SAFE",) or r.raw.startswith(b"upload"), r.raw[:50]
                    seen["ok"] += 1
                else:
                    seen["refused"] += 1
            name = "race/f" if i % 2 else "race/d/up%d" % i
            r = cl.request("PUT", fp(sid, name), raw=b"upload %d" % i)
            with lock:
                seen["put_ok" if r.status == 200 else "put_refused"] += 1
                if r.status not in (200, 400, 404):
                    bad.append(("PUT", name, r.status, r.raw[:200]))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    deadline = time.time() + 150
    flips = 0
    while time.time() < deadline:
        r = c.request("GET", fp(sid, "race/flips"))
        if r.status == 200:
            flips = int(r.raw)
            break
        if b"Traceback" in c.request("GET", fp(sid, "race/log")).raw:
            break
        time.sleep(0.5)
    done.set()
    for t in threads:
        t.join()
    log = c.request("GET", fp(sid, "race/log")).raw
    assert flips >= FLIPS, "the flipper did %d flips (log %r)" % (flips, log[-500:])
    assert not bad, bad[:5]
    total = sum(seen.values())
    assert total >= 200, seen
    assert seen["ok"] > 0 and seen["put_ok"] > 0, seen
    assert snapshot(top) == before, "a host file or directory changed during the race"
    assert os.listdir(hostdir) == []
    print("flips %d, requests %r" % (flips, seen))
