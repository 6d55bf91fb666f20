"""Session terminals over WebSocket (docs/terminals.md), through a real sbxd and a real
RFC 6455 client (wsclient.py): tickets, the interactive shell, resize, exit, re-attach
with replay, the limit of 5, Origin, idle disconnect, every refused handshake, and spec
002's error frames after the upgrade (SANDBOX_PAUSED, SANDBOX_STOPPED, TERMINAL_UNSUPPORTED)
with provision=1 waking a paused or stopped sandbox.

Two daemons: the module's shared one (production timings) and a small one with the test
knobs (short idle time, short tickets, short grace) for the time-dependent cases.
"""

import json
import socket
import struct
import time

import harness
import wsclient
from harness import assert_error, wait_for
from test_oom import kill_machine

ORIGIN = "https://app.example"
D = harness.Shared(extra_env={"SBX_TERMINAL_ORIGINS": ORIGIN + ", https://other.example"})
FAST = harness.Shared(extra_env={"SBX_TEST_TERMINAL_IDLE_MS": "1500",
                                 "SBX_TEST_TICKET_TTL_MS": "1000",
                                 "SBX_TERMINAL_GRACE_SECONDS": "30"})


def teardown_module():
    D.close()
    FAST.close()


def user(shared, name):
    k = shared.once("key:" + name, lambda d: d.client().create_key(name))
    return shared.get().client(k["key"])


def sandbox(shared, name, who="alice"):
    c = user(shared, who)
    sb = shared.once("sb:%s:%s" % (who, name), lambda d: c.create_sandbox(ttl_seconds=1200))
    return c, sb["id"]


def ticket(c, sid):
    return c.ok("POST", "/v1/sandboxes/%s/terminal-ticket" % sid)["ticket"]


def path(sid, tk, **q):
    s = "/v1/sandboxes/%s/terminal?ticket=%s" % (sid, tk)
    for k, v in q.items():
        s += "&%s=%s" % (k, v)
    return s


def open_term(shared, c, sid, origin=None, **q):
    ws = wsclient.connect(shared.get().port, path(sid, ticket(c, sid), **q), origin=origin)
    ready = ws.recv_json()
    assert ready["type"] == "ready", ready
    return ws, ready


def shell(ws, cmd, until, timeout=20):
    ws.send_binary(cmd.encode() + b"\n")
    out, _ = ws.read_until(until, timeout)
    return out.decode("utf-8", "replace")


def handshake_error(shared, p, status, code, origin=None, headers=None):
    try:
        ws = wsclient.connect(shared.get().port, p, origin=origin, headers=headers)
    except wsclient.HandshakeError as e:
        assert e.status == status, (e.status, e.body)
        assert e.body["error"]["code"] == code, e.body
        assert set(e.body) == {"error"} and e.body["error"]["message"], e.body
        return
    ws.close()
    raise AssertionError("handshake on %s succeeded; expected %d %s" % (p, status, code))


def test_ticket_shape_and_errors():
    c, sid = sandbox(D, "main")
    r = c.ok("POST", "/v1/sandboxes/%s/terminal-ticket" % sid)
    assert set(r) == {"object", "ticket", "expires_in"}, r
    assert r["object"] == "terminal_ticket" and r["expires_in"] == 120, r
    assert r["ticket"].startswith("tkt_") and len(r["ticket"]) == 68, r
    assert_error(c.request("POST", "/v1/sandboxes/%s/terminal-ticket" % sid, key=None), 401,
                 "missing_api_key")
    assert_error(c.request("POST", "/v1/sandboxes/sb_00000000000000000000/terminal-ticket"),
                 404, "sandbox_not_found")
    # Another user's sandbox looks missing.
    bob = user(D, "bob")
    assert_error(bob.request("POST", "/v1/sandboxes/%s/terminal-ticket" % sid), 404,
                 "sandbox_not_found")


# Until the terminal has this size (rows, cols), then say so as size-<rows>x<cols>.
WAIT_SIZE = (b'until [ "$(stty size)" = "$((%d+0)) $((%d+0))" ]; do sleep 0.05; done; '
             b'echo size-$(stty size | tr " " x)\n')


def test_interactive_shell_resize_and_exit():
    c, sid = sandbox(D, "main")
    ws, ready = open_term(D, c, sid, cols=100, rows=30)
    assert set(ready) == {"type", "pty_id", "backend", "reattachable"}, ready
    assert ready["backend"] == harness.test_runtime() and ready["reattachable"] is True, ready
    assert ready["pty_id"].startswith("pty_"), ready
    # A prompt, then typed commands echo and answer.
    out = shell(ws, "PS1='sbx$ '; stty size", "30 100")
    assert "30 100" in out, out
    ws.send_json({"type": "resize", "cols": 120, "rows": 40})
    # Fragmented input is reassembled by the server. The shell waits for the size itself
    # (a resize and typed input travel apart), and its answer is not in its echo.
    ws.send_binary(WAIT_SIZE % (40, 120), fragments=4)
    ws.read_until("size-40x120")
    # A fragmented control message too.
    ws.send_text(json.dumps({"type": "resize", "cols": 90, "rows": 20}), fragments=3)
    shell(ws, (WAIT_SIZE % (20, 90)).decode().strip(), "size-20x90")
    # Pings are answered with the same payload.
    ws.ping(b"hello")
    shell(ws, "echo pinged", "pinged\r\n")
    assert b"hello" in ws.pongs, ws.pongs
    ws.send_binary(b"exit 7\n")
    msgs = []
    try:
        while True:
            op, data = ws.recv(20)
            if op == wsclient.OP_TEXT:
                msgs.append(json.loads(data))
    except wsclient.Closed as e:
        assert e.code == 1000, e
    assert msgs == [{"type": "exited", "exit_code": 7}], msgs


def test_own_session_controlling_terminal_and_no_tiocsti():
    c, sid = sandbox(D, "main")
    ws, _ = open_term(D, c, sid)
    out = shell(ws, "python3 -c 'import os; print(\"SID\", os.getsid(0) == os.getsid(os.getppid()),"
                    " os.getsid(os.getppid()) == os.getppid(), os.ttyname(0))'", "/dev/pts/")
    assert "SID True True /dev/pts/" in out, out
    out = shell(ws, "python3 -c 'import fcntl, termios; fcntl.ioctl(0, termios.TIOCSTI, b\"x\")'"
                    " 2>&1 | tail -1; echo done-$((1))-tiocsti", "done-1-tiocsti")
    assert "PermissionError" in out and "Operation not permitted" in out, out
    ws.send_binary(b"exit\n")
    ws.close()


def test_reattach_replays_recent_output():
    c, sid = sandbox(D, "main")
    ws, ready = open_term(D, c, sid)
    pty = ready["pty_id"]
    shell(ws, "MYVAR=kept-$((6*7)); echo marker-$((1+1))-here", "marker-2-here")
    ws.abort()  # dropped, no close frame: the shell keeps running for its grace period
    time.sleep(0.3)
    ws2 = wsclient.connect(D.get().port, path(sid, ticket(c, sid), pty_id=pty))
    ready2 = ws2.recv_json()
    assert ready2["pty_id"] == pty, ready2
    replay, _ = ws2.read_until("marker-2-here", timeout=10)
    assert b"marker-2-here" in replay
    # The same shell: its variable survived.
    assert "kept-42" in shell(ws2, "echo $MYVAR", "kept-42")
    # A second connection to the same pty takes it over; the first hears why.
    ws3 = wsclient.connect(D.get().port, path(sid, ticket(c, sid), pty_id=pty))
    assert ws3.recv_json()["type"] == "ready"
    msg = ws2.recv_json(10)
    assert msg == {"type": "error", "code": "DETACHED"}, msg
    ws3.send_binary(b"exit 3\n")
    assert ws3.recv_json(20) == {"type": "exited", "exit_code": 3}
    ws3.close()
    ws2.close()
    # Gone now: re-attaching is refused before the upgrade.
    handshake_error(D, path(sid, ticket(c, sid), pty_id=pty), 404, "pty_not_found")


def test_sixth_terminal_is_429():
    c, sid = sandbox(D, "limit")
    terms = [open_term(D, c, sid)[0] for _ in range(5)]
    tk = ticket(c, sid)
    handshake_error(D, path(sid, tk), 429, "too_many_terminals")
    # The five still work; ending one frees a place.
    assert "still-5" in shell(terms[4], "echo still-$((2+3))", "still-5")
    terms[0].send_binary(b"exit\n")
    assert terms[0].recv_json(20)["type"] == "exited"
    terms[0].close()
    # Its place is freed once the server has seen it end: wait for that, not for a while.
    ws = harness.wait_for(lambda: _open_or_none(c, sid), 30, what="the fifth place freed")
    ws.send_binary(b"exit\n")
    ws.close()
    for t in terms[1:]:
        t.send_binary(b"exit\n")
        t.close()


def _open_or_none(c, sid):
    try:
        return open_term(D, c, sid)[0]
    except wsclient.HandshakeError as e:
        if e.status != 429:
            raise
        return None


def test_origin_allowlist():
    c, sid = sandbox(D, "main")
    tk = ticket(c, sid)
    handshake_error(D, path(sid, tk), 403, "origin_not_allowed", origin="https://evil.example")
    # The refused attempt did not use the ticket up.
    ws = wsclient.connect(D.get().port, path(sid, tk), origin=ORIGIN)
    assert ws.recv_json()["type"] == "ready"
    ws.send_binary(b"exit\n")
    ws.close()
    ws, _ = open_term(D, c, sid, origin="https://other.example")
    ws.send_binary(b"exit\n")
    ws.close()


def test_refused_handshakes():
    c, sid = sandbox(D, "main")
    _, other = sandbox(D, "second")
    # No ticket, a made-up one.
    handshake_error(D, "/v1/sandboxes/%s/terminal" % sid, 401, "missing_ticket")
    handshake_error(D, path(sid, "tkt_" + "0" * 64), 401, "invalid_ticket")
    handshake_error(D, path(sid, "nonsense"), 401, "invalid_ticket")
    # A ticket for another sandbox is refused, and used up.
    tk = ticket(c, other)
    handshake_error(D, path(sid, tk), 403, "ticket_forbidden")
    handshake_error(D, path(other, tk), 401, "invalid_ticket")
    # Reuse.
    tk = ticket(c, sid)
    ws = wsclient.connect(D.get().port, path(sid, tk))
    ws.recv_json()
    handshake_error(D, path(sid, tk), 401, "invalid_ticket")
    ws.send_binary(b"exit\n")
    ws.close()
    # Bad sizes and pty ids are answered before the ticket is used.
    tk = ticket(c, sid)
    for q in ({"cols": 0}, {"rows": 1001}, {"cols": "abc"}):
        handshake_error(D, path(sid, tk, **q), 400, "invalid_pty_size")
    handshake_error(D, path(sid, ticket(c, sid), pty_id="pty_9999"), 404, "pty_not_found")
    handshake_error(D, path(sid, ticket(c, sid), pty_id="../x"), 404, "pty_not_found")
    # Not a WebSocket: 426, and the ticket is still good afterwards.
    r = c.request("GET", path(sid, tk), key=None)
    assert_error(r, 426, "websocket_required")
    ws = wsclient.connect(D.get().port, path(sid, tk))
    assert ws.recv_json()["type"] == "ready"
    ws.send_binary(b"exit\n")
    ws.close()
    # A ticket whose key was deleted since.
    admin = D.get().client()
    k = admin.create_key("alice")
    c2 = D.get().client(k["key"])
    tk = ticket(c2, sid)
    admin.delete_key(k["id"])
    handshake_error(D, path(sid, tk), 401, "invalid_ticket")


def test_protocol_errors_close_the_connection():
    c, sid = sandbox(D, "main")
    ws, _ = open_term(D, c, sid)
    # A control message that is not one: an error message, the connection stays.
    ws.send_text("not json")
    assert ws.recv_json()["code"] == "BAD_MESSAGE"
    ws.send_json({"type": "resize", "cols": 5000, "rows": 1})
    assert ws.recv_json()["code"] == "BAD_MESSAGE"
    assert "alive-ok" in shell(ws, "echo alive-$((0))k | sed s/0/o/", "alive-ok")
    # An unmasked client frame breaks RFC 6455: the server closes with 1002.
    ws.send(wsclient.OP_BINARY, b"x", mask=False)
    try:
        while True:
            ws.recv(10)
    except wsclient.Closed as e:
        assert e.code == 1002, e
    except ConnectionError:
        pass
    ws.abort()


def test_idle_disconnect_keeps_the_shell():
    c, sid = sandbox(FAST, "idle")
    ws, ready = open_term(FAST, c, sid)
    shell(ws, "IDLEVAR=still-here", "still-here")
    t0 = time.monotonic()
    msg = ws.recv_json(10)
    assert msg == {"type": "error", "code": "IDLE_DISCONNECTED"}, msg
    assert 1.0 < time.monotonic() - t0 < 5, time.monotonic() - t0
    try:
        ws.recv(10)
        raise AssertionError("no close after IDLE_DISCONNECTED")
    except wsclient.Closed as e:
        assert e.code == 1000, e
    ws2 = wsclient.connect(FAST.get().port, path(sid, ticket(c, sid), pty_id=ready["pty_id"]))
    ws2.recv_json()
    assert "still-here" in shell(ws2, "echo $IDLEVAR", "still-here\r\n")
    ws2.send_binary(b"exit\n")
    ws2.close()


def test_expired_ticket():
    c, sid = sandbox(FAST, "idle")
    r = c.ok("POST", "/v1/sandboxes/%s/terminal-ticket" % sid)
    assert r["expires_in"] == 1, r
    time.sleep(1.2)
    handshake_error(FAST, path(sid, r["ticket"]), 401, "invalid_ticket")


def error_frame_then_close(shared, p, code, close_code):
    """The upgrade succeeds (101), then one error frame and a close: spec 002's form."""
    ws = wsclient.connect(shared.get().port, p)
    msg = ws.recv_json()
    assert msg == {"type": "error", "code": code}, msg
    try:
        got = ws.recv(10)
        raise AssertionError("no close after %s: %r" % (code, got))
    except wsclient.Closed as e:
        assert e.code == close_code, e
    ws.abort()


def audit_of(sid, action):
    log = D.get().client().ok("GET", "/v1/audit?sandbox_id=%s&action=%s" % (sid, action))
    return log["data"]


def test_paused_sandbox_answers_sandbox_paused_and_provision_resumes_it():
    c = user(D, "paula")
    sid = c.create_sandbox(ttl_seconds=1200)["id"]
    c.sh(sid, "echo kept > /workspace/kept.txt")
    c.ok("POST", "/v1/sandboxes/%s/pause" % sid)
    # Without provision: the documented error frame after the upgrade, and it stays paused.
    error_frame_then_close(D, path(sid, ticket(c, sid)), "SANDBOX_PAUSED", 1001)
    error_frame_then_close(D, path(sid, ticket(c, sid), provision=0), "SANDBOX_PAUSED", 1001)
    assert c.get_sandbox(sid)["status"] == "paused"
    assert [e["outcome"] for e in audit_of(sid, "terminal.open")] == ["SANDBOX_PAUSED"] * 2
    assert audit_of(sid, "sandbox.resume") == []
    # A provision that is not 0 or 1 is a plain 400 before the upgrade.
    handshake_error(D, path(sid, ticket(c, sid), provision="yes"), 400, "invalid_request")
    # provision=1: resumed (audited like POST .../resume), then the terminal opens on it.
    ws, ready = open_term(D, c, sid, provision=1)
    assert ready["backend"] == "gvisor" and ready["pty_id"], ready
    assert "kept" in shell(ws, "cat /workspace/kept.txt", "kept\r\n")
    assert c.get_sandbox(sid)["status"] == "running"
    resumed = audit_of(sid, "sandbox.resume")
    assert [e["outcome"] for e in resumed] == ["ok"], resumed
    ws.send_binary(b"exit\n")
    ws.close()
    # Running: provision=1 changes nothing more.
    ws, _ = open_term(D, c, sid, provision=1)
    ws.send_binary(b"exit\n")
    ws.close()
    assert len(audit_of(sid, "sandbox.resume")) == 1


def test_stopped_sandbox_answers_sandbox_stopped_and_provision_restarts_it():
    d = D.get()
    c = user(D, "stan")
    sid = c.create_sandbox(ttl_seconds=1200)["id"]
    c.sh(sid, "echo survived > /workspace/s.txt")
    kill_machine(d, sid)
    wait_for(lambda: c.get_sandbox(sid)["status"] == "failed", 30, what="sandbox failed")
    error_frame_then_close(D, path(sid, ticket(c, sid)), "SANDBOX_STOPPED", 1001)
    assert c.get_sandbox(sid)["status"] == "failed"
    ws, ready = open_term(D, c, sid, provision=1)
    assert "survived" in shell(ws, "cat /workspace/s.txt", "survived\r\n")
    assert c.get_sandbox(sid)["status"] == "running"
    restarted = audit_of(sid, "sandbox.restart")
    assert [e["outcome"] for e in restarted] == ["ok"], restarted
    ws.send_binary(b"exit\n")
    ws.close()


def test_a_backend_without_lasting_ptys_answers_terminal_unsupported():
    # v1 starts a fresh machine for each operation: a PTY would end with the op that made it.
    c = user(D, "vic")
    sid = c.create_sandbox(ttl_seconds=600, backend="v1")["id"]
    error_frame_then_close(D, path(sid, ticket(c, sid)), "TERMINAL_UNSUPPORTED", 1000)
    error_frame_then_close(D, path(sid, ticket(c, sid), provision=1), "TERMINAL_UNSUPPORTED",
                           1000)
    assert [e["outcome"] for e in audit_of(sid, "terminal.open")] == ["TERMINAL_UNSUPPORTED"] * 2
