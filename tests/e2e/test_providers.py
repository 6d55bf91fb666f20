"""The provider backends (docs/providers.md): two sbxd on this machine. The inner one is the
provider: its E2B-compatible surface (docs/e2b.md) on loopback, which the official SDKs
accept. The outer one runs SBX_BACKEND=e2b,gvisor with the provider's connection from the
environment (SBX_E2B_*): its sandboxes are the inner's, reached through the control plane
(/sandboxes) and envd's process stream, which carries sbx's own agent's frames.
"""

import base64
import errno
import hashlib
import http.server
import io
import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import zipfile

import egress_upstream as eu
import harness
import testserver
import wsclient
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


class ToolModel(http.server.BaseHTTPRequestHandler):
    """A model on loopback for the outer's chat gateway: its first answer calls
    sandbox_bash, its second repeats what the tool printed."""
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        results = [m["content"] for m in body["messages"] if m.get("role") == "tool"]
        if results:
            msg = {"role": "assistant", "content": "tool said " + json.loads(results[0])["stdout"]}
            finish = "stop"
        else:
            args = json.dumps({"command": "echo chat-$((6*7)) > out/chat.txt; cat out/chat.txt"})
            msg = {"role": "assistant", "content": "",
                   "tool_calls": [{"id": "call_0", "type": "function",
                                   "function": {"name": "sandbox_bash", "arguments": args}}]}
            finish = "tool_calls"
        data = json.dumps({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
                           "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                           "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                     "total_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


def model_url():
    if "model" not in STATE:
        srv = STATE["model"] = testserver.QuietHTTPServer(("127.0.0.1", 0), ToolModel)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    return "http://127.0.0.1:%d/v1" % STATE["model"].server_address[1]


def outer_env(key=None):
    d = inner()
    return {
        "SBX_LLM_URL": model_url(),
        "SBX_LLM_API_KEY": "sk-model-" + "x" * 24,
        "SBX_LLM_MODEL": "fake-model",
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


def stray_at_provider(ic, sbx_id, cid):
    """A provider sandbox labelled as sbx_id of configuration cid, made straight at the
    provider (no sbx sandbox claims it): its id there."""
    return ic.ok("POST", "/e2b/api/sandboxes", {"templateID": "base", "metadata": {
        "sbx_id": sbx_id, "sbx_config": cid}}, status=201)["sandboxID"]


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
    if "model" in STATE:
        srv = STATE.pop("model")
        srv.shutdown()
        srv.server_close()


def files_under(root):
    for base, _dirs, names in os.walk(root):
        for n in names:
            path = os.path.join(base, n)
            if os.path.isfile(path) and not os.path.islink(path):
                yield path


def file_holds(f, needle, chunk=4 << 20):
    """Whether the open file f holds needle anywhere. Only its data is read: a hole reads
    as zeros, which no secret contains, and the sandbox dir holds the workspace's 2 GB
    sparse image (reading it whole took half a minute a call under load)."""
    fd = f.fileno()
    size = os.fstat(fd).st_size
    pos = 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:  # nothing but a hole past pos
                return False
            raise
        end = os.lseek(fd, start, os.SEEK_HOLE)
        os.lseek(fd, start, os.SEEK_SET)
        tail = b""  # the last bytes of the previous chunk: a match across two chunks
        left = end - start
        while left > 0:
            got = os.read(fd, min(chunk, left))
            if not got:
                break
            seen = tail + got
            if needle in seen:
                return True
            tail = seen[max(0, len(seen) - len(needle) + 1):]
            left -= len(got)
        pos = end
    return False


def assert_nowhere_in(root, secret):
    """No file under root holds secret (the state dir, the shim's log among them)."""
    checked = 0
    for path in files_under(root):
        try:
            with open(path, "rb") as f:
                assert not file_holds(f, secret.encode()), path
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


def test_a_large_output_crosses_the_provider_whole():
    """The outer agent's frames are the inner's process output (envd's process stream),
    which now waits for a slower relay instead of losing bytes (issue 43): 24 MiB of exec
    output (three times the HTTP layer's 8 MiB queue, far past the agent's window and ring)
    are all counted by the outer sbxd, its first MiB as written, and a 16 MiB file
    downloaded through the agent hashes as the command hashed it; the sandbox runs on.
    test_e2b's slow reader takes 64 MiB through envd itself."""
    c, sid = sandbox()
    size, mib = 24 << 20, 1 << 20
    r = c.exec(sid, shell="head -c %d /dev/zero | tr '\\0' x; echo done >&2" % size,
               timeout_seconds=300)
    assert r["exit_code"] == 0 and r["stderr"] == "done\n", r["stderr"]
    assert r["stdout"] == "x" * mib and r["stdout_truncated"], len(r["stdout"])
    assert r["stdout_dropped_bytes"] == size - mib, r["stdout_dropped_bytes"]
    want = c.sh(sid, "head -c %d /dev/urandom | tee /workspace/big.bin | sha256sum" % (16 * mib))
    got = c.request("GET", fpath(sid, "big.bin"))
    assert got.status == 200 and len(got.raw) == 16 * mib, (got.status, len(got.raw))
    assert hashlib.sha256(got.raw).hexdigest() == want.split()[0]
    c.sh(sid, "rm /workspace/big.bin")
    assert c.get_sandbox(sid)["status"] == "running"


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
    stray = stray_at_provider(ic, "sb_paused_stray", cid)
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


def test_a_configuration_of_document_002s_cube_shape():
    """{"sandbox_type": "cube", "cube": {api_url, proxy_url, template_id, api_key,
    http_timeout_sec, cube_sandbox_ttl_seconds, dns_servers}}: CubeSandbox speaks the E2B
    API, so sbx's E2B surface stands in for the cluster, on an sbxd whose operator enabled
    the cube backend (SBX_BACKEND=cube,gvisor). The key is sealed and masked, the probe
    reaches the cluster, and a sandbox runs there, listed while it lives, gone after."""
    key = provider_key()["key"]
    d = inner()
    api = "http://127.0.0.1:%d/e2b/api" % d.port
    proxy = "http://127.0.0.1:%d/e2b/sandbox" % d.port
    op = harness.Daemon(extra_env={"SBX_BACKEND": "cube,gvisor", "SBX_CUBE_API_URL": api,
                                   "SBX_CUBE_SANDBOX_URL": proxy, "SBX_CUBE_API_KEY": key,
                                   "SBX_CUBE_TEMPLATE_ID": "base"})
    try:
        op.start()
        a = op.client()
        cube = {"api_url": api, "proxy_url": proxy, "template_id": "base", "api_key": key,
                "http_timeout_sec": 20, "cube_sandbox_ttl_seconds": 900,
                "dns_servers": ["10.0.0.2"]}
        cfg = a.ok("POST", "/v1/sandbox-configs", {"name": "cube-cluster", "config": {
            "sandbox_type": "cube", "cube": cube}}, status=201)
        assert cfg["sandbox_type"] == "cube", cfg
        assert cfg["config"]["cube"]["api_key"] == "********", cfg
        assert cfg["config"]["cube"]["dns_servers"] == ["10.0.0.2"], cfg
        assert key not in json.dumps(a.ok("GET", "/v1/sandbox-configs/" + cfg["id"]))
        pr = a.ok("POST", "/v1/system/sandbox-check", {"config_id": cfg["id"]})
        assert {x["name"]: x for x in pr["checks"]}["provider"]["ok"] is True, pr
        sid = a.create_sandbox(config_id=cfg["id"], ttl_seconds=600)["id"]
        assert a.get_sandbox(sid)["runtime"] == "cube"
        assert a.sh(sid, "echo from-cube") == "from-cube\n"
        assert provider_sandbox_of(sid), provider_list()
        rows = a.ok("GET", "/v1/sandbox-configs/%s/sandboxes" % cfg["id"])
        assert [r["id"] for r in rows["data"]] == [sid], rows
        a.delete_sandbox(sid)
        wait_for(lambda: provider_sandbox_of(sid) is None, timeout=30,
                 what="the cube sandbox gone")
        a.ok("DELETE", "/v1/sandbox-configs/" + cfg["id"])
    finally:
        op.cleanup()


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


class HeldLink:
    """A TCP relay in front of the inner's envd (a configuration's proxy_url) whose
    `flowing` event, while clear, stops it reading the inner's answers on the agent's
    process stream (process.Process/Start): a provider link that stalls, so the inner's
    answer queue for that stream fills."""

    def __init__(self, port):
        self.port = port
        self.flowing = threading.Event()
        self.flowing.set()
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d" % self.srv.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        u = socket.socket()
        # Small, so the relay's own buffers do not stand in for the inner's queue.
        u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        u.connect(("127.0.0.1", self.port))
        first = c.recv(1 << 16)
        u.sendall(first)
        threading.Thread(target=self._pump, args=(c, u, False), daemon=True).start()
        self._pump(u, c, b"/process.Process/Start" in first.split(b"\r\n")[0])

    def _pump(self, src, dst, held):
        try:
            while True:
                if held:
                    self.flowing.wait()
                b = src.recv(1 << 16)
                if not b:
                    break
                dst.sendall(b)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def close(self):
        self.flowing.set()
        self.srv.close()


def test_a_stalled_provider_link_loses_no_frame():
    """Issue 43: the outer's agent streams have more in flight than the inner's 8 MiB answer
    queue (sixteen downloads of 4 MiB at once, a 1 MiB window each) while the link to the
    inner stalls for a while. The inner holds the agent's output back instead of dropping
    frames, so every download arrives whole and the sandbox runs on."""
    link = HeldLink(inner().port)
    a = outer().client()
    try:
        cfg = a.ok("POST", "/v1/sandbox-configs", {"name": "e2b-stalling-link", "config": {
            "sandbox_type": "e2b", "e2b": e2b_object(provider_key()["key"],
                                                     proxy_url=link.url + "/e2b/sandbox")}},
                   status=201)
        sid = a.create_sandbox(config_id=cfg["id"], ttl_seconds=600)["id"]
        want = a.sh(sid, "head -c 4M /dev/urandom | tee /workspace/big.bin | sha256sum").split()[0]
        got = {}

        def download(i):
            r = a.request("GET", fpath(sid, "big.bin"), timeout=240)
            got[i] = (r.status, hashlib.sha256(r.raw or b"").hexdigest())
        link.flowing.clear()
        threads = [threading.Thread(target=download, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        time.sleep(8)  # the link's stall (the relay's behaviour, not a wait for a state)
        link.flowing.set()
        for t in threads:
            t.join(300)
        assert sorted(got.values()) == [(200, want)] * 16, got
        assert a.get_sandbox(sid)["status"] == "running"
        assert a.sh(sid, "echo alive") == "alive\n"
        a.delete_sandbox(sid)
    finally:
        link.close()


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
    stray = stray_at_provider(ic, "sb_stray", cid)
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
    # Every call is counted once its window has closed. A window holds no entry but its
    # first call's when nothing followed it (a late credit frame alone), so the newest entry
    # need not be a sum: wait for the count, then check the windows' shape.
    es = wait_for(lambda: [es for es in [since()] if calls(es) >= 20],
                  timeout=40, what="the input windows closed")[0]
    es.sort(key=lambda e: e["ts_ms"])
    sums = [e for e in es if "coalesced" in e["details"]]
    assert sums and all(e["details"]["coalesced"]["window_ms"] == 10000 for e in sums), es
    # Per window, not per call: one window per process at a time, opened by a first call's
    # entry and closed by at most one sum (the first sum's window may have opened before
    # t0); the next opens only after it closed.
    by_process = {}
    for e in es:
        by_process.setdefault(e["details"]["process"], []).append(e)
    for pes in by_process.values():
        sum_allowed, opened = True, None
        for e in pes:
            if "coalesced" in e["details"]:
                assert sum_allowed, pes
                sum_allowed = False
                continue
            assert opened is None or e["ts_ms"] - opened >= 10000 - 50, pes
            sum_allowed, opened = True, e["ts_ms"]
    assert len(es) < calls(es), es
    assert all(e["details"]["via"] == "e2b" for e in es), es


def test_streaming_sessions_and_idempotency_on_the_provider():
    """An exec streamed as server-sent events, a session's cd and exports kept between
    execs, and an Idempotency-Key replayed: each as on a local sandbox."""
    c, sid = sandbox()
    gen = c.stream("POST", "/v1/sandboxes/%s/exec" % sid,
                   {"shell": "echo one; sleep 0.2; echo two >&2; exit 4"})
    assert next(gen).status == 200
    events = [e for _, e in gen]
    kinds = [e["type"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "exit", events
    assert "".join(e["data"] for e in events if e["type"] == "stdout") == "one\n", events
    assert "".join(e["data"] for e in events if e["type"] == "stderr") == "two\n", events
    assert events[-1]["exit_code"] == 4, events
    c.ok("POST", "/v1/sandboxes/%s/sessions" % sid, {"session_id": "work"}, status=201)
    assert c.exec(sid, shell="mkdir -p /tmp/w && cd /tmp/w && export GREETING=salut",
                  session_id="work")["exit_code"] == 0
    out = c.exec(sid, shell="pwd; echo $GREETING", session_id="work")
    assert out["stdout"] == "/tmp/w\nsalut\n", out
    assert c.exec(sid, shell="pwd")["stdout"] == "/workspace\n"
    h = {"Idempotency-Key": "provider-count-1"}
    count = "echo x >> /workspace/counter; wc -l < /workspace/counter"
    r1 = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": count}, headers=h)
    r2 = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": count}, headers=h)
    assert r1.status == r2.status == 200 and r1.body == r2.body, (r1, r2)
    assert r2.headers.get("x-sbx-idempotent-replay") == "true", r2.headers
    assert c.sh(sid, "wc -l < /workspace/counter") == "1\n"


def test_the_kernel_a_pty_and_a_terminal_on_the_provider():
    c, sid = sandbox()
    base = "/v1/sandboxes/%s" % sid
    assert c.ok("POST", base + "/run_code", {"code": "x = 41"})["error"] is None
    b = c.ok("POST", base + "/run_code", {"code": "print('p'); x + 1"})
    assert b["result"] == "42" and b["stdout"] == "p\n" and b["kernel_restarted"] is False, b
    c.ok("POST", base + "/kernel/reset")
    e = c.ok("POST", base + "/run_code", {"code": "x"})["error"]
    assert e["name"] == "NameError", e
    r = c.ok("POST", base + "/pty", {"command": "tty; stty size", "rows": 11, "cols": 44})
    assert r["exit_code"] == 0 and r["stdout"].startswith("/dev/pts/"), r
    assert r["stdout"].endswith("11 44\r\n"), r
    tk = c.ok("POST", base + "/terminal-ticket")["ticket"]
    ws = wsclient.connect(outer().port, base + "/terminal?ticket=%s&rows=20&cols=70" % tk)
    try:
        ready = ws.recv_json()
        assert ready["type"] == "ready" and ready["backend"] == "e2b", ready
        ws.send_binary(b"echo term-$((6*7)); stty size\n")
        out, _ = ws.read_until("20 70")
        assert b"term-42" in out, out
    finally:
        ws.close()


def test_agent_tools_limits_metering_and_audit_on_the_provider():
    """The agent tools (REST; MCP is in the SDK/CLI test), a command's timeout, the output
    cap, the usage meter and the audit entries of a provider sandbox."""
    c, sid = sandbox()
    r = c.ok("POST", "/v1/sandboxes/%s/tools/sandbox_bash" % sid,
             {"command": "mkdir -p out && printf 'a = 1\\n' > conf.py && echo made"})["result"]
    assert r["exit_code"] == 0 and r["stdout"] == "made\n", r
    assert "conf.py" in [f["path"] for f in r["files"]], r
    e = c.ok("POST", "/v1/sandboxes/%s/edit" % sid,
             {"path": "conf.py", "old_string": "a = 1", "new_string": "a = 2"})
    assert e["result"]["replacements"] == 1, e
    assert c.sh(sid, "cat conf.py") == "a = 2\n"
    k = c.ok("POST", "/v1/sandboxes/%s/tools/sandbox_run_code" % sid,
             {"code": "6 * 7"})["result"]
    assert k["result"] == "42", k
    t0 = time.monotonic()
    out = c.exec(sid, shell="echo before; sleep 60", timeout_seconds=1)
    assert out["timed_out"] is True and out["stdout"] == "before\n", out
    assert time.monotonic() - t0 < 30, "the timeout did not end the command"
    big = c.exec(sid, shell="head -c 3000000 /dev/zero | tr '\\0' a")
    assert big["stdout_truncated"] is True and big["exit_code"] == 0, \
        {k: v for k, v in big.items() if k != "stdout"}
    usage = c.ok("GET", "/v1/usage")
    assert usage["total"]["exec_ms"] > 0, usage
    log = outer().client().ok("GET", "/v1/audit?sandbox_id=%s&limit=500" % sid)["data"]
    actions = {e["action"] for e in log}
    assert {"sandbox.create", "exec", "file.edit"} <= actions, actions


def test_every_file_tool_acts_on_the_providers_workspace():
    """edit_file (both shapes, view), sandbox_files (list, read, write), sandbox_bash's files
    and bsl_check's path go through the agent to the provider's /workspace, with the host
    path's answers and codes: none of them acts on the outer's empty host directory. Its own
    sandbox, deleted after (a key runs at most 3)."""
    c, sid = sandbox("tools")
    try:
        check_file_tools(c, sid)
    finally:
        c.delete_sandbox(sid)
        STATE.pop("sb:tools")


def check_file_tools(c, sid):
    def tool(name, args, status=200):
        r = c.request("POST", "/v1/sandboxes/%s/tools/%s" % (sid, name), args)
        assert r.status == status, (name, args, r)
        return r.body["result"] if status == 200 else r

    # sandbox_bash: the files a command made anywhere, hashed by sbxd from their bytes.
    m = b"x = 1\n" * 1000
    r = tool("sandbox_bash", {"command": "mkdir -p src out && yes 'x = 1' | head -n 1000 "
                                         "> src/m.py && printf hi > out/o.txt"})
    files = {f["path"]: f for f in r["files"]}
    assert set(files) == {"src/m.py", "out/o.txt"} and r["file_count"] == 2, r
    assert files["src/m.py"] == {"path": "src/m.py", "size": len(m),
                                 "sha256": hashlib.sha256(m).hexdigest()}, files
    assert files["out/o.txt"]["sha256"] == hashlib.sha256(b"hi").hexdigest(), files
    assert r["local_paths"]["src/m.py"].endswith("/v1/sandboxes/%s/files/src/m.py" % sid)
    assert fetch(r["local_paths"]["out/o.txt"]) == (200, b"hi")  # a signed artifact link
    again = tool("sandbox_bash", {"command": "cat src/m.py > /dev/null"})
    assert again["files"] == [] and again["file_count"] == 0, again
    touched = tool("sandbox_bash", {"command": "echo y >> src/m.py"})
    assert [f["path"] for f in touched["files"]] == ["src/m.py"], touched
    assert touched["files"][0]["sha256"] == hashlib.sha256(m + b"y\n").hexdigest()

    # edit_file: read through the agent, edited in sbxd, written back atomically.
    tool("sandbox_bash", {"command": "printf 'a = 1\\nb = 2\\n' > conf.py && "
                                     "printf '#!/bin/sh\\necho one\\n' > run.sh && "
                                     "chmod 750 run.sh"})
    e = tool("edit_file", {"path": "conf.py", "old_string": "b = 2", "new_string": "b = 3"})
    assert e["strategy"] == "exact" and "-b = 2\n+b = 3\n" in e["diff"], e
    assert e["sha256"] == hashlib.sha256(b"a = 1\nb = 3\n").hexdigest(), e
    assert c.sh(sid, "cat /workspace/conf.py") == "a = 1\nb = 3\n"
    tool("edit_file", {"path": "/workspace/run.sh", "command": "str_replace",
                       "old_str": "echo one", "new_str": "echo two"})
    assert c.sh(sid, "/workspace/run.sh; stat -c %a /workspace/run.sh") == "two\n750\n"
    tool("edit_file", {"path": "conf.py", "command": "insert", "insert_line": 1,
                       "new_str": "c = 9"})
    assert c.sh(sid, "cat /workspace/conf.py") == "a = 1\nc = 9\nb = 3\n"
    made = tool("edit_file", {"path": "new/n.py", "old_string": "", "new_string": "n = 0\n",
                              "create": True})
    assert made["created"] is True
    assert c.sh(sid, "cat /workspace/new/n.py; stat -c %a /workspace/new/n.py") == \
        "n = 0\n644\n"
    tool("edit_file", {"path": "new/n.py", "command": "create", "file_text": "n = 1\n"})
    assert c.sh(sid, "cat /workspace/new/n.py") == "n = 1\n"
    v = tool("edit_file", {"path": "conf.py", "command": "view", "view_range": [2, 3]})
    assert v == {"path": "conf.py", "type": "file", "content": "     2\tc = 9\n     3\tb = 3\n",
                 "lines": 3, "truncated": False}, v
    d = tool("edit_file", {"path": "new", "command": "view"})
    assert d["type"] == "dir" and d["entries"] == [
        {"path": "new/n.py", "type": "file", "size": 6}], d
    c.sh(sid, "ln -sfn new /workspace/new-link")
    d = tool("edit_file", {"path": "new-link", "command": "view"})
    assert d["type"] == "dir" and [x["path"] for x in d["entries"]] == ["new-link/n.py"], d
    assert c.sh(sid, "ls -a /workspace /workspace/new | grep -c sbx-upload || true") == "0\n"
    # Refusals and errors, as on the host path (test_mcp.py).
    c.sh(sid, "printf 'x = 1\\ny\\nx = 1\\n' > /workspace/dup.txt && "
              "ln -sfn /etc /workspace/etc-link && head -c 5000000 /dev/zero > /workspace/big")
    r = c.request("POST", "/v1/sandboxes/%s/edit" % sid,
                  {"path": "dup.txt", "old_string": "x = 1", "new_string": "x = 2"})
    assert r.status == 409 and r.body["error"]["code"] == "edit_not_unique", r
    assert [x["line"] for x in r.body["error"]["candidates"]] == [1, 3], r.body
    r = c.request("POST", "/v1/sandboxes/%s/edit" % sid,
                  {"path": "dup.txt", "old_string": "something else entirely", "new_string": "z"})
    assert r.status == 422 and r.body["error"]["code"] == "edit_no_match", r
    assert c.sh(sid, "cat /workspace/dup.txt") == "x = 1\ny\nx = 1\n"
    for path, status, code in (("nope.txt", 404, "file_not_found"),
                               ("etc-link/passwd", 400, "invalid_path"),
                               ("big", 413, "file_too_large"), ("new", 400, "invalid_path")):
        assert_error(c.request("POST", "/v1/sandboxes/%s/edit" % sid,
                               {"path": path, "old_string": "a", "new_string": "b"}),
                     status, code)
    assert_error(c.request("POST", "/v1/sandboxes/%s/edit" % sid,
                           {"path": "nope", "command": "view"}), 404, "file_not_found")

    # sandbox_files: written by the tool, read by a command, and the other way round.
    w = tool("sandbox_files", {"op": "write", "path": "w/x.txt", "content": "hello ș"})
    assert w == {"path": "w/x.txt", "size": len("hello ș".encode())}, w
    assert c.sh(sid, "cat /workspace/w/x.txt; stat -c %a /workspace/w/x.txt") == \
        "hello ș644\n"
    blob = bytes(range(256)) * 4
    tool("sandbox_files", {"op": "write", "path": "w/b.bin", "encoding": "base64",
                           "content": base64.b64encode(blob).decode()})
    assert c.sh(sid, "sha256sum < /workspace/w/b.bin").split()[0] == \
        hashlib.sha256(blob).hexdigest()
    got = tool("sandbox_files", {"op": "read", "path": "conf.py"})
    assert got == {"path": "conf.py", "size": 18, "inline": True,
                   "content": "a = 1\nc = 9\nb = 3\n", "encoding": "utf-8"}, got
    b = tool("sandbox_files", {"op": "read", "path": "w/b.bin"})
    assert b["encoding"] == "base64" and b["size"] == len(blob), b
    c.sh(sid, "head -c 300000 /dev/zero | tr '\\0' z > /workspace/out/large.txt")
    large = tool("sandbox_files", {"op": "read", "path": "out/large.txt"})
    assert large["inline"] is False and large["size"] == 300000, large
    assert large["sha256"] == hashlib.sha256(b"z" * 300000).hexdigest(), large
    assert fetch(large["url"]) == (200, b"z" * 300000)
    lst = tool("sandbox_files", {"op": "list", "path": "w"})
    assert [(x["path"], x["type"], x["size"]) for x in lst["entries"]] == [
        ("w/b.bin", "file", 1024), ("w/x.txt", "file", 8)], lst
    assert lst["path"] == "w" and lst["truncated"] is False and lst["entries"][0]["mtime"] > 0
    rec = tool("sandbox_files", {"op": "list", "path": "", "recursive": True})
    assert {"src/m.py", "new/n.py", "w/x.txt"} <= {x["path"] for x in rec["entries"]}, rec
    assert_error(tool("sandbox_files", {"op": "read", "path": "nope"}, 404), 404,
                 "file_not_found")
    assert_error(tool("sandbox_files", {"op": "read", "path": "etc-link/passwd"}, 400), 400,
                 "invalid_path")
    assert_error(tool("sandbox_files", {"op": "list", "path": "nope"}, 404), 404,
                 "file_not_found")

    # bsl_check on a module a command wrote; its path checked by the agent.
    c.sh(sid, "mkdir -p /workspace/bsl && printf '%s' '" + BSL_MODULE + "' > /workspace/bsl/m.bsl")
    report = tool("bsl_check", {"path": "bsl/m.bsl"})
    assert report["summary"]["files"] == 1 and report["exec_id"], report
    assert [f["path"] for f in report["fileinfos"]] == ["/workspace/bsl/m.bsl"], report
    assert ("UseLessForEach", 2) in [(x["code"], x["line"])
                                     for x in report["fileinfos"][0]["diagnostics"]], report
    assert_error(tool("bsl_check", {"path": "bsl/none.bsl"}, 404), 404, "file_not_found")
    assert_error(tool("bsl_check", {"path": "etc-link"}, 400), 400, "invalid_path")

    # A cancelled call (MCP's notifications/cancelled) cancels the helper it waits for: the
    # helper gets SIGTERM inside the sandbox. (A REST client that goes away is noticed by
    # the HTTP layer only once the answer is ready: a suspended connection is not watched.)
    c.sh(sid, "head -c 400000000 /dev/zero > /workspace/huge")
    h = {"Accept": "application/json, text/event-stream"}
    r = c.request("POST", "/mcp", body={"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                        "params": {"protocolVersion": "2025-11-25",
                                                   "capabilities": {},
                                                   "clientInfo": {"name": "raw", "version": "1"}}},
                  headers=h)
    h["Mcp-Session-Id"] = r.headers["mcp-session-id"]
    got = {}
    call = threading.Thread(target=lambda: got.update(r=c.request(
        "POST", "/mcp", headers=h, timeout=300,
        body={"jsonrpc": "2.0", "id": 7, "method": "tools/call",
              "params": {"name": "sandbox_files",
                         "arguments": {"sandbox_id": sid, "op": "read", "path": "huge"}}})))
    call.start()
    helper = "pgrep -f '\"op\":\"c[a]t\",' || true"  # [a]: not this pgrep's own line
    wait_for(lambda: c.sh(sid, helper).strip(), timeout=60, what="the read's helper running")
    r = c.request("POST", "/mcp", headers=h, body={
        "jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
    assert r.status == 202, r
    wait_for(lambda: not c.sh(sid, helper).strip(), timeout=60,
             what="the helper ended once its call was cancelled")
    call.join(60)
    assert got["r"].body["error"]["message"] == "cancelled", got
    c.sh(sid, "rm /workspace/huge")

    # Nothing of it is on the outer's host: its workspace directory holds no file.
    host_ws = os.path.join(outer().sandbox_dir(sid), "workspace")
    assert not os.path.isdir(host_ws) or list(files_under(host_ws)) == [], \
        list(files_under(host_ws))
    log = outer().client().ok("GET", "/v1/audit?sandbox_id=%s&limit=500" % sid)["data"]
    seen = {(x["action"], (x.get("details") or {}).get("path"), x["outcome"]) for x in log}
    for want in (("file.edit", "conf.py", "ok"), ("file.edit", "dup.txt", "edit_not_unique"),
                 ("file.upload", "w/x.txt", "ok"), ("file.download", "conf.py", "ok")):
        assert want in seen, (want, sorted(x for x in seen if x[0].startswith("file.")))


# A procedure with a useless For Each (UseLessForEach in docs/bsl.md), no single quotes.
BSL_MODULE = """Procedure Run(List)
\tFor Each Item In List Do
\t\tMessage(List);
\tEndDo;
EndProcedure
"""


def test_the_chat_gateway_runs_its_tool_in_a_provider_sandbox():
    """The chat gateway's sandbox comes from the default backend, here the provider: the
    model's sandbox_bash runs there and its out/ file comes back as an artifact."""
    c = client()
    r = c.request("POST", "/v1/chat/completions", {
        "model": "m", "tools": [{"type": "sbx_sandbox"}],
        "messages": [{"role": "user", "content": "write it"}]},
        headers={"x-sbx-session-id": "provider-chat"}, timeout=300)
    assert r.status == 200, r
    sbx = r.body["sbx_sandbox"]
    assert r.body["choices"][0]["message"]["content"].startswith("tool said chat-42"), r.body
    assert sbx["tool_calls"] == [{"round": 1, "name": "sandbox_bash", "ok": True}], sbx
    assert c.get_sandbox(sbx["sandbox_id"])["runtime"] == "e2b"
    assert provider_sandbox_of(sbx["sandbox_id"]), provider_list()
    art = {a["path"]: a for a in sbx["artifacts"]}["out/chat.txt"]
    with urllib.request.urlopen(art["url"], timeout=30) as f:
        assert f.read() == b"chat-42\n"


def test_no_host_workspace_and_no_skills_for_a_provider_configuration():
    """A provider sandbox keeps /workspace at the provider: the outer holds no workspace image
    for it, and skills, which are written into workspaces on this host, are refused for a
    provider's configuration rather than lost on the way."""
    c, sid = sandbox()
    sdir = outer().sandbox_dir(sid)
    assert os.path.isdir(sdir) and not os.path.exists(os.path.join(sdir, "workspace.img")), \
        os.listdir(sdir)
    with open("/proc/self/mountinfo") as f:
        assert sdir not in f.read(), "the outer mounted something for a provider sandbox"
    a = outer().client()
    cfg = a.ok("POST", "/v1/sandbox-configs", {"name": "e2b-skills", "config": {
        "sandbox_type": "e2b", "e2b": e2b_object(provider_key()["key"])}}, status=201)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("hello/SKILL.md", "---\nname: hello\ndescription: Says hello.\n"
                   "version: 1.0.0\n---\n# hello\n")
    cat = a.ok("POST", "/v1/skills/catalog", raw=buf.getvalue(), status=201,
               headers={"Content-Type": "application/zip"})
    got = a.ok("POST", "/v1/skills/catalog/%s/install" % cat["id"],
               {"sandbox_config_ids": [cfg["id"]]}, status=202)
    assert got["installs"] == [] and len(got["errors"]) == 1, got
    assert got["errors"][0]["error"]["code"] == "not_supported_on_provider", got
    assert "provider" in got["errors"][0]["error"]["message"], got
    assert a.ok("GET", "/v1/sandbox-configs/%s/skills" % cfg["id"])["data"] == [], cfg
    a.ok("DELETE", "/v1/skills/catalog/" + cat["id"])
    a.ok("DELETE", "/v1/sandbox-configs/" + cfg["id"])


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
