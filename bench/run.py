#!/usr/bin/env python3
"""`make bench`: sbx's core latencies beside the gVisor floor, measured in the same run.

    python3 bench/run.py --build build [-n 50]

Not part of the tests. Needs root, runsc and the base template (make bench builds it).
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def ms(x):
    return "%8.1f" % (x * 1000.0)


def main():
    ap = argparse.ArgumentParser(description="sbx core benchmark")
    ap.add_argument("--build", default="build", help="build dir with sbxd (default build)")
    ap.add_argument("-n", type=int, default=50, help="runs per operation (default 50)")
    args = ap.parse_args()
    build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
    os.environ["SBX_BUILD"] = build
    import bench_core
    import bench_kernel
    import bench_sessions
    import bench_stream

    print("sbx bench: %d runs per operation, build %s" % (args.n, build), flush=True)
    rows, notes = bench_core.run(build, args.n)
    srows, snotes = bench_sessions.run(build, args.n)
    rows += srows
    notes += snotes
    trows, tnotes = bench_stream.run(build, args.n)
    rows += trows
    notes += tnotes
    krows, knotes = bench_kernel.run(build, args.n)
    rows += krows
    notes += knotes
    import bench_terminal
    mrows, mnotes = bench_terminal.run(build)
    rows += mrows
    notes += mnotes
    p = bench_core.percentile
    head = "%-38s %8s %8s   %-22s %8s %8s   %7s %7s" % (
        "operation (sbx)", "p50 ms", "p95 ms", "baseline", "p50 ms", "p95 ms",
        "x p50", "x p95")
    print()
    print(head)
    print("-" * len(head))
    for name, xs, bname, bs in rows:
        s50, s95, b50, b95 = p(xs, 50), p(xs, 95), p(bs, 50), p(bs, 95)
        print("%-38s %s %s   %-22s %s %s   %7.2f %7.2f" % (
            name, ms(s50), ms(s95), bname, ms(b50), ms(b95), s50 / b50, s95 / b95))
    print()
    for n in notes:
        print("note: " + n)
    print("ratio = sbx / baseline; the baseline is the same runsc and template, called directly.")

    import bench_files

    print()
    rows, notes = bench_files.run(build, max(3, args.n // 10))
    for name, xs, bname, bs in rows:
        s50, b50 = p(xs, 50), p(bs, 50)
        print("%-38s %s   %-22s %s   baseline/sbx %5.2f" % (name, ms(s50), bname, ms(b50),
                                                            b50 / s50))
    for n in notes:
        print("note: " + n)

    import bench_egress

    print()
    rows, notes = bench_egress.run(build, args.n)
    for name, xs, bname, bs in rows:
        s50, s95, b50, b95 = p(xs, 50), p(xs, 95), p(bs, 50), p(bs, 95)
        print("%-38s %s %s   %-22s %s %s   %7.2f %7.2f" % (
            name, ms(s50), ms(s95), bname, ms(b50), ms(b95), s50 / b50, s95 / b95))
    for n in notes:
        print("note: " + n)

    import bench_snapshots

    print()
    rows, notes = bench_snapshots.run(build, 20)
    for name, xs, bname, bs in rows:
        s50, s95, b50, b95 = p(xs, 50), p(xs, 95), p(bs, 50), p(bs, 95)
        print("%-38s %s %s   %-22s %s %s   %7.2f %7.2f" % (
            name, ms(s50), ms(s95), bname, ms(b50), ms(b95), s50 / b50, s95 / b95))
    for n in notes:
        print("note: " + n)

    import bench_backends

    print()
    rows, notes = bench_backends.run(build, args.n)
    for name, xs, bname, bs in rows:
        s50, s95, b50, b95 = p(xs, 50), p(xs, 95), p(bs, 50), p(bs, 95)
        print("%-38s %s %s   %-22s %s %s   %7.2f %7.2f" % (
            name, ms(s50), ms(s95), bname, ms(b50), ms(b95), s50 / b50, s95 / b95))
    for n in notes:
        print("note: " + n)

    import bench_preview

    print()
    rows, notes = bench_preview.run(build, args.n)
    for name, xs, bname, bs in rows:
        s50, s95, b50, b95 = p(xs, 50), p(xs, 95), p(bs, 50), p(bs, 95)
        print("%-38s %s %s   %-22s %s %s   %7.2f %7.2f" % (
            name, ms(s50), ms(s95), bname, ms(b50), ms(b95), s50 / b50, s95 / b95))
    for n in notes:
        print("note: " + n)

    import bench_bsl

    print()
    rows, notes = bench_bsl.run(build, 3)
    base = rows[2][1]
    for name, mbs in rows:
        print("%-38s %8.1f MB/s   x wc -l %7.3f" % (name, mbs, mbs / base))
    for n in notes:
        print("note: " + n)

    import bench_concurrency

    print()
    for line in bench_concurrency.run(build, 15, max(10, args.n // 3)):
        print(line)

    import bench_memory

    print()
    for line in bench_memory.run(build, 15):
        print(line)


if __name__ == "__main__":
    main()
