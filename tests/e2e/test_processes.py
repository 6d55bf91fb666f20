"""Background processes (docs/sessions.md) through a real sbxd: start, list from any
session, status, logs (snapshot and followed live over SSE), signals, kill, the log ring's
bound, every bad input, and an sbxd restart with a session and a process alive.

One daemon for the module and one sandbox for most checks.
"""

import base64
import http.client
import json
import time

import harness
from harness import assert_error, wait_for

# The cgroup pids limit (SBX_PIDS_MAX, 512 by default) counts the host tasks of the gVisor
# sandbox, and under the ptrace platform each process in it costs about a dozen; past the
# limit the whole sandbox dies (runsc exits 2). The process limit check runs 64 processes
# at once, so this module's daemon gets room for them.
D = harness.Shared(extra_env={"SBX_PIDS_MAX": "8192"})

PROCESS_FIELDS = {"id", "object", "pid", "command", "cwd", "status", "exit_code", "signal",
                  "session_id", "started_at", "ended_at", "stdout_bytes", "stderr_bytes"}
LOG_RING = 512 * 1024


def teardown_module():
    D.close()


def user(name="procs"):
    k = D.once("key:" + name, lambda d: d.client().create_key(name, "member", "sandbox"))
    return D.get().client(k["key"])


def main_sandbox():
    a = user()
    sb = D.once("sb:main", lambda d: a.create_sandbox(env={"FROM_SANDBOX": "1"}))
    return a, sb["id"]


def path(sid, rest=""):
    return "/v1/sandboxes/%s/processes%s" % (sid, rest)


def start(a, sid, command, **fields):
    r = a.request("POST", path(sid), dict(fields, command=command))
    assert r.status == 201, r
    p = r.body
    assert set(p) >= PROCESS_FIELDS, p
    assert p["object"] == "process" and p["status"] == "running", p
    assert isinstance(p["pid"], int) and p["pid"] > 1, p
    return p


def get(a, sid, ref):
    r = a.request("GET", path(sid, "/" + str(ref)))
    assert r.status == 200, r
    return r.body


def listed(a, sid):
    r = a.request("GET", path(sid))
    assert r.status == 200 and r.body["object"] == "list", r
    return r.body["data"]


def logs(a, sid, ref):
    r = a.request("GET", path(sid, "/%s/logs" % ref))
    assert r.status == 200, r
    assert r.body["object"] == "process_logs", r.body
    return r.body


def wait_done(a, sid, ref, timeout=20):
    return wait_for(lambda: (lambda p: p if p["status"] != "running" else None)(get(a, sid, ref)),
                    timeout, 0.1, "process %s to end" % ref)


def follow(a, sid, ref, port=None):
    """GET logs with Accept: text/event-stream: [(seconds since the request, event)]."""
    conn = http.client.HTTPConnection("127.0.0.1", port or D.get().port, timeout=60)
    t0 = time.time()
    conn.request("GET", path(sid, "/%s/logs" % ref),
                 headers={"Authorization": "Bearer " + a.key, "Accept": "text/event-stream"})
    resp = conn.getresponse()
    assert resp.status == 200, (resp.status, resp.read())
    assert resp.getheader("Content-Type") == "text/event-stream"
    events = []
    for line in resp:
        line = line.decode().rstrip("\r\n")
        if line.startswith("data: "):
            events.append((time.time() - t0, json.loads(line[6:])))
    conn.close()
    return events


# --- starting and listing ------------------------------------------------------------

def test_start_list_get_and_exit_status():
    a, sid = main_sandbox()
    p = start(a, sid, "echo out; echo err >&2; echo $FROM_SANDBOX; exit 4")
    assert p["session_id"] == "default" and p["exit_code"] is None, p
    done = wait_done(a, sid, p["id"])
    assert done["status"] == "failed" and done["exit_code"] == 4 and done["signal"] is None, done
    assert isinstance(done["ended_at"], int) and done["ended_at"] >= done["started_at"], done
    assert p["id"] in [x["id"] for x in listed(a, sid)]
    # By pid as well as by id.
    assert get(a, sid, p["pid"])["id"] == p["id"]
    lg = logs(a, sid, p["id"])
    assert lg["stdout"] == "out\n1\n" and lg["stderr"] == "err\n", lg
    assert lg["status"] == "failed" and lg["exit_code"] == 4, lg
    assert lg["stdout_truncated"] is False, lg
    ok = start(a, sid, "true")
    assert wait_done(a, sid, ok["id"])["status"] == "completed"


def test_process_started_in_one_session_is_seen_from_another():
    a, sid = main_sandbox()
    r = a.request("POST", "/v1/sandboxes/%s/sessions" % sid, {"id": "server-side"})
    assert r.status == 201, r
    p = start(a, sid, "sleep 300", session_id="server-side")
    assert p["session_id"] == "server-side", p
    assert p["id"] in [x["id"] for x in listed(a, sid)]
    # The process space is shared: another session's shell sees (and may signal) it.
    r = a.exec(sid, shell="kill -0 %d && echo visible" % p["pid"], session_id="other-side")
    assert r["stdout"] == "visible\n", r
    a.request("DELETE", path(sid, "/" + p["id"]))


def test_process_uses_the_session_state():
    a, sid = main_sandbox()
    a.exec(sid, shell="mkdir -p /workspace/srv && cd /workspace/srv && export PORT=3000",
           session_id="app")
    p = start(a, sid, 'echo "$PWD $PORT $EXTRA"', session_id="app", env={"EXTRA": "x"})
    assert p["cwd"] == "/workspace/srv", p
    wait_done(a, sid, p["id"])
    assert logs(a, sid, p["id"])["stdout"] == "/workspace/srv 3000 x\n"
    p = start(a, sid, "pwd", cwd="/tmp")
    wait_done(a, sid, p["id"])
    assert logs(a, sid, p["id"])["stdout"] == "/tmp\n"


def test_without_default_session_processes_start_in_workspace():
    a = user("procs-nodefault")
    sb = a.create_sandbox(enable_default_session=False)
    try:
        a.exec(sb["id"], shell="cd /tmp")
        p = start(a, sb["id"], "pwd")
        assert p["session_id"] is None and p["cwd"] == "/workspace", p
    finally:
        a.delete_sandbox(sb["id"])


# --- logs ----------------------------------------------------------------------------

def test_logs_followed_live():
    a, sid = main_sandbox()
    p = start(a, sid, "echo first; sleep 1.5; echo second >&2; sleep 0.5; echo third; exit 2")
    ev = follow(a, sid, p["id"])
    types = [e["type"] for _, e in ev]
    assert types[0] == "start" and types[-1] == "exit", types
    assert ev[0][1]["id"] == p["id"], ev[0]
    out = "".join(e["data"] for _, e in ev if e["type"] == "stdout")
    err = "".join(e["data"] for _, e in ev if e["type"] == "stderr")
    assert out == "first\nthird\n" and err == "second\n", ev
    t_first = next(t for t, e in ev if e["type"] == "stdout")
    t_exit = ev[-1][0]
    assert t_exit - t_first > 1.2, "output was not streamed as it came: %r" % ev
    end = ev[-1][1]
    assert end["status"] == "failed" and end["exit_code"] == 2, end


def test_follow_of_a_finished_process_replays_and_ends():
    a, sid = main_sandbox()
    p = start(a, sid, "printf 'a\\nb\\n'")
    wait_done(a, sid, p["id"])
    ev = follow(a, sid, p["id"])
    assert [e["type"] for _, e in ev] == ["start", "stdout", "exit"], ev
    assert ev[1][1]["data"] == "a\nb\n", ev


def test_logs_survive_exit_and_are_bounded():
    a, sid = main_sandbox()
    # About 2 MB on stdout in many writes: the ring keeps exactly the last 512 KiB, in order.
    p = start(a, sid, "seq 1 300000")
    full = "".join("%d\n" % i for i in range(1, 300001))
    done = wait_done(a, sid, p["id"])
    assert done["stdout_bytes"] == len(full), done
    lg = logs(a, sid, p["id"])
    assert lg["stdout_truncated"] is True, {k: v for k, v in lg.items() if k != "stdout"}
    assert len(lg["stdout"]) == LOG_RING, len(lg["stdout"])
    assert lg["stdout"] == full[-LOG_RING:], "the ring's bytes are not the output's last ones"
    # Still there later, and a follower replays the same bytes, saying what it lost.
    assert logs(a, sid, p["id"])["stdout"] == lg["stdout"]
    ev = follow(a, sid, p["id"])
    assert "".join(e["data"] for _, e in ev if e["type"] == "stdout") == lg["stdout"]
    assert ev[-1][1]["stdout_dropped"] == len(full) - LOG_RING, ev[-1]


def test_logs_that_are_not_utf8_come_as_base64():
    a, sid = main_sandbox()
    p = start(a, sid, "printf '\\377\\376ok'")
    wait_done(a, sid, p["id"])
    lg = logs(a, sid, p["id"])
    assert lg.get("stdout_encoding") == "base64", lg
    assert base64.b64decode(lg["stdout"]) == b"\xff\xfeok", lg


# --- signals and kill ----------------------------------------------------------------

def test_signal_by_name_and_number():
    a, sid = main_sandbox()
    p = start(a, sid, "trap 'echo got-usr1' USR1; echo ready; while :; do sleep 0.1; done")
    wait_for(lambda: "ready" in logs(a, sid, p["id"])["stdout"], 10, 0.1, "ready")
    r = a.request("POST", path(sid, "/%s/signal" % p["id"]), {"signal": "SIGUSR1"})
    assert r.status == 200 and r.body["id"] == p["id"], r
    wait_for(lambda: "got-usr1" in logs(a, sid, p["id"])["stdout"], 10, 0.1, "the trap")
    assert get(a, sid, p["id"])["status"] == "running"
    r = a.request("POST", path(sid, "/%s/signal" % p["pid"]), {"signal": 15})
    assert r.status == 200, r
    done = wait_done(a, sid, p["id"])
    assert done["status"] == "killed" and done["signal"] == 15, done
    assert done["exit_code"] == 143, done


def test_delete_kills_the_process_group():
    a, sid = main_sandbox()
    p = start(a, sid, "sleep 300 & sleep 300 & wait")
    wait_for(lambda: a.exec(sid, shell="pgrep -c -x sleep || true")["stdout"] == "2\n", 10, 0.1,
             "both sleeps running")
    r = a.request("DELETE", path(sid, "/" + p["id"]))
    assert r.status == 200, r
    assert r.body["status"] == "killed" and r.body["exit_code"] == 137, r.body
    # The answer comes once the whole group is gone, not merely signalled: the leader's
    # death alone is not enough (its SIGKILLed members may still be exiting then).
    assert a.exec(sid, shell="pgrep -x sleep || echo none")["stdout"] == "none\n"
    # The record and its logs stay.
    assert get(a, sid, p["id"])["status"] == "killed"


def test_delete_after_the_leader_exited():
    # The leader exits and leaves a member in its group: DELETE still kills the member (the
    # group cannot have been reused while it has one). Once the group is empty, a DELETE
    # signals nothing: the leader's pid number may name a stranger's group by then (the
    # agent's process_group_alive; pid reuse itself cannot be forced deterministically).
    a, sid = main_sandbox()
    p = start(a, sid, "sleep 301 >/dev/null 2>&1 & echo left")
    assert wait_done(a, sid, p["id"])["status"] == "completed"
    assert a.exec(sid, shell="pgrep -c -f 'sleep 30[1]' || true")["stdout"] == "1\n"
    r = a.request("DELETE", path(sid, "/" + p["id"]))
    assert r.status == 200 and r.body["status"] == "completed" and r.body["exit_code"] == 0, r
    assert a.exec(sid, shell="pgrep -f 'sleep 30[1]' || echo none")["stdout"] == "none\n"
    # A finished process whose group is gone: DELETE answers and leaves others alone.
    other = start(a, sid, "sleep 302")
    q = start(a, sid, "true")
    wait_done(a, sid, q["id"])
    r = a.request("DELETE", path(sid, "/" + q["id"]))
    assert r.status == 200 and r.body["status"] == "completed", r
    assert get(a, sid, other["id"])["status"] == "running"
    a.request("DELETE", path(sid, "/" + other["id"]))


# --- bad input -----------------------------------------------------------------------

def test_start_bad_input():
    a, sid = main_sandbox()
    before = listed(a, sid)
    cases = [
        ({}, 400, "invalid_request"),
        ({"command": ""}, 400, "invalid_request"),
        ({"command": 5}, 400, "invalid_request"),
        ({"command": ["ls"]}, 400, "invalid_request"),
        ({"command": "x" * (512 * 1024 + 1)}, 400, "invalid_request"),
        ({"command": "true", "session_id": "a b"}, 400, "invalid_session_id"),
        ({"command": "true", "session_id": 3}, 400, "invalid_session_id"),
        ({"command": "true", "env": {"SBX_NO": "1"}}, 400, "invalid_env"),
        ({"command": "true", "env": "A=1"}, 400, "invalid_env"),
        ({"command": "true", "cwd": ""}, 400, "invalid_cwd"),
        ({"command": "true", "cwd": 7}, 400, "invalid_cwd"),
        ({"command": "true", "cwd": "/no/such/dir"}, 400, "invalid_cwd"),
    ]
    for body, status, code in cases:
        assert_error(a.request("POST", path(sid), body), status, code)
    for raw in (b"{", b"[1]"):
        assert_error(a.request("POST", path(sid), raw=raw), 400,
                     ("invalid_json", "invalid_request"))
    assert listed(a, sid) == before


def test_unknown_process_and_bad_signal():
    a, sid = main_sandbox()
    p = start(a, sid, "sleep 300")
    before = listed(a, sid)
    for ref in ("proc_999999", "999999", "no-such", "a%20b"):
        assert_error(a.request("GET", path(sid, "/" + ref)), 404, "process_not_found")
        assert_error(a.request("GET", path(sid, "/%s/logs" % ref)), 404, "process_not_found")
        assert_error(a.request("GET", path(sid, "/%s/logs" % ref),
                               headers={"Accept": "text/event-stream"}), 404,
                     "process_not_found")
        assert_error(a.request("POST", path(sid, "/%s/signal" % ref), {"signal": 15}), 404,
                     "process_not_found")
        assert_error(a.request("DELETE", path(sid, "/" + ref)), 404, "process_not_found")
    for bad in ({}, {"signal": 0}, {"signal": 65}, {"signal": "SIGFOO"}, {"signal": 1.5},
                {"signal": None}, {"signal": [9]}):
        r = a.request("POST", path(sid, "/%s/signal" % p["id"]), bad)
        assert_error(r, 400, "invalid_signal")
    assert listed(a, sid) == before, "bad requests changed the process list"
    a.request("DELETE", path(sid, "/" + p["id"]))
    r = a.request("POST", path(sid, "/%s/signal" % p["id"]), {"signal": "TERM"})
    assert_error(r, 409, "process_not_running")


def test_process_routes_other_user_and_auth():
    a, sid = main_sandbox()
    other = user("procs-other")
    before = listed(a, sid)
    for method, p, body in (("POST", path(sid), {"command": "true"}), ("GET", path(sid), None),
                            ("GET", path(sid, "/proc_1"), None),
                            ("GET", path(sid, "/proc_1/logs"), None),
                            ("POST", path(sid, "/proc_1/signal"), {"signal": 9}),
                            ("DELETE", path(sid, "/proc_1"), None)):
        assert_error(other.request(method, p, body), 404, "sandbox_not_found")
        assert_error(a.request(method, p, body, key=None), 401, "missing_api_key")
    assert_error(a.request("PUT", path(sid, "/proc_1"), {}), 405, "method_not_allowed")
    assert listed(a, sid) == before


def test_process_limit():
    a = user("procs-limit")
    sb = a.create_sandbox()
    sid = sb["id"]
    try:
        first = start(a, sid, "true")
        wait_done(a, sid, first["id"])
        for _ in range(63):
            start(a, sid, "sleep 300")
        # Full, but one has exited: its record is reused.
        extra = start(a, sid, "sleep 300")
        ids = [x["id"] for x in listed(a, sid)]
        assert len(ids) == 64 and first["id"] not in ids and extra["id"] in ids, ids
        before = listed(a, sid)
        assert_error(a.request("POST", path(sid), {"command": "true"}), 429, "too_many_processes")
        assert [x["id"] for x in listed(a, sid)] == [x["id"] for x in before]
    finally:
        a.delete_sandbox(sid)


# --- restart -------------------------------------------------------------------------

def test_session_and_process_survive_sbxd_restart():
    a, sid = main_sandbox()
    d = D.get()
    a.exec(sid, shell="mkdir -p /workspace/keep && cd /workspace/keep && export KEPT=yes",
           session_id="survivor")
    p = start(a, sid, "echo before; while :; do sleep 0.2; [ -e /workspace/go ] && break; "
                      "done; echo after", session_id="survivor")
    wait_for(lambda: logs(a, sid, p["id"])["stdout"] == "before\n", 10, 0.1, "first line")
    for hard in (False, True):
        d.restart(hard=hard)
        assert get(a, sid, p["id"])["status"] == "running", "process lost by the restart"
        r = a.exec(sid, shell='pwd; echo "$KEPT"', session_id="survivor")
        assert r["stdout"] == "/workspace/keep\nyes\n", r
        assert r["session"]["created"] is False, r
    a.exec(sid, shell="touch /workspace/go")
    done = wait_done(a, sid, p["id"])
    assert done["status"] == "completed", done
    assert logs(a, sid, p["id"])["stdout"] == "before\nafter\n"
