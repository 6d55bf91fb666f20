"""The persistent Python kernel through a real sbxd: run_code, kernel/reset, kernel/interrupt,
streaming, rich outputs, the REPL helpers and llm_query (docs/kernel.md).

One daemon and one sandbox serve most tests, in file order (the kernel's state carries from
one test to the next only where a test says so). llm_query with an endpoint runs a second
daemon pointed at a fake OpenAI-compatible server on 127.0.0.1.
"""

import base64
import http.client
import http.server
import json
import threading
import time

import harness
from harness import assert_error
import testserver

D = harness.Shared()

ANSWER_FIELDS = {"object", "stdout", "stderr", "result", "error", "duration_ms",
                 "execution_count", "kernel_restarted", "timed_out", "stdout_truncated",
                 "stderr_truncated", "oom_killed"}
# Output accounting shared with exec's answer; why a restarted kernel was (docs/kernel.md).
OPTIONAL_FIELDS = {"stdout_dropped_bytes", "stderr_dropped_bytes", "restart_reason"}


def teardown_module():
    D.close()


def alice():
    k = D.once("key:alice", lambda d: d.client().create_key("alice"))
    return D.get().client(k["key"])


def sandbox():
    a = alice()
    sb = D.once("sb", lambda d: a.create_sandbox(ttl_seconds=3600))
    return a, sb["id"]


def run(code, status=200, sid=None, client=None, **fields):
    a, s = sandbox()
    a = client or a
    body = dict(fields, code=code)
    to = fields.get("timeout_seconds", 60) + 60
    r = a.request("POST", "/v1/sandboxes/%s/run_code" % (sid or s), body, timeout=to)
    assert r.status == status, "run_code %r: %r" % (code, r)
    return r.body


def ok(code, **fields):
    """A cell that must not raise."""
    b = run(code, **fields)
    assert b["error"] is None, "cell %r raised: %r" % (code, b["error"])
    return b


def count():
    """The kernel's execution count now (one more cell is run to read it)."""
    return ok("0")["execution_count"]


def control(what, sid=None, client=None):
    a, s = sandbox()
    a = client or a
    return a.request("POST", "/v1/sandboxes/%s/kernel/%s" % (sid or s, what), timeout=90)


def in_background(fn):
    box = {}

    def go():
        try:
            box["value"] = fn()
        except Exception as e:  # reported by the test that joins
            box["error"] = e
    t = threading.Thread(target=go)
    t.start()
    return t, box


# A cell's line that holds it until the test creates the file (after what it checks).
HOLD = ("import os, time\nwhile not os.path.exists(%r):\n    time.sleep(0.05)\n")


def release(path):
    a, s = sandbox()
    a.sh(s, "touch %s" % path)


def wait_running(marker):
    """Wait until a cell has printed to a file (the cell is inside user code then)."""
    a, s = sandbox()
    harness.wait_for(lambda: a.exec(s, shell="cat %s 2>/dev/null" % marker)["stdout"].strip(),
                     30, interval=0.05, what="the cell to start")


# --- state, results, errors ------------------------------------------------------------------

def test_state_persists_and_answer_shape():
    b = ok("x = 21\nprint('hello')")
    assert ANSWER_FIELDS <= set(b) <= ANSWER_FIELDS | OPTIONAL_FIELDS, b
    assert b["object"] == "run_code" and b["result"] is None, b
    assert b["stdout"] == "hello\n" and b["stderr"] == "", b
    assert b["kernel_restarted"] is False and b["timed_out"] is False, b
    assert isinstance(b["duration_ms"], int) and b["duration_ms"] >= 0, b
    n = b["execution_count"]
    assert isinstance(n, int) and n >= 1, b
    b = ok("x * 2")
    assert b["result"] == "42" and b["execution_count"] == n + 1, b
    b = ok("import sys\nsys.stderr.write('warn\\n')\nx")
    assert b["stderr"] == "warn\n" and b["result"] == "21", b


def test_results_of_expressions_and_statements():
    assert ok("y = [1, 'a']")["result"] is None
    assert ok("y")["result"] == "[1, 'a']"
    assert ok("'text'")["result"] == "'text'"
    assert ok("None")["result"] is None
    assert ok("for i in range(3):\n    pass")["result"] is None
    assert ok("def f(v):\n    return v + 1\nf(41)")["result"] == "42"
    # A cell is cwd /workspace, and _ holds the last value, as in a notebook.
    assert ok("import os\nos.getcwd()")["result"] == "'/workspace'"
    assert ok("_")["result"] == "'/workspace'"


def test_exception_name_value_traceback_and_kernel_lives():
    ok("keep = 'still here'")
    b = run("print('before')\ndef g():\n    raise ValueError('bad value')\ng()")
    e = b["error"]
    assert set(e) == {"name", "value", "traceback"}, e
    assert e["name"] == "ValueError" and e["value"] == "bad value", e
    assert "Traceback" in e["traceback"] and "in g" in e["traceback"], e
    assert "ValueError: bad value" in e["traceback"] and "<cell" in e["traceback"], e
    assert "sbx" not in e["traceback"].lower(), "kernel frames leak: %r" % e
    assert b["stdout"] == "before\n" and b["result"] is None and not b["kernel_restarted"], b
    e = run("def (:")["error"]
    assert e["name"] == "SyntaxError" and "SyntaxError" in e["traceback"], e
    e = run("raise SystemExit(3)")["error"]
    assert e["name"] == "SystemExit", e
    assert ok("keep")["result"] == "'still here'"


def test_result_is_cut_at_64k():
    b = ok("'x' * 200000")
    r = b["result"]
    assert len(r.encode()) <= 64 * 1024, len(r)
    assert len(r.encode()) > 60 * 1024, len(r)
    assert r.startswith("'xxxx") and "cut" in r[-60:], r[-80:]
    # Non-ASCII is cut on a character boundary.
    r = ok("'ș' * 100000")["result"]
    assert len(r.encode()) <= 64 * 1024 and r.startswith("'șș"), r[:10]
    assert ok("'small'")["result"] == "'small'"


# --- bad input ---------------------------------------------------------------------------

def test_bad_input():
    a, s = sandbox()
    n = count()
    path = "/v1/sandboxes/%s/run_code" % s
    for body, code in (({}, "invalid_request"),
                       ({"code": 5}, "invalid_request"),
                       ({"code": None}, "invalid_request"),
                       ({"code": "1", "timeout_seconds": 0}, "invalid_timeout"),
                       ({"code": "1", "timeout_seconds": 901}, "invalid_timeout"),
                       ({"code": "1", "timeout_seconds": "5"}, "invalid_timeout"),
                       ({"code": "1", "timeout_seconds": 1.5}, "invalid_timeout"),
                       ({"code": "x = '" + "a" * (130 * 1024) + "'"}, "invalid_request")):
        assert_error(a.request("POST", path, body), 400, code)
    assert_error(a.request("POST", path, raw=b"{not json"), 400, "invalid_json")
    assert_error(a.request("POST", path, raw=b'{"code": "1\\u0000"}'), 400, "invalid_json")
    assert_error(a.request("POST", path, raw=b"[1]"), 400, ("invalid_json", "invalid_request"))
    assert_error(a.request("GET", path), 405, "method_not_allowed")
    for p in (path, "/v1/sandboxes/%s/kernel/reset" % s, "/v1/sandboxes/%s/kernel/interrupt" % s):
        assert_error(a.request("POST", p, {"code": "1"}, key=None), 401, "missing_api_key")
        missing = p.replace(s, "sb_doesnotexist0000")
        assert_error(a.request("POST", missing, {"code": "1"}), 404, "sandbox_not_found")
    # Another user's sandbox is not found either, and a key without the sandbox tool level
    # is refused.
    d = D.get()
    bob = d.client(d.client().create_key("bob")["key"])
    assert_error(bob.request("POST", path, {"code": "1"}), 404, "sandbox_not_found")
    assert_error(bob.request("POST", "/v1/sandboxes/%s/kernel/reset" % s), 404,
                 "sandbox_not_found")
    basic = d.client(d.client().create_key("carol", tool_level="basic")["key"])
    for p in (path, "/v1/sandboxes/%s/kernel/reset" % s, "/v1/sandboxes/%s/kernel/interrupt" % s):
        assert_error(basic.request("POST", p, {"code": "1"}), 403, "insufficient_tool_level")
        assert_error(a.request("GET", p), 405, "method_not_allowed")
    # Nothing ran and the kernel was neither reset nor interrupted: the next cell is the next
    # count.
    assert count() == n + 1


# --- timeout, reset, interrupt, death ----------------------------------------------------

def test_timeout_restarts_kernel_and_state_is_lost():
    ok("lost = 1\nopen('/workspace/kept.txt', 'w').write('file')")
    t0 = time.time()
    b = run("import time\nprint('started')\ntime.sleep(30)", timeout_seconds=1)
    took = time.time() - t0
    assert took < 10, took
    assert b["kernel_restarted"] is True and b["timed_out"] is True, b
    assert b["error"]["name"] == "TimeoutError" and "timeout" in b["error"]["value"], b
    assert b["stdout"] == "started\n", b
    e = run("lost")["error"]
    assert e["name"] == "NameError", e
    assert ok("open('/workspace/kept.txt').read()")["result"] == "'file'"
    assert count() == 3, "a new kernel counts from 1"


def test_reset_restarts_and_files_stay():
    ok("gone = 1\nopen('/workspace/reset.txt', 'w').write('stays')")
    r = control("reset")
    assert r.status == 200, r
    assert r.body["object"] == "kernel" and r.body["status"] == "ready", r
    assert r.body["restarted"] is True, r
    b = run("gone")
    assert b["error"]["name"] == "NameError" and b["execution_count"] == 1, b
    assert ok("open('/workspace/reset.txt').read()")["result"] == "'stays'"


def test_interrupt_stops_cell_and_keeps_state():
    a, s = sandbox()
    ok("kept = 7")
    r = control("interrupt")
    assert r.status == 200 and r.body == {"object": "kernel", "interrupted": False}, r
    t, box = in_background(lambda: run(
        "import time\nopen('/workspace/int.mark', 'w').write('1')\n"
        "for i in range(600):\n    time.sleep(0.1)", timeout_seconds=120))
    try:
        wait_running("/workspace/int.mark")
        t0 = time.time()
        r = control("interrupt")
        assert r.status == 200 and r.body["interrupted"] is True, r
    finally:
        t.join(60)
    assert time.time() - t0 < 5
    b = box.get("value")
    assert b, box
    assert b["error"]["name"] == "KeyboardInterrupt", b
    assert b["kernel_restarted"] is False and b["timed_out"] is False, b
    assert ok("kept")["result"] == "7"


def test_kernel_death_is_reported_and_next_cell_starts_fresh():
    b = run("import os\nprint('bye', flush=True)\nos._exit(3)")
    assert b["kernel_restarted"] is True and b["timed_out"] is False, b
    assert b["error"]["name"] == "KernelDied" and "3" in b["error"]["value"], b
    assert b["stdout"] == "bye\n", b
    assert ok("1 + 1")["execution_count"] == 1


# --- concurrency -------------------------------------------------------------------------

def test_busy_kernel_409_and_exec_files_and_gets_run_alongside():
    a, s = sandbox()
    ok("alongside = 'yes'")
    a.sh(s, "rm -f /workspace/busy.go")
    # The cell holds until the test lets it go, after everything below has answered: so
    # none of it waited for the cell.
    t, box = in_background(lambda: run(
        "open('/workspace/busy.mark', 'w').write('1')\n" + HOLD % "/workspace/busy.go" +
        "'slept'", timeout_seconds=120))
    try:
        wait_running("/workspace/busy.mark")
        r = a.request("POST", "/v1/sandboxes/%s/run_code" % s, {"code": "1"})
        assert_error(r, 409, "kernel_busy")
        out = a.sh(s, "echo exec-ran")
        assert out == "exec-ran\n", out
        assert a.get_sandbox(s)["status"] == "running"
        files = "/v1/sandboxes/%s/files/alongside.txt" % s
        assert a.request("PUT", files, raw=b"put while busy").status == 200
        assert a.request("GET", files).raw == b"put while busy"
        other = D.get().client(D.once("key:alice", None)["key"])
        assert any(x["id"] == s for x in other.list_sandboxes())
        assert t.is_alive() and not box, "the cell ended before it was let go: %r" % box
    finally:
        release("/workspace/busy.go")
        t.join(60)
    b = box.get("value")
    assert b and b["result"] == "'slept'" and b["error"] is None, box
    assert ok("alongside")["result"] == "'yes'"


# --- streaming -----------------------------------------------------------------------------

def sse(code, on_event=None, **fields):
    """POST run_code with Accept: text/event-stream; [(seconds since start, event)].
    on_event(event) is called as each arrives."""
    a, s = sandbox()
    conn = http.client.HTTPConnection("127.0.0.1", D.get().port, timeout=60)
    body = json.dumps(dict(fields, code=code)).encode()
    t0 = time.time()
    conn.request("POST", "/v1/sandboxes/%s/run_code" % s, body,
                 {"Authorization": "Bearer " + a.key, "Content-Type": "application/json",
                  "Accept": "text/event-stream"})
    resp = conn.getresponse()
    assert resp.status == 200, (resp.status, resp.read())
    assert resp.getheader("Content-Type") == "text/event-stream"
    events = []
    for line in resp:
        line = line.decode().rstrip("\r\n")
        if line.startswith("data: "):
            events.append((time.time() - t0, json.loads(line[6:])))
            if on_event:
                on_event(events[-1][1])
    conn.close()
    return events


def test_streaming_prints_arrive_as_printed_then_one_result():
    a, s = sandbox()
    a.sh(s, "rm -f /workspace/sse.go")

    # 'two' is printed only once the test has received 'one': streamed, or never ends.
    def on_event(e):
        if e["type"] == "stdout" and "one" in e["data"]:
            release("/workspace/sse.go")
    ev = sse("print('one', flush=True)\n" + HOLD % "/workspace/sse.go" + "print('two')\n"
             "import sys\nsys.stderr.write('err\\n')\n'done'", on_event=on_event,
             timeout_seconds=60)
    types = [e["type"] for _, e in ev]
    assert types[0] == "start" and types[-1] == "result", types
    assert types.count("result") == 1, types
    outs = [(t, e["data"]) for t, e in ev if e["type"] == "stdout"]
    assert "".join(d for _, d in outs) == "one\ntwo\n", outs
    assert [e["data"] for _, e in ev if e["type"] == "stderr"] == ["err\n"], ev
    res = ev[-1][1]
    assert res["result"] == "'done'" and res["error"] is None, res
    assert "stdout" not in res and res["stdout_truncated"] is False, res
    assert res["execution_count"] >= 1 and res["kernel_restarted"] is False, res


def test_streaming_request_to_a_busy_kernel_is_409():
    a, s = sandbox()
    a.sh(s, "rm -f /workspace/sse409.go /workspace/sse.mark")
    t, box = in_background(lambda: run(
        "open('/workspace/sse.mark', 'w').write('1')\n" + HOLD % "/workspace/sse409.go" +
        "'held'", timeout_seconds=120))
    try:
        wait_running("/workspace/sse.mark")
        r = a.request("POST", "/v1/sandboxes/%s/run_code" % s, {"code": "1"},
                      headers={"Accept": "text/event-stream"})
        assert_error(r, 409, "kernel_busy")
    finally:
        release("/workspace/sse409.go")
        t.join(60)
    b = box.get("value")
    assert b and b["result"] == "'held'" and b["error"] is None, box


# --- rich outputs ----------------------------------------------------------------------------

def test_png_from_a_figure_and_html_outputs():
    b = ok("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')\nplt.show()",
           timeout_seconds=180)
    outs = b.get("outputs")
    assert outs and len(outs) == 1 and outs[0]["mime"] == "image/png", b
    png = base64.b64decode(outs[0]["data"])
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 1000, png[:16]
    # A figure left open at the end of a cell is shown too, and then closed.
    b = ok("fig, ax = plt.subplots()\nax.bar([1, 2], [3, 4])\nNone")
    assert [o["mime"] for o in b["outputs"]] == ["image/png"], b
    assert "outputs" not in ok("len(plt.get_fignums())"), "figures were not closed"
    b = ok("display(HTML('<b>hi</b>'))")
    assert b["outputs"] == [{"mime": "text/html", "data": "<b>hi</b>"}], b
    b = ok("import pandas as pd\npd.DataFrame({'a': [1, 2]})")
    assert "a" in b["result"] and b["outputs"][0]["mime"] == "text/html", b
    assert "<table" in b["outputs"][0]["data"], b
    plain = ok("print('plain')\n1 + 1")
    assert "outputs" not in plain and plain["result"] == "2", plain


def test_png_streams_as_output_frame():
    ev = sse("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\n'after'")
    types = [e["type"] for _, e in ev]
    assert types[0] == "start" and types[-1] == "result" and "output" in types, types
    out = next(e for _, e in ev if e["type"] == "output")
    assert out["mime"] == "image/png", out
    assert ev[-1][1]["outputs"][0]["data"] == out["data"]


# --- REPL helpers ------------------------------------------------------------------------------

BIG = "/workspace/big.txt"


def test_helpers_on_a_50mb_file_without_loading_it():
    # 50 MB made inside the sandbox, not uploaded: 625 000 lines of 80 bytes, one needle.
    ok("line, needle = 'x' * 70, 'NEEDLE-HERE'.ljust(70, '.')\n"
       "with open(%r, 'w') as f:\n"
       "    for i in range(625000):\n"
       "        f.write('%%08d %%s\\n' %% (i, needle if i == 600000 else line))\n"
       % BIG, timeout_seconds=180)
    b = ok("import os\nos.path.getsize(%r)" % BIG)
    assert int(b["result"]) == 625000 * 80, b
    ok("import resource\nrss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss")
    b = ok("peek(%r, 600000 * 80, 20)" % BIG)
    assert b["result"] == repr("00600000 NEEDLE-HERE"), b
    b = ok("grep('NEEDLE', %r)" % BIG, timeout_seconds=180)
    assert b["result"] == repr([(600001, "00600000 " + "NEEDLE-HERE".ljust(70, "."))]), b
    b = ok("len(grep('^0000', %r, max_matches=5))" % BIG)
    assert b["result"] == "5", b
    b = ok("chunk_indices(%r, 10_000_000)" % BIG)
    assert b["result"] == repr([(0, 10000000), (10000000, 20000000), (20000000, 30000000),
                                (30000000, 40000000), (40000000, 50000000)]), b
    b = ok("chunk_indices(%r, 20_000_000, overlap=1000)[1]" % BIG)
    assert b["result"] == "(19999000, 39999000)", b
    b = ok("(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) // 1024")
    assert int(b["result"]) < 30, "the helpers loaded the file: +%s MB peak" % b["result"]
    # The same helpers on strings.
    b = ok("s = 'a' * 1000 + '\\nfind me\\n' + 'b' * 1000\n"
           "(peek(s, 1001, 7), grep('find', s), chunk_indices(s, 1000), chunk_indices(10, 4))")
    assert b["result"] == repr(("find me", [(2, "find me")],
                                [(0, 1000), (1000, 2000), (2000, 2009)],
                                [(0, 4), (4, 8), (8, 10)])), b
    e = run("chunk_indices(10, 0)")["error"]
    assert e["name"] == "ValueError", e


def test_final_marks_the_answer():
    b = ok("FINAL('the answer is 42')")
    assert b["final"] == "the answer is 42" and b["result"] is None, b
    assert "final" not in ok("1")


def test_llm_query_without_configuration_raises_clearly():
    e = run("llm_query('hello')")["error"]
    assert e["name"] == "LLMQueryError", e
    assert "not configured" in e["value"] and "SBX_LLM_URL" in e["value"], e


class FakeOpenAI(http.server.BaseHTTPRequestHandler):
    """POST /v1/chat/completions answering "echo: <last message>"; "fail" answers 500."""
    seen = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeOpenAI.seen.append((self.path, self.headers.get("Authorization"), body))
        prompt = body["messages"][-1]["content"]
        if prompt == "fail":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'{"error":"boom"}')
            return
        out = json.dumps({"choices": [{"message": {"role": "assistant",
                                                   "content": "echo: " + prompt}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


def test_llm_query_through_sbxd_with_the_operators_key():
    srv = testserver.QuietHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    secret = "sk-test-" + "s3cr3t" * 4
    env = {"SBX_LLM_URL": "http://127.0.0.1:%d/v1" % srv.server_address[1],
           "SBX_LLM_API_KEY": secret, "SBX_LLM_MODEL": "fake-model"}
    try:
        with harness.Daemon(extra_env=env) as d:
            c = d.client(d.client().create_key("llm-user")["key"])
            sid = c.create_sandbox(ttl_seconds=600)["id"]
            b = run("answer = llm_query('say hi', system='be brief')\nanswer", sid=sid, client=c)
            assert b["error"] is None and b["result"] == repr("echo: say hi"), b
            path, auth, body = FakeOpenAI.seen[-1]
            assert path == "/v1/chat/completions" and auth == "Bearer " + secret, (path, auth)
            assert body["model"] == "fake-model", body
            assert body["messages"] == [{"role": "system", "content": "be brief"},
                                        {"role": "user", "content": "say hi"}], body
            b = run("llm_query('x', model='other', max_tokens=5)", sid=sid, client=c)
            assert FakeOpenAI.seen[-1][2]["model"] == "other", FakeOpenAI.seen[-1]
            assert FakeOpenAI.seen[-1][2]["max_tokens"] == 5, FakeOpenAI.seen[-1]
            e = run("llm_query('fail')", sid=sid, client=c)["error"]
            assert e["name"] == "LLMQueryError" and "HTTP 500" in e["value"], e
            # The sandbox never holds the key: not in the kernel's environment, nor in any
            # process's, nor in a file under /tmp or /workspace.
            b = run("import os\n[k for k, v in os.environ.items() if %r in v]" % secret,
                    sid=sid, client=c)
            assert b["result"] == "[]", b
            r = c.exec(sid, shell="grep -rl %s /proc/*/environ /tmp /workspace 2>/dev/null; "
                                  "true" % secret)
            assert r["stdout"] == "", r
            assert ok_after(c, sid) == "'echo: again'"
    finally:
        srv.shutdown()
        srv.server_close()


def ok_after(c, sid):
    """A second query in a later cell: the kernel and the daemon's multi handle live on."""
    b = run("llm_query('again')", sid=sid, client=c)
    assert b["error"] is None, b
    return b["result"]
