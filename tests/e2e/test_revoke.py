"""Deleting a key ends at once what it opened (docs/keys.md#deleting-a-key, issue 38):
WebSocket terminals get an error frame AUTH_REVOKED then a close, its PTY sessions and
SSE streams end, and terminal tickets and E2B access tokens issued to it stop working."""

import http.client
import json
import struct
import threading
import time

import harness
import wsclient
from test_e2b import _raw

D = harness.Shared()


def teardown_module():
    D.close()


def fresh(name):
    """A new member key (its own, so each test deletes one) and a sandbox it made."""
    a = D.get().client()
    k = a.create_key(name)
    c = D.get().client(k["key"])
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    return a, c, k, sid


def test_a_terminal_gets_auth_revoked_then_a_close():
    a, c, k, sid = fresh("rev-term")
    t = c.ok("POST", "/v1/sandboxes/%s/terminal-ticket" % sid)["ticket"]
    ws = wsclient.connect(D.get().port, "/v1/sandboxes/%s/terminal?ticket=%s" % (sid, t))
    ready = ws.recv_json()
    assert ready["type"] == "ready", ready
    a.delete_key(k["id"])
    t0 = time.monotonic()
    msg = ws.recv_json(timeout=10)
    assert msg == {"type": "error", "code": "AUTH_REVOKED"}, msg
    try:
        while True:
            ws.recv(timeout=10)
    except wsclient.Closed as e:
        assert e.code == 1008 and e.reason == "AUTH_REVOKED", (e.code, e.reason)
    assert time.monotonic() - t0 < 5
    ws.close()
    # The shell went with it: nobody re-attaches to it.
    a2 = a.create_key("rev-term")
    c2 = D.get().client(a2["key"])
    t = c2.ok("POST", "/v1/sandboxes/%s/terminal-ticket" % sid)["ticket"]
    try:
        ws = wsclient.connect(D.get().port, "/v1/sandboxes/%s/terminal?ticket=%s&pty_id=%s"
                              % (sid, t, ready["pty_id"]))
        ws.close()
        raise AssertionError("re-attached to a revoked key's terminal")
    except wsclient.HandshakeError as e:
        assert e.status == 404 and e.body["error"]["code"] == "pty_not_found", e.body


def test_a_ticket_of_a_deleted_key_does_not_open():
    a, c, k, sid = fresh("rev-ticket")
    t = c.ok("POST", "/v1/sandboxes/%s/terminal-ticket" % sid)["ticket"]
    a.delete_key(k["id"])
    try:
        ws = wsclient.connect(D.get().port, "/v1/sandboxes/%s/terminal?ticket=%s" % (sid, t))
        ws.close()
        raise AssertionError("a revoked key's ticket opened a terminal")
    except wsclient.HandshakeError as e:
        assert e.status in (401, 403) and e.body["error"]["code"] == "invalid_ticket", e.body


def test_pty_sessions_of_the_key_end():
    a, c, k, sid = fresh("rev-pty")
    # The same user's other key, which stays.
    admin, a = a, D.get().client(a.create_key("rev-pty")["key"])
    r = c.ok("POST", "/v1/sandboxes/%s/pty" % sid, {"command": "cat", "grace_seconds": 0})
    mine = r["session_id"]
    assert r["alive"] is True, r
    # Another key's session on the same sandbox stays.
    other = a.ok("POST", "/v1/sandboxes/%s/pty" % sid, {"command": "cat", "grace_seconds": 0})
    admin.delete_key(k["id"])

    def ended():
        got = a.request("GET", "/v1/sandboxes/%s/pty/%s" % (sid, mine))
        return got.status == 404 or (got.status == 200 and got.body["alive"] is False)
    harness.wait_for(ended, 5, what="the revoked key's PTY session to end")
    got = a.ok("GET", "/v1/sandboxes/%s/pty/%s" % (sid, other["session_id"]))
    assert got["alive"] is True, got
    a.ok("DELETE", "/v1/sandboxes/%s/pty/%s" % (sid, other["session_id"]))
    a.delete_sandbox(sid)


def test_an_sse_stream_of_the_key_ends():
    a, c, k, sid = fresh("rev-sse")
    gen = c.stream("POST", "/v1/sandboxes/%s/exec" % sid,
                   {"shell": "echo started; sleep 60; echo never"}, timeout=90)
    head = next(gen)
    assert head.status == 200, head
    seen = []
    t0 = None
    try:
        for _, ev in gen:
            seen.append(ev)
            if ev.get("type") == "stdout" and t0 is None:
                a.delete_key(k["id"])
                t0 = time.monotonic()
    except (http.client.IncompleteRead, ConnectionError, OSError):
        pass
    assert t0 is not None, seen
    assert time.monotonic() - t0 < 10, seen
    assert seen[-1] == {"type": "error", "code": "auth_revoked",
                        "message": "the key this stream was opened with was deleted"}, seen
    assert not any("never" in json.dumps(e) for e in seen), seen


def test_e2b_access_tokens_of_the_key_stop_working():
    d = D.get()
    a = d.client()
    k = a.create_key("rev-e2b")
    api = {"X-API-KEY": k["key"], "Content-Type": "application/json"}
    st, _, body = _raw(d.port, "POST", "/e2b/api/v2/sandboxes", api,
                       b'{"templateID":"base","timeout":120}')
    assert st == 201, body
    sb = json.loads(body)
    envd = {"E2b-Sandbox-Id": sb["sandboxID"], "X-Access-Token": sb["envdAccessToken"],
            "Content-Type": "application/json"}
    st, _, body = _raw(d.port, "POST", "/e2b/sandbox/filesystem.Filesystem/Stat", envd,
                       b'{"path":"/home/user"}')
    assert st == 200, body
    a.delete_key(k["id"])
    st, _, body = _raw(d.port, "POST", "/e2b/sandbox/filesystem.Filesystem/Stat", envd,
                       b'{"path":"/home/user"}')
    assert st == 401, (st, body)
    D.get().client(a.create_key("rev-e2b")["key"]).delete_sandbox(sb["sandboxID"])


def test_lowering_a_key_ends_what_it_opened():
    """PATCH /v1/keys/{id} to a lower role: the terminal it opened gets AUTH_REVOKED, its
    E2B access token stops working; raising it back ends nothing, and bad bodies are 400."""
    d = D.get()
    a = d.client()
    k = a.create_key("rev-lower")
    c = d.client(k["key"])
    api = {"X-API-KEY": k["key"], "Content-Type": "application/json"}
    st, _, body = _raw(d.port, "POST", "/e2b/api/v2/sandboxes", api,
                       b'{"templateID":"base","timeout":120}')
    assert st == 201, body
    sb = json.loads(body)
    sid = sb["sandboxID"]
    envd = {"E2b-Sandbox-Id": sid, "X-Access-Token": sb["envdAccessToken"],
            "Content-Type": "application/json"}
    t = c.ok("POST", "/v1/sandboxes/%s/terminal-ticket" % sid)["ticket"]
    ws = wsclient.connect(d.port, "/v1/sandboxes/%s/terminal?ticket=%s" % (sid, t))
    assert ws.recv_json()["type"] == "ready"
    # Raising (or restating) a key ends nothing.
    r = a.ok("PATCH", "/v1/keys/" + k["id"], {"role": "member", "tool_level": "sandbox"})
    assert r["role"] == "member" and r["id"] == k["id"] and "key" not in r, r
    st, _, body = _raw(d.port, "POST", "/e2b/sandbox/filesystem.Filesystem/Stat", envd,
                       b'{"path":"/home/user"}')
    assert st == 200, body
    for bad in ({}, {"user": "x"}, {"role": "root"}, {"tool_level": 3}):
        r = a.request("PATCH", "/v1/keys/" + k["id"], bad)
        assert r.status == 400 and r.body["error"]["code"] == "invalid_request", (bad, r)
    r = a.request("PATCH", "/v1/keys/key_nope", {"role": "viewer"})
    assert r.status == 404 and r.body["error"]["code"] == "key_not_found", r
    r = c.request("PATCH", "/v1/keys/" + k["id"], {"role": "admin"})
    assert r.status == 403 and r.body["error"]["code"] == "admin_required", r
    # Down to viewer: the terminal is told and closed, the token refused.
    r = a.ok("PATCH", "/v1/keys/" + k["id"], {"role": "viewer"})
    assert r["role"] == "viewer", r
    assert ws.recv_json(timeout=10) == {"type": "error", "code": "AUTH_REVOKED"}
    try:
        while True:
            ws.recv(timeout=10)
    except wsclient.Closed as e:
        assert e.code == 1008 and e.reason == "AUTH_REVOKED", (e.code, e.reason)
    ws.close()
    st, _, body = _raw(d.port, "POST", "/e2b/sandbox/filesystem.Filesystem/Stat", envd,
                       b'{"path":"/home/user"}')
    assert st == 401, (st, body)
    got = [e for e in a.ok("GET", "/v1/audit?action=key.update&limit=500")["data"]
           if e["details"]["key_id"] == k["id"]]
    assert [e["details"]["lowered"] for e in got] == [False, True], got
    a.ok("PATCH", "/v1/keys/" + k["id"], {"role": "member"})
    c.delete_sandbox(sid)
