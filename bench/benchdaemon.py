"""What the stand-alone benchmarks that drive a real sbxd through the tests' harness share:
the command line (--build, -n), the harness imported with SBX_BUILD pointing at that build,
and how a timing is taken and summed up (bench_e2b.py, bench_providers.py)."""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def setup(runs):
    """Parse --build and -n (runs by default); returns (args, the harness module)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("-n", type=int, default=runs)
    args = ap.parse_args()
    os.environ["SBX_BUILD"] = (args.build if os.path.isabs(args.build)
                               else os.path.join(REPO, args.build))
    sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
    import harness
    return args, harness


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def timed(fn):
    """(seconds fn took, what it returned)."""
    t0 = time.perf_counter()
    r = fn()
    return time.perf_counter() - t0, r
