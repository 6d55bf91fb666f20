"""The provider backends (docs/providers.md): two sbxd on this machine. The inner one is the
provider: its E2B-compatible surface (docs/e2b.md) on loopback, which the official SDKs
accept. The outer one runs SBX_BACKEND=e2b,gvisor with the provider's connection from the
environment (SBX_E2B_*): its sandboxes are the inner's, reached through the control plane
(/sandboxes) and envd's process stream, which carries sbx's own agent's frames.
"""

import hashlib
import json
import os
import urllib.error
import urllib.request

import harness
from harness import assert_error, wait_for
from test_files import fpath, listing

INNER = harness.Shared(extra_env={"SBX_MAX_PER_KEY": "20", "SBX_MAX_PER_USER": "20"})
STATE = {}


def inner():
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


def provider_list():
    """The inner's own list of E2B sandboxes, as the provider key sees it."""
    d = inner()
    req = urllib.request.Request("http://127.0.0.1:%d/e2b/api/sandboxes" % d.port,
                                 headers={"X-API-KEY": provider_key()["key"]})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def provider_sandbox_of(sid):
    for s in provider_list():
        if (s.get("metadata") or {}).get("sbx_id") == sid:
            return s
    return None


def teardown_module():
    d = STATE.pop("outer", None)
    if d:
        d.cleanup()
    INNER.close()


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
    # Not done: the receipt does not list outputs of a workspace that is not on the host,
    # and says so instead of listing none as if none changed.
    rc = r.body["receipt"]
    assert rc["outputs"] == [] and any("not on this host" in w for w in rc["warnings"]), rc


def test_pause_and_fork_are_refused_with_a_code():
    c, sid = sandbox()
    for verb in ("pause", "fork"):
        r = c.request("POST", "/v1/sandboxes/%s/%s" % (sid, verb), {})
        assert_error(r, 409, "not_supported_on_provider")
        assert verb in r.body["error"]["message"], r.body
    assert c.get_sandbox(sid)["status"] == "running"
    assert c.sh(sid, "echo still") == "still\n"


def test_background_process_and_a_kill9_of_the_outer_sbxd():
    c, sid = sandbox("restart")
    c.sh(sid, "echo before > /workspace/mark; sleep 600 >/dev/null 2>&1 &")
    p = provider_sandbox_of(sid)
    outer().restart(hard=True)
    c2 = client()
    out = c2.sh(sid, "cat /workspace/mark; pgrep -c sleep")
    assert out.split() == ["before", "1"], out
    assert c2.get_sandbox(sid)["status"] == "running"
    # Re-adopted, not made again: the same provider sandbox.
    assert provider_sandbox_of(sid)["sandboxID"] == p["sandboxID"]
    c2.delete_sandbox(sid)
    STATE.pop("sb:restart")


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
