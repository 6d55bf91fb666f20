"""Streaming exec (SSE), output limits, binary output and exec records."""

import base64
import hashlib
import os
import time

import harness
from harness import assert_error, wait_for

D = harness.Shared()
MB = 1024 * 1024


def teardown_module():
    D.close()


def client():
    return D.get().client()


def sandbox():
    return D.once("sb", lambda d: d.client().create_sandbox())["id"]


def collect(c, path, body, **kw):
    """(head, [(t, event)...]) of a streamed call."""
    gen = c.stream("POST", path, body, **kw)
    head = next(gen)
    return head, list(gen)


def data_of(events, stream):
    out = b""
    for _, e in events:
        if e["type"] == stream:
            if e.get("encoding") == "base64":
                out += base64.b64decode(e["data"])
            else:
                out += e["data"].encode()
    return out


def test_frame_order_and_exactly_one_exit():
    c, sid = client(), sandbox()
    head, events = collect(c, "/v1/sandboxes/%s/exec" % sid,
                           {"shell": "echo out1; echo err1 >&2; echo out2; exit 4"})
    assert head.status == 200 and head.headers["content-type"].startswith("text/event-stream")
    assert "x-request-id" in head.headers
    types = [e["type"] for _, e in events]
    assert types[0] == "start", types
    assert types.count("exit") == 1 and types[-1] == "exit", types
    assert "error" not in types
    assert set(types[1:-1]) <= {"stdout", "stderr"}, types
    start, exit_ = events[0][1], events[-1][1]
    assert start["exec_id"].startswith("ex_") and start["sandbox_id"] == sid
    assert exit_["exit_code"] == 4 and exit_["timed_out"] is False
    assert isinstance(exit_["duration_ms"], int) and "receipt" in exit_
    assert exit_["id"] == start["exec_id"]
    assert data_of(events, "stdout") == b"out1\nout2\n"
    assert data_of(events, "stderr") == b"err1\n"


def test_first_stdout_arrives_while_running():
    c, sid = client(), sandbox()
    go = "/v1/sandboxes/%s/files/stream.go" % sid
    c.request("DELETE", go)
    # "second" comes only once the test has received "first" (and let it go through the
    # files API): a first chunk held until the end would hold the command to its timeout.
    gen = c.stream("POST", "/v1/sandboxes/%s/exec" % sid,
                   {"shell": "echo first; until [ -e /workspace/stream.go ]; do sleep 0.05; "
                             "done; echo second", "timeout_seconds": 60})
    assert next(gen).status == 200
    events, released = [], False
    for t, e in gen:
        events.append((t, e))
        if e["type"] == "stdout" and not released:
            assert data_of(events, "stdout") == b"first\n", events
            assert c.request("PUT", go, raw=b"go").status == 200
            released = True
    assert data_of(events, "stdout") == b"first\nsecond\n"
    assert events[-1][1]["timed_out"] is False, events[-1]


def test_blocking_result_carries_the_same_facts():
    c, sid = client(), sandbox()
    r = c.exec(sid, shell="printf abc; printf def >&2; exit 2")
    assert r["exit_code"] == 2 and r["stdout"] == "abc" and r["stderr"] == "def"
    assert r["stdout_truncated"] is False and r["stderr_truncated"] is False
    assert r["id"].startswith("ex_") and r["sandbox_id"] == sid and "receipt" in r


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_five_megabytes_are_truncated_at_one_megabyte_with_memory_flat():
    d = D.get()
    c, sid = client(), sandbox()
    cmd = "head -c 5000000 /dev/zero | tr '\\0' a; head -c 5000000 /dev/zero | tr '\\0' b >&2"
    c.exec(sid, shell="true")  # warm
    before = rss_kb(d.pid)
    head, events = collect(c, "/v1/sandboxes/%s/exec" % sid, {"shell": cmd})
    truncated = [e["stream"] for _, e in events if e["type"] == "truncated"]
    assert sorted(truncated) == ["stderr", "stdout"], truncated
    out, err = data_of(events, "stdout"), data_of(events, "stderr")
    assert len(out) == MB and set(out) == {ord("a")}
    assert len(err) == MB and set(err) == {ord("b")}
    exit_ = events[-1][1]
    assert exit_["type"] == "exit" and exit_["exit_code"] == 0
    assert exit_["stdout_truncated"] and exit_["stderr_truncated"]
    assert exit_["stdout_dropped_bytes"] == 5000000 - MB
    # Blocking: the same flags, the command ran to its end.
    r = c.exec(sid, shell=cmd + "; echo done >/workspace/finished")
    assert r["stdout_truncated"] and r["stderr_truncated"] and len(r["stdout"]) == MB
    assert r["stderr_dropped_bytes"] == 5000000 - MB
    assert c.sh(sid, "cat /workspace/finished") == "done\n"
    # Much more output than that: had the daemon kept it, it would have grown by as much.
    for _ in range(3):
        r = c.exec(sid, shell="head -c 40000000 /dev/zero; head -c 40000000 /dev/zero >&2")
        assert r["stdout_dropped_bytes"] == 40000000 - MB
    grew = rss_kb(d.pid) - before
    assert grew < 64 * 1024, "sbxd grew by %d kB after 260 MB of output" % grew


def test_binary_output_arrives_intact():
    c, sid = client(), sandbox()
    payload = bytes(range(256)) * 300
    c.ok("POST", "/v1/sandboxes/%s/exec" % sid,
         {"language": "python", "code":
          "import sys,base64; open('/workspace/bin','wb').write(base64.b64decode(%r))"
          % base64.b64encode(payload).decode()})
    head, events = collect(c, "/v1/sandboxes/%s/exec" % sid, {"shell": "cat /workspace/bin"})
    assert data_of(events, "stdout") == payload
    assert any(e.get("encoding") == "base64" for _, e in events if e["type"] == "stdout")
    r = c.exec(sid, shell="cat /workspace/bin")
    assert r["stdout_encoding"] == "base64"
    assert base64.b64decode(r["stdout"]) == payload


def test_utf8_split_across_chunks_is_not_mangled():
    c, sid = client(), sandbox()
    # ș is 2 bytes; print them one byte at a time with pauses so chunks split them.
    code = ("import sys,time\nb='șțăîâ'.encode()\n"
            "for x in b:\n sys.stdout.buffer.write(bytes([x])); sys.stdout.flush(); time.sleep(0.02)\n")
    head, events = collect(c, "/v1/sandboxes/%s/exec" % sid, {"language": "python", "code": code})
    chunks = [e for _, e in events if e["type"] == "stdout"]
    assert all("encoding" not in e for e in chunks), chunks
    assert "".join(e["data"] for e in chunks) == "șțăîâ"


def test_disconnect_mid_stream_keeps_the_command_and_the_record():
    c, sid = client(), sandbox()
    gen = c.stream("POST", "/v1/sandboxes/%s/exec" % sid,
                   {"shell": "echo started; sleep 2; echo finished > /workspace/after_disconnect"})
    assert next(gen).status == 200
    _, start = next(gen)
    exec_id = start["exec_id"]
    gen.close()  # the client goes away
    rec = c.ok("GET", "/v1/sandboxes/%s/execs/%s" % (sid, exec_id))
    assert rec["status"] == "running", rec
    rec = wait_for(lambda: (lambda r: r if r["status"] != "running" else None)(
        c.ok("GET", "/v1/sandboxes/%s/execs/%s" % (sid, exec_id))), 20, what="the exec to end")
    assert rec["status"] == "exited" and rec["exit_code"] == 0
    assert rec["stdout"] == "started\n" and "receipt" in rec
    assert c.sh(sid, "cat /workspace/after_disconnect") == "finished\n"


def test_exec_record_statuses_and_errors():
    c, sid = client(), sandbox()
    r = c.exec(sid, shell="sleep 5", timeout_seconds=1)
    rec = c.ok("GET", "/v1/sandboxes/%s/execs/%s" % (sid, r["id"]))
    assert rec["status"] == "timed_out" and rec["timed_out"] is True
    assert_error(c.request("GET", "/v1/sandboxes/%s/execs/ex_nope" % sid), 404, "exec_not_found")
    other = D.get().client(D.once("key:bob", lambda d: d.client().create_key("bob"))["key"])
    assert_error(other.request("GET", "/v1/sandboxes/%s/execs/%s" % (sid, r["id"])), 404,
                 ("sandbox_not_found", "exec_not_found"))


def test_streamed_errors_are_json_before_the_stream():
    c, sid = client(), sandbox()
    head, events = collect(c, "/v1/sandboxes/%s/exec" % sid, {"shell": 5})
    assert_error(head, 400, "invalid_request")
    head, events = collect(c, "/v1/sandboxes/sb_missing/exec", {"shell": "true"})
    assert_error(head, 404, "sandbox_not_found")


def test_run_streams_too():
    c = client()
    head, events = collect(c, "/v1/sandboxes/run", {"shell": "echo via-run"})
    types = [e["type"] for _, e in events]
    assert types[0] == "start" and types[-1] == "exit", types
    assert data_of(events, "stdout") == b"via-run\n"
    sid = events[0][1]["sandbox_id"]
    assert_error(c.request("GET", "/v1/sandboxes/" + sid), 404, "sandbox_not_found")


def test_exec_in_flight_reads_interrupted_after_a_restart():
    d = D.get()
    c = d.client()
    sid = c.create_sandbox()["id"]
    gen = c.stream("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "sleep 30"})
    assert next(gen).status == 200
    _, start = next(gen)
    d.kill9()
    d.start()
    c = d.client()
    rec = c.ok("GET", "/v1/sandboxes/%s/execs/%s" % (sid, start["exec_id"]))
    assert rec["status"] == "interrupted", rec
    # The sandbox itself is fine and takes the next command.
    assert c.sh(sid, "echo alive") == "alive\n"
    gen.close()
    c.delete_sandbox(sid)
