"""exec_command / write_stdin (spec 004) as routes, through a real sbxd:
POST /v1/sandboxes/{id}/pty, POST .../pty/{session_id}/input, GET and DELETE
.../pty/{session_id}; the PTYs are the agent's, shared with the WebSocket terminals."""

import harness
from harness import assert_error

D = harness.Shared()


def teardown_module():
    D.close()


def client(name="alice"):
    k = D.once("key:" + name, lambda d: d.client().create_key(name))
    return D.get().client(k["key"])


def sandbox():
    c = client()
    sb = D.once("sb", lambda d: c.create_sandbox(ttl_seconds=1200))
    return c, sb["id"]


def pty(c, sid, **body):
    return c.request("POST", "/v1/sandboxes/%s/pty" % sid, body)


def test_quick_command_answers_at_once():
    c, sid = sandbox()
    r = pty(c, sid, command="echo hi; tty; stty size", rows=10, cols=33)
    assert r.status == 200, r
    b = r.body
    assert b["alive"] is False and b["exit_code"] == 0 and b["status"] == "exited", b
    assert "session_id" not in b, b
    out = b["stdout"]
    assert out.startswith("hi\r\n/dev/pts/") and out.endswith("10 33\r\n"), out
    assert b["cursor"] == len(out.encode()), b
    r = pty(c, sid, command="exit 5")
    assert r.body["exit_code"] == 5 and r.body["alive"] is False, r


def settled(c, base, r, since, end=">>> "):
    """An answer ends once the output has been quiet for 100 ms, which a loaded host can
    leave between the terminal's echo of the input and the program's reply: read on from
    the same cursor until the prompt is back."""
    for _ in range(6):
        if r["stdout"].endswith(end):
            break
        r = c.ok("GET", base + "?since=%d&wait_seconds=5" % since)
    return r


def test_python_repl_driven_by_write_stdin():
    c, sid = sandbox()
    b = pty(c, sid, command="python3 -i -q", grace_seconds=1).body
    assert b["alive"] is True and b["status"] == "running" and b["exit_code"] is None, b
    sess = b["session_id"]
    assert sess.startswith("pty_") and isinstance(b["pid"], int), b
    base = "/v1/sandboxes/%s/pty/%s" % (sid, sess)
    # The grace is how long the create waits for the command to end, not for its first
    # output: a loaded host can start Python after it, so read on until the prompt.
    b = settled(c, base, b, 0)
    assert b["stdout"].endswith(">>> "), b
    c0 = b["cursor"]
    r = c.ok("POST", base + "/input", {"input": "x = 6 * 7\n", "since": c0, "wait_seconds": 5})
    r = settled(c, base, r, c0)
    c1 = r["cursor"]
    assert c1 > c0 and r["alive"] is True and r["session_id"] == sess, r
    r = c.ok("POST", base + "/input", {"input": "print(x)\n", "since": c1, "wait_seconds": 5})
    r = settled(c, base, r, c1)
    # Only what came after the cursor: the echo, the answer, the next prompt.
    assert r["stdout"] == "print(x)\r\n42\r\n>>> ", r
    c2 = r["cursor"]
    # Reads are resumable from any cursor the ring still holds.
    r = c.ok("GET", base + "?since=%d" % c1)
    assert r["stdout"] == "print(x)\r\n42\r\n>>> " and r["cursor"] == c2, r
    r = c.ok("GET", base + "?since=0")
    assert r["stdout"].startswith(">>> x = 6 * 7") and r["cursor"] == c2, r
    # Without since: from where the last read ended (nothing new yet).
    r = c.ok("GET", base + "?wait_seconds=0.2")
    assert r["stdout"] == "" and r["cursor"] == c2, r
    # Output that comes later, picked up by waiting.
    c.ok("POST", base + "/input", {"input": "import time; time.sleep(0.5); print('late')\n",
                                    "wait_seconds": 0})
    r = c.ok("GET", base + "?since=%d&wait_seconds=5" % c2)
    assert "late" in r["stdout"], r
    c.ok("POST", base + "/input", {"input": "exit()\n", "wait_seconds": 5})
    # Waiting for output that never comes ends when the command does.
    r = harness.wait_for(lambda: (lambda x: x if not x["alive"] else None)(
        c.ok("GET", base + "?wait_seconds=10")), 20, what="python to exit")
    assert r["exit_code"] == 0 and r["status"] == "exited", r
    # Ended sessions can still be read until deleted.
    assert c.ok("GET", base)["alive"] is False
    r = c.request("POST", base + "/input", {"input": "1\n"})
    assert_error(r, 409, "pty_not_running")
    assert c.ok("DELETE", base) == {"object": "pty", "session_id": sess, "deleted": True}
    assert_error(c.request("GET", base), 404, "pty_not_found")


def test_delete_kills_a_live_session():
    c, sid = sandbox()
    b = pty(c, sid, command="sleep 1000", grace_seconds=0.2).body
    base = "/v1/sandboxes/%s/pty/%s" % (sid, b["session_id"])
    c.ok("DELETE", base)
    assert_error(c.request("GET", base), 404, "pty_not_found")
    assert_error(c.request("DELETE", base), 404, "pty_not_found")
    out = c.sh(sid, "pgrep -x sleep || echo none")
    assert out.strip() == "none", out


def test_tiocsti_refused_in_a_pty():
    c, sid = sandbox()
    b = pty(c, sid, command="python3 -c 'import fcntl, termios; "
                           "fcntl.ioctl(0, termios.TIOCSTI, b\"x\")'").body
    assert b["exit_code"] == 1 and "PermissionError" in b["stdout"], b


def test_bad_requests():
    c, sid = sandbox()
    before = c.ok("POST", "/v1/sandboxes/%s/pty" % sid, {"command": "true"})
    cases = [
        ({}, 400, "invalid_request"),
        ({"command": ""}, 400, "invalid_request"),
        ({"command": 5}, 400, "invalid_request"),
        ({"command": "true", "rows": 0}, 400, "invalid_pty_size"),
        ({"command": "true", "cols": 1001}, 400, "invalid_pty_size"),
        ({"command": "true", "rows": "24"}, 400, "invalid_pty_size"),
        ({"command": "true", "grace_seconds": -1}, 400, "invalid_wait"),
        ({"command": "true", "grace_seconds": 61}, 400, "invalid_wait"),
        ({"command": "true", "grace_seconds": "1"}, 400, "invalid_wait"),
    ]
    for body, status, code in cases:
        assert_error(pty(c, sid, **body), status, code)
    assert_error(c.request("POST", "/v1/sandboxes/%s/pty" % sid, raw=b"{nope"), 400,
                 "invalid_json")
    assert_error(c.request("POST", "/v1/sandboxes/%s/pty" % sid, {"command": "true"}, key=None),
                 401, "missing_api_key")
    assert_error(client("bob").request("POST", "/v1/sandboxes/%s/pty" % sid,
                                       {"command": "true"}), 404, "sandbox_not_found")
    b = pty(c, sid, command="cat", grace_seconds=0).body
    base = "/v1/sandboxes/%s/pty/%s" % (sid, b["session_id"])
    for body, code in (({}, "invalid_request"), ({"input": 1}, "invalid_request"),
                       ({"input": "a", "since": -1}, "invalid_cursor"),
                       ({"input": "a", "since": "0"}, "invalid_cursor"),
                       ({"input": "a", "wait_seconds": 100}, "invalid_wait")):
        assert_error(c.request("POST", base + "/input", body), 400, code)
    assert_error(c.request("GET", base + "?since=x"), 400, "invalid_cursor")
    assert_error(c.request("GET", base + "?wait_seconds=-1"), 400, "invalid_wait")
    # Nothing was written by the refused requests: cat has echoed nothing.
    r = c.ok("GET", base + "?since=0")
    assert r["stdout"] == "" and r["alive"] is True, r
    for ref in ("pty_999", "Bad!", "x" * 40):
        assert_error(c.request("POST", "/v1/sandboxes/%s/pty/%s/input" % (sid, ref),
                               {"input": "a"}), 404, "pty_not_found")
    c.ok("DELETE", base)
    assert before["alive"] is False
