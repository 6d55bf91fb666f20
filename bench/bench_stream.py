"""Streaming exec: how fast output reaches the client, and how fast a blocking exec moves
bytes, each beside a local baseline measured in the same run.

  first write -> client frame   a command prints its CLOCK_REALTIME as its first write; the
                                client notes when that SSE frame arrives (over 200 runs)
                                vs the same measure for a local child writing into a pipe
  blocking exec, 1 MB output    POST exec `head -c 1000000 /dev/zero`, whole round trip
                                vs a local `head -c 1000000 /dev/zero` read through a pipe,
                                and vs the same exec writing to /dev/null inside the sandbox
                                (what gVisor itself costs; the difference is our transport)
"""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import harness  # noqa: E402

STAMP = "date +%s%N; sleep 0.05"


def local_first_write(n):
    xs = []
    for _ in range(n):
        p = subprocess.Popen(["sh", "-c", STAMP], stdout=subprocess.PIPE)
        line = p.stdout.readline()
        xs.append((time.time_ns() - int(line)) / 1e9)
        p.wait()
    return xs


def local_pipe(n):
    xs = []
    for _ in range(n):
        t = time.monotonic()
        out = subprocess.run(["head", "-c", "1000000", "/dev/zero"], stdout=subprocess.PIPE).stdout
        assert len(out) == 1000000
        xs.append(time.monotonic() - t)
    return xs


def run(build, n=50):
    runs = max(n * 4, 200)
    rows, notes = [], []
    with harness.Daemon(build=build) as d:
        c = d.client()
        sid = c.create_sandbox()["id"]
        c.exec(sid, shell="true")
        lat = []
        for _ in range(runs):
            gen = c.stream("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": STAMP})
            next(gen)
            for _, ev in gen:
                if ev["type"] == "stdout":
                    lat.append((time.time_ns() - int(ev["data"].split()[0])) / 1e9)
                    break
            for _ in gen:
                pass
        rows.append(("first write -> client frame", lat, "local pipe", local_first_write(runs)))
        thr = []
        for _ in range(n):
            t = time.monotonic()
            r = c.exec(sid, shell="head -c 1000000 /dev/zero")
            assert r["stdout_encoding"] == "base64" and not r["stdout_truncated"]
            thr.append(time.monotonic() - t)
        rows.append(("blocking exec of 1 MB output", thr, "local head | pipe", local_pipe(n)))
        quiet = []
        for _ in range(n):
            t = time.monotonic()
            c.exec(sid, shell="head -c 1000000 /dev/zero >/dev/null")
            quiet.append(time.monotonic() - t)
        rows.append(("blocking exec of 1 MB output", thr, "same, to /dev/null", quiet))
        notes.append("1 MB of NUL bytes is not UTF-8, so it comes back base64-encoded (1.33 MB)")
    return rows, notes
