"""Templates and warm starts (docs/templates.md), all measured in the same run:

  create, warm pool   POST /v1/sandboxes served by SBX_WARM_POOL=base:N (the pool is
                      refilled, untimed, before each create)
  create, cold        POST /v1/sandboxes on a daemon without a pool (boots gVisor)
  runsc run           `runsc run /bin/true` on the base template (bench_core's baseline)
  office              create of office cold vs restored from its warm snapshot
                      (SBX_WARM_SNAPSHOT=office), and in each sandbox the first and the next
                      `soffice --convert-to pdf` of a small CSV

    python3 bench/bench_templates.py [--build build] [-n 20]

Not part of the tests. Needs root, runsc, and the base and office templates built.
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import bench_core  # noqa: E402
import harness  # noqa: E402

POOL = 2


def _pool_ready(c, n):
    deadline = time.time() + 300
    while time.time() < deadline:
        for t in c.ok("GET", "/v1/templates")["data"]:
            if t["name"] == "base" and t["pool"]["ready"] >= n:
                return
        time.sleep(0.05)
    raise RuntimeError("the warm pool did not fill")


def _creates(build, n, pool):
    env = {"SBX_WARM_POOL": "base:%d" % POOL} if pool else {}
    times = []
    with harness.Daemon(build=build, extra_env=env) as d:
        c = d.client(d.client().create_key("bench", "member", "sandbox")["key"])
        c.delete_sandbox(c.create_sandbox(ttl_seconds=600)["id"])  # warm-up, not counted
        for _ in range(n):
            if pool:
                _pool_ready(c, POOL)
            t0 = time.perf_counter()
            r = c.request("POST", "/v1/sandboxes", {"ttl_seconds": 600}, timeout=120)
            dt = time.perf_counter() - t0
            if r.status != 201 or bool(r.body.get("from_pool")) != pool:
                raise RuntimeError("create: %r" % r)
            times.append(dt)
            c.delete_sandbox(r.body["id"])
    return times


CONVERT = ("cd /workspace && printf 'a,b\\nș,ț\\n' > t%d.csv && "
           "soffice --headless --convert-to pdf --outdir out t%d.csv >/dev/null 2>&1 && "
           "test -s out/t%d.pdf")


def _office(build, n, warm):
    """Creates of office and two conversions in each, cold or from the warm snapshot."""
    env = {"SBX_WARM_SNAPSHOT": "office"} if warm else {}
    create, first, later = [], [], []
    with harness.Daemon(build=build, extra_env=env) as d:
        c = d.client()
        deadline = time.time() + 300
        while warm:
            t = [t for t in c.ok("GET", "/v1/templates")["data"] if t["name"] == "office"][0]
            if t["warm_snapshot"] == "ready":
                break
            if t["warm_snapshot"] == "failed" or time.time() > deadline:
                raise RuntimeError("office's warm snapshot: %s" % t["warm_snapshot"])
            time.sleep(0.2)
        for i in range(n):
            t0 = time.perf_counter()
            sb = c.create_sandbox(template="office", ttl_seconds=600)
            create.append(time.perf_counter() - t0)
            if bool(sb.get("restored")) != warm:
                raise RuntimeError("create: %r" % sb)
            for k in range(2):
                t0 = time.perf_counter()
                r = c.exec(sb["id"], shell=CONVERT % (k, k, k), timeout_seconds=300)
                dt = time.perf_counter() - t0
                if r["exit_code"] != 0:
                    raise RuntimeError("soffice: %r" % r)
                (first if k == 0 else later).append(dt)
            c.delete_sandbox(sb["id"])
    return create, first, later


def main():
    ap = argparse.ArgumentParser(description="sbx templates benchmark")
    ap.add_argument("--build", default="build")
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--office-runs", type=int, default=3)
    args = ap.parse_args()
    build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
    os.environ["SBX_BUILD"] = build
    warm = _creates(build, args.n, True)
    cold = _creates(build, args.n, False)
    run_t, _ = bench_core.bench_runsc(args.n, bench_core.RUNSC_FLAGS)
    oc_create, oc_first, oc_later = _office(build, args.office_runs, False)
    ow_create, ow_first, ow_later = _office(build, args.office_runs, True)
    p = bench_core.percentile
    print("%-40s %8s %8s %8s" % ("operation", "p50 ms", "p95 ms", "x p50"))
    base50 = p(run_t, 50)
    for name, xs in (("create base, warm pool (base:%d)" % POOL, warm), ("create base, cold", cold),
                     ("runsc run /bin/true", run_t),
                     ("create office, cold", oc_create),
                     ("create office, warm snapshot", ow_create),
                     ("office cold: first soffice convert", oc_first),
                     ("office cold: next soffice convert", oc_later),
                     ("office warm: first soffice convert", ow_first),
                     ("office warm: next soffice convert", ow_later)):
        print("%-40s %8.1f %8.1f %8.2f" % (name, p(xs, 50) * 1000, p(xs, 95) * 1000,
                                           p(xs, 50) / base50))
    print("x p50: ratio to runsc run /bin/true; cold/warm-pool create p50 = %.1f; first "
          "convert cold/warm p50 = %.2f" % (p(cold, 50) / p(warm, 50),
                                            p(oc_first, 50) / p(ow_first, 50)))


if __name__ == "__main__":
    main()
