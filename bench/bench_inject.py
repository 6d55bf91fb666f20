"""Header injection (docs/configs.md) beside a plain CONNECT tunnel, measured in the same
run, from the same sandbox:

  HTTPS GET, tunnel     CONNECT second.example.com:443, TLS end to end with the upstream,
                        GET /, read the answer (a fresh connection each time)
  HTTPS GET, injected   CONNECT allowed.example.com:443, TLS ended by sbxd (a leaf of the
                        per-daemon CA), TLS again to the upstream, the header put in
  50 MB, tunnel / injected   GET /bytes/50000000 the same two ways

The upstreams are egress_upstream.Upstreams (a random 127.x address; nothing leaves the
machine). Not part of the tests:  python3 bench/bench_inject.py [build]
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import egress_upstream as eu  # noqa: E402
import harness  # noqa: E402

BIG = 50 * 1000 * 1000

INSIDE = r'''
import json, socket, ssl, sys, time
n, big, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
ctx = ssl.create_default_context(cafile="/workspace/.sbx-egress-ca.pem")
ctx.load_verify_locations("/workspace/ca.pem")
def fetch(host, path):
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host, host))
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    assert data.startswith(b"HTTP/1.1 200"), data
    t = ctx.wrap_socket(s, server_hostname=host.decode())
    t.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, host))
    got = 0
    while True:
        c = t.recv(1 << 20)
        if not c:
            break
        got += len(c)
    t.close()
    return got
out = {}
for name, host in (("tunnel", b"second.example.com"), ("inject", b"allowed.example.com")):
    gets, bigs = [], []
    for _ in range(n):
        t0 = time.perf_counter(); assert fetch(host, b"/") > 0; gets.append(time.perf_counter() - t0)
    for _ in range(reps):
        t0 = time.perf_counter(); assert fetch(host, b"/bytes/%d" % big) > big
        bigs.append(time.perf_counter() - t0)
    out[name] = {"get": gets, "big": bigs}
print(json.dumps(out))
'''


def run(build, n=50):
    reps = 3
    up = eu.Upstreams()
    try:
        env = dict(up.env(), SBX_FETCH_CA_FILE=os.path.join(up.tmp, "ca.pem"))
        with harness.Daemon(build=build, extra_env=env) as d:
            c = d.client()
            cfg = c.ok("POST", "/v1/sandbox-configs", {"name": "bench", "config": {"network": {
                "allow_out": ["allowed.example.com", "second.example.com"],
                "rules": [{"name": "api", "host": "allowed.example.com",
                           "inject": [{"header": "X-Api-Key", "secret": "bench-secret"}]}]}}},
                       status=201)
            sid = c.create_sandbox(config_id=cfg["id"])["id"]
            up.install(c, sid)
            c.ok("PUT", "/v1/sandboxes/%s/files/bench_inject.py" % sid, raw=INSIDE.encode())
            r = c.exec(sid, shell="python3 /workspace/bench_inject.py %d %d %d" % (n, BIG, reps),
                       timeout_seconds=600)
            assert r["exit_code"] == 0, r
            return json.loads(r["stdout"])
    finally:
        up.close()


if __name__ == "__main__":
    b = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build")
    res = run(b, 50)
    p = lambda xs, q: sorted(xs)[min(len(xs) - 1, int(len(xs) * q / 100))]
    t, i = res["tunnel"], res["inject"]
    print("%-24s p50 %8.2f ms  p95 %8.2f ms | %-24s p50 %8.2f ms  p95 %8.2f ms | x%.2f" % (
        "HTTPS GET, injected", p(i["get"], 50) * 1e3, p(i["get"], 95) * 1e3, "HTTPS GET, tunnel",
        p(t["get"], 50) * 1e3, p(t["get"], 95) * 1e3, p(i["get"], 50) / p(t["get"], 50)))
    mbs = lambda xs: BIG / 1e6 / sorted(xs)[len(xs) // 2]
    print("50 MB: %.0f MB/s injected, %.0f MB/s tunnel (ratio %.2f)" % (
        mbs(i["big"]), mbs(t["big"]), mbs(i["big"]) / mbs(t["big"])))
