"""Files in and out of /workspace through a real sbxd: upload, download, listing, delete,
the 100 MB upload limit, the workspace quota (a small one here), inputs on exec and run,
and a kill -9 of sbxd in the middle of a large upload.

One daemon with SBX_WORKSPACE_MB=96 is shared; one sandbox serves most checks.
"""

import hashlib
import os
import socket
import time

import harness
from harness import assert_error, fpath, listing, wait_for

QUOTA_MB = 96
D = harness.Shared(extra_env={"SBX_WORKSPACE_MB": str(QUOTA_MB)})


def teardown_module():
    D.close()


def client():
    def make(d):
        return d.client().create_key("filer")["key"]
    return D.get().client(D.once("key", make))


def sandbox():
    c = client()
    return c, D.once("sb", lambda d: c.create_sandbox(ttl_seconds=3600))["id"]


def paths(c, sid):
    return [e["path"] for e in listing(c, sid)["data"]]


def test_put_get_roundtrip():
    c, sid = sandbox()
    body = "client,suma\nSC Exemplu SRL,1200\nș ț ă\n".encode()
    r = c.request("PUT", fpath(sid, "in/date.csv"), raw=body)
    assert r.status == 200, r
    assert r.body == {"object": "file", "path": "in/date.csv", "size": len(body)}, r.body
    r = c.request("GET", fpath(sid, "in/date.csv"))
    assert r.status == 200 and r.raw == body, r
    assert r.headers["content-length"] == str(len(body)), r.headers
    assert r.headers["content-type"] == "application/octet-stream", r.headers
    # The sandbox sees the same bytes at /workspace.
    out = c.sh(sid, "sha256sum /workspace/in/date.csv")
    assert out.split()[0] == hashlib.sha256(body).hexdigest(), out
    # And what the sandbox writes comes back out.
    c.sh(sid, "printf 'from inside' > /workspace/inside.txt")
    assert c.request("GET", fpath(sid, "inside.txt")).raw == b"from inside"


def test_put_replaces_and_binary_bytes():
    c, sid = sandbox()
    blob = bytes(range(256)) * 1000
    assert c.request("PUT", fpath(sid, "bin/blob"), raw=b"old").status == 200
    assert c.request("PUT", fpath(sid, "bin/blob"), raw=blob).status == 200
    r = c.request("GET", fpath(sid, "bin/blob"))
    assert r.raw == blob
    assert c.request("PUT", fpath(sid, "bin/empty"), raw=b"").status == 200
    r = c.request("GET", fpath(sid, "bin/empty"))
    assert r.status == 200 and r.raw == b"", r


def test_both_sides_see_each_others_changes_at_once():
    """The workspace is shared by the sandbox and the API (docs/performance.md, "Work inside
    the sandbox": why gVisor may not cache it): what one side changes, the other sees on its
    very next look, even where the sandbox had looked before (a cached name, a file it had
    open, a listing it had read)."""
    c, sid = sandbox()
    c.sh(sid, "mkdir -p seen && echo old > seen/a.txt && ls seen >/dev/null && cat seen/a.txt")
    # Replaced from outside (the upload renames a new file over the old one).
    assert c.request("PUT", fpath(sid, "seen/a.txt"), raw=b"new\n").status == 200
    assert c.sh(sid, "cat seen/a.txt") == "new\n"
    # A new name in a directory the sandbox has listed, and one made gone.
    assert c.request("PUT", fpath(sid, "seen/b.txt"), raw=b"b\n").status == 200
    assert c.sh(sid, "ls seen").split() == ["a.txt", "b.txt"]
    assert c.request("DELETE", fpath(sid, "seen/a.txt")).status == 200
    assert c.sh(sid, "ls seen; test -e seen/a.txt || echo gone").split() == ["b.txt", "gone"]
    # And the other way: written inside, read outside at once, listed, replaced, removed.
    c.sh(sid, "echo inside > seen/c.txt; echo more >> seen/b.txt; mv seen/c.txt seen/d.txt")
    assert c.request("GET", fpath(sid, "seen/d.txt")).raw == b"inside\n"
    assert c.request("GET", fpath(sid, "seen/b.txt")).raw == b"b\nmore\n"
    assert sorted(p for p in paths(c, sid) if p.startswith("seen/")) == [
        "seen/b.txt", "seen/d.txt"]


def test_put_chunked_upload():
    c, sid = sandbox()
    data = os.urandom(300_000)
    r = c.request("PUT", fpath(sid, "chunked.bin"), raw=data,
                  headers={"Transfer-Encoding": "chunked"})
    assert r.status == 200 and r.body["size"] == len(data), r
    assert c.request("GET", fpath(sid, "chunked.bin")).raw == data


def test_listing_fields_and_recursion():
    c, sid = sandbox()
    c.sh(sid, "mkdir -p /workspace/l/sub && printf abc > /workspace/l/a.txt && "
              "chmod 600 /workspace/l/a.txt && printf x > /workspace/l/sub/b && "
              "ln -sf /etc/passwd /workspace/l/link")
    top = listing(c, sid, "l", recursive=False)
    assert top["object"] == "list" and top["path"] == "l" and top["truncated"] is False, top
    assert [e["path"] for e in top["data"]] == ["l/a.txt", "l/link", "l/sub"], top
    a = top["data"][0]
    assert set(a) == {"path", "type", "size", "mode", "mtime"}, a
    assert a["type"] == "file" and a["size"] == 3 and a["mode"] == "0600", a
    assert type(a["mtime"]) is int and abs(a["mtime"] - time.time()) < 300, a
    assert top["data"][1]["type"] == "symlink", top
    assert top["data"][2]["type"] == "directory", top
    rec = listing(c, sid, "l", recursive=True)
    assert [e["path"] for e in rec["data"]] == ["l/a.txt", "l/link", "l/sub", "l/sub/b"], rec
    # The workspace root without a path.
    assert "l" in [e["path"] for e in listing(c, sid, "", recursive=False)["data"]]


def test_delete_file_and_tree():
    c, sid = sandbox()
    c.sh(sid, "mkdir -p /workspace/d/e && printf 1 > /workspace/d/e/f && printf 2 > /workspace/d/g")
    r = c.request("DELETE", fpath(sid, "d/g"))
    assert r.status == 200 and r.body == {"object": "file", "path": "d/g", "deleted": True}, r
    assert c.request("DELETE", fpath(sid, "d")).status == 200
    assert not any(p.startswith("d/") or p == "d" for p in paths(c, sid))
    assert c.sh(sid, "ls /workspace/d 2>&1 || echo gone").strip().endswith("gone")
    assert_error(c.request("DELETE", fpath(sid, "d")), 404, "file_not_found")


def test_bad_inputs_change_nothing():
    c, sid = sandbox()
    c.request("PUT", fpath(sid, "keep.txt"), raw=b"keep")
    before = listing(c, sid)
    for path in ("..%2fx", "a/../../x", "%2e%2e/x", "a%00b", "a//b", "a/./b", "a/"):
        for method in ("PUT", "GET", "DELETE"):
            r = c.request(method, fpath(sid, path), raw=b"x" if method == "PUT" else None)
            assert_error(r, 400, "invalid_path")
    r = c.request("GET", "/v1/sandboxes/%s/files?path=..%%2f" % sid)
    assert_error(r, 400, "invalid_path")
    r = c.request("GET", "/v1/sandboxes/%s/files?path=keep.txt" % sid)
    assert_error(r, 400, "invalid_path")
    r = c.request("GET", "/v1/sandboxes/%s/files?recursive=maybe" % sid)
    assert_error(r, 400, "invalid_request")
    assert_error(c.request("GET", fpath(sid, "nope.txt")), 404, "file_not_found")
    assert_error(c.request("GET", fpath(sid, "in")), 400, "invalid_path")  # a directory
    assert_error(c.request("PUT", fpath(sid, "in"), raw=b"x"), 400, "invalid_path")
    assert_error(c.request("PUT", fpath("sb_" + "0" * 20, "x"), raw=b"x"), 404,
                 "sandbox_not_found")
    assert_error(c.request("GET", fpath("sb_" + "0" * 20, "x")), 404, "sandbox_not_found")
    # Another user's sandbox is not found either, and keys are required.
    other = D.get().client(D.get().client().create_key("intruder")["key"])
    assert_error(other.request("GET", fpath(sid, "keep.txt")), 404, "sandbox_not_found")
    assert_error(other.request("PUT", fpath(sid, "keep.txt"), raw=b"evil"), 404,
                 "sandbox_not_found")
    assert_error(c.request("GET", fpath(sid, "keep.txt"), key=None), 401, "missing_api_key")
    assert_error(c.request("PUT", fpath(sid, "keep.txt"), raw=b"x", key=None), 401,
                 "missing_api_key")
    assert listing(c, sid) == before
    assert c.request("GET", fpath(sid, "keep.txt")).raw == b"keep"


def test_upload_over_100mb_is_413_before_reading():
    c, sid = sandbox()
    before = listing(c, sid)
    # Declare 100 MB + 1 and send almost nothing: the answer must come anyway.
    s = socket.create_connection(("127.0.0.1", D.get().port), timeout=10)
    s.sendall(("PUT %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Length: 100000001\r\n\r\n" % (fpath(sid, "huge.bin"), c.key)).encode())
    s.sendall(b"x" * 1000)
    data = b""
    t0 = time.time()
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    assert time.time() - t0 < 5, "the 413 waited for the body"
    assert data.startswith(b"HTTP/1.1 413"), data[:200]
    assert b'"file_too_large"' in data, data
    assert listing(c, sid) == before


def test_quota_upload_507_and_usable_after_delete():
    c, sid = sandbox()
    # What fits is bounded by the image: fill it from an upload, then one more.
    big = os.urandom(50 * 1000 * 1000)
    r = c.request("PUT", fpath(sid, "q/one.bin"), raw=big)
    assert r.status == 200, r
    before = listing(c, sid)
    r = c.request("PUT", fpath(sid, "q/two.bin"), raw=big)
    assert_error(r, 507, "workspace_too_large")
    assert listing(c, sid) == before, "a refused upload left something behind"
    # A write from inside fails the same way.
    r = c.exec(sid, shell="head -c 60000000 /dev/zero > /workspace/q/inside.bin")
    assert r["exit_code"] != 0 and "No space left" in r["stderr"], r
    assert r["error"]["code"] == "workspace_too_large", r
    # Streamed, the same command ends with one error event that still has its exit facts.
    gen = c.stream("POST", "/v1/sandboxes/%s/exec" % sid,
                   {"shell": "head -c 60000000 /dev/zero > /workspace/q/inside2.bin"})
    assert next(gen).status == 200
    events = [e for _, e in gen]
    ends = [e for e in events if e["type"] in ("exit", "error")]
    assert len(ends) == 1 and ends[0]["type"] == "error", events
    assert ends[0]["code"] == "workspace_too_large" and ends[0]["exit_code"] != 0, ends
    c.sh(sid, "rm -f /workspace/q/inside.bin /workspace/q/inside2.bin")
    r = c.exec(sid, shell="echo fits > /workspace/q/small.txt")
    assert r["exit_code"] == 0 and "error" not in r, r
    # Freed space is usable again, whoever deleted the file.
    assert c.request("DELETE", fpath(sid, "q/one.bin")).status == 200
    r = c.request("PUT", fpath(sid, "q/two.bin"), raw=big)
    assert r.status == 200, r
    assert c.request("DELETE", fpath(sid, "q")).status == 200
    c.sh(sid, "head -c 50000000 /dev/zero > /workspace/q2 && rm /workspace/q2")


def test_inputs_on_exec():
    c, sid = sandbox()
    r = c.exec(sid, shell="cat /workspace/in/a.txt /workspace/in/b.bin | od -An -c | tr -s ' '",
               inputs=[{"path": "in/a.txt", "content": "ș"},
                       {"path": "in/b.bin", "content_base64": "AAEC"}])
    assert r["exit_code"] == 0, r
    assert c.request("GET", fpath(sid, "in/b.bin")).raw == b"\x00\x01\x02"
    assert c.request("GET", fpath(sid, "in/a.txt")).raw == "ș".encode()


def test_inputs_errors_change_nothing():
    c, sid = sandbox()
    before = listing(c, sid)
    bad = [
        ([{"path": "../x", "content": "x"}], 400, "invalid_path"),
        ([{"path": "/etc/x", "content": "x"}], 400, "invalid_path"),
        ([{"path": "ok.txt"}], 400, "invalid_input"),
        ([{"path": "ok.txt", "content": "x", "content_base64": "eA=="}], 400, "invalid_input"),
        ([{"path": "ok.txt", "content_base64": "!!!"}], 400, "invalid_input"),
        ([{"path": "ok.txt", "content": 5}], 400, "invalid_input"),
        ([{"path": "ok.txt", "url": "http://example.com/x"}], 400, "invalid_input"),
        ([{"path": "ok.txt", "url": "not a url"}], 400, "invalid_input"),
        # An internal name: refused before any lookup, so no test ever reaches the network.
        ([{"path": "ok.txt", "content": "x"}, {"path": "b.txt",
                                               "url": "https://files.internal/page.html"}],
         403, "egress_denied"),
        ("nope", 400, "invalid_input"),
        ([{"path": "x%d" % i, "content": ""} for i in range(65)], 400, "invalid_input"),
    ]
    for inputs, status, code in bad:
        r = c.request("POST", "/v1/sandboxes/%s/exec" % sid,
                      {"shell": "touch /workspace/ran", "inputs": inputs})
        assert_error(r, status, code)
    assert listing(c, sid) == before, "a refused exec changed the workspace"


def test_inputs_on_run():
    c = client()
    r = c.request("POST", "/v1/sandboxes/run",
                  {"shell": "cat /workspace/page.html > /workspace/out/copy.html; cat /workspace/page.html",
                   "inputs": [{"path": "page.html", "content": "<p>ș</p>"},
                              {"path": "out/.keep", "content": ""}]}, timeout=120)
    assert r.status == 200, r
    assert r.body["stdout"] == "<p>ș</p>", r.body
    names = sorted(a["path"] for a in r.body["artifacts"])
    assert names == ["out/.keep", "out/copy.html"], r.body["artifacts"]
    before = c.list_sandboxes()
    r = c.request("POST", "/v1/sandboxes/run",
                  {"shell": "true", "inputs": [{"path": "p", "url": "https://files.internal/p"}]})
    assert_error(r, 403, "egress_denied")
    assert c.list_sandboxes() == before, "a refused run left a sandbox"


def test_kill9_mid_upload_leaves_old_or_new():
    c, sid = sandbox()
    d = D.get()
    old = b"old content\n" * 1000
    assert c.request("PUT", fpath(sid, "atomic.bin"), raw=old).status == 200
    size = 40 * 1000 * 1000
    s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    s.sendall(("PUT %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Length: %d\r\n\r\n" % (fpath(sid, "atomic.bin"), c.key, size)).encode())
    s.sendall(b"n" * (size // 2))
    ws = os.path.join(d.sandbox_dir(sid), "workspace")

    def writing():
        """sbxd holds the upload's unnamed file (O_TMPFILE) in the workspace, with data."""
        fds = "/proc/%d/fd" % d.proc.pid
        for fd in os.listdir(fds):
            try:
                if os.readlink(os.path.join(fds, fd)).startswith(ws + "/#") and \
                        os.stat(os.path.join(fds, fd)).st_size > 0:
                    return True
            except OSError:
                pass
        return False
    # The daemon is writing the upload when it is killed.
    wait_for(writing, 30, 0.05, "the upload being written")
    d.kill9()
    s.close()
    with open(os.path.join(ws, "atomic.bin"), "rb") as f:
        got = f.read()
    assert got == old, "after kill -9 mid-upload the file is %d bytes, not the old one" % len(got)
    leftovers = [n for n in os.listdir(ws) if n.startswith(".sbx-upload")]
    assert not leftovers, leftovers
    d.start()
    c = client()
    assert c.request("GET", fpath(sid, "atomic.bin")).raw == old
    new = os.urandom(size)
    assert c.request("PUT", fpath(sid, "atomic.bin"), raw=new).status == 200
    assert c.request("GET", fpath(sid, "atomic.bin")).raw == new
    assert c.request("DELETE", fpath(sid, "atomic.bin")).status == 200


def test_fork_with_quota_copies_each_workspace_image():
    """With the quota each copy's workspace is a clone of the parent's image, made on a
    worker: every copy sees the parent's files, then writes of one are nobody else's."""
    c, sid = sandbox()
    c.ok("PUT", fpath(sid, "fork/seed.txt"), raw=b"seed")
    r = c.request("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 2}, timeout=300)
    assert r.status == 200, r
    kids = [k["id"] for k in r.body["data"]]
    assert len(kids) == 2 and all("error" not in k and k["restored"] for k in r.body["data"]), \
        r.body
    try:
        for i, k in enumerate(kids):
            assert c.request("GET", fpath(k, "fork/seed.txt")).raw == b"seed"
            c.sh(k, "printf 'kid %d' > /workspace/fork/own.txt" % i)
        c.sh(sid, "printf parent > /workspace/fork/own.txt")
        assert c.request("GET", fpath(sid, "fork/own.txt")).raw == b"parent"
        for i, k in enumerate(kids):
            assert c.request("GET", fpath(k, "fork/own.txt")).raw == b"kid %d" % i
    finally:
        for k in kids:
            c.delete_sandbox(k)


OUT_CHECK = "stat -c '%U %a %F' out; echo made > out/r.txt && cat out/r.txt"


def test_a_new_workspace_has_out_owned_by_the_sandbox_user():
    """Spec 000's examples write out/... without making it. Every new workspace has out/,
    the sandbox user's: from the workspace pool's prepared images (and images made on the
    spot when three creates in a row find it dry), on v1, from a v1 snapshot whose workspace
    had no out/ (on v1 and v2), and on run, whose out/ comes back as artifacts."""
    c = D.get().client(D.get().client().create_key("outer")["key"])
    ids = [c.create_sandbox(ttl_seconds=600)["id"] for _ in range(3)]
    for sid in ids:
        assert c.sh(sid, OUT_CHECK) == "user 755 directory\nmade\n", sid
        c.delete_sandbox(sid)
    old = c.create_sandbox(ttl_seconds=600, backend="v1")["id"]
    assert c.sh(old, OUT_CHECK) == "user 755 directory\nmade\n"
    c.sh(old, "rm -r out; echo kept > k.txt")
    r = c.request("POST", "/v1/sandboxes/%s/snapshot" % old)
    assert r.status == 201, r
    for backend in ("v1", "v2"):
        n = c.create_sandbox(backend=backend, snapshot_id=r.body["id"], ttl_seconds=600)["id"]
        assert c.sh(n, "cat k.txt; " + OUT_CHECK) == "kept\nuser 755 directory\nmade\n", n
        c.delete_sandbox(n)
    c.delete_sandbox(old)
    r = c.request("POST", "/v1/sandboxes/run", {"shell": "echo doc > out/page.txt"}, timeout=120)
    assert r.status == 200 and r.body["exit_code"] == 0, r
    assert [a["path"] for a in r.body["artifacts"]] == ["out/page.txt"], r.body
