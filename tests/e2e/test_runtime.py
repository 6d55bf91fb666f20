#!/usr/bin/env python3
"""The runtime layer on this host, end to end: rt_start/rt_connect/rt_alive/rt_destroy/
rt_list and the cgroup helpers (through tests/e2e/rt_driver.c), the sbx-shim relay, runsc.

No daemon involved. The sandbox root is a tiny busybox rootfs made here (or the real
template when present), and the "agent" is either a shell script that writes a probe
report into /workspace, says one HELLO frame and then echoes frames back (`exec cat`),
or the real build/sbx-agent when it has been built.

    python3 tests/e2e/test_runtime.py          # prints `N passed, N failed, N skipped`

Binaries: $SBX_RT_DRIVER or $SBX_BUILD/tests/rt_driver (compiled here from the sources
when missing), $SBX_SHIM or $SBX_BUILD/sbx-shim, $SBX_AGENT or $SBX_BUILD/sbx-agent.
"""

import glob
import json
import os
import re
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

import harness

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HDR = struct.Struct(">IIBBH")
HELLO, OPEN, DATA, EOF, WINDOW, EXIT, ERROR, SIGNAL, PING, PONG = range(1, 11)
CGROUP_PARENT = "sbx-rt-test"
MEM = 256 * 1024 * 1024
PIDS = 128
MILLI = 500
TMP = 16 * 1024 * 1024

_state = {}


# ---- helpers -----------------------------------------------------------------------------

def _build_dir():
    b = os.environ.get("SBX_BUILD", "build")
    return b if os.path.isabs(b) else os.path.join(REPO, b)


def _base():
    if "base" not in _state:
        _state["base"] = tempfile.mkdtemp(prefix="sbx-rt-")
    return _state["base"]


def _driver():
    if "driver" in _state:
        return _state["driver"]
    d = os.environ.get("SBX_RT_DRIVER") or os.path.join(_build_dir(), "tests", "rt_driver")
    if not os.access(d, os.X_OK):
        d = os.path.join(_base(), "rt_driver")
        srcs = ["tests/e2e/rt_driver.c", "src/runtime/gvisor.c", "src/runtime/oci.c",
                "src/runtime/cgroup.c"] + sorted(glob.glob(os.path.join(REPO, "src/common/*.c"))) \
            + sorted(glob.glob(os.path.join(REPO, "src/proto/*.c")))
        subprocess.run(["cc", "-std=gnu17", "-O1", "-g", "-D_GNU_SOURCE", "-o", d] + srcs +
                       ["-ljansson"], cwd=REPO, check=True)
    _state["driver"] = d
    return d


def _shim():
    s = os.environ.get("SBX_SHIM") or os.path.join(_build_dir(), "sbx-shim")
    assert os.access(s, os.X_OK), "no sbx-shim at %s (make build/sbx-shim)" % s
    return s


def _real_agent():
    a = os.environ.get("SBX_AGENT") or os.path.join(_build_dir(), "sbx-agent")
    return a if os.access(a, os.X_OK) else None


def _rootfs():
    """A busybox root filesystem with the mount targets the bundle needs."""
    if "rootfs" in _state:
        return _state["rootfs"]
    bb = shutil.which("busybox") or "/bin/busybox"
    assert os.path.exists(bb), "busybox-static is needed (apt-get install -y busybox-static)"
    r = os.path.join(_base(), "rootfs")
    for d in ("bin", "opt/sbx", "workspace", "tmp", "proc", "dev", "sys", "etc", "root"):
        os.makedirs(os.path.join(r, d), exist_ok=True)
    shutil.copy(bb, os.path.join(r, "bin", "busybox"))
    for a in ("sh", "cat", "ls", "echo", "env", "touch", "hostname", "grep", "id", "sleep",
              "tr", "head", "printf", "df", "wc", "dd", "mount"):
        os.symlink("busybox", os.path.join(r, "bin", a))
    open(os.path.join(r, "opt/sbx/sbx-agent"), "w").close()
    _state["rootfs"] = r
    return r


PROBE_AGENT = r"""#!/bin/sh
# Write what the sandbox looks like from inside, say HELLO, then echo frames back.
{
  # /proc/net/dev: runsc 20240729 has no /sys/class/net under --network=none
  echo "netdevs: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')"
  echo "hostname: $(hostname)"
  echo "id: $(id -u)"
  if touch /rootfs-write-test 2>/dev/null; then echo "rootwrite: yes"; else echo "rootwrite: no"; fi
  if touch /opt/sbx/sbx-agent 2>/dev/null; then echo "agentwrite: yes"; else echo "agentwrite: no"; fi
  if touch /tmp/x 2>/dev/null; then echo "tmpwrite: yes"; else echo "tmpwrite: no"; fi
  grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status
  echo "--env"; env
  echo "--mounts"; cat /proc/mounts
} > /workspace/probe.txt 2>&1
printf '\000\000\000\002\000\000\000\000\001\000\000\000{}'
exec cat
"""


def _probe_agent():
    p = os.path.join(_base(), "probe-agent")
    if not os.path.exists(p):
        with open(p, "w") as f:
            f.write(PROBE_AGENT)
        os.chmod(p, 0o755)
    return p


def _run(args, check=True, timeout=60):
    p = subprocess.run([_driver(), "--runsc-root", os.path.join(_base(), "runsc"),
                        "--shim", _shim(), "--cgroup-parent", CGROUP_PARENT] + args,
                       capture_output=True, text=True, timeout=timeout)
    out = p.stdout.strip()
    if check:
        assert p.returncode == 0 and out.startswith("ok"), \
            "rt_driver %s: rc %d: %s %s" % (args[:3], p.returncode, out, p.stderr.strip())
    return out


class Sandbox:
    def __init__(self, agent=None, rootfs=None, mem=MEM, pids=PIDS, milli=MILLI, tmp=TMP):
        self.id = "rt" + secrets.token_hex(4)
        self.dir = os.path.join(_base(), "sandboxes", self.id)
        self.state = os.path.join(self.dir, "state")
        self.ws = os.path.join(self.dir, "workspace")
        os.makedirs(self.state)
        os.makedirs(self.ws)
        self.agent = agent or _probe_agent()
        self.rootfs = rootfs or _rootfs()
        self.args = [self.id, self.rootfs, self.state, self.ws, str(mem), str(pids), str(milli),
                     str(tmp)]

    def start_args(self):
        return ["--agent", self.agent, "start"] + self.args

    def start(self):
        out = _run(self.start_args())
        self.start_ms = int(out.split()[1])
        return self

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(os.path.join(self.state, "shim.sock"))
        return s

    def shim_pid(self):
        with open(os.path.join(self.state, "shim.pid")) as f:
            return int(f.read())

    def alive(self):
        return _run(["alive", self.state]) == "ok 1"

    def destroy(self, remove=True):
        return _run(["destroy", self.id, self.state] + ([self.dir] if remove else []))

    def wait_gone(self, timeout=20):
        t = time.time() + timeout
        while time.time() < t:
            if not os.path.exists(self.dir) and not _container_exists(self.id):
                return time.time()
            time.sleep(0.05)
        raise AssertionError("sandbox %s not cleaned up in %ss (dir exists: %s, runsc: %s)" % (
            self.id, timeout, os.path.exists(self.dir), _container_exists(self.id)))

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        try:
            if os.path.exists(self.dir):
                self.destroy()
                self.wait_gone()
        except Exception:
            pass


def _container_exists(cid):
    return bool(glob.glob(os.path.join(_base(), "runsc", "%s_sandbox:*.state" % cid)))


def frame(stream, typ, flags=0, payload=b""):
    return HDR.pack(len(payload), stream, typ, flags, 0) + payload


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        chunk = s.recv(n - len(b))
        if not chunk:
            raise AssertionError("EOF after %d of %d bytes" % (len(b), n))
        b += chunk
    return b


def recv_frame(s):
    ln, stream, typ, flags, _ = HDR.unpack(recv_exact(s, HDR.size))
    return stream, typ, flags, recv_exact(s, ln)


def _pid_running(pid):
    """Alive and not a zombie (PID 1 here does not reap orphans)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _cgroup_dir(ctrl, cid):
    if _run(["cgmode"]) == "ok v2":
        return "/sys/fs/cgroup/%s/%s" % (CGROUP_PARENT, cid)
    return "/sys/fs/cgroup/%s/%s/%s" % (ctrl, CGROUP_PARENT, cid)


def _read(p):
    with open(p) as f:
        return f.read().strip()


# ---- tests -------------------------------------------------------------------------------

def test_start_relay_whole_frames():
    with Sandbox() as sb:
        assert sb.alive()
        assert sb.id in _run(["list"]).split()[1:]
        st = os.stat(os.path.join(sb.state, "shim.sock"))
        assert st.st_mode & 0o777 == 0o600, oct(st.st_mode)
        s = sb.connect()
        s.sendall(frame(0, PING, 0, b"hello"))
        assert recv_frame(s) == (0, PING, 0, b"hello")
        # Big frames, split into odd writes, come back whole and in order.
        big = [os.urandom(256 * 1024) for _ in range(4)]
        blob = b"".join(frame(2 * i + 1, DATA, 1, p) for i, p in enumerate(big))
        for i in range(0, len(blob), 7777):
            s.sendall(blob[i:i + 7777])
        for i, p in enumerate(big):
            assert recv_frame(s) == (2 * i + 1, DATA, 1, p)
        s.close()


def shim_log_has(sb, pattern):
    """The shim's log has a line matching pattern (a regex)."""
    try:
        return re.search(pattern, _read(os.path.join(sb.state, "shim.log")), re.M)
    except FileNotFoundError:
        return None


def test_partial_frame_never_reaches_agent():
    with Sandbox() as sb:
        a = sb.connect()
        whole = frame(7, DATA, 1, b"x" * 1000)
        a.sendall(whole[:HDR.size + 400])  # a header and part of the payload, then gone
        a.close()
        # The shim has seen it leave with the torn frame, and dropped that.
        harness.wait_for(lambda: shim_log_has(sb, r"client \d+ detached: .*\([1-9]\d* bytes of "
                                                  r"a partial frame dropped"),
                         30, what="the shim to drop the torn frame")
        b = sb.connect()
        b.sendall(frame(0, PING, 0, b"after"))
        assert recv_frame(b) == (0, PING, 0, b"after"), "a torn frame reached the agent"
        b.close()


def test_frames_discarded_without_client_and_new_client_replaces_old():
    # The agent echoes nothing until the test opens its gate (a file in the workspace), so
    # the echo of a's frame is made only once a has detached. With the probe agent, a test
    # process descheduled between a's send and a's close let the echo reach a before it
    # closed (seen once under load): nothing was then dropped and the wait below timed out.
    agent = os.path.join(_base(), "gate-agent")
    with open(agent, "w") as f:
        f.write(PROBE_AGENT.replace("exec cat", "while [ ! -e /workspace/gate ]; do sleep 0.05; "
                                                "done\nexec cat"))
    os.chmod(agent, 0o755)
    with Sandbox(agent=agent) as sb:
        a = sb.connect()
        a.sendall(frame(0, PING, 0, b"lost"))
        a.close()
        harness.wait_for(lambda: shim_log_has(sb, r"client \d+ detached: EOF"), 30,
                         what="the shim to see the first client leave")
        open(os.path.join(sb.ws, "gate"), "w").close()
        # Its echo arrives while nobody is attached: dropped (the HELLO at start was dropped
        # too, before any client, so the line must come after the detach).
        harness.wait_for(lambda: shim_log_has(sb, r"client \d+ detached:(.|\n)*no client: "
                                                  r"dropping"), 30,
                         what="the shim to drop the echo nobody was attached for")
        b = sb.connect()
        # The first frame b gets is the answer to its own: the echo from before it came is
        # gone.
        b.sendall(frame(0, PING, 0, b"mine"))
        assert recv_frame(b) == (0, PING, 0, b"mine"), "a frame from before it attached came"
        c = sb.connect()  # replaces b
        assert b.recv(100) == b"", "the old client was not disconnected"
        c.sendall(frame(0, PING, 0, b"c"))
        assert recv_frame(c) == (0, PING, 0, b"c")
        c.close()
        b.close()


def test_sandbox_shape_readonly_root_no_network_no_secrets():
    os.environ["SBX_SECRET_CANARY"] = "do-not-leak"
    try:
        with Sandbox() as sb:
            probe = os.path.join(sb.ws, "probe.txt")
            t = time.time() + 10
            while time.time() < t and "--mounts" not in (open(probe).read() if os.path.exists(probe) else ""):
                time.sleep(0.05)
            rep = open(probe).read()
    finally:
        del os.environ["SBX_SECRET_CANARY"]
    lines = dict((k, v.strip()) for k, v in (l.split(":", 1) for l in
                                              rep.split("--env")[0].splitlines() if ":" in l))
    assert lines["netdevs"].split() == ["lo"], "network devices: %r" % lines["netdevs"]
    assert lines["rootwrite"] == "no", "root filesystem is writable"
    assert lines["agentwrite"] == "no", "agent binary is writable"
    assert lines["tmpwrite"] == "yes"
    assert lines["hostname"] == "sbx"
    # Our 12 capabilities (gVisor shows no NoNewPrivs line; test_oci checks the flag).
    assert lines["CapEff"].strip() == "00000000a00405fb", lines["CapEff"]
    assert lines["CapBnd"].strip() == "00000000a00405fb", lines["CapBnd"]
    env = rep.split("--env")[1].split("--mounts")[0]
    assert "SBX_" not in env and "do-not-leak" not in env, env
    mounts = rep.split("--mounts")[1]
    tmp = [l for l in mounts.splitlines() if l.split()[1:2] == ["/tmp"]]
    assert tmp and "size=%d" % TMP in tmp[0], tmp
    ws = [l for l in mounts.splitlines() if l.split()[1:2] == ["/workspace"]]
    assert ws and " rw" in ws[0], ws


# The host pids cgroup is a ceiling for gVisor's own tasks (src/runtime/oci.h); the
# sandbox's process limit itself is RLIMIT_NPROC (tests/security/test_limits.py).
HOST_PIDS = PIDS * 128 + 256


def test_cgroup_limits_applied():
    with Sandbox() as sb:
        mode = _run(["cgmode"]).split()[1]
        assert _run(["memlimit", sb.id]) == "ok %d" % MEM
        if mode == "v2":
            assert _read(_cgroup_dir("", sb.id) + "/memory.max") == str(MEM)
            assert _read(_cgroup_dir("", sb.id) + "/pids.max") == str(HOST_PIDS)
            assert _read(_cgroup_dir("", sb.id) + "/cpu.max") == "%d 100000" % (MILLI * 100)
        else:
            assert _read(_cgroup_dir("memory", sb.id) + "/memory.limit_in_bytes") == str(MEM)
            assert _read(_cgroup_dir("pids", sb.id) + "/pids.max") == str(HOST_PIDS)
            assert _read(_cgroup_dir("cpu", sb.id) + "/cpu.cfs_quota_us") == str(MILLI * 100)
            assert _read(_cgroup_dir("cpu", sb.id) + "/cpu.cfs_period_us") == "100000"
            procs = _read(_cgroup_dir("memory", sb.id) + "/cgroup.procs").split()
            assert procs, "no process in the sandbox's memory cgroup"
        mem_dir = _cgroup_dir("memory", sb.id)
    t = time.time() + 10
    while os.path.exists(mem_dir) and time.time() < t:
        time.sleep(0.05)
    assert not os.path.exists(mem_dir), "cgroup %s left behind" % mem_dir


def test_memory_limit_enforced():
    """Filling a 300 MB tmpfs inside a 64 MiB sandbox gets it OOM-killed by the host."""
    agent = os.path.join(_base(), "mem-agent")
    with open(agent, "w") as f:
        f.write("#!/bin/sh\nprintf '\\000\\000\\000\\002\\000\\000\\000\\000\\001\\000\\000\\000{}'\n"
                "dd if=/dev/zero of=/tmp/big bs=1M count=300 >/workspace/dd.txt 2>&1\n"
                "echo \"rc $?\" >> /workspace/dd.txt\nexec cat\n")
    os.chmod(agent, 0o755)
    sb = Sandbox(agent=agent, mem=64 << 20, tmp=400 << 20).start()
    status = os.path.join(sb.state, "exit_status")
    t = time.time() + 15
    while time.time() < t and not os.path.exists(status):
        time.sleep(0.05)
    assert os.path.exists(status), "a 64 MiB sandbox survived writing 300 MB to its tmpfs"
    assert _read(status) == "137", "exit status %s" % _read(status)
    sb.destroy()
    sb.wait_gone()


def _template_rootfs():
    cache = os.environ.get("SBX_TEMPLATE_CACHE", "/var/cache/sbx/templates")
    r = os.path.join(cache, "base", "rootfs")
    return r if os.path.isdir(r) else None


def test_template_with_real_agent_exec():
    agent, rootfs = _real_agent(), _template_rootfs()
    if not agent or not rootfs:
        raise harness.Skip("needs sbx-agent (%s) and the base template (%s)" % (agent, rootfs))
    with Sandbox(agent=agent, rootfs=rootfs) as sb:
        s = sb.connect()
        s.sendall(frame(0, HELLO, 0, json.dumps({"version": 1, "role": "daemon"}).encode()))
        assert recv_frame(s)[1] == HELLO
        req = {"op": "exec", "argv": ["/bin/sh", "-c",
                                      "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "
                                      "python3 -c 'print(6*7)'; "
                                      "touch /x 2>/dev/null || echo ro"],
               "cwd": "/workspace", "timeout_ms": 20000, "stdin": False}
        s.sendall(frame(1, OPEN, 0, json.dumps(req).encode()))
        out, result = b"", None
        while result is None:
            stream, typ, flags, payload = recv_frame(s)
            if typ == DATA and flags == 1:
                out += payload
            elif typ in (EXIT, ERROR):
                result = (typ, json.loads(payload))
        assert result[0] == EXIT and result[1].get("exit_code") == 0, result
        assert out.decode().split() == ["lo", "42", "ro"], out
        s.close()


def assert_relays(sb, payload):
    """A PING through the shim comes back from the agent."""
    s = sb.connect()
    s.sendall(frame(0, PING, 0, payload))
    assert recv_frame(s) == (0, PING, 0, payload)
    s.close()


def test_detached_survives_kill9_of_starter():
    sb = Sandbox()
    try:
        cmd = [_driver(), "--runsc-root", os.path.join(_base(), "runsc"), "--shim", _shim(),
               "--cgroup-parent", CGROUP_PARENT] + sb.start_args()
        # The starter: rt_start, then linger; it and its whole group get SIGKILL.
        starter = subprocess.Popen(["sh", "-c", '"$@"; echo done; sleep 60', "sh"] + cmd,
                                   stdout=subprocess.PIPE, text=True, start_new_session=True)
        first = starter.stdout.readline()
        assert first.startswith("ok"), first
        shim = sb.shim_pid()
        with open("/proc/%d/stat" % shim) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ppid, sid = int(fields[1]), int(fields[3])
        assert ppid != starter.pid and sid != os.getsid(starter.pid), (ppid, sid)
        os.killpg(starter.pid, signal.SIGKILL)
        starter.wait()
        time.sleep(0.3)
        assert sb.alive(), "the shim died with its starter"
        assert_relays(sb, b"still here")
    finally:
        sb.__exit__()


def test_an_idle_sandbox_costs_its_sandbox_and_gofer_processes_and_no_runsc_run():
    sb = Sandbox().start()
    try:
        shim = sb.shim_pid()
        kids = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % d) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if int(fields[1]) == shim:
                kids[int(d)] = [a.decode(errors="replace") for a in argv if a]
        # `runsc run --detach` has exited; what it started is the shim's (a subreaper).
        assert not [a for a in kids.values() if "run" in a or "restore" in a], kids
        roles = sorted("gofer" if "gofer" in a else "boot" if "boot" in a else " ".join(a)
                       for a in kids.values())
        assert roles == ["boot", "gofer"], kids
        boot = [p for p, a in kids.items() if "boot" in a]
        assert boot == [int(_read(os.path.join(sb.state, "sandbox.pid")))], (boot, kids)
        assert_relays(sb, b"relayed")
    finally:
        sb.__exit__()


def test_destroy_cleans_everything():
    # How long rt_destroy takes is bench/bench_runtime.py's; here, what it leaves.
    sb = Sandbox().start()
    shim = sb.shim_pid()
    sb.destroy()
    sb.wait_gone()
    t = time.time() + 30
    while _pid_running(shim) and time.time() < t:  # it removes the dir last, then exits
        time.sleep(0.02)
    assert not _pid_running(shim), "the shim is still running"
    assert sb.id not in _run(["list"]).split()[1:]
    assert not os.path.exists(_cgroup_dir("memory", sb.id))
    ps = subprocess.run(["pgrep", "-f", "runsc.* %s$" % sb.id], capture_output=True, text=True)
    assert ps.stdout.strip() == "", "runsc processes left: %s" % ps.stdout


def test_destroy_without_shim_uses_helper():
    # The probe agent would end on stdin EOF when the shim dies; this one lingers, as
    # a stuck sandbox would.
    agent = os.path.join(_base(), "linger-agent")
    with open(agent, "w") as f:
        f.write(PROBE_AGENT.replace("exec cat", "cat; exec sleep 100000"))
    os.chmod(agent, 0o755)
    sb = Sandbox(agent=agent).start()
    os.kill(sb.shim_pid(), signal.SIGKILL)
    # Gone once the kernel has ended it: waited for, not slept on.
    t = time.time() + 10
    while sb.alive() and time.time() < t:
        time.sleep(0.05)
    assert not sb.alive(), "the killed shim still counts as alive"
    assert _container_exists(sb.id), "runsc container vanished with the shim"
    sb.destroy()
    sb.wait_gone()
    assert not os.path.exists(_cgroup_dir("memory", sb.id))


def test_runsc_exit_writes_status_and_keeps_dir():
    agent = os.path.join(_base(), "exit-agent")
    with open(agent, "w") as f:
        f.write("#!/bin/sh\nprintf '\\000\\000\\000\\002\\000\\000\\000\\000\\001\\000\\000\\000{}'\n"
                "read x\nexit 3\n")
    os.chmod(agent, 0o755)
    sb = Sandbox(agent=agent).start()
    s = sb.connect()
    s.sendall(b"\n")  # not a frame: the shim holds it back; close so the agent's read ends
    s.close()
    # Nothing reaches the agent, so end it via stdin EOF? It has none; kill it from the host.
    subprocess.run(["runsc", "--root", os.path.join(_base(), "runsc"), "kill", sb.id, "TERM"],
                   capture_output=True)
    t = time.time() + 10
    status = os.path.join(sb.state, "exit_status")
    while time.time() < t and (sb.alive() or not os.path.exists(status)):
        time.sleep(0.05)
    assert os.path.exists(status), "no exit_status"
    assert _read(status) in ("143", "3"), _read(status)
    assert os.path.isdir(sb.ws), "the directory was removed without a destroy"
    t = time.time() + 10
    while time.time() < t and _container_exists(sb.id):
        time.sleep(0.05)
    assert not _container_exists(sb.id), "runsc container not deleted after exit"
    # The delete itself succeeded: it waits for the gofer, which the shim must have reaped
    # (a zombie gofer held it to its own timeout and it failed with 128).
    deletes = [l for l in _read(os.path.join(sb.state, "shim.log")).splitlines()
               if "runsc delete:" in l]
    assert deletes and all("runsc delete: exit 0 " in l for l in deletes), deletes
    sb.destroy()
    sb.wait_gone()


def test_start_failure_reports_runsc_log():
    sb = Sandbox(rootfs="/nonexistent/rootfs")
    out = _run(sb.start_args(), check=False)
    assert out.startswith("error"), out
    assert "runsc" in out and len(out) > 60, out
    assert not sb.alive()
    # runsc created the cgroup before failing and `runsc delete` cannot find it; the shim
    # removes it after the delete.
    cg = _cgroup_dir("memory", sb.id)
    t = time.time() + 10
    while os.path.exists(cg) and time.time() < t:
        time.sleep(0.05)
    assert not os.path.exists(cg), "cgroup %s left behind by a failed start" % cg
    shutil.rmtree(sb.dir, ignore_errors=True)


def test_real_agent_hello():
    agent = _real_agent()
    if not agent:
        raise harness.Skip("no sbx-agent in %s" % _build_dir())
    with Sandbox(agent=agent) as sb:
        s = sb.connect()
        s.sendall(frame(0, HELLO, 0, json.dumps({"version": 1, "role": "daemon"}).encode()))
        stream, typ, _, payload = recv_frame(s)
        assert (stream, typ) == (0, HELLO), (stream, typ, payload)
        hello = json.loads(payload)
        assert hello.get("role") == "agent" and hello.get("version") == 1, hello
        s.sendall(frame(0, PING, 0, b"p"))
        assert recv_frame(s) == (0, PONG, 0, b"p")
        s.close()


def teardown_module():
    base = _state.get("base")
    if not base:
        return
    for d in glob.glob(os.path.join(base, "sandboxes", "*")):
        sid = os.path.basename(d)
        try:
            _run(["destroy", sid, os.path.join(d, "state"), d], check=False)
        except Exception:
            pass
    t = time.time() + 15
    while time.time() < t and glob.glob(os.path.join(base, "sandboxes", "*")):
        time.sleep(0.1)
    shutil.rmtree(base, ignore_errors=True)
    for d in glob.glob("/sys/fs/cgroup/*/%s" % CGROUP_PARENT) + ["/sys/fs/cgroup/" + CGROUP_PARENT]:
        try:
            os.rmdir(d)  # the empty parent runsc leaves behind
        except OSError:
            pass
    _state.clear()


def main():
    passed = failed = skipped = 0
    tests = [(n, f) for n, f in globals().items() if n.startswith("test_") and callable(f)]
    only = sys.argv[1:]
    try:
        for name, fn in tests:
            if only and not any(o in name for o in only):
                continue
            t0 = time.time()
            try:
                fn()
                passed += 1
                print("PASS %s (%.1fs)" % (name, time.time() - t0), flush=True)
            except harness.Skip as e:
                skipped += 1
                print("SKIP %s: %s" % (name, e), flush=True)
            except Exception as e:  # AssertionError and anything unexpected
                failed += 1
                print("FAIL %s: %s: %s" % (name, type(e).__name__, e), flush=True)
    finally:
        teardown_module()
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
