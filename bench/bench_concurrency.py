"""Concurrent execs beside concurrent `runsc exec`, measured in the same run.

  15 clients x 15 sandboxes   each client its own thread, own sandbox, POST /exec `echo`
                              back to back; every answer must be 200 with exit 0 and the
                              echoed text (any other answer is counted as an error)
          vs  15 threads running `runsc exec <container> /bin/echo` back to back on 15
              containers of the same template with the daemon's runsc flags

Printed: execs per second, p50 and p99 latency of each side, errors.

    python3 bench/bench_concurrency.py --build build [--clients 15] [-n 20]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import bench_core  # noqa: E402
import harness  # noqa: E402


def _parallel(k, n, one):
    """k threads calling one(i) n times each: (latencies, errors, wall seconds)."""
    lat, errors = [], []
    lock = threading.Lock()

    def worker(i):
        for _ in range(n):
            t0 = time.perf_counter()
            try:
                one(i)
                ok = None
            except Exception as e:  # counted, never hidden
                ok = repr(e)[:200]
            dt = time.perf_counter() - t0
            with lock:
                lat.append(dt)
                if ok:
                    errors.append(ok)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(k)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, errors, time.perf_counter() - t0


def bench_sbx(build, k, n):
    with harness.Daemon(build=build) as d:
        admin = d.client()
        # A key may run only a few sandboxes at once: one user and key per client.
        clients = [d.client(admin.create_key("bench%d" % i, "member", "sandbox")["key"])
                   for i in range(k)]
        sids = [clients[i].create_sandbox(ttl_seconds=3600)["id"] for i in range(k)]
        flags = bench_core.daemon_runsc_flags(sids[0])

        def one(i):
            r = clients[i].request("POST", "/v1/sandboxes/%s/exec" % sids[i],
                                   {"shell": "echo hello-%d" % i}, timeout=120)
            if r.status != 200 or r.body.get("exit_code") != 0 or \
                    r.body.get("stdout") != "hello-%d\n" % i:
                raise RuntimeError("exec: %d %r" % (r.status, r.body))

        for i in range(k):
            one(i)  # warm: first exec of each sandbox
        lat, errors, wall = _parallel(k, n, one)
        for i in range(k):
            clients[i].delete_sandbox(sids[i])
    return lat, errors, wall, flags


def bench_runsc(k, n, flags):
    rootfs = bench_core.template_rootfs()
    tmp = tempfile.mkdtemp(prefix="sbx-bench-conc-")
    root = os.path.join(tmp, "root")
    os.makedirs(root)
    base = ["runsc", "--root", root] + flags
    cids = ["sbxconc-%d-%03d" % (os.getpid(), i) for i in range(k)]  # runsc takes id prefixes
    try:
        b = bench_core._bundle(os.path.join(tmp, "sleep"), rootfs, ["/bin/sleep", "100000"])
        for cid in cids:
            bench_core._timed(base + ["run", "--detach", "--bundle", b, cid], detached=True)

        def one(i):
            p = subprocess.run(base + ["exec", cids[i], "/bin/echo", "hello-%d" % i],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
            if p.returncode != 0 or p.stdout != b"hello-%d\n" % i:
                raise RuntimeError("runsc exec: %d %r" % (p.returncode, p.stderr[-300:]))

        for i in range(k):
            one(i)
        return _parallel(k, n, one)
    finally:
        for cid in cids:
            subprocess.run(base + ["kill", cid, "KILL"], capture_output=True)
            subprocess.run(base + ["delete", "--force", cid], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def run(build, k=15, n=20):
    """Returns printable lines."""
    lat, errors, wall, flags = bench_sbx(build, k, n)
    blat, berrors, bwall = bench_runsc(k, n, flags or bench_core.RUNSC_FLAGS)
    p = bench_core.percentile
    tput, btput = len(lat) / wall, len(blat) / bwall
    head = "%-34s %8s %8s %8s %6s   %-26s %8s %8s %8s %6s   %7s" % (
        "concurrency (sbx)", "exec/s", "p50 ms", "p99 ms", "errors", "baseline", "exec/s",
        "p50 ms", "p99 ms", "errors", "x tput")
    lines = [head, "-" * len(head), "%-34s %8.1f %8.1f %8.1f %6d   %-26s %8.1f %8.1f %8.1f %6d   %7.2f" % (
        "%d clients x %d sandboxes, echo" % (k, k), tput, p(lat, 50) * 1e3, p(lat, 99) * 1e3,
        len(errors), "%d x runsc exec echo" % k, btput, p(blat, 50) * 1e3, p(blat, 99) * 1e3,
        len(berrors), tput / btput)]
    lines.append("note: concurrency: %d execs per client; x tput = sbx execs/s over runsc's" % n)
    for e in (errors + berrors)[:5]:
        lines.append("note: error: " + e)
    return lines


def main():
    ap = argparse.ArgumentParser(description="sbx concurrency benchmark")
    ap.add_argument("--build", default="build")
    ap.add_argument("--clients", type=int, default=15)
    ap.add_argument("-n", type=int, default=20, help="execs per client (default 20)")
    args = ap.parse_args()
    build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
    os.environ["SBX_BUILD"] = build
    for line in run(build, args.clients, args.n):
        print(line)


if __name__ == "__main__":
    main()
