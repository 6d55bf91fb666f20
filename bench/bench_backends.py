"""Execution backends (docs/runtime.md): create and `true` exec round trips on namespaces
and gVisor through one sbxd, beside `bwrap --unshare-all true`, `runsc run /bin/true` and
`runsc exec` measured in the same run on the same template.

  create             POST /v1/sandboxes until 201 (the agent has said HELLO: exec-ready)
  spawn -> HELLO     the shim's own figure (shim.log): container started to the agent's
                     first frame, without the daemon's record, workspace and HTTP
  exec `true`        POST /v1/sandboxes/{id}/exec {"shell": "true"} until 200, beside host
                     fork+exec of true and the command itself (bash -c true in the template's
                     root, chrooted)

    python3 bench/bench_backends.py [--build build] [-n 50]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_core  # noqa: E402

ENV = {"SBX_BACKEND": "namespaces,gvisor", "SBX_MAX_PER_KEY": "20", "SBX_MAX_PER_USER": "20"}
HELLO_RE = re.compile(r"first frame from the agent \(type \d+\) (\d+) ms after spawning")


def _spawn_ms(d, sid):
    try:
        with open(os.path.join(d.sandbox_dir(sid), "state", "shim.log")) as f:
            m = HELLO_RE.search(f.read())
    except OSError:
        return None
    return int(m.group(1)) / 1000.0 if m else None


def bench_daemon(build, n, runtime):
    spawn_t = []

    def spawn(d, sid):
        s = _spawn_ms(d, sid)
        if s is not None:
            spawn_t.append(s)

    create_t, exec_t, _, _ = bench_core.bench_daemon(build, n, ENV, {"runtime": runtime}, spawn)
    return create_t, spawn_t, exec_t


def bench_bwrap(n):
    rootfs = bench_core.template_rootfs()
    argv = ["bwrap", "--unshare-all", "--ro-bind", rootfs, "/", "--proc", "/proc",
            "--dev", "/dev", "--die-with-parent", "true"]
    bench_core._timed(argv)
    return [bench_core._timed(argv) for _ in range(n)]


def bench_host_true(n):
    bench_core._timed(["true"])
    return [bench_core._timed(["true"]) for _ in range(n)]


def bench_host_bash(n):
    """What the exec API runs for {"shell": "true"} (/bin/bash -c true, with the agent's
    LANG), on the host in the template's root: the command's own floor."""
    rootfs = bench_core.template_rootfs()
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}

    def enter():
        os.chroot(rootfs)
        os.chdir("/")

    def once():
        t0 = time.perf_counter()
        subprocess.run(["/bin/bash", "-c", "true"], env=env, preexec_fn=enter, check=True,
                       stdin=subprocess.DEVNULL)
        return time.perf_counter() - t0

    once()
    return [once() for _ in range(n)]


def run(build, n=50):
    notes = []
    ns_create, ns_spawn, ns_exec = bench_daemon(build, n, "namespaces")
    gv_create, gv_spawn, gv_exec = bench_daemon(build, n, "gvisor")
    if not shutil.which("bwrap"):
        raise SystemExit("bwrap is not installed (scripts/deps.sh installs bubblewrap)")
    bwrap_t = bench_bwrap(n)
    host_t = bench_host_true(n)
    bash_t = bench_host_bash(n)
    run_t, rexec_t = bench_core.bench_runsc(n, bench_core.RUNSC_FLAGS)
    rows = [
        ("create, namespaces", ns_create, "bwrap --unshare-all true", bwrap_t),
        ("spawn -> HELLO, namespaces", ns_spawn, "bwrap --unshare-all true", bwrap_t),
        ("exec `true`, namespaces", ns_exec, "host fork+exec true", host_t),
        ("exec `true`, namespaces", ns_exec, "host chroot bash -c true", bash_t),
        ("create, gvisor", gv_create, "runsc run /bin/true", run_t),
        ("spawn -> HELLO, gvisor", gv_spawn, "runsc run /bin/true", run_t),
        ("exec `true`, gvisor", gv_exec, "runsc exec /bin/true", rexec_t),
    ]
    p = bench_core.percentile
    notes.append("targets (issue 21): namespaces create p50 <= 15 ms (measured %.1f), exec "
                 "`true` p50 <= 3 ms (measured %.1f)" % (p(ns_create, 50) * 1000,
                                                         p(ns_exec, 50) * 1000))
    notes.append("spawn -> HELLO comes from shim.log, whole milliseconds")
    return rows, notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("-n", type=int, default=50)
    args = ap.parse_args()
    build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
    rows, notes = run(build, args.n)
    p = bench_core.percentile
    head = "%-30s %8s %8s   %-26s %8s %8s   %7s %7s" % (
        "operation (sbx)", "p50 ms", "p95 ms", "baseline", "p50 ms", "p95 ms", "x p50", "x p95")
    print(head)
    print("-" * len(head))
    for name, xs, bname, bs in rows:
        s50, s95, b50, b95 = p(xs, 50), p(xs, 95), p(bs, 50), p(bs, 95)
        print("%-30s %8.1f %8.1f   %-26s %8.1f %8.1f   %7.2f %7.2f" % (
            name, s50 * 1000, s95 * 1000, bname, b50 * 1000, b95 * 1000, s50 / b50, s95 / b95))
    for note in notes:
        print("note: " + note)


if __name__ == "__main__":
    main()
