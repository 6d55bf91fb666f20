#!/usr/bin/env python3
"""The store's cost per request, PostgreSQL against SQLite (the baseline), in the same run.

    python3 bench/bench_store.py --build build [-n 2000]

Two sbxd in turn, one on SQLite in its data dir and one with SBX_STORE on a throwaway
PostgreSQL on 127.0.0.1 (scripts/pg.sh, test settings: fsync off). For each, a member's
GET /v1/sandboxes (key lookup, list, counts) n times and POST /v1/sandbox-configs n/10 times;
prints milliseconds per request and the PostgreSQL/SQLite ratio. No sandbox is started.
Not part of the tests (docs/scale-out.md).
"""

import argparse
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


def measure(build, env, n):
    d = harness.Daemon(extra_env=env, build=build)
    d.start()
    try:
        admin = d.client()
        member = d.client(admin.create_key("bench")["key"])
        for _ in range(50):
            member.ok("GET", "/v1/sandboxes")
        t0 = time.perf_counter()
        for _ in range(n):
            member.ok("GET", "/v1/sandboxes")
        get_ms = 1000 * (time.perf_counter() - t0) / n
        m = max(1, n // 10)
        t0 = time.perf_counter()
        for i in range(m):
            admin.ok("POST", "/v1/sandbox-configs", {"name": "b%d" % i, "config": {}}, status=201)
        post_ms = 1000 * (time.perf_counter() - t0) / m
        return get_ms, post_ms
    finally:
        d.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("-n", type=int, default=2000)
    args = ap.parse_args()
    build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
    pg = tempfile.mkdtemp(prefix="sbx-bench-pg-")
    try:
        r = subprocess.run([os.path.join(REPO, "scripts", "pg.sh"), "start", pg],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            sys.exit("bench_store: scripts/pg.sh could not start PostgreSQL:\n" + r.stderr)
        lite = measure(build, {}, args.n)
        post = measure(build, {"SBX_STORE": r.stdout.strip()}, args.n)
    finally:
        subprocess.run([os.path.join(REPO, "scripts", "pg.sh"), "stop", pg], timeout=60)
        shutil.rmtree(pg, ignore_errors=True)
    print("%-36s %10s %10s %8s" % ("ms per request", "sqlite", "postgres", "ratio"))
    for name, a, b in (("GET /v1/sandboxes (member)", lite[0], post[0]),
                       ("POST /v1/sandbox-configs (admin)", lite[1], post[1])):
        print("%-36s %10.2f %10.2f %7.2fx" % (name, a, b, b / a))


if __name__ == "__main__":
    main()
