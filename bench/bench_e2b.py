"""The E2B surface beside our own API (docs/e2b.md), measured in the same run on the same
daemon: sandbox create, a `true` command, a 4 KiB file write and a `1+1` cell, each through
the unmodified e2b SDK and through /v1. Not part of `make bench` or the tests.

    SBX_TEMPLATE_CACHE=/var/cache/sbx/templates python3 bench/bench_e2b.py --build build -n 20
"""

import json
import os
import subprocess
import sys

from benchdaemon import HERE, median, setup


def main():
    args, harness = setup(20)
    with harness.Daemon(extra_env={"SBX_MAX_PER_KEY": "4"}) as d:
        key = d.client().create_key("bench")["key"]
        base = "http://127.0.0.1:%d" % d.port
        env = dict(os.environ, E2B_API_URL=base + "/e2b/api", E2B_SANDBOX_URL=base + "/e2b/sandbox",
                   E2B_API_KEY=key, SBX_URL=base, SBX_KEY=key, BENCH_N=str(args.n))
        p = subprocess.run(["node", os.path.join(HERE, "bench_e2b.mjs")], env=env,
                           capture_output=True, text=True, timeout=1800)
        if p.returncode:
            sys.exit(p.stderr)
        t = json.loads(p.stdout.strip().splitlines()[-1])
    print("%-16s %10s %10s %7s   (median ms, %d runs)" % ("operation", "e2b", "own", "ratio", args.n))
    for a, b, name in (("create e2b", "create own", "create+kill"),
                       ("run true e2b", "run true own", "command true"),
                       ("write 4KiB e2b", "write 4KiB own", "write 4 KiB"),
                       ("runCode e2b", "run_code own", "cell 1+1")):
        e, o = median(t[a]) * 1000, median(t[b]) * 1000
        print("%-16s %10.1f %10.1f %7.2f" % (name, e, o, e / o))


if __name__ == "__main__":
    main()
