"""Not root by default (docs/security.md): commands, sessions, background processes, the
kernel, terminals and E2B commands run as `user` (uid 1000, home /home/user, owner of
/workspace), files sbxd writes into a workspace belong to it, and `"user": "root"` is
refused unless the operator sets SBX_ALLOW_ROOT=1."""

import base64
import json
import os
import struct

import harness
import wsclient
from harness import assert_error
from test_e2b import _envelopes, _raw

D = harness.Shared()
ROOT = harness.Shared(extra_env={"SBX_ALLOW_ROOT": "1"})


def teardown_module():
    D.close()
    ROOT.close()


def sandbox(shared=D):
    c = shared.client("alice")
    return c, shared.once("sb", lambda d: c.create_sandbox(ttl_seconds=1800)["id"])


def test_exec_runs_as_user_who_owns_the_workspace():
    c, sid = sandbox()
    r = c.exec(sid, shell='id -u; id -g; id -un; echo "$HOME $USER $LOGNAME"; pwd; '
                          'stat -c "%u %g" /workspace /home/user; touch /workspace/mine; '
                          'stat -c %u /workspace/mine; ulimit -u')
    out = r["stdout"].split("\n")
    assert r["exit_code"] == 0, r
    assert out[:5] == ["1000", "1000", "user", "/home/user user user", "/workspace"], r
    assert out[5:8] == ["1000 1000", "1000 1000", "1000"], r
    assert out[8] == "128", r   # the sandbox's process limit (SBX_PIDS_MAX) holds for the user
    # The host side agrees: the sandbox's files belong to uid 1000 there too.
    ws = os.path.join(D.get().sandbox_dir(sid), "workspace")
    assert os.stat(ws).st_uid == 1000 and os.stat(os.path.join(ws, "mine")).st_uid == 1000
    # Root's things stay root's: the agent (PID 1) cannot even be signalled.
    r = c.exec(sid, shell="kill -0 1")
    assert r["exit_code"] != 0 and "not permitted" in r["stderr"], r


def test_sessions_processes_and_the_kernel_run_as_user():
    c, sid = sandbox()
    c.ok("POST", "/v1/sandboxes/%s/sessions" % sid, {"id": "s1"}, status=201)
    r = c.exec(sid, shell="id -u; echo $HOME", session_id="s1")
    assert r["stdout"] == "1000\n/home/user\n", r
    p = c.ok("POST", "/v1/sandboxes/%s/processes" % sid, {"command": "id -u; sleep 0.2"},
             status=201)
    harness.wait_for(lambda: c.ok("GET", "/v1/sandboxes/%s/processes/%s" % (sid, p["id"]))
                     ["status"] != "running", 30, what="the process to end")
    logs = c.ok("GET", "/v1/sandboxes/%s/processes/%s/logs" % (sid, p["id"]))
    assert "1000" in json.dumps(logs), logs
    r = c.ok("POST", "/v1/sandboxes/%s/run_code" % sid,
             {"code": "import os, pathlib\nprint(os.getuid(), os.getgid(), os.environ['HOME'])"},
             timeout=120)
    assert "1000 1000 /home/user" in json.dumps(r), r


def test_terminal_runs_as_user():
    c, sid = sandbox()
    tk = c.ok("POST", "/v1/sandboxes/%s/terminal-ticket" % sid)["ticket"]
    ws = wsclient.connect(D.get().port, "/v1/sandboxes/%s/terminal?ticket=%s" % (sid, tk))
    try:
        assert ws.recv_json()["type"] == "ready"
        ws.send_binary(b"echo uid=$(id -u) tty=$(stat -c %u $(tty))\n")
        out, _ = ws.read_until(b"tty=1000", 20)
        assert b"uid=1000 tty=1000" in out, out
    finally:
        ws.close()
    # Root asked for on a terminal: refused in the handshake like any other bad request.
    tk = c.ok("POST", "/v1/sandboxes/%s/terminal-ticket" % sid)["ticket"]
    try:
        wsclient.connect(D.get().port, "/v1/sandboxes/%s/terminal?ticket=%s&user=root" % (sid, tk))
        raise AssertionError("a root terminal was opened")
    except wsclient.HandshakeError as e:
        assert e.status == 403 and e.body["error"]["code"] == "root_not_allowed", e


def test_uploaded_files_and_directories_belong_to_user():
    c, sid = sandbox()
    r = c.request("PUT", "/v1/sandboxes/%s/files/up/deep/f.txt" % sid, raw=b"data\n")
    assert r.status in (200, 201), r
    assert c.sh(sid, "stat -c %u /workspace/up /workspace/up/deep /workspace/up/deep/f.txt; "
                     "echo more >> /workspace/up/deep/f.txt && echo appended").split() == \
        ["1000", "1000", "1000", "appended"]
    ws = os.path.join(D.get().sandbox_dir(sid), "workspace")
    for p in ("up", "up/deep", "up/deep/f.txt"):
        st = os.stat(os.path.join(ws, p))
        assert (st.st_uid, st.st_gid) == (1000, 1000), (p, st)


def test_root_is_refused_by_default():
    c, sid = sandbox()
    base = "/v1/sandboxes/%s" % sid
    for path, body in ((base + "/exec", {"shell": "id -u", "user": "root"}),
                       (base + "/sessions", {"id": "r1", "user": "root"}),
                       (base + "/processes", {"command": "id -u", "user": "root"})):
        assert_error(c.request("POST", path, body), 403, "root_not_allowed")
        for bad in ("nobody", "", 0, ["root"], "ROOT"):
            assert_error(c.request("POST", path, dict(body, user=bad)), 400, "invalid_user")
    # Nothing was started by the refused requests; an explicit "user" is the default.
    assert c.ok("GET", base + "/sessions")["data"] == [] or \
        all(s["id"] != "r1" for s in c.ok("GET", base + "/sessions")["data"])
    assert c.exec(sid, shell="id -u", user="user")["stdout"] == "1000\n"


def test_root_when_the_operator_allows_it():
    c, sid = sandbox(ROOT)
    base = "/v1/sandboxes/%s" % sid
    assert c.exec(sid, shell="id -u")["stdout"] == "1000\n"   # still not root by default
    r = c.exec(sid, shell="id -u; echo $HOME; touch /workspace/by-root; stat -c %u /workspace",
               user="root")
    assert r["stdout"] == "0\n/tmp\n1000\n", r
    c.ok("POST", base + "/sessions", {"id": "rs", "user": "root"}, status=201)
    assert c.exec(sid, shell="id -u", session_id="rs")["stdout"] == "0\n"
    # A command's own "user" wins over its session's.
    assert c.exec(sid, shell="id -u", session_id="rs", user="user")["stdout"] == "1000\n"
    p = c.ok("POST", base + "/processes", {"command": "id -u", "user": "root"}, status=201)
    harness.wait_for(lambda: c.ok("GET", base + "/processes/" + p["id"])["status"] != "running",
                     30, what="the process to end")
    assert '"0\\n"' in json.dumps(c.ok("GET", base + "/processes/%s/logs" % p["id"])) or \
        "0" in json.dumps(c.ok("GET", base + "/processes/%s/logs" % p["id"]))


def test_a_bad_allow_root_value_stops_the_daemon():
    why = harness.refused_start({"SBX_ALLOW_ROOT": "yes"}, timeout=15)
    assert "SBX_ALLOW_ROOT" in why, why


def _e2b_start(port, sid, token, cmd, user=None):
    envd = {"E2b-Sandbox-Id": sid, "X-Access-Token": token,
            "Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"}
    if user is not None:
        envd["Authorization"] = "Basic " + base64.b64encode(user.encode() + b":").decode()
    msg = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", cmd]}, "stdin": False}).encode()
    st, _, body = _raw(port, "POST", "/e2b/sandbox/process.Process/Start", envd,
                       b"\0" + struct.pack(">I", len(msg)) + msg)
    assert st == 200, (st, body)
    env = _envelopes(body)
    out = b"".join(base64.b64decode(m["event"]["data"].get("stdout", ""))
                   for f, m in env if "data" in m.get("event", {}))
    return out.decode(), env[-1][1].get("error")


def _e2b_sandbox(d):
    key = d.client().create_key("e2b-users")["key"]
    st, _, body = _raw(d.port, "POST", "/e2b/api/v2/sandboxes",
                       {"X-API-KEY": key, "Content-Type": "application/json"},
                       b'{"templateID":"base","timeout":300}')
    assert st == 201, body
    sb = json.loads(body)
    return sb["sandboxID"], sb["envdAccessToken"]


def test_e2b_commands_run_as_user_and_root_only_when_allowed():
    d = D.get()
    sid, token = _e2b_sandbox(d)
    assert _e2b_start(d.port, sid, token, "id -u; echo $HOME $USER") == \
        ("1000\n/home/user user\n", None)
    assert _e2b_start(d.port, sid, token, "id -u", user="user") == ("1000\n", None)
    out, err = _e2b_start(d.port, sid, token, "id -u", user="root")
    assert out == "" and err["code"] == "permission_denied", err
    out, err = _e2b_start(d.port, sid, token, "id -u", user="nobody")
    assert out == "" and err and "invalid username" in err["message"], err
    r = ROOT.get()
    sid, token = _e2b_sandbox(r)
    assert _e2b_start(r.port, sid, token, "id -u; echo $HOME", user="root") == ("0\n/root\n", None)
