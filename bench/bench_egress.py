"""Egress through the proxy beside a direct local connection, measured in the same run.

  CONNECT tunnel open      inside a sandbox: connect to the agent's listener, CONNECT
                           allowed.example.com:443, read the 200 (agent -> channel -> sbxd:
                           parse, policy, resolve, validate, dial) vs a direct TCP connect from
                           the host to the same upstream
  plain GET through proxy  inside: GET http://allowed.example.com/ via the proxy, whole
                           answer vs the same GET sent directly from the host
  200 MB through CONNECT   inside: TLS through the tunnel, GET /bytes/200000000, read all vs
                           the same TLS download directly from the host
  TLS over sandbox loopback
                           inside: the same TLS download, served by another process of the
                           sandbox over its own loopback as the upstream serves it: what the
                           same client and server do inside gVisor with nothing of sbx in
                           the way, the floor under the row above (and the same plain, in
                           a note)

The upstreams are egress_upstream.Upstreams (a random 127.x address; nothing leaves the
machine). Latencies in the table; the transfer also as MB/s in a note.
"""

import json
import os
import socket
import ssl
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import egress_upstream as eu  # noqa: E402
import harness  # noqa: E402

BIG = 200 * 1000 * 1000

INSIDE = r'''
import json, os, socket, ssl, sys, time
n, big, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def tunnel():
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"CONNECT allowed.example.com:443 HTTP/1.1\r\nHost: allowed.example.com:443\r\n\r\n")
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(4096)
    assert data.startswith(b"HTTP/1.1 200"), data
    return s
def read_all(s):
    data = b""
    while True:
        c = s.recv(65536)
        if not c:
            return data
        data += c
opens, gets, bigs = [], [], []
for _ in range(n):
    t = time.perf_counter(); s = tunnel(); opens.append(time.perf_counter() - t); s.close()
for _ in range(n):
    t = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", 3128))
    s.sendall(b"GET http://allowed.example.com/ HTTP/1.1\r\nHost: allowed.example.com\r\n\r\n")
    body = read_all(s)
    gets.append(time.perf_counter() - t)
    assert b"hello from" in body, body
    s.close()
def drain(s):
    got = 0
    while True:
        c = s.recv(1 << 20)
        if not c:
            return got
        got += len(c)
ctx = ssl.create_default_context(cafile="/workspace/ca.pem")
for _ in range(reps):
    t = time.perf_counter()
    s = ctx.wrap_socket(tunnel(), server_hostname="allowed.example.com")
    s.sendall(b"GET /bytes/%d HTTP/1.0\r\nHost: allowed.example.com\r\n\r\n" % big)
    got = drain(s)
    bigs.append(time.perf_counter() - t)
    assert got > big, got
    s.close()
def loopback(tls):
    """200 MB from a process of this sandbox to another over its own loopback, served as
    the upstream serves it (64 KiB writes), read as above: no sbx in the way."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    pid = os.fork()
    if pid == 0:
        c, _ = srv.accept()
        if tls:
            sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            sctx.load_cert_chain("/workspace/srv.pem", "/workspace/srv.key")
            c = sctx.wrap_socket(c, server_side=True)
        c.recv(100)
        chunk = b"\0" * 65536
        left = big
        while left > 0:
            c.sendall(chunk[:min(left, len(chunk))])
            left -= len(chunk)
        c.close()
        os._exit(0)
    t = time.perf_counter()
    s = socket.create_connection(srv.getsockname())
    if tls:
        s = ctx.wrap_socket(s, server_hostname="allowed.example.com")
    s.sendall(b"GET")
    got = drain(s)
    took = time.perf_counter() - t
    assert got == big, got
    s.close()
    srv.close()
    os.waitpid(pid, 0)
    return took
tls_loop = [loopback(True) for _ in range(reps)]
plain_loop = [loopback(False) for _ in range(reps)]
print(json.dumps({"open": opens, "get": gets, "big": bigs, "tls_loop": tls_loop,
                  "plain_loop": plain_loop}))
'''


def host_side(addr, ca, n, reps):
    conns, gets, bigs = [], [], []
    for _ in range(n):
        t = time.perf_counter()
        s = socket.create_connection((addr, 443))
        conns.append(time.perf_counter() - t)
        s.close()
    for _ in range(n):
        t = time.perf_counter()
        s = socket.create_connection((addr, 80))
        s.sendall(b"GET / HTTP/1.1\r\nHost: allowed.example.com\r\nConnection: close\r\n\r\n")
        while s.recv(65536):
            pass
        gets.append(time.perf_counter() - t)
        s.close()
    ctx = ssl.create_default_context(cafile=ca)
    for _ in range(reps):
        t = time.perf_counter()
        s = ctx.wrap_socket(socket.create_connection((addr, 443)),
                            server_hostname="allowed.example.com")
        s.sendall(b"GET /bytes/%d HTTP/1.0\r\nHost: allowed.example.com\r\n\r\n" % BIG)
        while s.recv(1 << 20):
            pass
        bigs.append(time.perf_counter() - t)
        s.close()
    return conns, gets, bigs


def run(build, n=50):
    n = max(n, 50)
    reps = 3
    up = eu.Upstreams()
    try:
        with harness.Daemon(build=build, extra_env=up.env()) as d:
            c = d.client()
            sid = c.create_sandbox(egress={"mode": "allowlist",
                                           "domains": ["allowed.example.com"]})["id"]
            up.install(c, sid)
            for name in ("srv.pem", "srv.key"):  # the floor's server, inside
                with open(os.path.join(up.tmp, name), "rb") as f:
                    c.ok("PUT", "/v1/sandboxes/%s/files/%s" % (sid, name), raw=f.read())
            c.ok("PUT", "/v1/sandboxes/%s/files/bench_egress.py" % sid, raw=INSIDE.encode())
            r = c.exec(sid, shell="python3 /workspace/bench_egress.py %d %d %d" % (n, BIG, reps),
                       timeout_seconds=600)
            assert r["exit_code"] == 0, r
            inside = json.loads(r["stdout"])
        ca = os.path.join(up.tmp, "ca.pem")
        conns, gets, bigs = host_side(up.addr, ca, n, reps)
    finally:
        up.close()
    rows = [("egress CONNECT tunnel open", inside["open"], "host TCP connect", conns),
            ("egress plain GET via proxy", inside["get"], "host direct GET", gets),
            ("egress 200 MB TLS via CONNECT", inside["big"], "host direct 200 MB TLS", bigs),
            ("egress 200 MB TLS via CONNECT", inside["big"], "TLS over sandbox loopback",
             inside["tls_loop"]),
            ("TLS over sandbox loopback", inside["tls_loop"], "host direct 200 MB TLS", bigs)]
    mbs = lambda xs: BIG / 1e6 / sorted(xs)[len(xs) // 2]
    notes = ["egress 200 MB: %.0f MB/s through the proxy, %.0f MB/s direct (ratio %.2f)" % (
        mbs(inside["big"]), mbs(bigs), mbs(inside["big"]) / mbs(bigs)),
             "egress floor: the same download between two processes of the sandbox over its"
             " own loopback, no sbx in the way: %.0f MB/s with TLS (%.2f of direct), %.0f MB/s"
             " plain" % (mbs(inside["tls_loop"]), mbs(inside["tls_loop"]) / mbs(bigs),
                         mbs(inside["plain_loop"]))]
    return rows, notes


if __name__ == "__main__":
    b = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build")
    rows, notes = run(b, 50)
    p = lambda xs, q: sorted(xs)[min(len(xs) - 1, int(len(xs) * q / 100))]
    for name, xs, bname, bs in rows:
        print("%-32s p50 %8.2f ms  p95 %8.2f ms | %-24s p50 %8.2f ms  p95 %8.2f ms | x%.1f" % (
            name, p(xs, 50) * 1e3, p(xs, 95) * 1e3, bname, p(bs, 50) * 1e3, p(bs, 95) * 1e3,
            p(xs, 50) / p(bs, 50)))
    for x in notes:
        print("note: " + x)
