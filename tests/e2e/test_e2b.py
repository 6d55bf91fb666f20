"""The E2B-compatible surface (docs/e2b.md): the unmodified official `e2b` and
`@e2b/code-interpreter` npm packages (pinned in tests/e2b/package.json, installed by
scripts/npm-deps.sh) run against a real sbxd with only E2B_API_URL, E2B_SANDBOX_URL and
E2B_API_KEY set. The cases are in tests/e2b/sdk.test.mjs; each one counts as a test.
"""

import base64
import hashlib
import http.client
import json
import os
import shutil
import struct
import tempfile
import time

from harness import REPO, Daemon, wait_for

E2B_DIR = os.path.join(REPO, "tests", "e2b")
# Low enough that the limit test reaches it, high enough for the other cases.
PER_KEY = 3


def suite_e2b(ext):
    _node_suite(ext, "sdk.test.mjs")


def suite_e2b_surface(ext):
    """The newer SDK surface (issue 42): files anywhere, getHost, contexts, ..."""
    _node_suite(ext, "surface.test.mjs")


def suite_e2b_pty(ext):
    """PTYs, JavaScript and TypeScript cells, writes anywhere the user may (issue 42)."""
    _node_suite(ext, "pty.test.mjs")


def suite_e2b_resources(ext):
    """Secrets, network rules injecting them upstream, snapshots (tests/e2b/resources.test.mjs),
    with the egress tests' upstreams on a loopback address (tests/e2e/egress_upstream.py)."""
    import egress_upstream as eu
    up = eu.Upstreams()
    try:
        env = dict(up.env())
        # The proxy verifies an injected host's upstream as a client would: the test CA too.
        env["SBX_FETCH_CA_FILE"] = os.path.join(up.tmp, "ca.pem")
        _node_suite(ext, "resources.test.mjs", env, {"UPSTREAM_ADDR": up.addr})
    finally:
        up.close()


def suite_e2b_template(ext):
    """Template builds from the SDK's Template builder (issue 42), in a template cache of
    their own that holds a link to the real base build (as test_template_build's)."""
    real = os.path.realpath(os.path.join(
        os.environ.get("SBX_TEMPLATE_CACHE", "/var/cache/sbx/templates"), "base"))
    cache = tempfile.mkdtemp(prefix="e2b-tpl-test-", dir=os.path.dirname(os.path.dirname(real)))
    os.symlink(real, os.path.join(cache, "base"))
    try:
        _node_suite(ext, "template.test.mjs", {"SBX_TEMPLATE_CACHE": cache})
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _node_suite(ext, script, daemon_env=None, test_env=None):
    node = shutil.which("node")
    assert node, "node is needed for the E2B SDK tests (scripts/deps.sh installs it)"
    assert os.path.isdir(os.path.join(E2B_DIR, "node_modules", "e2b")), \
        "tests/e2b/node_modules is missing: run scripts/npm-deps.sh"
    with Daemon(extra_env=dict(daemon_env or {}, SBX_MAX_PER_KEY=str(PER_KEY))) as d:
        admin = d.client()
        k = admin.create_key("e2b-user")
        basic = admin.create_key("e2b-basic", tool_level="basic")
        base = "http://127.0.0.1:%d" % d.port
        ext.tap([node, "--test", "--test-reporter=tap", "--test-concurrency=1", script],
                cwd=E2B_DIR,
                env={
                    "E2B_API_URL": base + "/e2b/api",
                    "E2B_SANDBOX_URL": base + "/e2b/sandbox",
                    # Where the SDK's Volume sends its file calls (docs/e2b.md).
                    "E2B_VOLUME_API_URL": base + "/e2b/api",
                    "E2B_API_KEY": k["key"],
                    # Our own API, to check that both surfaces are one system.
                    "SBX_URL": base,
                    "SBX_KEY": k["key"],
                    "SBX_ADMIN_KEY": d.admin_key,
                    "SBX_BASIC_KEY": basic["key"],
                    "SBX_PER_KEY": str(PER_KEY),
                    **(test_env or {}),
                })


def _raw(port, method, path, headers, body=None, chunked=False, host=None):
    """One request with exactly these headers (Host included when given)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.putrequest(method, path, skip_host=host is not None, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        for k, v in headers.items():
            conn.putheader(k, v)
        if body is not None and chunked:
            conn.putheader("Transfer-Encoding", "chunked")
        elif body is not None:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        if body is not None and chunked:
            for i in range(0, len(body), 7):
                part = body[i:i + 7]
                conn.send(b"%x\r\n%s\r\n" % (len(part), part))
            conn.send(b"0\r\n\r\n")
        elif body is not None:
            conn.send(body)
        r = conn.getresponse()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
    finally:
        conn.close()


def _envelopes(data):
    out = []
    while data:
        flags, n = data[0], struct.unpack(">I", data[1:5])[0]
        out.append((flags, json.loads(data[5:5 + n])))
        data = data[5 + n:]
    return out


def test_e2b_wire():
    """The wire as the SDK does not show it: a chunked create, Host routing, Connect
    envelopes and end-stream errors, E2B's JSON error bodies."""
    with Daemon() as d:
        key = d.client().create_key("wire")["key"]
        api = {"X-API-KEY": key, "Content-Type": "application/json"}
        st, _, body = _raw(d.port, "POST", "/e2b/api/v2/sandboxes", api,
                           b'{"templateID":"base","timeout":120}', chunked=True)
        assert st == 201, body
        sb = json.loads(body)
        sid, token = sb["sandboxID"], sb["envdAccessToken"]
        # getHost(port) is {port}-{id}.{domain}: the preview listener's name (docs/e2b.md).
        assert sb["envdVersion"] == "0.6.13", sb
        assert sb["domain"] == "sbx.localhost:%d" % d.preview_port, sb
        try:
            # Host routing: {port}-{id}.{domain}, no E2b-Sandbox-Id header.
            st, _, _ = _raw(d.port, "GET", "/e2b/sandbox/health", {},
                            host="49983-%s.sbx.test" % sid)
            assert st == 204
            st, _, body = _raw(d.port, "GET", "/e2b/sandbox/health", {},
                               host="49983-sb_00000000000000000000.sbx.test")
            assert st == 502 and json.loads(body)["code"] == 502
            envd = {"E2b-Sandbox-Id": sid, "X-Access-Token": token,
                    "Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"}
            msg = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", "echo out; exit 4"]},
                              "stdin": False}).encode()
            st, hdrs, body = _raw(d.port, "POST", "/e2b/sandbox/process.Process/Start", envd,
                                  b"\0" + struct.pack(">I", len(msg)) + msg)
            assert st == 200 and hdrs["content-type"] == "application/connect+json", (st, hdrs)
            env = _envelopes(body)
            assert "start" in env[0][1]["event"] and env[0][0] == 0, env
            out = b"".join(base64.b64decode(m["event"]["data"]["stdout"]) for f, m in env
                           if "data" in m.get("event", {}))
            assert out == b"out\n", env
            end = [m["event"]["end"] for f, m in env if "end" in m.get("event", {})]
            assert end == [{"exitCode": 4, "exited": True, "status": "exit status 4",
                            "error": "exit status 4"}], env
            assert env[-1] == (2, {}), env
            # A compressed envelope: the error travels in the end-stream message.
            st, _, body = _raw(d.port, "POST", "/e2b/sandbox/process.Process/Start", envd,
                               b"\1" + struct.pack(">I", len(msg)) + msg)
            env = _envelopes(body)
            assert st == 200 and env[-1][0] == 2, (st, env)
            assert env[-1][1]["error"]["code"] == "invalid_argument", env
            # A unary call with a broken body.
            unary = dict(envd, **{"Content-Type": "application/json"})
            st, _, body = _raw(d.port, "POST", "/e2b/sandbox/process.Process/List", unary,
                               b"{nope")
            assert st == 400 and json.loads(body)["code"] == "invalid_argument", body
            st, _, body = _raw(d.port, "POST", "/e2b/sandbox/filesystem.Filesystem/Stat", unary,
                               b'{"path":"/home/user/none"}')
            assert st == 404 and json.loads(body)["code"] == "not_found", body
            st, _, body = _raw(d.port, "POST", "/e2b/sandbox/nothing.Here/X", unary, b"{}")
            assert st == 404, body
            # The code interpreter: listing needs no token (the SDK sends none), a restart does.
            ci = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49999"}
            st, _, body = _raw(d.port, "GET", "/e2b/sandbox/contexts", ci)
            assert st == 200 and json.loads(body)[0]["language"] == "python", body
            st, _, _ = _raw(d.port, "POST", "/e2b/sandbox/contexts/python/restart", ci, b"")
            assert st == 401
            st, _, _ = _raw(d.port, "POST", "/e2b/sandbox/contexts/python/restart",
                            dict(ci, **{"X-Access-Token": token}), b"")
            assert st == 204
            # Missing key, unknown sandbox: E2B's {"code": <status>}.
            st, _, body = _raw(d.port, "GET", "/e2b/api/v2/sandboxes", {})
            assert st == 401 and json.loads(body)["code"] == 401
        finally:
            st, _, _ = _raw(d.port, "DELETE", "/e2b/api/sandboxes/" + sid, api)
            assert st == 204
            st, _, body = _raw(d.port, "DELETE", "/e2b/api/sandboxes/" + sid, api)
            assert st == 404 and json.loads(body)["code"] == 404


def _e2b_sandbox(d, user, timeout):
    """A key of user's and a base sandbox made with it: the control plane's headers and the
    create's answer."""
    key = d.client().create_key(user)["key"]
    api = {"X-API-KEY": key, "Content-Type": "application/json"}
    st, _, body = _raw(d.port, "POST", "/e2b/api/v2/sandboxes", api,
                       b'{"templateID":"base","timeout":%d}' % timeout)
    assert st == 201, body
    return api, json.loads(body)


def _start(port, sid, token, cmd):
    """A command through envd's process.Process/Start; its exit code."""
    envd = {"E2b-Sandbox-Id": sid, "X-Access-Token": token,
            "Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"}
    msg = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", cmd]},
                      "stdin": False}).encode()
    st, _, body = _raw(port, "POST", "/e2b/sandbox/process.Process/Start", envd,
                       b"\0" + struct.pack(">I", len(msg)) + msg)
    assert st == 200, body
    end = [m["event"]["end"] for f, m in _envelopes(body) if "end" in m.get("event", {})]
    return end[0]["exitCode"] if end else None


def test_e2b_list_metrics_resume_and_context_delete():
    """The routes the SDK cases do not reach: the v1 list, metrics (one sample of what the
    sandbox uses now), the resume route, and deleting the interpreter's context."""
    with Daemon() as d:
        api, sb = _e2b_sandbox(d, "e2b-metrics", 300)
        sid, token = sb["sandboxID"], sb["envdAccessToken"]
        st, _, body = _raw(d.port, "GET", "/e2b/api/sandboxes", api)
        listed = json.loads(body)
        assert st == 200 and [s["sandboxID"] for s in listed] == [sid], listed
        assert listed[0]["state"] == "running" and listed[0]["cpuCount"] >= 1, listed
        info = listed[0]

        def metrics():
            st, _, body = _raw(d.port, "GET", "/e2b/api/sandboxes/%s/metrics" % sid, api)
            assert st == 200, body
            return json.loads(body)

        before = metrics()
        assert len(before) == 1, before
        m = before[0]
        assert set(m) == {"timestamp", "timestampUnix", "cpuCount", "cpuUsedPct", "memUsed",
                          "memTotal", "diskUsed", "diskTotal"}, m
        assert m["memTotal"] == info["memoryMB"] << 20 and 0 < m["memUsed"], (m, info)
        assert 0 < m["diskUsed"] < m["diskTotal"] and m["cpuCount"] == info["cpuCount"], m
        assert m["timestamp"].endswith("Z") and abs(m["timestampUnix"] - time.time()) < 60, m
        # Work inside shows: CPU time, 32 MB more on its disk and in its memory.
        assert _start(d.port, sid, token,
                      "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; "
                      "head -c 33554432 /dev/urandom > /workspace/blob; sync") == 0
        after = metrics()[0]
        assert after["cpuUsedPct"] > 0, after
        assert after["diskUsed"] >= m["diskUsed"] + (30 << 20), (m, after)
        # Paused, it has no machine and no sample; the resume route brings it back.
        st, _, body = _raw(d.port, "POST", "/e2b/api/sandboxes/%s/pause" % sid, api)
        assert st == 204, body
        assert metrics() == []
        st, _, body = _raw(d.port, "POST", "/e2b/api/sandboxes/%s/resume" % sid, api,
                           b'{"timeout":300}')
        assert st == 201 and json.loads(body)["sandboxID"] == sid, (st, body)
        assert len(metrics()) == 1
        assert _start(d.port, sid, token, "test -s /workspace/blob") == 0
        st, _, body = _raw(d.port, "POST", "/e2b/api/sandboxes/%s/resume" % sid, api, b"{}")
        assert st == 200, (st, body)  # running already: nothing to resume
        # The interpreter's one context can be deleted (it holds nothing); no other exists.
        ci = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49999", "X-Access-Token": token}
        st, _, body = _raw(d.port, "DELETE", "/e2b/sandbox/contexts/python", ci)
        assert st == 204, body
        st, _, body = _raw(d.port, "DELETE", "/e2b/sandbox/contexts/other", ci)
        assert st == 404, (st, body)
        st, _, _ = _raw(d.port, "DELETE", "/e2b/api/sandboxes/" + sid, api)
        assert st == 204
        st, _, body = _raw(d.port, "GET", "/e2b/api/sandboxes/%s/metrics" % sid, api)
        assert st == 404 and json.loads(body)["code"] == 404, body


def test_e2b_secret_patch_is_an_update_that_never_returns_the_value():
    """PATCH /secrets/{id} (E2B's spec; the SDK itself sends POST) makes a new version as
    POST does, and no answer carries the value."""
    with Daemon() as d:
        key = d.client().create_key("e2b-secret-patch")["key"]
        api = {"X-API-KEY": key, "Content-Type": "application/json"}
        st, _, body = _raw(d.port, "POST", "/e2b/api/secrets", api,
                           b'{"name":"patched","value":"first-VALUE-1"}')
        assert st == 201, body
        made = json.loads(body)
        st, _, body = _raw(d.port, "PATCH", "/e2b/api/secrets/" + made["secretID"], api,
                           b'{"value":"second-VALUE-2"}')
        assert st == 200, body
        got = json.loads(body)
        assert got["secretID"] == made["secretID"]
        assert got["currentVersion"] == made["currentVersion"] + 1, (made, got)
        assert b"VALUE" not in body
        st, _, body = _raw(d.port, "PATCH", "/e2b/api/secrets/sec_nope", api,
                           b'{"value":"x"}')
        assert st == 404 and json.loads(body)["code"] == 404, body


UNSUPPORTED = [("PATCH", "/volumecontent/vol_1/path")]


def test_e2b_routes_not_served_yet_answer_e2b_errors_and_v1_connect_works():
    """What docs/e2b.md lists as not supported answers 501 in E2B's error shape (after the
    key is checked), never a 404 the SDK would read as "not found"; and the first
    connect route reaches a running sandbox as the v2 one does."""
    with Daemon() as d:
        key = d.client().create_key("e2b-unsupported")["key"]
        api = {"X-API-KEY": key, "Content-Type": "application/json"}
        for method, path in UNSUPPORTED:
            st, _, body = _raw(d.port, method, "/e2b/api" + path, {"Content-Type": "application/json"},
                               b"{}" if method in ("POST", "PATCH") else None)
            assert st == 401, (method, path, st, body)
            st, _, body = _raw(d.port, method, "/e2b/api" + path, api,
                               b"{}" if method in ("POST", "PATCH") else None)
            err = json.loads(body)
            assert st == 501 and err["code"] == 501, (method, path, st, body)
            assert "not supported" in err["message"] and path in err["message"], err
        st, _, body = _raw(d.port, "POST", "/e2b/api/v2/sandboxes", api,
                           b'{"templateID":"base","timeout":120}')
        assert st == 201, body
        sid = json.loads(body)["sandboxID"]
        st, _, body = _raw(d.port, "POST", "/e2b/api/sandboxes/%s/connect" % sid, api,
                           b'{"timeout":120}')
        assert st in (200, 201) and json.loads(body)["sandboxID"] == sid, (st, body)
        st, _, _ = _raw(d.port, "DELETE", "/e2b/api/sandboxes/" + sid, api)
        assert st == 204


def test_e2b_process_output_to_a_slow_reader_arrives_whole():
    """process.Start's output waits for a client that stops reading (issue 43): sbxd gives the
    agent its window back only once the client's queue drained, and the agent stops reading
    the process's pipe while that follower is a whole ring behind, so the command blocks on
    write as under envd. 64 MiB of random bytes reach a client that pauses three times
    whole: the length and the sha256 the command printed itself."""
    size = 64 << 20
    cmd = "head -c %d /dev/urandom | tee >(sha256sum >&2)" % size
    with Daemon() as d:
        api, sb = _e2b_sandbox(d, "e2b-slow", 900)
        msg = json.dumps({"process": {"cmd": "/bin/bash", "args": ["-c", cmd]},
                          "stdin": False}).encode()
        conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=300)
        try:
            conn.request("POST", "/e2b/sandbox/process.Process/Start",
                         b"\0" + struct.pack(">I", len(msg)) + msg,
                         {"E2b-Sandbox-Id": sb["sandboxID"], "X-Access-Token": sb["envdAccessToken"],
                          "Content-Type": "application/connect+json",
                          "Connect-Protocol-Version": "1"})
            r = conn.getresponse()
            assert r.status == 200
            digest, got, err, end, last, buf = hashlib.sha256(), 0, b"", None, None, b""
            # The client's own pauses (not a wait for a state): at the start, after a quarter
            # and after half of the output, each longer than the 8 MiB queue takes to fill.
            pauses = {0: 5, size // 4: 3, size // 2: 3}
            while True:
                for at in [a for a in pauses if got >= a]:
                    time.sleep(pauses.pop(at))
                chunk = r.read1(1 << 16)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= 5 and len(buf) >= 5 + struct.unpack(">I", buf[1:5])[0]:
                    n = struct.unpack(">I", buf[1:5])[0]
                    flags, m = buf[0], json.loads(buf[5:5 + n])
                    buf = buf[5 + n:]
                    if flags & 2:
                        last = m
                        continue
                    ev = m.get("event", {})
                    if "stdout" in ev.get("data", {}):
                        data = base64.b64decode(ev["data"]["stdout"])
                        digest.update(data)
                        got += len(data)
                    elif "stderr" in ev.get("data", {}):
                        err += base64.b64decode(ev["data"]["stderr"])
                    elif "end" in ev:
                        end = ev["end"]
        finally:
            conn.close()
        assert last == {} and end and end["exitCode"] == 0, (last, end)
        assert got == size, (got, size)
        assert err.split()[0].decode() == digest.hexdigest(), err
        st, _, _ = _raw(d.port, "DELETE", "/e2b/api/sandboxes/" + sb["sandboxID"], api)
        assert st == 204


def test_e2b_a_client_that_leaves_does_not_hold_its_process():
    """The hold is the follower's: once the Start's client leaves, the command (32 MiB to a
    stdout nobody reads) runs to its end, its output forgotten by the ring as before."""
    with Daemon() as d:
        api, sb = _e2b_sandbox(d, "e2b-leaves", 300)
        envd = {"E2b-Sandbox-Id": sb["sandboxID"], "X-Access-Token": sb["envdAccessToken"],
                "Connect-Protocol-Version": "1"}
        msg = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", "head -c 32M /dev/zero"]},
                          "stdin": False}).encode()
        conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=60)
        conn.request("POST", "/e2b/sandbox/process.Process/Start",
                     b"\0" + struct.pack(">I", len(msg)) + msg,
                     dict(envd, **{"Content-Type": "application/connect+json"}))
        r = conn.getresponse()
        assert r.status == 200 and r.read1(5)  # it started; then the client is gone
        conn.close()
        unary = dict(envd, **{"Content-Type": "application/json"})

        def running():
            st, _, body = _raw(d.port, "POST", "/e2b/sandbox/process.Process/List", unary, b"{}")
            assert st == 200, body
            return json.loads(body)["processes"]
        wait_for(lambda: not running(), timeout=60, what="the command's end with no reader")
        st, _, _ = _raw(d.port, "DELETE", "/e2b/api/sandboxes/" + sb["sandboxID"], api)
        assert st == 204
