"""Exec metering on the surfaces that run code besides exec and run_code (docs/billing.md):
background processes (POST /processes and E2B's process.Start, metered until the agent
reports their end, whether anyone follows them or not), E2B's code interpreter (/execute),
and tool calls (sandbox_bash, sandbox_exec, repl_execute). Each is checked through
GET /v1/usage, and processes against the daily limit and the 402 of an unpaid balance.

One daemon, the real clock, a daily limit of DAILY_S exec seconds; every test uses its own
user, so one test's seconds never count against another's limit (each stays below it, but the one
that tests it)."""

import base64
import http.client
import json
import struct
import time

import harness
from harness import assert_error, wait_for
from test_e2b import _envelopes

DAILY_S = 4

_state = {}


def daemon():
    if "d" not in _state:
        _state["d"] = harness.Daemon(extra_env={"SBX_DAILY_EXEC_SECONDS": str(DAILY_S),
                                                "SBX_TEST_BILLING_TICK_MS": "100"}).start()
    return _state["d"]


def teardown_module():
    d = _state.pop("d", None)
    if d:
        d.cleanup()


def member(name):
    """A client for a new member key of user name, and that key's id."""
    k = daemon().client().create_key(name, "member", "sandbox")
    return daemon().client(k["key"]), k["id"]


def usage(user):
    """Today's exec ms of user, in total and by key id."""
    u = daemon().client().ok("GET", "/v1/usage?user=" + user)
    return u["total"]["exec_ms"], {k["key_id"]: k["exec_ms"] for k in u["keys"]}


def process(c, sid, pid):
    return c.ok("GET", "/v1/sandboxes/%s/processes/%s" % (sid, pid))


def test_background_processes_are_metered_and_limited():
    c, key_id = member("procs")
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    assert usage("procs")[0] == 0
    # Nobody follows it: the daemon still hears its end and meters its wall time.
    p = c.ok("POST", "/v1/sandboxes/%s/processes" % sid, {"command": "sleep 1.5"}, status=201)
    wait_for(lambda: process(c, sid, p["id"])["status"] == "completed", 30, what="it ended")
    wait_for(lambda: usage("procs")[0] > 0, 10, what="its time metered")
    total, keys = usage("procs")
    assert 1500 <= total < 10000 and keys == {key_id: total}, (total, keys)

    # A long one counts as running: once it alone fills the daily limit, execs and new
    # processes get 429 while it goes on (a running process is never cut).
    long = c.ok("POST", "/v1/sandboxes/%s/processes" % sid, {"command": "sleep 60"},
                status=201)
    wait_for(lambda: c.request("POST", "/v1/sandboxes/%s/exec" % sid,
                               {"shell": "true"}).status == 429, 30, what="the daily limit")
    assert_error(c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true"}), 429,
                 "sandbox_daily_limit")
    assert_error(c.request("POST", "/v1/sandboxes/%s/processes" % sid, {"command": "true"}),
                 429, "sandbox_daily_limit")
    assert process(c, sid, long["id"])["status"] == "running"
    mid = usage("procs")[0]  # the first process and the short execs the wait ran
    assert mid < DAILY_S * 1000, "nothing of the running one is stored yet"
    c.ok("DELETE", "/v1/sandboxes/%s/processes/%s" % (sid, long["id"]))
    wait_for(lambda: usage("procs")[0] > mid, 10, what="the killed one metered")
    after, keys = usage("procs")
    # It was refused once the stored time plus the running one's reached the limit.
    assert DAILY_S * 1000 <= after < DAILY_S * 1000 + 10000, (mid, after)
    assert list(keys) == [key_id], keys
    # Another user is not limited by it.
    other, _ = member("procs2")
    sid2 = other.create_sandbox(ttl_seconds=600)["id"]
    other.ok("POST", "/v1/sandboxes/%s/processes" % sid2, {"command": "true"}, status=201)
    other.delete_sandbox(sid2)
    c.delete_sandbox(sid)


def test_a_process_still_running_when_its_sandbox_is_deleted_is_metered():
    c, key_id = member("procdel")
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    c.ok("POST", "/v1/sandboxes/%s/processes" % sid, {"command": "sleep 60"}, status=201)
    time.sleep(1.2)
    c.delete_sandbox(sid)
    wait_for(lambda: usage("procdel")[0] >= 1200, 10, what="metered up to the delete")
    total, keys = usage("procdel")
    assert total < 30000 and keys == {key_id: total}, (total, keys)


def test_a_pause_ends_a_process_metering():
    c, key_id = member("procpause")
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    p = c.ok("POST", "/v1/sandboxes/%s/processes" % sid, {"command": "sleep 60"}, status=201)
    time.sleep(1.2)
    c.ok("POST", "/v1/sandboxes/%s/pause" % sid, timeout=120)
    wait_for(lambda: usage("procpause")[0] >= 1200, 10, what="metered up to the pause")
    paused = usage("procpause")[0]
    time.sleep(1)
    assert usage("procpause")[0] == paused, "a paused process does not count"
    c.ok("POST", "/v1/sandboxes/%s/resume" % sid, timeout=120)
    # It runs on after the resume; from there on only v2 running time covers it.
    assert process(c, sid, p["id"])["status"] == "running"
    c.delete_sandbox(sid)
    assert usage("procpause")[0] == paused


def test_a_v1_process_is_metered_for_its_op_only():
    # A v1 machine lives for one op, so the process ends with its start: metered at
    # once, and no machine is kept alive or booted to wait on it.
    c, key_id = member("procv1")
    sid = c.create_sandbox(backend="v1", ttl_seconds=600)["id"]
    c.ok("POST", "/v1/sandboxes/%s/processes" % sid, {"command": "sleep 30"}, status=201)
    wait_for(lambda: usage("procv1")[0] > 0, 10, what="metered at its start")
    total, keys = usage("procv1")
    assert total < 30000 and keys == {key_id: total}, (total, keys)
    assert c.sh(sid, "echo still usable") == "still usable\n"
    c.delete_sandbox(sid)


# ---- E2B --------------------------------------------------------------------------------

def _raw(method, path, headers, body=None, read=True):
    conn = http.client.HTTPConnection("127.0.0.1", daemon().port, timeout=60)
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    if not read:
        # Only the first envelope (the start event), then the client leaves.
        head = r.read(5)
        r.read(struct.unpack(">I", head[1:5])[0])
        conn.close()
        return r.status, None
    out = r.read()
    conn.close()
    return r.status, out


def _start(envd, cmd, read=True):
    msg = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", cmd]},
                      "stdin": False}).encode()
    return _raw("POST", "/e2b/sandbox/process.Process/Start", envd,
                b"\0" + struct.pack(">I", len(msg)) + msg, read)


def test_e2b_processes_and_execute_are_metered_and_refused_when_unpaid():
    c, key_id = member("e2bbill")
    api = {"X-API-KEY": c.key, "Content-Type": "application/json"}
    st, body = _raw("POST", "/e2b/api/v2/sandboxes", api, b'{"templateID":"base","timeout":300}')
    assert st == 201, body
    sb = json.loads(body)
    sid = sb["sandboxID"]
    envd = {"E2b-Sandbox-Id": sid, "X-Access-Token": sb["envdAccessToken"],
            "Content-Type": "application/connect+json", "Connect-Protocol-Version": "1"}
    try:
        st, body = _start(envd, "sleep 0.6; echo ok")
        env = _envelopes(body)
        out = b"".join(base64.b64decode(m["event"]["data"]["stdout"]) for f, m in env
                       if "data" in m.get("event", {}))
        assert st == 200 and out == b"ok\n", env
        wait_for(lambda: usage("e2bbill")[0] >= 600, 10, what="the followed process metered")
        first, keys = usage("e2bbill")
        assert keys == {key_id: first}, keys

        # The client leaves after the start event: the process runs on and is metered
        # when it ends.
        st, _ = _start(envd, "sleep 0.8", read=False)
        assert st == 200
        wait_for(lambda: usage("e2bbill")[0] >= first + 800, 20,
                 what="the unfollowed process metered")
        second = usage("e2bbill")[0]

        # The code interpreter's cells go through the kernel's metered path.
        ci = dict(envd, **{"E2b-Sandbox-Port": "49999", "Content-Type": "application/json"})
        st, body = _raw("POST", "/e2b/sandbox/execute", ci,
                        json.dumps({"code": "import time; time.sleep(0.6); 6*7"}).encode())
        assert st == 200 and b"42" in body, body
        wait_for(lambda: usage("e2bbill")[0] >= second + 600, 10, what="the cell metered")

        # An unpaid balance: Start is refused in its end-stream message, nothing runs.
        admin = daemon().client()
        admin.ok("POST", "/v1/wallet/top-up", {"user": "e2bbill", "source": "adjustment",
                                               "amount_micro_eur": -5000})
        before = usage("e2bbill")[0]
        st, body = _start(envd, "touch /home/user/ran")
        env = _envelopes(body)
        assert st == 200 and env[-1][0] == 2, env
        err = env[-1][1]["error"]
        assert err["code"] == "resource_exhausted" and "unpaid" in err["message"], err
        assert not any("start" in m.get("event", {}) for f, m in env), env
        assert usage("e2bbill")[0] == before
        admin.ok("POST", "/v1/wallet/top-up", {"user": "e2bbill", "source": "top_up",
                                               "amount_micro_eur": 5000})
        st, body = _start(envd, "test ! -e /home/user/ran")
        env = _envelopes(body)
        end = [m["event"]["end"] for f, m in env if "end" in m.get("event", {})]
        assert end and end[0]["exitCode"] == 0, env
    finally:
        st, _ = _raw("DELETE", "/e2b/api/sandboxes/" + sid, api)
        assert st == 204


# ---- tools --------------------------------------------------------------------------------

def test_tool_calls_are_metered():
    c, key_id = member("toolbill")
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    base = 0
    for name, args, ms in [("sandbox_bash", {"command": "sleep 0.8"}, 800),
                           ("sandbox_exec", {"shell": "sleep 0.8"}, 800),
                           ("repl_execute", {"code": "import time; time.sleep(0.8)"}, 800)]:
        r = c.request("POST", "/v1/sandboxes/%s/tools/%s" % (sid, name), args, timeout=120)
        assert r.status == 200, (name, r)
        wait_for(lambda: usage("toolbill")[0] >= base + ms, 10, what=name + " metered")
        total, keys = usage("toolbill")
        assert total < base + ms + 10000 and keys == {key_id: total}, (name, total, keys)
        base = total
    c.delete_sandbox(sid)
