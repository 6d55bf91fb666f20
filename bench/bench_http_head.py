"""The cost of sbxd's request-head checks (docs/api-contract.md, "Requests sbxd refuses"):
sbxd CPU time per keep-alive GET /healthz carrying 32 header lines, for two sbxd binaries
measured alternately in the same run (CPU time of the daemon's process, which the other
load on a shared machine disturbs far less than wall time).

    python3 bench/bench_http_head.py BASELINE_SBXD [CANDIDATE_SBXD (default build/sbxd)]

Build the baseline from the commit before a change to compare against it.
"""

import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "e2e"))
from harness import free_port  # noqa: E402

REQUESTS = 20000
ROUNDS = 7


def cpu_s(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def per_request_us(binary):
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="sbx-bench-")
    env = dict(os.environ, SBX_ADMIN_KEY="sbx_admin_" + "a" * 40,
               SBX_PREVIEW_LISTEN="127.0.0.1:%d" % free_port())
    p = subprocess.Popen([binary, "--listen", "127.0.0.1:%d" % port, "--data-dir", tmp + "/d"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        headers = b"".join(b"X-Header-%d: a value of a typical length %d\r\n" % (i, i)
                           for i in range(30))
        req = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n"
        s = socket.create_connection(("127.0.0.1", port))
        c0 = cpu_s(p.pid)
        for _ in range(REQUESTS):
            s.sendall(req)
            buf = b""
            while not buf.rstrip().endswith(b"}"):
                buf += s.recv(65536)
        used = cpu_s(p.pid) - c0
        s.close()
        return used / REQUESTS * 1e6
    finally:
        p.terminate()
        p.wait()
        subprocess.run(["rm", "-rf", tmp])


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    base = sys.argv[1]
    cand = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(HERE), "build",
                                                              "sbxd")
    res = {"baseline": [], "candidate": []}
    for _ in range(ROUNDS):
        res["baseline"].append(per_request_us(base))
        res["candidate"].append(per_request_us(cand))
    for k, v in res.items():
        print("%-9s %s  (us of sbxd CPU per request)" % (k, " ".join("%.1f" % x for x in v)))
    med = {k: sorted(v)[len(v) // 2] for k, v in res.items()}
    print("median: baseline %.1f us, candidate %.1f us, ratio %.3f" %
          (med["baseline"], med["candidate"], med["candidate"] / med["baseline"]))


if __name__ == "__main__":
    main()
