"""The provider backends (docs/providers.md): two sbxd on this machine. The inner one is the
provider: its E2B-compatible surface (docs/e2b.md) on loopback, which the official SDKs
accept. The outer one runs SBX_BACKEND=e2b,gvisor with the provider's connection from the
environment (SBX_E2B_*): its sandboxes are the inner's, reached through the control plane
(/sandboxes) and envd's process stream, which carries sbx's own agent's frames.
"""

import base64
import hashlib
import http.server
import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.request

import egress_upstream as eu
import harness
from harness import assert_error, fpath, listing, wait_for

INNER = harness.Shared(extra_env={"SBX_MAX_PER_KEY": "20", "SBX_MAX_PER_USER": "20"})
STATE = {}


def upstreams():
    """The egress upstreams (an HTTPS server on a loopback address) the inner's sandboxes
    reach through the inner's egress proxy, which verifies them with the test CA."""
    if "up" not in STATE:
        u = STATE["up"] = eu.Upstreams()
        INNER.kw["extra_env"].update(u.env())
        INNER.kw["extra_env"]["SBX_FETCH_CA_FILE"] = os.path.join(u.tmp, "ca.pem")
    return STATE["up"]


def inner():
    upstreams()
    return INNER.get()


def provider_key():
    """The inner's key the outer uses as its provider key (tool level sandbox)."""
    def make(d):
        return d.client().create_key("provider")
    return INNER.once("key", make)


def outer_env(key=None):
    d = inner()
    return {
        "SBX_BACKEND": "e2b,gvisor",
        "SBX_E2B_API_URL": "http://127.0.0.1:%d/e2b/api" % d.port,
        "SBX_E2B_SANDBOX_URL": "http://127.0.0.1:%d/e2b/sandbox" % d.port,
        "SBX_E2B_API_KEY": key or provider_key()["key"],
        "SBX_E2B_TEMPLATE_ID": "base",
    }


def outer():
    if "outer" not in STATE:
        d = harness.Daemon(extra_env=outer_env())
        STATE["outer"] = d
        d.start()
    d = STATE["outer"]
    if d.proc is None:
        d.start()
    return d


def client():
    if "alice" not in STATE:
        STATE["alice"] = outer().client().create_key("alice")["key"]
    return outer().client(STATE["alice"])


def sandbox(name="main"):
    if "sb:" + name not in STATE:
        STATE["sb:" + name] = client().create_sandbox(ttl_seconds=1800)["id"]
    return client(), STATE["sb:" + name]


def provider_list(states="running,paused"):
    """The inner's own list of E2B sandboxes, as the provider key sees it (E2B's v2 list,
    the states asked for; None: the deprecated v1 list, which has the running ones only)."""
    d = inner()
    path = "/e2b/api/sandboxes" if states is None else "/e2b/api/v2/sandboxes?state=" + states
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (d.port, path),
                                 headers={"X-API-KEY": provider_key()["key"]})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def provider_sandbox_of(sid):
    for s in provider_list():
        if (s.get("metadata") or {}).get("sbx_id") == sid:
            return s
    return None


def provider_of_config(cid):
    return [s for s in provider_list() if (s.get("metadata") or {}).get("sbx_config") == cid]


class SlowProvider:
    """A loopback proxy in front of the inner's control plane that forwards every request
    at once but holds the answers to the requests in `hold` ((method, path) pairs) until
    `gate` is set: a provider that answers slowly, without a fixed sleep."""

    def __init__(self):
        self.hold = set()
        self.gate = threading.Event()
        self.arrived = threading.Event()
        target = "http://127.0.0.1:%d" % inner().port
        me = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def forward(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                hdrs = {k: v for k, v in self.headers.items()
                        if k.lower() not in ("host", "content-length", "connection")}
                req = urllib.request.Request(target + self.path, data=body, headers=hdrs,
                                             method=self.command)
                try:
                    with urllib.request.urlopen(req, timeout=60) as r:
                        status, data, ctype = r.status, r.read(), r.headers.get("Content-Type")
                except urllib.error.HTTPError as e:
                    status, data, ctype = e.code, e.read(), e.headers.get("Content-Type")
                if (self.command, self.path.split("?")[0]) in me.hold:
                    me.arrived.set()
                    me.gate.wait(60)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype or "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up waiting

            do_GET = do_POST = do_PUT = do_DELETE = forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


def teardown_module():
    d = STATE.pop("outer", None)
    if d:
        d.cleanup()
    INNER.close()
    if "up" in STATE:
        STATE.pop("up").close()


def files_under(root):
    for base, _dirs, names in os.walk(root):
        for n in names:
            path = os.path.join(base, n)
            if os.path.isfile(path) and not os.path.islink(path):
                yield path


def assert_nowhere_in(root, secret):
    """No file under root holds secret (the state dir, the shim's log among them)."""
    checked = 0
    for path in files_under(root):
        try:
            with open(path, "rb") as f:
                assert secret.encode() not in f.read(), path
            checked += 1
        except FileNotFoundError:
            pass  # gone meanwhile (an atomic write's temporary file)
    assert checked, root


def test_create_and_exec_on_the_provider():
    c, sid = sandbox()
    sb = c.get_sandbox(sid)
    assert sb["runtime"] == "e2b" and sb["status"] == "running", sb
    out = c.exec(sid, shell="echo hi; id -un; echo err >&2; exit 3")
    assert out["exit_code"] == 3 and out["stdout"] == "hi\nuser\n", out
    assert out["stderr"] == "err\n", out
    # The agent runs inside the provider's sandbox: the inner sbxd's agent is its parent.
    ps = c.sh(sid, "cat /proc/$PPID/cmdline | tr '\\0' ' '")
    assert ".sbx-agent" in ps, ps


def test_the_sandbox_is_in_the_providers_list():
    c, sid = sandbox()
    p = provider_sandbox_of(sid)
    assert p and p["templateID"] == "base", provider_list()
    # The inner's own API sees the same sandbox running.
    inner_sb = inner().client(provider_key()["key"]).get_sandbox(p["sandboxID"])
    assert inner_sb["status"] == "running", inner_sb


def test_files_written_by_a_command_are_read_by_a_command():
    c, sid = sandbox()
    c.sh(sid, "mkdir -p /workspace/d && printf 'x%.0s' $(seq 1 1000) > /workspace/d/f")
    assert c.sh(sid, "wc -c < /workspace/d/f").strip() == "1000"


def test_the_files_api_reaches_the_providers_workspace_through_the_agent():
    """No host-side workspace: each route is done inside the provider's sandbox by the
    agent, with the host path's answers."""
    c, sid = sandbox()
    body = "client,suma\nSC Exemplu SRL,1200\nș ț ă\n".encode()
    r = c.request("PUT", fpath(sid, "in/date.csv"), raw=body)
    assert r.status == 200, r
    assert r.body == {"object": "file", "path": "in/date.csv", "size": len(body)}, r.body
    out = c.sh(sid, "sha256sum /workspace/in/date.csv; stat -c %a /workspace/in/date.csv")
    assert out.split()[0] == hashlib.sha256(body).hexdigest() and out.split()[2] == "644", out
    r = c.request("GET", fpath(sid, "in/date.csv"))
    assert r.status == 200 and r.raw == body, r
    assert r.headers["content-length"] == str(len(body)), r.headers
    assert r.headers["content-type"] == "application/octet-stream", r.headers
    # Written by a command, read by the API; replaced, binary, empty, chunked.
    c.sh(sid, "printf 'from inside' > /workspace/inside.txt")
    assert c.request("GET", fpath(sid, "inside.txt")).raw == b"from inside"
    blob = os.urandom(3 * 1024 * 1024 + 17)
    assert c.request("PUT", fpath(sid, "inside.txt"), raw=blob).status == 200
    assert c.request("GET", fpath(sid, "inside.txt")).raw == blob
    assert c.sh(sid, "ls -a /workspace | grep -c sbx-upload || true").strip() == "0"
    assert c.request("PUT", fpath(sid, "empty"), raw=b"").status == 200
    r = c.request("GET", fpath(sid, "empty"))
    assert r.status == 200 and r.raw == b"", r
    r = c.request("PUT", fpath(sid, "chunked.bin"), raw=blob[:300_000],
                  headers={"Transfer-Encoding": "chunked"})
    assert r.status == 200 and r.body["size"] == 300_000, r
    assert c.request("GET", fpath(sid, "chunked.bin")).raw == blob[:300_000]
    # The listing's shape and order.
    c.sh(sid, "mkdir -p /workspace/l/sub && printf abc > /workspace/l/a.txt && "
              "chmod 600 /workspace/l/a.txt && printf x > /workspace/l/sub/b && "
              "ln -sf /etc/passwd /workspace/l/link")
    top = listing(c, sid, "l", recursive=False)
    assert top["object"] == "list" and top["path"] == "l" and top["truncated"] is False, top
    assert [e["path"] for e in top["data"]] == ["l/a.txt", "l/link", "l/sub"], top
    a = top["data"][0]
    assert set(a) == {"path", "type", "size", "mode", "mtime"}, a
    assert a["type"] == "file" and a["size"] == 3 and a["mode"] == "0600", a
    assert [e["type"] for e in top["data"][1:]] == ["symlink", "directory"], top
    rec = listing(c, sid, "l", recursive=True)
    assert [e["path"] for e in rec["data"]] == ["l/a.txt", "l/link", "l/sub", "l/sub/b"], rec
    assert "in" in [e["path"] for e in listing(c, sid, "", recursive=False)["data"]]
    # Delete a file, a tree; then 404.
    r = c.request("DELETE", fpath(sid, "l/a.txt"))
    assert r.status == 200 and r.body == {"object": "file", "path": "l/a.txt",
                                          "deleted": True}, r
    assert c.request("DELETE", fpath(sid, "l")).status == 200
    assert c.sh(sid, "ls /workspace/l 2>&1 || echo gone").strip().endswith("gone")
    assert_error(c.request("DELETE", fpath(sid, "l")), 404, "file_not_found")
    # Every change is in the audit log, as on the host path.
    log = outer().client().ok("GET", "/v1/audit?limit=500&sandbox_id=%s" % sid)["data"]
    actions = [(e["action"], (e.get("details") or {}).get("path")) for e in log]
    for want in (("file.upload", "in/date.csv"), ("file.download", "in/date.csv"),
                 ("file.delete", "l")):
        assert want in actions, actions


def test_provider_files_errors_are_the_host_paths():
    c, sid = sandbox()
    assert_error(c.request("GET", fpath(sid, "nope.txt")), 404, "file_not_found")
    assert_error(c.request("GET", "/v1/sandboxes/%s/files?path=nope" % sid), 404,
                 "file_not_found")
    c.sh(sid, "mkdir -p /workspace/in && ln -sfn /etc /workspace/etc-link && "
              "ln -sfn ../../etc/hostname /workspace/in/up")
    # Escapes: by name (refused before the agent) and by a symlink (refused inside).
    for path in ("..%2fx", "a/../../x"):
        for method in ("PUT", "GET", "DELETE"):
            r = c.request(method, fpath(sid, path), raw=b"x" if method == "PUT" else None)
            assert_error(r, 400, "invalid_path")
    assert_error(c.request("GET", fpath(sid, "etc-link/passwd")), 400, "invalid_path")
    assert_error(c.request("GET", fpath(sid, "in/up")), 400, "invalid_path")
    assert_error(c.request("PUT", fpath(sid, "etc-link/x"), raw=b"x"), 400, "invalid_path")
    assert_error(c.request("GET", "/v1/sandboxes/%s/files?path=etc-link" % sid), 400,
                 "invalid_path")
    assert_error(c.request("GET", fpath(sid, "in")), 400, "invalid_path")  # a directory
    assert_error(c.request("PUT", fpath(sid, "in"), raw=b"x"), 400, "invalid_path")
    # Deleting the link removes the link, never what it points to.
    assert c.request("DELETE", fpath(sid, "etc-link")).status == 200
    assert c.sh(sid, "test -f /etc/passwd && echo kept") == "kept\n"
    r = c.request("PUT", fpath(sid, "big"), raw=b"",
                  headers={"Content-Length": str(100 * 1000 * 1000 + 1)})
    assert_error(r, 413, "file_too_large")


def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_out_files_become_artifacts_hashed_by_sbxd():
    c, sid = sandbox()
    c.sh(sid, "rm -rf /workspace/out && mkdir -p /workspace/out/sub && "
              "printf 'hello\\n' > /workspace/out/notes.txt && "
              "head -c 300000 /dev/urandom > /workspace/out/sub/data.bin && "
              "ln -s /etc/passwd /workspace/out/passwd")
    want = c.sh(sid, "sha256sum /workspace/out/sub/data.bin").split()[0]
    r = c.request("GET", "/v1/sandboxes/%s/artifacts" % sid)
    assert r.status == 200, r
    arts = {a["path"]: a for a in r.body["data"]}
    assert sorted(arts) == ["out/notes.txt", "out/sub/data.bin"], arts
    notes = arts["out/notes.txt"]
    assert notes["sha256"] == hashlib.sha256(b"hello\n").hexdigest() and notes["size"] == 6
    assert notes["mime"] == "text/plain" and notes["scan"] == "clean", notes
    assert arts["out/sub/data.bin"]["sha256"] == want
    # The signed link serves the hashed bytes, without a key, after the file changed.
    c.sh(sid, "printf changed > /workspace/out/notes.txt")
    status, body = fetch(notes["url"])
    assert status == 200 and body == b"hello\n", (status, body[:100])
    status, body = fetch(arts["out/sub/data.bin"]["url"])
    assert status == 200 and hashlib.sha256(body).hexdigest() == want


def test_run_on_the_provider_answers_its_artifacts():
    c = client()
    r = c.request("POST", "/v1/sandboxes/run",
                  {"shell": "mkdir -p /workspace/out && printf 'act\\n' > /workspace/out/act.txt"})
    assert r.status == 200 and r.body["exit_code"] == 0, r
    arts = {a["path"]: a for a in r.body["artifacts"]}
    assert list(arts) == ["out/act.txt"], r.body
    assert arts["out/act.txt"]["sha256"] == hashlib.sha256(b"act\n").hexdigest()
    assert fetch(arts["out/act.txt"]["url"]) == (200, b"act\n")
    rc = r.body["receipt"]
    assert [o["path"] for o in rc["outputs"]] == ["out/act.txt"] and "warnings" not in rc, rc
    assert rc["outputs"][0]["sha256"] == hashlib.sha256(b"act\n").hexdigest()


def test_receipts_on_the_provider_list_outputs_hashed_from_the_bytes_read_back():
    """As on a host workspace (test_receipts_audit.py): the walks before and after the
    command run through the agent, and the changed files' bytes are hashed by sbxd."""
    c, sid = sandbox("receipts")
    c.sh(sid, "mkdir -p /workspace/out && echo old > /workspace/out/kept.txt && "
              "echo same > /workspace/out/same.txt")
    code = ("import os\nos.makedirs('out/sub', exist_ok=True)\n"
            "open('out/new.bin','wb').write(os.urandom(200000))\n"
            "open('out/sub/r.txt','w').write('Părțile convin')\n"
            "open('out/kept.txt','w').write('changed\\n')\n")
    r = c.exec(sid, language="python", code=code)
    rc = r["receipt"]
    assert rc["exec_id"] == r["id"] and rc["sandbox_id"] == sid and "warnings" not in rc, rc
    assert rc["command_sha256"] == hashlib.sha256(code.encode()).hexdigest()
    listed = {o["path"]: o for o in rc["outputs"]}
    assert set(listed) == {"out/new.bin", "out/sub/r.txt", "out/kept.txt"}, listed
    for path, o in listed.items():
        got = c.request("GET", fpath(sid, path))
        assert got.status == 200, got
        assert o["sha256"] == hashlib.sha256(got.raw).hexdigest() and o["size"] == len(got.raw)
    assert listed["out/kept.txt"]["sha256"] == hashlib.sha256(b"changed\n").hexdigest()
    assert rc["workspace_generation_after"] > rc["workspace_generation_before"]
    # Nothing changed: the generation stays and nothing is listed.
    r2 = c.exec(sid, shell="true")["receipt"]
    assert r2["workspace_generation_before"] == rc["workspace_generation_after"], r2
    assert r2["workspace_generation_after"] == rc["workspace_generation_after"], r2
    assert r2["outputs"] == [] and "warnings" not in r2, r2
    # A change outside out/ moves the generation and lists no output.
    r3 = c.exec(sid, shell="echo x > /workspace/elsewhere.txt")["receipt"]
    assert r3["workspace_generation_after"] == r2["workspace_generation_after"] + 1, r3
    assert r3["outputs"] == [], r3
    # The exec record keeps the same receipt.
    rec = c.ok("GET", "/v1/sandboxes/%s/execs/%s" % (sid, r["id"]))
    assert rec["receipt"]["outputs"] == rc["outputs"], rec


NOT_UTF8 = ("import os\nos.makedirs('out', exist_ok=True)\n"
            "open(b'out/caf\\xe9-\\xff.txt', 'wb').write(b'latin-1 name\\n')\n"
            "open('out/plain.txt', 'w').write('plain')\n")


def test_a_name_in_out_that_is_not_utf8_is_listed_as_on_a_host_workspace():
    """A file in out/ whose name is not UTF-8: the receipt's outputs and the artifacts list
    it through the agent exactly as a gVisor sandbox's host walk does: its path with U+FFFD
    for each byte that is not UTF-8, its bytes in path_base64, its hash sbxd's."""
    c = client()
    raw = b"out/caf\xe9-\xff.txt"
    want = [{"path": "out/caf\ufffd-\ufffd.txt",
             "path_base64": base64.b64encode(raw).decode(),
             "sha256": hashlib.sha256(b"latin-1 name\n").hexdigest(), "size": 13},
            {"path": "out/plain.txt", "sha256": hashlib.sha256(b"plain").hexdigest(),
             "size": 5}]

    def rows(items):
        return sorted(({k: o[k] for k in ("path", "path_base64", "sha256", "size") if k in o}
                       for o in items), key=lambda o: o["path"])

    for runtime in ("gvisor", "e2b"):
        sid = c.create_sandbox(ttl_seconds=600, runtime=runtime)["id"]
        try:
            rc = c.exec(sid, language="python", code=NOT_UTF8)["receipt"]
            assert "warnings" not in rc, (runtime, rc)
            assert rows(rc["outputs"]) == want, (runtime, rc)
            arts = c.ok("GET", "/v1/sandboxes/%s/artifacts" % sid)["data"]
            assert rows(arts) == want, (runtime, arts)
        finally:
            c.delete_sandbox(sid)


def test_pause_and_resume_at_the_provider_and_fork_refused():
    """sbx's pause is the provider's: the provider sandbox is paused there (the inner's own
    status says so) and the resume reconnects to the same agent, whose boot id says
    restored; a background process and /tmp survive it. Fork has nothing to map to."""
    c, sid = sandbox("pause")
    c.sh(sid, "echo kept > /tmp/mark; sleep 600 >/dev/null 2>&1 &")
    p = provider_sandbox_of(sid)
    r = c.request("POST", "/v1/sandboxes/%s/fork" % sid, {})
    assert_error(r, 409, "not_supported_on_provider")
    assert "fork" in r.body["error"]["message"], r.body
    c.ok("POST", "/v1/sandboxes/%s/pause" % sid, {})
    assert c.get_sandbox(sid)["status"] == "paused"
    ic = inner().client(provider_key()["key"])
    wait_for(lambda: ic.get_sandbox(p["sandboxID"])["status"] == "paused", timeout=60,
             what="the provider sandbox paused at the provider")
    res = c.ok("POST", "/v1/sandboxes/%s/resume" % sid, {}, timeout=120)
    assert res["status"] == "running" and res["restored"] is True, res
    assert ic.get_sandbox(p["sandboxID"])["status"] == "running"
    out = c.sh(sid, "cat /tmp/mark; pgrep -c sleep")
    assert out.split() == ["kept", "1"], out
    # The same provider sandbox, not a new one.
    assert provider_sandbox_of(sid)["sandboxID"] == p["sandboxID"]
    c.delete_sandbox(sid)
    STATE.pop("sb:pause")
    wait_for(lambda: provider_sandbox_of(sid) is None, timeout=30,
             what="the provider sandbox deleted")


def test_background_process_and_a_kill9_of_the_outer_sbxd():
    c, sid = sandbox("restart")
    c.sh(sid, "echo before > /workspace/mark; sleep 600 >/dev/null 2>&1 &")
    p = provider_sandbox_of(sid)
    # The provider's key rests in no file of the sandbox's (provider.json, shim.log, ...):
    # sbxd handed it to the shim through its stdin, the shim keeps it in memory.
    key = provider_key()["key"]
    state = os.path.join(outer().sandbox_dir(sid), "state")
    assert os.path.exists(os.path.join(state, "provider.json")), os.listdir(state)
    assert_nowhere_in(outer().sandbox_dir(sid), key)
    outer().restart(hard=True)
    c2 = client()
    out = c2.sh(sid, "cat /workspace/mark; pgrep -c sleep")
    assert out.split() == ["before", "1"], out
    assert c2.get_sandbox(sid)["status"] == "running"
    # Re-adopted, not made again: the same provider sandbox.
    assert provider_sandbox_of(sid)["sandboxID"] == p["sandboxID"]
    assert_nowhere_in(outer().sandbox_dir(sid), key)
    # The live shim still holds the key: the delete reaches the provider.
    c2.delete_sandbox(sid)
    STATE.pop("sb:restart")
    wait_for(lambda: provider_sandbox_of(sid) is None, timeout=30,
             what="the provider sandbox deleted by the re-adopted shim")


def test_a_configurations_key_is_opened_again_after_outer_restarts():
    """A configuration's provider key is sealed in the outer's store; sbxd holds it in
    memory from the create only. After an outer restart (clean, then kill -9) it opens it
    again for what starts a new shim or has none left: the resume after a pause, exec,
    the delete of a paused sandbox (the cleanup helper deletes at the provider), and a
    restart's new provider sandbox. Each delete is seen in the inner's own list."""
    a = outer().client()
    key = provider_key()["key"]
    cid = a.ok("POST", "/v1/sandbox-configs", {"name": "e2b-restarts", "config": {
        "sandbox_type": "e2b", "e2b": e2b_object(key)}}, status=201)["id"]
    sid = a.create_sandbox(config_id=cid, ttl_seconds=900)["id"]
    other = a.create_sandbox(config_id=cid, ttl_seconds=900)["id"]
    a.sh(sid, "echo kept > /tmp/mark")
    p = provider_sandbox_of(sid)
    outer().restart()
    a = outer().client()
    a.ok("POST", "/v1/sandboxes/%s/pause" % sid, {}, timeout=120)
    assert a.get_sandbox(sid)["status"] == "paused"
    res = a.ok("POST", "/v1/sandboxes/%s/resume" % sid, {}, timeout=120)
    assert res["status"] == "running" and res["restored"] is True, res
    assert a.sh(sid, "cat /tmp/mark") == "kept\n"
    assert provider_sandbox_of(sid)["sandboxID"] == p["sandboxID"]
    # Paused (no shim left), then kill -9: the delete's cleanup helper needs the key.
    a.ok("POST", "/v1/sandboxes/%s/pause" % sid, {}, timeout=120)
    wait_for(lambda: provider_sandbox_of(sid)["state"] == "paused", timeout=60,
             what="the provider sandbox paused at the provider")
    outer().restart(hard=True)
    a = outer().client()
    assert a.sh(other, "echo alive") == "alive\n"
    # A restart makes a new provider sandbox with the key and deletes the old one.
    old = provider_sandbox_of(other)["sandboxID"]
    a.ok("POST", "/v1/sandboxes/%s/restart" % other, {}, timeout=120)
    assert a.sh(other, "echo again") == "again\n"
    wait_for(lambda: old not in [s["sandboxID"] for s in provider_list()], timeout=30,
             what="the restarted sandbox's old provider sandbox deleted")
    a.delete_sandbox(sid)
    a.delete_sandbox(other)
    wait_for(lambda: not provider_of_config(cid), timeout=30,
             what="both provider sandboxes deleted at the provider")
    assert p["sandboxID"] not in [s["sandboxID"] for s in provider_list()]
    a.ok("DELETE", "/v1/sandbox-configs/" + cid)


def test_inventory_and_delete_see_paused_provider_sandboxes():
    """E2B's v1 GET /sandboxes lists running sandboxes only (so does sbx's surface, the
    provider here): the inventory asks the v2 list for running and paused ones, so a paused
    sandbox keeps the provider's row, and a paused one no sandbox claims is unclaimed (its
    configuration's delete refused)."""
    a = outer().client()
    key = provider_key()["key"]
    cid = a.ok("POST", "/v1/sandbox-configs", {"name": "e2b-paused", "config": {
        "sandbox_type": "e2b", "e2b": e2b_object(key)}}, status=201)["id"]
    path = "/v1/sandbox-configs/" + cid
    sid = a.create_sandbox(config_id=cid, ttl_seconds=600)["id"]
    p = provider_sandbox_of(sid)
    a.ok("POST", "/v1/sandboxes/%s/pause" % sid, {}, timeout=120)
    wait_for(lambda: provider_sandbox_of(sid)["state"] == "paused", timeout=60,
             what="the provider sandbox paused at the provider")
    assert p["sandboxID"] not in [s["sandboxID"] for s in provider_list(None)]
    inv = a.ok("GET", path + "/sandboxes")
    row = inv["data"][0]
    assert row["id"] == sid and row["status"] == "paused", inv
    assert row["provider"]["sandbox_id"] == p["sandboxID"], inv
    assert row["provider"]["state"] == "paused", inv
    assert inv["verified"] is True and inv["provider"]["unclaimed"] == [], inv
    assert_error(a.request("DELETE", path + "?force=true"), 409, "sandboxes_still_live")
    a.delete_sandbox(sid)
    wait_for(lambda: not provider_of_config(cid), timeout=30, what="its provider sandbox gone")
    ic = inner().client(key)
    stray = ic.ok("POST", "/e2b/api/sandboxes", {"templateID": "base", "metadata": {
        "sbx_id": "sb_paused_stray", "sbx_config": cid}}, status=201)["sandboxID"]
    try:
        r = ic.request("POST", "/e2b/api/sandboxes/%s/pause" % stray, timeout=120)
        assert r.status == 204, r
        inv = a.ok("GET", path + "/sandboxes")
        assert [(u["id"], u["sandbox_id"]) for u in inv["provider"]["unclaimed"]] == [
            ("sb_paused_stray", stray)], inv
        assert inv["verified"] is False, inv
        assert_error(a.request("DELETE", path), 409, "sandbox_inventory_unverifiable")
    finally:
        ic.request("DELETE", "/e2b/api/sandboxes/" + stray)
    wait_for(lambda: not provider_of_config(cid), timeout=30, what="the stray one gone")
    a.ok("DELETE", path)


LISTENER = ("python3 -c 'import socket, time; s = socket.socket(); "
            "s.bind((\"127.0.0.1\", 8765)); s.listen(); time.sleep(900)'")


def test_a_pause_the_provider_refuses_is_its_error_and_the_sandbox_runs_on():
    """A provider that refuses the pause (sbx's surface on gVisor cannot checkpoint a
    listening TCP server: 409) makes sbx's pause its mapped error (502 provider_error with
    the provider's message), and the sandbox stays running, with its processes, in the
    same provider sandbox. Once the server is gone the pause goes through."""
    c, sid = sandbox("refuse")
    c.sh(sid, "echo kept > /tmp/mark; nohup %s >/dev/null 2>&1 &" % LISTENER)
    up = "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8765), 5); print(1)'"
    wait_for(lambda: c.sh(sid, up + " 2>/dev/null || true").strip() == "1", timeout=30,
             what="the listener up")
    p = provider_sandbox_of(sid)
    r = c.request("POST", "/v1/sandboxes/%s/pause" % sid, {}, timeout=120)
    assert_error(r, 502, "provider_error")
    assert "8765" in r.body["error"]["message"], r.body
    assert c.get_sandbox(sid)["status"] == "running"
    assert c.sh(sid, "cat /tmp/mark; " + up) == "kept\n1\n"
    assert provider_sandbox_of(sid)["sandboxID"] == p["sandboxID"]
    assert inner().client(provider_key()["key"]).get_sandbox(p["sandboxID"])["status"] == "running"
    c.sh(sid, "pkill -f 'time[.]sleep[(]900' || true")
    c.ok("POST", "/v1/sandboxes/%s/pause" % sid, {}, timeout=120)
    assert c.get_sandbox(sid)["status"] == "paused"
    res = c.ok("POST", "/v1/sandboxes/%s/resume" % sid, {}, timeout=120)
    assert res["status"] == "running" and res["restored"] is True, res
    c.delete_sandbox(sid)
    STATE.pop("sb:refuse")
    wait_for(lambda: provider_sandbox_of(sid) is None, timeout=30,
             what="the provider sandbox deleted")


def test_delete_removes_the_provider_sandbox():
    c = client()
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    p = wait_for(lambda: provider_sandbox_of(sid), timeout=30, what="the provider sandbox")
    c.delete_sandbox(sid)
    wait_for(lambda: provider_sandbox_of(sid) is None, timeout=30,
             what="the provider sandbox deleted")
    r = inner().client(provider_key()["key"]).request("GET", "/v1/sandboxes/" + p["sandboxID"])
    assert r.status == 404 or r.body.get("status") in ("destroyed", "deleted"), r


def e2b_object(key, **more):
    d = inner()
    o = {"api_key": key, "template_id": "base",
         "api_url": "http://127.0.0.1:%d/e2b/api" % d.port,
         "proxy_url": "http://127.0.0.1:%d/e2b/sandbox" % d.port,
         "http_timeout_sec": 20, "e2b_sandbox_ttl_seconds": 1200}
    o.update(more)
    return o


def test_a_configuration_of_document_002s_e2b_shape():
    """{"sandbox_type": "e2b", "e2b": {api_key, template_id, ...}}: the key sealed in the
    store, masked in answers, kept by a masked PUT; its sandboxes run at that provider."""
    a = outer().client()
    key = provider_key()["key"]
    cfg = a.ok("POST", "/v1/sandbox-configs", {"name": "e2b-provider", "config": {
        "sandbox_type": "e2b", "e2b": e2b_object(key)}}, status=201)
    assert cfg["sandbox_type"] == "e2b" and cfg["config"]["backend"] == "e2b", cfg
    assert cfg["config"]["e2b"]["api_key"] == "********", cfg
    assert cfg["config"]["e2b"]["template_id"] == "base", cfg
    assert key not in json.dumps(cfg) and key not in json.dumps(
        a.ok("GET", "/v1/sandbox-configs/" + cfg["id"]))
    put = a.ok("PUT", "/v1/sandbox-configs/" + cfg["id"], {"name": "e2b-provider", "config": {
        "sandbox_type": "e2b", "e2b": e2b_object("********", e2b_sandbox_ttl_seconds=900)}})
    assert put["config"]["e2b"]["e2b_sandbox_ttl_seconds"] == 900, put
    import glob
    for f in glob.glob(os.path.join(outer().data_dir, "*.db*")):
        with open(f, "rb") as fh:
            assert key.encode() not in fh.read(), f
    # The probe: shallow (reachable, the key accepted), then deep (a provider sandbox made,
    # the script run in it, destroyed), each check with its latency.
    pr = a.ok("POST", "/v1/system/sandbox-check", {"config_id": cfg["id"]})
    chk = {x["name"]: x for x in pr["checks"]}
    assert chk["provider"]["ok"] is True and chk["provider"]["latency_ms"] >= 0, pr
    n = len(provider_list())
    pr = a.ok("POST", "/v1/system/sandbox-check", {"config_id": cfg["id"], "deep": True},
              timeout=180)
    chk = {x["name"]: x for x in pr["checks"]}
    for name in ("provider", "sandbox_create", "script", "sandbox_destroy"):
        assert chk[name]["ok"] is True and chk[name]["latency_ms"] is not None, (name, pr)
    wait_for(lambda: len(provider_list()) == n, timeout=30, what="the probe's provider sandbox gone")
    sid = a.create_sandbox(config_id=cfg["id"], ttl_seconds=600)["id"]
    assert a.get_sandbox(sid)["runtime"] == "e2b"
    assert a.sh(sid, "echo from-config") == "from-config\n"
    assert provider_sandbox_of(sid), provider_list()
    a.delete_sandbox(sid)
    # Its network policy becomes the provider's network configuration.
    net = a.ok("POST", "/v1/sandbox-configs", {"name": "e2b-net", "config": {
        "sandbox_type": "e2b", "e2b": e2b_object(key),
        "network": {"deny_egress_by_default": True, "allow_out": ["pypi.org"]}}}, status=201)
    sid = a.create_sandbox(config_id=net["id"], ttl_seconds=600)["id"]
    p = provider_sandbox_of(sid)
    got = inner().client(key).get_sandbox(p["sandboxID"])["egress"]
    assert got["mode"] == "allowlist" and got["domains"] == ["pypi.org"], got
    a.delete_sandbox(sid)
    # A wrong key in a configuration: the provider's 401 as 502, said clearly.
    bad = a.ok("POST", "/v1/sandbox-configs", {"name": "e2b-bad", "config": {
        "sandbox_type": "e2b", "e2b": e2b_object("sbx_wrong_key")}}, status=201)
    r = a.request("POST", "/v1/sandboxes", {"config_id": bad["id"], "ttl_seconds": 300})
    assert_error(r, 502, "provider_auth_failed")
    pr = a.ok("POST", "/v1/system/sandbox-check", {"config_id": bad["id"]})
    chk = {x["name"]: x for x in pr["checks"]}
    assert chk["provider"]["ok"] is False and chk["provider"]["reason"] == "provider_auth_failed", pr


INJECTED = "provider-injected-secret-7c2e"

FETCH_HEADERS = r'''
import hashlib, json, ssl, sys, urllib.request
# The provider's egress CA, which sbx's E2B surface (the provider here) puts in the
# workspace of a sandbox whose network rules put headers in.
ctx = ssl.create_default_context(cafile="/workspace/.sbx-egress-ca.pem")
# Its egress proxy (the travelling agent's commands have the outer's env, not the
# provider sandbox's HTTPS_PROXY).
opener = urllib.request.build_opener(
    urllib.request.ProxyHandler({"https": "http://127.0.0.1:3128"}),
    urllib.request.HTTPSHandler(context=ctx))
req = urllib.request.Request(sys.argv[1], headers={"X-Api-Key": "forged"})
got = json.loads(opener.open(req, timeout=20).read())
key = got.get("x-api-key")
print(json.dumps({"sha": hashlib.sha256(key.encode()).hexdigest() if key else None}))
'''


def test_e2b_host_rules_put_headers_in_at_the_provider():
    """A configuration's e2b_host_rules become the provider's network rules: the upstream
    gets the header when a command in the provider sandbox calls it; the sandbox's env,
    /proc/*/environ and workspace, and the outer's state dir, never hold the value."""
    up = upstreams()
    a = outer().client()
    key = provider_key()["key"]
    cfg = a.ok("POST", "/v1/sandbox-configs", {"name": "e2b-inject", "config": {
        "sandbox_type": "e2b", "e2b": e2b_object(key),
        "network": {"deny_egress_by_default": True, "allow_out": ["allowed.example.com"],
                    "e2b_host_rules": [{"host": "allowed.example.com",
                                        "headers": {"X-Api-Key": INJECTED}}]}}}, status=201)
    assert INJECTED not in json.dumps(cfg)
    sid = a.create_sandbox(config_id=cfg["id"], ttl_seconds=600)["id"]
    try:
        a.ok("PUT", "/v1/sandboxes/%s/files/fetch.py" % sid, raw=FETCH_HEADERS.encode())
        out = a.exec(sid, shell="python3 /workspace/fetch.py https://allowed.example.com/headers")
        assert out["exit_code"] == 0, out
        assert json.loads(out["stdout"])["sha"] == hashlib.sha256(INJECTED.encode()).hexdigest(), out
        assert any(p == "/headers" for _h, p in up.https.seen), up.https.seen
        # Not the sandbox's to see: its env, every process's environ, its workspace.
        seen = a.sh(sid, "env; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'; "
                         "grep -rl %s /workspace /tmp 2>/dev/null; true" % INJECTED)
        assert INJECTED not in seen, seen
        # Nor at rest here: the rules reached the provider through the shim's memory.
        assert_nowhere_in(outer().sandbox_dir(sid), INJECTED)
        assert_nowhere_in(outer().sandbox_dir(sid), key)
        # The provider was given the rule: its own sandbox injects (its egress log says so).
        p = provider_sandbox_of(sid)
        log = inner().client(key).request("GET", "/v1/sandboxes/%s/egress" % p["sandboxID"])
        text = log.raw.decode()
        assert log.status == 200 and "injected 1 header" in text and INJECTED not in text, text
    finally:
        a.delete_sandbox(sid)


def test_bad_e2b_configurations_are_400():
    a = outer().client()
    for conf in ({"sandbox_type": "e2b"},
                 {"sandbox_type": "e2b", "e2b": {"api_key": "k"}},
                 {"sandbox_type": "e2b", "e2b": {"template_id": "base"}},
                 {"sandbox_type": "e2b", "e2b": e2b_object("k", api_url="ftp://x")},
                 {"sandbox_type": "e2b", "e2b": e2b_object("k", nosuch=1)},
                 {"sandbox_type": "e2b", "e2b": e2b_object("********")},
                 {"sandbox_type": "e2b", "backend": "gvisor", "e2b": e2b_object("k")},
                 {"backend": "gvisor", "e2b": e2b_object("k")}):
        r = a.request("POST", "/v1/sandbox-configs", {"name": "bad", "config": conf})
        assert_error(r, 400, "invalid_sandbox_config")


def test_runtime_named_on_create_and_the_fallback():
    c = client()
    r = c.request("POST", "/v1/sandboxes", {"runtime": "gvisor", "ttl_seconds": 300})
    assert r.status == 201 and r.body["runtime"] == "gvisor", r
    assert provider_sandbox_of(r.body["id"]) is None
    c.delete_sandbox(r.body["id"])
    assert_error(c.request("POST", "/v1/sandboxes", {"runtime": "cube"}), 400, "invalid_runtime")


def test_a_revoked_provider_key_is_a_clear_error():
    """The provider refuses the key (401): 502 provider_auth_failed with its message, and
    nothing is left at the provider."""
    d = inner()
    k = d.client().create_key("provider2")
    o = harness.Daemon(extra_env=outer_env(k["key"]))
    try:
        o.start()
        before = len(provider_list())
        d.client().delete_key(k["id"])
        c = o.client(o.client().create_key("bob")["key"])
        r = c.request("POST", "/v1/sandboxes", {"ttl_seconds": 300})
        assert_error(r, 502, "provider_auth_failed")
        assert "401" in r.body["error"]["message"], r.body
        assert len(provider_list()) == before
        assert c.list_sandboxes() == [] or all(
            s["status"] != "running" for s in c.list_sandboxes())
    finally:
        o.cleanup()


def test_inventory_of_a_provider_configuration_is_checked_at_the_provider():
    """GET /v1/sandbox-configs/{id}/sandboxes of an e2b configuration: each row with the
    provider's own state, the provider's sandboxes of it that no row claims, and the 409s
    of document 002 on an identity change or a delete while they live."""
    a = outer().client()
    key = provider_key()["key"]
    cid = a.ok("POST", "/v1/sandbox-configs", {"name": "e2b-inv", "config": {
        "sandbox_type": "e2b", "e2b": e2b_object(key)}}, status=201)["id"]
    sid = a.create_sandbox(config_id=cid, ttl_seconds=600)["id"]
    p = provider_sandbox_of(sid)
    assert p["metadata"]["sbx_config"] == cid, p
    inv = a.ok("GET", "/v1/sandbox-configs/%s/sandboxes" % cid)
    assert inv["verified"] is True, inv
    assert inv["provider"]["reachable"] is True and inv["provider"]["unclaimed"] == [], inv
    row = inv["data"][0]
    assert row["id"] == sid and row["verified"] is True, inv
    assert row["provider"]["sandbox_id"] == p["sandboxID"], inv
    assert row["provider"]["state"] == "running", inv
    # What its sandboxes are (the provider's template, its control plane) cannot change
    # under them, force or not; the rest can.
    path = "/v1/sandbox-configs/" + cid
    for o, q in ((e2b_object("********", template_id="other"), ""),
                 (e2b_object("********", api_url="http://127.0.0.1:9/e2b/api"), "?force=true")):
        r = a.request("PUT", path + q, {"name": "e2b-inv", "config": {
            "sandbox_type": "e2b", "e2b": o}})
        assert_error(r, 409, "sandboxes_still_live")
    a.ok("PUT", path, {"name": "e2b-inv", "config": {
        "sandbox_type": "e2b", "e2b": e2b_object("********", e2b_sandbox_ttl_seconds=700)}})
    assert_error(a.request("DELETE", path + "?force=true"), 409, "sandboxes_still_live")
    a.delete_sandbox(sid)
    wait_for(lambda: not provider_of_config(cid), timeout=30, what="its provider sandbox gone")
    # A provider sandbox labelled with this configuration that no sandbox here claims (made
    # straight at the provider): listed, the inventory unverified, a delete refused
    # without force.
    ic = inner().client(key)
    stray = ic.ok("POST", "/e2b/api/sandboxes", {"templateID": "base", "metadata": {
        "sbx_id": "sb_stray", "sbx_config": cid}}, status=201)["sandboxID"]
    try:
        inv = a.ok("GET", "/v1/sandbox-configs/%s/sandboxes" % cid)
        assert inv["verified"] is False and inv["data"] == [], inv
        assert [(u["id"], u["sandbox_id"]) for u in inv["provider"]["unclaimed"]] == [
            ("sb_stray", stray)], inv
        assert_error(a.request("DELETE", path), 409, "sandbox_inventory_unverifiable")
    finally:
        ic.request("DELETE", "/e2b/api/sandboxes/" + stray)
    wait_for(lambda: not provider_of_config(cid), timeout=30, what="the stray one gone")
    a.ok("DELETE", path)


def test_templates_query_lists_the_providers_templates():
    a = outer().client()
    cid = a.ok("POST", "/v1/sandbox-configs", {"name": "e2b-tpl", "config": {
        "sandbox_type": "e2b", "e2b": e2b_object(provider_key()["key"])}}, status=201)["id"]
    q = a.ok("POST", "/v1/sandbox-configs/templates/query", {"config_id": cid})
    assert q["backend"] == "e2b" and q["template"] == "base", q
    assert q["provider"]["reachable"] is True, q
    # The inner's own templates, as its E2B surface lists them.
    want = urllib.request.Request("http://127.0.0.1:%d/e2b/api/templates" % inner().port,
                                  headers={"X-API-KEY": provider_key()["key"]})
    with urllib.request.urlopen(want, timeout=30) as r:
        theirs = sorted(t["templateID"] for t in json.loads(r.read()))
    assert sorted(t["template_id"] for t in q["templates"]) == theirs and theirs, (q, theirs)
    assert_error(a.request("POST", "/v1/sandbox-configs/templates/query",
                           {"config_id": cid, "ensure_standard": True}), 400, "invalid_request")
    a.ok("DELETE", "/v1/sandbox-configs/" + cid)


def test_a_slow_provider_is_504_and_leaves_nothing_behind():
    """A provider that answers past http_timeout_sec: the create is 504 provider_timeout
    and the sandbox the provider made meanwhile is deleted; templates/query the same. A
    delete held while the provider lists its sandboxes keeps the configuration locked
    (423 for another change)."""
    sp = SlowProvider()
    a = outer().client()
    key = provider_key()["key"]
    try:
        sp.hold = {("POST", "/e2b/api/sandboxes"), ("GET", "/e2b/api/templates")}
        cid = a.ok("POST", "/v1/sandbox-configs", {"name": "e2b-slow", "config": {
            "sandbox_type": "e2b", "e2b": e2b_object(key, api_url=sp.url + "/e2b/api",
                                                     http_timeout_sec=1)}}, status=201)["id"]
        r = a.request("POST", "/v1/sandboxes", {"config_id": cid, "ttl_seconds": 300},
                      timeout=120)
        assert_error(r, 504, "provider_timeout")
        assert sp.arrived.wait(60), "the create never reached the provider"
        wait_for(lambda: not provider_of_config(cid), timeout=30,
                 what="the timed-out create's provider sandbox deleted")
        r = a.request("POST", "/v1/sandbox-configs/templates/query", {"config_id": cid})
        assert_error(r, 504, "provider_timeout")
        sp.gate.set()
        # 423 while a delete waits for the provider's list.
        sp.gate.clear()
        sp.arrived.clear()
        sp.hold = {("GET", "/e2b/api/v2/sandboxes")}
        path = "/v1/sandbox-configs/" + cid
        a.ok("PUT", path, {"name": "e2b-slow", "config": {"sandbox_type": "e2b", "e2b": e2b_object(
            "********", api_url=sp.url + "/e2b/api", http_timeout_sec=60)}})
        out = {}
        th = threading.Thread(target=lambda: out.update(r=a.request("DELETE", path, timeout=120)))
        th.start()
        assert sp.arrived.wait(60), "the delete never asked the provider"
        r = a.request("PUT", path, {"name": "e2b-slow2", "config": {"sandbox_type": "e2b",
                                                                      "e2b": e2b_object("********")}})
        assert_error(r, 423, "sandbox_config_locked")
        sp.gate.set()
        th.join(120)
        assert out["r"].status == 200, out
    finally:
        sp.close()


def test_the_python_sdk_the_cli_and_mcp_on_a_provider_sandbox():
    """The clients as users run them against the outer sbxd, whose default backend is the
    provider: the Python SDK (sdk/python), the sbx CLI, and the MCP tools."""
    d = outer()
    key = client().key
    env = {k: v for k, v in os.environ.items() if not k.startswith("SBX_")}
    harness.sanitizer_env(env)
    env.update({"SBX_URL": "http://127.0.0.1:%d" % d.port, "SBX_API_KEY": key,
                "PYTHONPATH": os.path.join(harness.REPO, "sdk", "python"),
                "PYTHONDONTWRITEBYTECODE": "1"})
    script = (
        "from sbx import Sbx\n"
        "c = Sbx()\n"
        "sb = c.sandboxes.create(runtime='e2b', ttl_seconds=600)\n"
        "out = c.sandboxes.exec(sb['id'], shell='echo sdk-$((6*7))')\n"
        "print(sb['id'], sb['runtime'], out['stdout'].strip())\n"
        "c.sandboxes.delete(sb['id'])\n")
    p = subprocess.run(["/usr/bin/python3", "-c", script], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    sid, runtime, said = p.stdout.decode().split()
    assert runtime == "e2b" and said == "sdk-42", p.stdout
    wait_for(lambda: provider_sandbox_of(sid) is None, timeout=30, what="the SDK's one deleted")
    sbx = os.path.join(harness.build_dir(), "sbx")
    env = {k: v for k, v in env.items() if not k.startswith("PYTHON")}

    def cli(*args):
        r = subprocess.run([sbx] + list(args), env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=300)
        assert r.returncode == 0, (args, r.stderr.decode())
        return r.stdout.decode()
    sid = cli("create", "--ttl", "10m").strip()
    assert provider_sandbox_of(sid), provider_list()
    assert cli("exec", sid, "--", "echo cli-$((6*7))") == "cli-42\n"
    # MCP: the sandbox_bash tool on the same provider sandbox.
    c = client()
    h = {"Accept": "application/json, text/event-stream"}
    r = c.request("POST", "/mcp", body={"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                        "params": {"protocolVersion": "2025-11-25",
                                                   "capabilities": {},
                                                   "clientInfo": {"name": "raw", "version": "1"}}},
                  headers=h)
    assert r.status == 200, r
    h["Mcp-Session-Id"] = r.headers["mcp-session-id"]
    r = c.request("POST", "/mcp", body={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                        "params": {"name": "sandbox_bash", "arguments": {
                                            "sandbox_id": sid, "command": "echo mcp-$((6*7))"}}},
                  headers=h)
    assert r.body["result"]["isError"] is False, r.body
    assert r.body["result"]["structuredContent"]["stdout"] == "mcp-42\n", r.body
    cli("rm", sid)
    wait_for(lambda: provider_sandbox_of(sid) is None, timeout=30, what="the CLI's one deleted")



def test_the_inner_audits_the_agents_frames_per_window_not_per_call():
    """The outer's relay sends the agent's frames as SendInput calls: binary stdin, which
    the inner audits as a window's first call plus one entry summing the rest, so twenty
    execs are a few process.input entries, not one per frame (typed text keeps one entry
    per call: test_audit_rule)."""
    c, sid = sandbox()
    pid = provider_sandbox_of(sid)["sandboxID"]
    a = inner().client()
    t0 = int(time.time() * 1000)

    def since():
        q = "/v1/audit?limit=500&action=process.input&sandbox_id=%s&since=%d" % (pid, t0 // 1000)
        return [e for e in a.ok("GET", q)["data"] if e["ts_ms"] >= t0]

    def calls(es):
        return sum((e["details"].get("coalesced") or {"calls": 1})["calls"] for e in es)
    for i in range(20):
        assert c.sh(sid, "echo %d" % i) == "%d\n" % i
    # Settled: the last window has closed (its summing entry is the newest).
    es = wait_for(lambda: [es for es in [since()]
                           if es and "coalesced" in es[-1]["details"] and calls(es) >= 20],
                  timeout=40, what="the input windows closed")[0]
    assert len(es) <= 6, es
    assert all(e["details"]["via"] == "e2b" for e in es), es


def test_provider_down_is_a_clear_error():
    """Last: kills the inner sbxd mid-exec. The running exec ends with 409
    sandbox_not_running (its provider went away), the sandbox is failed, and a create
    answers 502 provider_unreachable."""
    c, sid = sandbox()
    gen = c.stream("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "echo started; sleep 60"},
                   timeout=60)
    assert next(gen).status == 200
    first = next(e for _, e in gen if e["type"] == "stdout")
    assert "started" in first.get("data", first.get("text", "")), first
    inner().kill9()
    ends = [e for _, e in gen if e["type"] in ("exit", "error")]
    assert len(ends) == 1 and ends[0]["type"] == "error", ends
    assert ends[0]["code"] == "sandbox_not_running", ends
    assert c.get_sandbox(sid)["status"] == "failed", c.get_sandbox(sid)
    r = c.request("POST", "/v1/sandboxes", {"ttl_seconds": 300})
    assert_error(r, 502, "provider_unreachable")
    assert "127.0.0.1" in r.body["error"]["message"], r.body
