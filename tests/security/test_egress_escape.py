"""No route out but the proxy: raw TCP, UDP, DNS and raw sockets from inside a sandbox go
nowhere, and the proxy will not be talked into the host's loopback, the daemon itself or
the metadata address. Host-side listeners on 127.0.0.1 check that nothing arrives.

Every address used here is on this machine (the loopback range); nothing is sent further.
"""

import json
import socket
import threading

import egress_upstream as eu
import harness

UP = {}
D = harness.Shared()


def setup():
    if "u" not in UP:
        UP["u"] = eu.Upstreams()
        D.kw["extra_env"] = UP["u"].env()
    d = D.get()
    def make(d):
        c = d.client()
        sb = c.create_sandbox(egress={"mode": "allowlist", "domains": ["allowed.example.com"]})
        UP["u"].install(c, sb["id"])
        return c, sb["id"]
    return D.once("sb", make)


def teardown_module():
    D.close()
    if "u" in UP:
        UP.pop("u").close()


def run_py(c, sid, code):
    r = c.exec(sid, code=code, language="python", timeout_seconds=60)
    assert r["exit_code"] == 0, r
    return json.loads(r["stdout"].strip().splitlines()[-1])


class Listeners:
    """A TCP and a UDP socket on the host's 127.0.0.1 that record whatever reaches them."""

    def __init__(self):
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.tcp.settimeout(0.2)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.2)
        self.got = []
        self.stop = False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop:
            for s, kind in ((self.tcp, "tcp"), (self.udp, "udp")):
                try:
                    if kind == "tcp":
                        conn, peer = s.accept()
                        conn.close()
                    else:
                        _, peer = s.recvfrom(2048)
                    self.got.append((kind, peer))
                except socket.timeout:
                    pass

    def close(self):
        self.stop = True
        self.t.join()
        self.tcp.close()
        self.udp.close()


def test_only_loopback_and_no_routes_inside():
    c, sid = setup()
    r = run_py(c, sid, """
import json, os
routes = open('/proc/net/route').read().splitlines()[1:]
try:
    routes6 = [l for l in open('/proc/net/ipv6_route').read().splitlines() if not l.endswith('lo')]
except OSError:
    routes6 = []
# runsc 20240729 has no /sys/class/net under --network=none; /proc/net/dev lists them too.
dev = [l.split(':')[0].strip() for l in open('/proc/net/dev').read().splitlines()[2:]]
try:
    ifaces = os.listdir('/sys/class/net')
except FileNotFoundError:
    ifaces = dev
print(json.dumps({"ifaces": sorted(ifaces), "dev": sorted(dev), "routes": routes,
                  "routes6": routes6}))
""")
    assert r["ifaces"] == ["lo"] and r["dev"] == ["lo"], r
    assert r["routes"] == [] and r["routes6"] == [], r


def test_raw_tcp_udp_and_dns_from_inside_reach_nothing():
    c, sid = setup()
    ls = Listeners()
    try:
        tport, uport = ls.tcp.getsockname()[1], ls.udp.getsockname()[1]
        addr = UP["u"].addr
        seen_before = len(UP["u"].https.seen)
        r = run_py(c, sid, """
import json, socket
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except Exception as e:
        out[name] = type(e).__name__
def tcp(host, port):
    s = socket.create_connection((host, port), timeout=3)
    s.sendall(b"x")
    s.close()
def udp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"hello", (host, port))
    s.close()
attempt("tcp_host_loopback", lambda: tcp("127.0.0.1", %(tport)d))
attempt("tcp_upstream", lambda: tcp("%(addr)s", 443))
attempt("dns", lambda: socket.getaddrinfo("allowed.example.com", 443))
attempt("raw", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
udp("127.0.0.1", %(uport)d)
udp("%(addr)s", 53)
print(json.dumps(out))
""" % {"tport": tport, "uport": uport, "addr": addr})
        # Inside, 127.0.0.0/8 is the sandbox's own loopback: nothing listens there.
        assert r["tcp_host_loopback"] == "ConnectionRefusedError", r
        assert r["tcp_upstream"] == "ConnectionRefusedError", r
        assert r["dns"] == "gaierror", r
        assert r["raw"] in ("PermissionError", "OSError"), r
        assert r["packet"] in ("PermissionError", "OSError"), r
        import time
        time.sleep(0.5)
        assert ls.got == [], ls.got
        assert len(UP["u"].https.seen) == seen_before
    finally:
        ls.close()


def test_the_proxy_refuses_the_host_the_daemon_and_metadata():
    c, sid = setup()
    port = D.get().port
    for target in ("127.0.0.1:%d" % port, "localhost:443", "[::1]:443", "0.0.0.0:443",
                   "169.254.169.254:443", "[fd00:ec2::254]:443", "100.100.100.200:443",
                   "loop.example.com:443", "meta.example.com:443"):
        r = eu.probe(c, sid, "connect", target)
        assert r["status_line"] == "HTTP/1.1 403 Forbidden", (target, r)
        assert r["reason"] in ("blocked_address", "ip_literal", "host_not_allowed",
                               "port_not_allowed"), (target, r)
    r = eu.probe(c, sid, "plain", "http://127.0.0.1:%d/healthz" % port)
    assert r["status_line"] == "HTTP/1.1 403 Forbidden", r
    log = c.ok("GET", "/v1/sandboxes/%s/egress?limit=100" % sid)["data"]
    assert all(e["verdict"] == "denied" and e["bytes_sent"] == 0 for e in log), log


def test_a_flood_of_connections_is_bounded_and_answered():
    c, sid = setup()
    r = run_py(c, sid, """
import json, socket
socks, refused = [], 0
for i in range(100):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
        socks.append(s)
    except OSError:
        refused += 1
for s in socks:
    s.sendall(b"CONNECT other.example.com:443 HTTP/1.1\\r\\n\\r\\n")
codes = []
for s in socks:
    s.settimeout(30)
    try:
        codes.append(s.recv(64).split(b" ")[1].decode())
    except Exception as e:
        codes.append(type(e).__name__)
    s.close()
print(json.dumps({"codes": sorted(set(codes)), "n": len(codes), "refused": refused}))
""")
    assert r["codes"] == ["403"] and r["n"] + r["refused"] == 100, r
