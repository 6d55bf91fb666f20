"""Exec `true` in the default session, builds side by side, with `runsc exec` in each round.

    python3 bench/bench_exec_ab.py [-n 20] [-k 1] BUILD [BUILD ...]

One daemon and one sandbox per build. Each round runs -k execs on every build in turn, then
one `runsc exec /bin/true` (the bench_core baseline), so a loaded machine weighs on every
column alike. With -k 1 each sandbox rests while the others take their turn (an agent that
reads each result before the next command); with -k 5 most execs come back to back.
Not part of the tests.
"""

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import bench_core  # noqa: E402
import harness  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=20, help="rounds (default 20)")
    ap.add_argument("-k", type=int, default=1, help="execs per build per round (default 1)")
    ap.add_argument("builds", nargs="+", help="build dirs with sbxd")
    args = ap.parse_args()
    p = bench_core.percentile
    with contextlib.ExitStack() as es:
        targets, flags = [], None
        for b in args.builds:
            b = b if os.path.isabs(b) else os.path.join(REPO, b)
            d = es.enter_context(harness.Daemon(build=b))
            c = d.client(d.client().create_key("bench", "member", "sandbox")["key"])
            sb = c.create_sandbox(ttl_seconds=3600)
            flags = flags or bench_core.daemon_runsc_flags(sb["id"]) or bench_core.RUNSC_FLAGS
            path = "/v1/sandboxes/%s/exec" % sb["id"]
            for _ in range(3):  # page-ins
                c.request("POST", path, {"shell": "true"})
            targets.append((b, c, path, []))
        tmp = tempfile.mkdtemp(prefix="sbx-bench-ab-")
        es.callback(shutil.rmtree, tmp, True)
        root = os.path.join(tmp, "root")
        os.makedirs(root)
        base = ["runsc", "--root", root] + flags
        cid = "sbxbench-ab-%d" % os.getpid()
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        es.callback(subprocess.run, base + ["delete", "--force", cid], **quiet)
        es.callback(subprocess.run, base + ["kill", cid, "KILL"], **quiet)
        bundle = bench_core._bundle(os.path.join(tmp, "sleep"), bench_core.template_rootfs(),
                                    ["/bin/sleep", "100000"])
        bench_core._timed(base + ["run", "--detach", "--bundle", bundle, cid], detached=True)
        bench_core._timed(base + ["exec", cid, "/bin/true"])
        runsc = []
        for _ in range(args.n):
            for _b, c, path, xs in targets:
                for _ in range(args.k):
                    t0 = time.perf_counter()
                    r = c.request("POST", path, {"shell": "true"})
                    xs.append(time.perf_counter() - t0)
                    if r.status != 200 or r.body.get("exit_code") != 0:
                        raise RuntimeError("exec: %r" % r)
            runsc.append(bench_core._timed(base + ["exec", cid, "/bin/true"]))
    b50 = p(runsc, 50)
    print("runsc exec /bin/true  p50 %.1f ms  p95 %.1f ms  (load %.1f)"
          % (b50 * 1e3, p(runsc, 95) * 1e3, os.getloadavg()[0]))
    for b, _c, _path, xs in targets:
        print("  %-40s p50 %6.1f ms  p95 %6.1f ms  x%.2f" % (b, p(xs, 50) * 1e3, p(xs, 95) * 1e3,
                                                             p(xs, 50) / b50))


if __name__ == "__main__":
    main()
