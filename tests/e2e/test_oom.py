"""Memory hogs and machines that die (docs/runtime.md, "Memory" and "When a machine dies").

A command that allocates past its sandbox's memory is killed inside the sandbox by the
agent's watcher: the exec answers 200 with oom_killed (result, receipt, stream), a kernel
cell answers kernel_restarted with restart_reason out_of_memory, and the sandbox lives on
with its files. A machine killed from outside (kill -9 of everything under its shim)
leaves the sandbox failed with a state_reason; its files stay readable, and POST
/restart or the next exec starts it cold (restored: false).
"""

import os
import signal
import threading

import harness
from harness import assert_error, wait_for

D = harness.Shared()
MEMORY_MB = 256
HOG = "x = []\nwhile True:\n    x.append(bytearray(16 * 1024 * 1024))\n"


def teardown_module():
    NS.close()
    D.close()


def client():
    return D.get().client()


def small_sandbox():
    """One 256 MiB sandbox for the module's memory tests, with a file to keep."""
    def make(d):
        c = d.client()
        sid = c.create_sandbox(limits={"memory_mb": MEMORY_MB}, ttl_seconds=1800)["id"]
        assert c.request("PUT", "/v1/sandboxes/%s/files/keep.txt" % sid,
                         raw=b"still here\n").status in (200, 201)
        return sid
    return D.once("small", make)


def assert_alive_with_files(c, sid):
    sb = c.get_sandbox(sid)
    assert sb["status"] == "running", sb
    r = c.request("GET", "/v1/sandboxes/%s/files/keep.txt" % sid)
    assert r.status == 200 and r.raw == b"still here\n", r
    r = c.exec(sid, shell="cat /workspace/keep.txt")
    assert r["exit_code"] == 0 and r["stdout"] == "still here\n" and not r["oom_killed"], r


def test_exec_memory_hog_is_killed_inside_and_the_sandbox_lives():
    c = client()
    sid = small_sandbox()
    r = c.request("POST", "/v1/sandboxes/%s/exec" % sid, timeout=120,
                  body={"language": "python", "code": HOG, "timeout_seconds": 60})
    assert r.status == 200, r
    assert r.body["oom_killed"] is True, r.body
    assert r.body["exit_code"] == 137 and not r.body["timed_out"], r.body
    assert r.body["error"]["code"] == "out_of_memory", r.body
    assert r.body["receipt"]["oom_killed"] is True, r.body
    assert_alive_with_files(c, sid)
    # The stored record says the same.
    rec = c.ok("GET", "/v1/sandboxes/%s/execs/%s" % (sid, r.body["id"]))
    assert rec["oom_killed"] is True and rec["status"] == "exited", rec


def test_node_and_shell_hogs_too():
    c = client()
    sid = small_sandbox()
    r = c.exec(sid, language="node", timeout_seconds=60,
               code="const a = []; for (;;) a.push(Buffer.alloc(4 << 20, 1));")
    assert r["oom_killed"] is True and r["exit_code"] != 0, r
    # The hog is a child of the command: still the command's, still reported.
    r = c.exec(sid, timeout_seconds=60,
               shell="python3 -c 'x = []\nwhile True: x.append(bytearray(8 << 20))'; "
                     "echo after $?")
    assert r["oom_killed"] is True and r["stdout"] == "after 137\n", r
    assert_alive_with_files(c, sid)


def test_stream_says_out_of_memory():
    c = client()
    sid = small_sandbox()
    events = []
    for item in c.stream("POST", "/v1/sandboxes/%s/exec" % sid, timeout=120,
                         body={"language": "python", "code": HOG, "timeout_seconds": 60}):
        if isinstance(item, harness.Response):
            assert item.status == 200, item
            continue
        events.append(item[1])
    assert events[0]["type"] == "start", events
    last = events[-1]
    assert last["type"] == "error" and last["code"] == "out_of_memory", events
    assert last["oom_killed"] is True and last["exit_code"] == 137, last
    assert_alive_with_files(c, sid)


def test_kernel_cell_memory_hog_restarts_the_kernel():
    c = client()
    sid = small_sandbox()
    r = c.ok("POST", "/v1/sandboxes/%s/run_code" % sid, {"code": "kept = 41"})
    assert r["error"] is None, r
    r = c.ok("POST", "/v1/sandboxes/%s/run_code" % sid, {"code": HOG}, timeout=120)
    assert r["kernel_restarted"] is True and r["oom_killed"] is True, r
    assert r["restart_reason"] == "out_of_memory", r
    assert r["error"]["name"] == "OutOfMemory" and "256 MiB" in r["error"]["value"], r
    r = c.ok("POST", "/v1/sandboxes/%s/run_code" % sid,
             {"code": "print('kept' in globals(), 1 + 1)"})
    assert r["stdout"] == "False 2\n" and r["kernel_restarted"] is False, r
    assert r["oom_killed"] is False and "restart_reason" not in r, r
    assert_alive_with_files(c, sid)


def test_ordinary_commands_are_not_reported():
    c = client()
    sid = small_sandbox()
    # 100 MiB in a 256 MiB sandbox: nothing is killed.
    r = c.exec(sid, language="python", timeout_seconds=60,
               code="x = bytearray(100 << 20)\nprint(len(x) >> 20)")
    assert r["stdout"] == "100\n" and r["oom_killed"] is False and "error" not in r, r
    r = c.ok("POST", "/v1/sandboxes/%s/run_code" % sid, {"code": "1 + 1"})
    assert r["oom_killed"] is False and "restart_reason" not in r, r


def test_a_background_process_killed_for_memory_says_so():
    c = client()
    sid = small_sandbox()
    procs = "/v1/sandboxes/%s/processes" % sid

    def ended(pid):
        def done():
            p = c.ok("GET", "%s/%s" % (procs, pid))
            return p if p["status"] != "running" else None
        return wait_for(done, 60, 0.2, "process %s to end" % pid)
    hog = c.ok("POST", procs,
               {"command": "python3 -c 'x = [bytearray(16 << 20) for _ in iter(int, 1)]'"}, status=201)
    assert "oom_killed" not in hog, hog  # not known while it runs
    p = ended(hog["id"])
    assert p["status"] == "killed" and p["exit_code"] == 137 and p["oom_killed"] is True, p
    fine = c.ok("POST", procs, {"command": "sleep 0.2"}, status=201)
    p = ended(fine["id"])
    assert p["status"] == "completed" and p["oom_killed"] is False, p
    listed = {q["id"]: q for q in c.ok("GET", procs)["data"]}
    assert listed[hog["id"]]["oom_killed"] is True, listed
    assert_alive_with_files(c, sid)


# --- a machine that dies --------------------------------------------------------------

def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                kids = [int(x) for x in f.read().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


def kill_machine(d, sid):
    """kill -9 of everything the sandbox's shim runs (runsc and its sandbox and gofer,
    or the namespaces container), the shim left to notice."""
    with open(os.path.join(d.sandbox_dir(sid), "state", "shim.pid")) as f:
        shim = int(f.read().split()[0])
    pids = descendants(shim)
    assert pids, "nothing runs under shim %d" % shim
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def sandbox_with_file(c):
    sid = c.create_sandbox(ttl_seconds=900)["id"]
    c.sh(sid, "mkdir -p /workspace/d && echo precious > /workspace/d/file.txt")
    return sid


def wait_failed(c, sid):
    return wait_for(lambda: (lambda s: s if s["status"] == "failed" else None)(c.get_sandbox(sid)),
                    30, what="sandbox %s failed" % sid)


def test_killed_machine_leaves_a_failed_sandbox_with_its_files_then_restart():
    d = D.get()
    c = d.client()
    sid = sandbox_with_file(c)
    kill_machine(d, sid)
    sb = wait_failed(c, sid)
    assert sb["state_reason"] in ("runtime_exited", "channel_lost"), sb
    listed = c.list_sandboxes()
    listed = listed["data"] if isinstance(listed, dict) else listed
    assert [s["status"] for s in listed if s["id"] == sid] == ["failed"], listed
    r = c.request("GET", "/v1/sandboxes/%s/files/d/file.txt" % sid)
    assert r.status == 200 and r.raw == b"precious\n", r
    listing = c.ok("GET", "/v1/sandboxes/%s/files?path=d" % sid)
    assert "file.txt" in str(listing), listing
    r = c.ok("POST", "/v1/sandboxes/%s/restart" % sid, timeout=120)
    assert r["status"] == "running" and r["restored"] is False, r
    assert isinstance(r["ready_ms"], int) and "state_reason" not in r, r
    assert c.sh(sid, "cat /workspace/d/file.txt") == "precious\n"
    c.delete_sandbox(sid)


def test_next_exec_starts_a_failed_sandbox_cold():
    d = D.get()
    c = d.client()
    sid = sandbox_with_file(c)
    kill_machine(d, sid)
    wait_failed(c, sid)
    r = c.exec(sid, shell="cat /workspace/d/file.txt")
    assert r["exit_code"] == 0 and r["stdout"] == "precious\n", r
    sb = c.get_sandbox(sid)
    assert sb["status"] == "running" and sb["restored"] is False, sb
    c.delete_sandbox(sid)


def test_exec_under_a_dying_machine_says_the_sandbox_is_kept():
    d = D.get()
    c = d.client()
    sid = sandbox_with_file(c)
    out = {}

    def run():
        out["r"] = c.request("POST", "/v1/sandboxes/%s/exec" % sid, timeout=120,
                             body={"shell": "touch /workspace/started; sleep 60",
                                   "timeout_seconds": 90})
    t = threading.Thread(target=run)
    t.start()
    wait_for(lambda: c.request("GET", "/v1/sandboxes/%s/files/started" % sid).status == 200,
             30, what="the exec to start")
    kill_machine(d, sid)
    t.join(60)
    assert_error(out["r"], 409, "sandbox_not_running")
    assert "kept as failed" in out["r"].body["error"]["message"], out["r"].body
    wait_failed(c, sid)
    assert c.sh(sid, "cat /workspace/d/file.txt") == "precious\n"
    c.delete_sandbox(sid)


def test_machine_lost_while_the_daemon_was_down_is_kept_failed():
    d = D.get()
    c = d.client()
    sid = sandbox_with_file(c)
    d.stop()
    with open(os.path.join(d.sandbox_dir(sid), "state", "shim.pid")) as f:
        shim = int(f.read().split()[0])
    kill_machine(d, sid)
    # The kill has landed (the shim has nothing left under it) before the daemon looks.
    wait_for(lambda: not descendants(shim), 10, 0.1, "the machine's processes gone")
    d.start()
    c = d.client()
    # Found dead at start-up (lost), or its shim outlived it and said so (runtime_exited).
    sb = wait_failed(c, sid)
    assert sb["state_reason"] in ("lost", "runtime_exited", "channel_lost"), sb
    r = c.request("GET", "/v1/sandboxes/%s/files/d/file.txt" % sid)
    assert r.status == 200 and r.raw == b"precious\n", r
    # A restart of the daemon keeps it failed, still with its files.
    d.restart()
    c = d.client()
    assert c.get_sandbox(sid)["status"] == "failed"
    assert c.sh(sid, "cat /workspace/d/file.txt") == "precious\n"
    c.delete_sandbox(sid)
    assert_error(c.request("GET", "/v1/sandboxes/" + sid), 404, "sandbox_not_found")
    wait_for(lambda: not os.path.exists(d.sandbox_dir(sid)), 30, what="its directory removed")


def test_restart_of_a_running_sandbox_and_errors():
    d = D.get()
    c = d.client()
    sid = sandbox_with_file(c)
    c.sh(sid, "echo gone > /tmp/t")
    r = c.ok("POST", "/v1/sandboxes/%s/restart" % sid, timeout=120)
    assert r["status"] == "running" and r["restored"] is False, r
    # A cold start: the machine's memory and /tmp are new, the workspace is kept.
    assert c.exec(sid, shell="cat /tmp/t")["exit_code"] != 0
    assert c.sh(sid, "cat /workspace/d/file.txt") == "precious\n"
    assert_error(c.request("POST", "/v1/sandboxes/sb_nope/restart"), 404, "sandbox_not_found")
    other = D.client("mallory")
    assert_error(other.request("POST", "/v1/sandboxes/%s/restart" % sid), 404,
                 "sandbox_not_found")
    c.delete_sandbox(sid)



def test_restart_respects_the_running_limits():
    """A failed sandbox does not count as running, and re-enters the limits when it starts
    again, by a restart or by an exec (3 running per key by default)."""
    d = D.get()
    c = D.client("lim")
    sid = sandbox_with_file(c)
    kill_machine(d, sid)
    wait_failed(c, sid)
    others = [c.create_sandbox(ttl_seconds=600)["id"] for _ in range(3)]
    assert_error(c.request("POST", "/v1/sandboxes/%s/restart" % sid), 429,
                 "sandbox_concurrency_limit")
    assert_error(c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true"}), 429,
                 "sandbox_concurrency_limit")
    assert c.get_sandbox(sid)["status"] == "failed"
    c.delete_sandbox(others.pop())
    assert c.sh(sid, "cat /workspace/d/file.txt") == "precious\n"
    for s in others + [sid]:
        c.delete_sandbox(s)


# --- the same on the namespaces backend (its own daemon; docs/runtime.md) ---------------
# There /proc/meminfo is the host's: the watcher sums the sandbox's resident sizes.

NS = harness.Rerun(os.path.dirname(os.path.abspath(__file__)), "namespaces")


def test_ns_exec_memory_hog_is_killed_inside_and_the_sandbox_lives():
    NS("test_oom", "test_exec_memory_hog_is_killed_inside_and_the_sandbox_lives")


def test_ns_kernel_cell_memory_hog_restarts_the_kernel():
    NS("test_oom", "test_kernel_cell_memory_hog_restarts_the_kernel")


def test_ns_killed_machine_leaves_a_failed_sandbox_with_its_files_then_restart():
    NS("test_oom", "test_killed_machine_leaves_a_failed_sandbox_with_its_files_then_restart")


def test_ns_next_exec_starts_a_failed_sandbox_cold():
    NS("test_oom", "test_next_exec_starts_a_failed_sandbox_cold")
