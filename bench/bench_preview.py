"""Preview URLs beside a direct connection to the same server, measured in the same run.

The server is tests/e2e/preview_app.py running inside a sandbox on port 8000.

  preview GET (new conn)   from the host: connect to sbxd's preview listener, GET a signed
                           /p/{id}/8000/hello, read the whole answer (sbxd: parse the head,
                           verify, open a tcp_connect stream; agent: connect; relay) vs the
                           same GET sent directly to 127.0.0.1:8000 inside the sandbox
  preview 200 MB GET       from the host: GET /big?n=200000000 through the preview URL, read
                           all vs the same download directly inside the sandbox
                           and the floor under any preview on gVisor: a process in the
                           sandbox (`runsc exec`, no sbx in the way) downloading the same
                           bytes and writing them to its stdout, a pipe the host reads, in
                           256 KiB reads as sbx's agent reads; timed from its first byte
                           out, so the exec's own start is left out

Latencies in the table; the transfer also as MB/s and as a ratio in a note.
"""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import harness  # noqa: E402

BIG = 200 * 1000 * 1000
PORT = 8000

INSIDE = r'''
import json, socket, sys, time
n, big, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def get(path):
    s = socket.create_connection(("127.0.0.1", %d))
    s.sendall(b"GET %%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" %% path)
    got = 0
    while True:
        c = s.recv(1 << 20)
        if not c:
            break
        got += len(c)
    s.close()
    return got
gets, bigs = [], []
for _ in range(n):
    t = time.perf_counter(); get(b"/hello"); gets.append(time.perf_counter() - t)
for _ in range(reps):
    t = time.perf_counter(); got = get(b"/big?n=%%d" %% big); bigs.append(time.perf_counter() - t)
    assert got > big, got
print(json.dumps({"get": gets, "big": bigs}))
''' % PORT


# Runs under `runsc exec`: says it is connected with one byte, then copies the download to
# its stdout.
OUT_OF_SANDBOX = r'''
import os, socket, sys
s = socket.create_connection(("127.0.0.1", %d))
os.write(1, b"R")
s.sendall(b"GET /big?n=%%d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" %% int(sys.argv[1]))
buf = bytearray(256 * 1024)
view = memoryview(buf)
while True:
    n = s.recv_into(buf)
    if not n:
        break
    done = 0
    while done < n:
        done += os.write(1, view[done:n])
''' % PORT


def out_of_sandbox(root, sid):
    """Seconds for the 200 MB download to leave the sandbox through a host pipe."""
    p = subprocess.Popen(["runsc", "--root", root, "exec", sid, "python3",
                          "/workspace/out_of_sandbox.py", str(BIG)], stdout=subprocess.PIPE)
    assert p.stdout.read(1) == b"R"
    t = time.perf_counter()
    got = 0
    while True:
        b = p.stdout.read1(1 << 20)
        if not b:
            break
        got += len(b)
    dt = time.perf_counter() - t
    assert p.wait() == 0 and got > BIG, got
    return dt


def through_preview(port, path):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
    got = 0
    while True:
        c = s.recv(1 << 20)
        if not c:
            break
        got += len(c)
    s.close()
    return got


def run(build, n=50):
    n = max(n, 50)
    reps = 3
    app = open(os.path.join(REPO, "tests", "e2e", "preview_app.py"), "rb").read()
    with harness.Daemon(build=build) as d:
        c = d.client()
        sid = c.create_sandbox()["id"]
        c.ok("PUT", "/v1/sandboxes/%s/files/preview_app.py" % sid, raw=app)
        c.ok("PUT", "/v1/sandboxes/%s/files/bench_preview.py" % sid, raw=INSIDE.encode())
        c.ok("PUT", "/v1/sandboxes/%s/files/out_of_sandbox.py" % sid,
             raw=OUT_OF_SANDBOX.encode())
        c.ok("POST", "/v1/sandboxes/%s/processes" % sid,
             {"command": "python3 /workspace/preview_app.py %d" % PORT}, status=201)
        c.sh(sid, "for i in $(seq 100); do python3 -c 'import socket; socket.create_connection("
                  "(\"127.0.0.1\", %d))' 2>/dev/null && exit 0; sleep 0.1; done; exit 1" % PORT)
        url = c.ok("POST", "/v1/sandboxes/%s/preview" % sid, {"port": PORT})["url"]
        u = urllib.parse.urlsplit(url)
        base = u.path.rstrip("/")
        q = "sbx_preview=" + urllib.parse.parse_qs(u.query)["sbx_preview"][0]
        gets, bigs, floor = [], [], []
        for _ in range(n):
            t = time.perf_counter()
            assert through_preview(d.preview_port, "%s/hello?%s" % (base, q)) > 0
            gets.append(time.perf_counter() - t)
        for _ in range(reps):
            t = time.perf_counter()
            got = through_preview(d.preview_port, "%s/big?n=%d&%s" % (base, BIG, q))
            bigs.append(time.perf_counter() - t)
            assert got > BIG, got
            floor.append(out_of_sandbox(os.path.join(d.data_dir, "runsc"), sid))
        r = c.exec(sid, shell="python3 /workspace/bench_preview.py %d %d %d" % (n, BIG, reps),
                   timeout_seconds=600)
        assert r["exit_code"] == 0, r
        inside = json.loads(r["stdout"])
    rows = [("preview GET (new connection)", gets, "direct GET in sandbox", inside["get"]),
            ("preview 200 MB GET", bigs, "direct 200 MB in sandbox", inside["big"]),
            ("preview 200 MB GET", bigs, "out of the sandbox by pipe", floor)]
    mbs = lambda xs: BIG / 1e6 / sorted(xs)[len(xs) // 2]
    notes = ["preview 200 MB: %.0f MB/s through the preview URL, %.0f MB/s direct inside the "
             "sandbox (throughput ratio preview/direct %.2f)" % (
                 mbs(bigs), mbs(inside["big"]), mbs(bigs) / mbs(inside["big"])),
             "preview floor: the same download leaving the sandbox through a pipe, no sbx in "
             "the way: %.0f MB/s (%.2f of direct inside; preview/floor %.2f)" % (
                 mbs(floor), mbs(floor) / mbs(inside["big"]), mbs(bigs) / mbs(floor))]
    return rows, notes


if __name__ == "__main__":
    b = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build")
    rows, notes = run(b, 50)
    p = lambda xs, q: sorted(xs)[min(len(xs) - 1, int(len(xs) * q / 100))]
    for name, xs, bname, bs in rows:
        print("%-32s p50 %8.2f ms  p95 %8.2f ms | %-26s p50 %8.2f ms  p95 %8.2f ms | x%.1f" % (
            name, p(xs, 50) * 1e3, p(xs, 95) * 1e3, bname, p(bs, 50) * 1e3, p(bs, 95) * 1e3,
            p(xs, 50) / p(bs, 50)))
    for x in notes:
        print("note: " + x)
