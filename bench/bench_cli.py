#!/usr/bin/env python3
"""The sbx command-line client beside curl doing the same HTTP calls, same daemon, same run.

    python3 bench/bench_cli.py [BUILD_DIR]      (default build; needs sbxd and sbx there)

Prints p50/p95 of `sbx exec ID true` against `curl -X POST …/exec` (both a new process and a
new connection per call, interleaved), and the wall time of a 100 MB upload and download with
`sbx cp` against `curl -T` / `curl -o`. Not part of the tests.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    build = build if os.path.isabs(build) else os.path.join(REPO, build)
    os.environ["SBX_BUILD"] = build
    import harness

    sbx = os.path.join(build, "sbx")
    with harness.Daemon(build=build) as d:
        key = d.client().create_key("bench")["key"]
        url = "http://127.0.0.1:%d" % d.port
        env = dict(os.environ, SBX_URL=url, SBX_API_KEY=key)
        sid = subprocess.run([sbx, "create", "--ttl", "30m"], env=env, check=True,
                             stdout=subprocess.PIPE).stdout.decode().strip()
        curl_exec = ["curl", "-sS", "-o", "/dev/null", "-X", "POST", "-H",
                     "Authorization: Bearer " + key, "-H", "Content-Type: application/json",
                     "-d", '{"shell":"true"}', "%s/v1/sandboxes/%s/exec" % (url, sid)]
        sbx_exec = [sbx, "exec", sid, "true"]
        n = 40
        a, b = [], []
        for i in range(n + 5):
            for cmd, out in ((sbx_exec, a), (curl_exec, b)):
                t0 = time.perf_counter()
                subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
                if i >= 5:  # warm-up
                    out.append(time.perf_counter() - t0)
        print("exec true, %d runs each (ms)     p50      p95" % n)
        print("  sbx exec (SSE stream)        %7.1f  %7.1f" % (pct(a, .5) * 1e3, pct(a, .95) * 1e3))
        print("  curl POST exec (blocking)    %7.1f  %7.1f" % (pct(b, .5) * 1e3, pct(b, .95) * 1e3))
        print("  ratio p50                    %7.2f" % (statistics.median(a) / statistics.median(b)))

        tmp = tempfile.mkdtemp(prefix="sbx-bench-cli-")
        src = os.path.join(tmp, "big.bin")
        with open(src, "wb") as f:
            f.write(os.urandom(100 * 1000 * 1000 - 1))
        auth = ["-H", "Authorization: Bearer " + key]
        furl = "%s/v1/sandboxes/%s/files/" % (url, sid)
        rows = []
        for what, sbx_cmd, curl_cmd in (
                ("upload 100 MB", [sbx, "cp", src, sid + ":a.bin"],
                 ["curl", "-sS", "-o", "/dev/null", "-T", src] + auth + [furl + "b.bin"]),
                ("download 100 MB", [sbx, "cp", sid + ":a.bin", os.path.join(tmp, "a")],
                 ["curl", "-sS", "-o", os.path.join(tmp, "b")] + auth + [furl + "b.bin"])):
            ts, tc = [], []
            for _ in range(3):
                for cmd, out in ((sbx_cmd, ts), (curl_cmd, tc)):
                    t0 = time.perf_counter()
                    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
                    out.append(time.perf_counter() - t0)
            rows.append((what, min(ts), min(tc)))
        print("transfers, best of 3 (s)      sbx cp     curl    ratio")
        for what, s, c in rows:
            print("  %-24s %8.2f %8.2f %8.2f" % (what, s, c, s / c))
        subprocess.run([sbx, "rm", sid], env=env, stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
