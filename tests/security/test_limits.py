"""Resource limits hold inside the sandbox without taking it down."""

import harness

D = harness.Shared(extra_env={"SBX_PIDS_MAX": "64", "SBX_MEMORY_MB": "256"})


def teardown_module():
    D.close()


FORK_MANY = """
import os, resource, signal, time
kids, refused = [], 0
for _ in range(100):
    try:
        pid = os.fork()
    except BlockingIOError:
        refused += 1
        continue
    if pid == 0:
        os.execv("/bin/sleep", ["sleep", "60"])
    kids.append(pid)
print(resource.getrlimit(resource.RLIMIT_NPROC)[0], len(kids), refused)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
"""


def test_process_limit_fails_fork_and_the_sandbox_lives_on():
    c = D.get().client()
    sid = c.create_sandbox()["id"]
    r = c.exec(sid, language="python", code=FORK_MANY, timeout_seconds=60)
    limit, started, refused = map(int, r["stdout"].split())
    assert limit == 64, r
    assert started < 64 and refused > 0 and started + refused == 100, r
    assert c.sh(sid, "echo alive") == "alive\n"
    assert c.get_sandbox(sid)["status"] == "running"


def test_memory_limit_stops_the_hog_not_the_host():
    """The agent's memory watcher kills the hog inside the sandbox before the host's
    memory cgroup would end it (docs/runtime.md, "Memory"): the caller learns it was
    memory, the sandbox lives on, and the daemon and other sandboxes carry on."""
    c = D.get().client()
    bystander = c.create_sandbox()["id"]
    sid = c.create_sandbox()["id"]
    r = c.request("POST", "/v1/sandboxes/%s/exec" % sid, timeout=120, body={
        "language": "python", "timeout_seconds": 60,
        "code": "x = []\nwhile True:\n    x.append(bytearray(16 * 1024 * 1024))\n"})
    assert r.status == 200, r
    assert r.body["exit_code"] == 137 and r.body["oom_killed"] is True, r.body
    assert c.get_sandbox(sid)["status"] == "running"
    assert c.sh(sid, "echo alive") == "alive\n"
    assert c.sh(bystander, "echo fine") == "fine\n"
    assert c.request("GET", "/healthz").status == 200
