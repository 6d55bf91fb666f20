#!/usr/bin/env python3
"""What a hop between nodes costs: a request served by the node that runs the sandbox (the
baseline) against the same request sent to another node, which relays it (docs/scale-out.md).

    python3 bench/bench_nodes.py --build build [-n 60] [--mb 50]

Two sbxd on one throwaway PostgreSQL on 127.0.0.1 (scripts/pg.sh, fsync off), one sandbox on
node-b. Interleaved, direct then relayed: exec `true` (blocking), an SSE exec's time to its
first event, GET of a small file, and a download of --mb MB. Prints medians, and each relayed
figure over its direct one (MB/s for the download: relayed over direct). Not part of the tests.
"""

import argparse
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import harness  # noqa: E402

KEYS = ("cluster.key", "secrets.key", "audit-anchor.key", "artifact-link.key", "preview-link.key")


def node(build, url, name, admin=None, keys_from=None):
    d = harness.Daemon(admin_key=admin or "generate", build=build,
                       extra_env={"SBX_STORE": url, "SBX_NODE_ID": name})
    if keys_from:
        os.makedirs(d.data_dir, mode=0o700, exist_ok=True)
        for k in KEYS:
            shutil.copy2(os.path.join(keys_from, k), d.data_dir)
    return d.start()


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def first_event(c, sid):
    t0 = time.perf_counter()
    it = c.stream("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "echo x"})
    head = next(it)
    assert head.status == 200, head
    next(it)
    dt = time.perf_counter() - t0
    for _ in it:
        pass
    return dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("-n", type=int, default=60)
    ap.add_argument("--mb", type=int, default=50)
    args = ap.parse_args()
    build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
    pg, url = harness.pg_start("sbx-bench-pg-")
    ds = []
    try:
        a = node(build, url, "node-a")
        ds.append(a)
        b = node(build, url, "node-b", admin=a.admin_key, keys_from=a.data_dir)
        ds.append(b)
        key = a.client().create_key("bench")["key"]
        on_b, via_a = b.client(key), a.client(key)
        sid = on_b.create_sandbox(ttl_seconds=1800)["id"]
        assert via_a.get_sandbox(sid)["node"] == "node-b"
        on_b.ok("POST", "/v1/sandboxes/%s/exec" % sid,
                {"shell": "head -c %d /dev/urandom > big.bin; echo hi > small.txt" %
                 (args.mb << 20)})
        rows = {}
        cases = (
            ("exec true (ms)", lambda c: timed(lambda: c.ok(
                "POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true"}))),
            ("SSE exec, first event (ms)", lambda c: first_event(c, sid)),
            ("GET a small file (ms)", lambda c: timed(lambda: c.ok(
                "GET", "/v1/sandboxes/%s/files/small.txt" % sid))),
        )
        for c in (on_b, via_a):  # warm both paths
            for _, fn in cases:
                fn(c)
        for name, fn in cases:
            d, r_ = [], []
            for _ in range(args.n):
                d.append(fn(on_b))
                r_.append(fn(via_a))
            rows[name] = (1000 * statistics.median(d), 1000 * statistics.median(r_))
        dl_d, dl_r = [], []
        for _ in range(5):
            dl_d.append(timed(lambda: on_b.request("GET", "/v1/sandboxes/%s/files/big.bin" % sid,
                                                   timeout=300)))
            dl_r.append(timed(lambda: via_a.request("GET", "/v1/sandboxes/%s/files/big.bin" % sid,
                                                    timeout=300)))
        mbps = (args.mb / statistics.median(dl_d), args.mb / statistics.median(dl_r))
    finally:
        for d in ds:
            d.cleanup()
        harness.pg_stop(pg)
    print("%-30s %10s %10s %8s" % ("", "direct", "relayed", "ratio"))
    for name, (d, r_) in rows.items():
        print("%-30s %10.2f %10.2f %7.2fx" % (name, d, r_, r_ / d))
    print("%-30s %10.0f %10.0f %7.2fx" % ("download %d MB (MB/s)" % args.mb, mbps[0], mbps[1],
                                          mbps[1] / mbps[0]))


if __name__ == "__main__":
    main()
