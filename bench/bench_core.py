"""Core latencies of sbxd against the runtime floor, measured in the same run.

  create   POST /v1/sandboxes until 201 (the daemon answers only once the agent is
           exec-ready)                      vs  `runsc run` of the base template's /bin/true
  exec     POST /v1/sandboxes/{id}/exec `true` round trip, back to back
                                            vs  `runsc exec <id> /bin/true` on a running container
  paced    the same with 0.2 s between commands (an agent reading each result before the
           next): the session's next bash is ready by then (docs/sessions.md, "The spare
           shell")                          vs  the same `runsc exec`

The baseline uses the same runsc binary, the same template root filesystem (read-only)
and the same global runsc flags as the daemon's own runsc processes (read from their
command lines while a sandbox runs), so the ratio is what sbx adds on top of gVisor.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import harness  # noqa: E402

# The pause between paced commands.
PACE_S = 0.2

# Global runsc flags that are about where state and logs go, not about how it runs.
_PRIVATE_FLAGS = ("--root", "-root", "--log", "-log", "--debug-log", "-debug-log",
                  "--panic-log", "-panic-log", "--log-format", "-log-format")


def percentile(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def _cmdlines():
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
            except OSError:
                continue
            yield argv


# The global flags sbx-shim gives `runsc run` (src/runtime/shim.c, SBX_RUNSC_PLATFORM's
# default): a baseline runs the same sandbox when the daemon's own cannot be read.
RUNSC_FLAGS = ["--network=none", "--overlay2=none", "--platform=systrap"]


def daemon_runsc_flags(sid):
    """The global flags of the daemon's `runsc ... run ... <sid>` process (minus the state
    and log locations), or None when it cannot be found."""
    for argv in _cmdlines():
        if not argv or "runsc" not in os.path.basename(argv[0]) or sid not in argv:
            continue
        flags = []
        i = 1
        while i < len(argv) and argv[i].startswith("-"):
            a = argv[i]
            name = a.split("=", 1)[0]
            takes_value = "=" not in a and i + 1 < len(argv) and not argv[i + 1].startswith("-") \
                and argv[i + 1] not in ("run", "create", "start")
            if name in _PRIVATE_FLAGS:
                i += 2 if takes_value else 1
                continue
            flags.append(a)
            if takes_value:
                flags.append(argv[i + 1])
                i += 1
            i += 1
        if i < len(argv) and argv[i] == "run":
            return flags
    return None


def template_rootfs():
    cache = os.environ.get("SBX_TEMPLATE_CACHE", "/var/cache/sbx/templates")
    p = os.path.join(cache, "base", "rootfs")
    if not os.path.isdir(p):
        raise SystemExit("no base template at %s (run scripts/build-template.sh base)" % p)
    return os.path.realpath(p)


def _timed(argv, detached=False):
    # A detached container inherits our stdio: give it none, or we would wait for its end.
    out = subprocess.DEVNULL if detached else subprocess.PIPE
    t0 = time.perf_counter()
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, timeout=120)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(argv), p.returncode,
                                                     (p.stdout or b"").decode()[-2000:]))
    return dt


def _bundle(dirpath, rootfs, args):
    os.makedirs(dirpath, exist_ok=True)
    subprocess.run(["runsc", "spec", "--bundle", dirpath, "--"] + args, check=True,
                   stdout=subprocess.DEVNULL)
    cfg_path = os.path.join(dirpath, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["root"] = {"path": rootfs, "readonly": True}
    cfg["process"]["terminal"] = False
    cfg["process"]["cwd"] = "/"
    cfg["hostname"] = "sandbox"
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    return dirpath


def bench_runsc(n, flags, runsc="runsc"):
    """`runsc run` of /bin/true and `runsc exec /bin/true`, n times each."""
    rootfs = template_rootfs()
    tmp = tempfile.mkdtemp(prefix="sbx-bench-runsc-")
    root = os.path.join(tmp, "root")
    os.makedirs(root)
    base = [runsc, "--root", root] + flags
    run_t, exec_t = [], []
    cid = "sbxbench-exec-%d" % os.getpid()
    try:
        b_true = _bundle(os.path.join(tmp, "true"), rootfs, ["/bin/true"])
        for i in range(n + 1):
            dt = _timed(base + ["run", "--bundle", b_true, "sbxbench-run-%d-%d" % (os.getpid(), i)])
            if i:  # the first run warms caches; not counted
                run_t.append(dt)
        b_sleep = _bundle(os.path.join(tmp, "sleep"), rootfs, ["/bin/sleep", "100000"])
        _timed(base + ["run", "--detach", "--bundle", b_sleep, cid], detached=True)
        for i in range(n + 1):
            dt = _timed(base + ["exec", cid, "/bin/true"])
            if i:
                exec_t.append(dt)
    finally:
        subprocess.run(base + ["kill", cid, "KILL"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        subprocess.run(base + ["delete", "--force", cid], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)
    return run_t, exec_t


def bench_daemon(build, n, extra_env=None, body=None, on_created=None):
    """Creates (each followed by a delete) and `true` execs through a real sbxd. body: more
    create fields; on_created(daemon, sandbox id) runs after each timed create."""
    create_t, exec_t, paced_t = [], [], []
    flags = None
    body = dict(body or {}, ttl_seconds=600)
    with harness.Daemon(build=build, extra_env=extra_env) as d:
        c = d.client(d.client().create_key("bench", "member", "sandbox")["key"])
        # Warm-up (template lookup, first runsc start), also used for the exec loop.
        sb = c.create_sandbox(**dict(body, ttl_seconds=3600))
        flags = daemon_runsc_flags(sb["id"])
        for _ in range(n):
            t0 = time.perf_counter()
            r = c.request("POST", "/v1/sandboxes", body, timeout=120)
            dt = time.perf_counter() - t0
            if r.status != 201:
                raise RuntimeError("create: %r" % r)
            create_t.append(dt)
            if on_created:
                on_created(d, r.body["id"])
            c.delete_sandbox(r.body["id"])
        path = "/v1/sandboxes/%s/exec" % sb["id"]
        c.request("POST", path, {"shell": "true"})
        for pause, out in ((0, exec_t), (PACE_S, paced_t)):
            for _ in range(n):
                time.sleep(pause)
                t0 = time.perf_counter()
                r = c.request("POST", path, {"shell": "true"})
                dt = time.perf_counter() - t0
                if r.status != 200 or r.body.get("exit_code") != 0:
                    raise RuntimeError("exec: %r" % r)
                out.append(dt)
        c.delete_sandbox(sb["id"])
    return create_t, exec_t, paced_t, flags


def run(build, n=50):
    """Returns (rows, notes): rows of (operation, sbx samples, baseline name, baseline samples)."""
    notes = []
    create_t, exec_t, paced_t, flags = bench_daemon(build, n)
    if flags is None:
        flags = RUNSC_FLAGS
        notes.append("could not read the daemon's runsc flags; baseline uses %s" % flags)
    else:
        notes.append("baseline runsc flags (copied from the daemon's runsc): %s"
                     % (" ".join(flags) or "(none)"))
    run_t, rexec_t = bench_runsc(n, flags)
    rows = [
        ("create (POST until 201, exec-ready)", create_t, "runsc run /bin/true", run_t),
        ("exec `true` round trip", exec_t, "runsc exec /bin/true", rexec_t),
        ("exec `true`, 0.2 s apart", paced_t, "runsc exec /bin/true", rexec_t),
    ]
    return rows, notes
