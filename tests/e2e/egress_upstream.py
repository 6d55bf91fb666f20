"""Upstreams for the egress tests and bench, all on one random loopback address.

An HTTPS server (port 443, certificate from a CA made here with the openssl CLI) that also
serves a fake package index with one wheel (`sbxdemo`), and a plain HTTP server (port 80).
A hosts file points the test names at that address; sbxd gets it as SBX_EGRESS_HOSTS, and
SBX_EGRESS_TEST_UPSTREAMS exempts exactly ADDR:443 and ADDR:80 from the loopback rule, so
nothing leaves the machine and every other loopback address and port stays refused.
Binding ports 443 and 80 needs root, as the rest of the suite does.
"""

import base64
import hashlib
import http.server
import io
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import zipfile
import testserver

NAMES = ["pypi.org", "files.pythonhosted.org", "registry.npmjs.org", "allowed.example.com",
         "other.example.com", "second.example.com", "wild.example.com",
         "a.wild.example.com"]

PROBE = r'''
import json, socket, ssl, sys, urllib.request
def head(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data
def connect(target):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
    return s, head(s)
def reason(h):
    for line in h.decode("latin-1").split("\r\n"):
        if line.lower().startswith("x-sbx-egress-reason:"):
            return line.split(":", 1)[1].strip()
    return None
cmd = sys.argv[1]
out = {}
try:
    if cmd == "fetch":
        ctx = ssl.create_default_context(cafile="/workspace/ca.pem")
        r = urllib.request.urlopen(sys.argv[2], timeout=20, context=ctx)
        out = {"ok": True, "status": r.status, "body": r.read().decode()}
    elif cmd == "connect":
        s, h = connect(sys.argv[2])
        out = {"status_line": h.split(b"\r\n")[0].decode(), "reason": reason(h)}
    elif cmd == "plain":
        s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % sys.argv[2].encode())
        h = head(s)
        out = {"status_line": h.split(b"\r\n")[0].decode(), "reason": reason(h)}
    elif cmd == "sni":
        s, h = connect(sys.argv[2])
        out["status_line"] = h.split(b"\r\n")[0].decode()
        ctx = ssl.create_default_context(cafile="/workspace/ca.pem")
        ctx.check_hostname = False
        t = ctx.wrap_socket(s, server_hostname=sys.argv[3])
        t.sendall(b"GET / HTTP/1.0\r\n\r\n")
        out["ok"] = True
        out["body"] = t.recv(4096).decode("latin-1")
except Exception as e:
    out.setdefault("ok", False)
    out["error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
'''


def _wheel():
    files = {
        "sbxdemo/__init__.py": b'VALUE = "sbx-egress-ok"\n',
        "sbxdemo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: sbxdemo\nVersion: 1.0\n",
        "sbxdemo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: sbx-test\n"
                                       b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, h, len(data)))
    record.append("sbxdemo-1.0.dist-info/RECORD,,")
    files["sbxdemo-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


WHEEL = _wheel()
WHEEL_NAME = "sbxdemo-1.0-py3-none-any.whl"


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _send(self, code, body, ctype="text/plain"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        host = (self.headers.get("Host") or "").split(":")[0]
        self.server.seen.append((host, self.path))
        if self.path.startswith("/bytes/"):
            n = int(self.path.split("/")[2])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"\0" * 65536
            while n > 0:
                self.wfile.write(chunk[:min(n, len(chunk))])
                n -= len(chunk)
            return
        if self.path.startswith("/slow/"):
            # Headers at once, then nothing for N seconds (a fetch's time limit).
            self.send_response(200)
            self.send_header("Content-Length", "1")
            self.end_headers()
            self.wfile.flush()
            time.sleep(int(self.path.split("/")[2]))
            self.wfile.write(b"x")
            return
        if self.path.startswith("/headers"):
            # The request's headers as the upstream got them (configuration inject rules).
            body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
            self._send(200, body, "application/json")
            return
        if self.path.startswith("/simple/sbxdemo"):
            sha = hashlib.sha256(WHEEL).hexdigest()
            html = ('<html><body><a href="https://files.pythonhosted.org/packages/%s#sha256=%s">'
                    '%s</a></body></html>' % (WHEEL_NAME, sha, WHEEL_NAME))
            self._send(200, html.encode(), "text/html")
            return
        if self.path == "/packages/" + WHEEL_NAME:
            self._send(200, WHEEL, "application/octet-stream")
            return
        self._send(200, ("hello from %s via %s" % (host, self.server.scheme)).encode())


class _Server(testserver.QuietHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class Upstreams:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="sbx-egress-")
        self.servers = []
        for _ in range(20):
            self.addr = "127.%d.%d.%d" % (random.randint(64, 250), random.randint(1, 250),
                                          random.randint(2, 250))
            try:
                self._start()
                break
            except OSError:
                self.close_servers()
        else:
            raise AssertionError("no free loopback address for the egress upstreams")
        self.hosts = os.path.join(self.tmp, "hosts")
        with open(self.hosts, "w") as f:
            f.write("%s %s\n" % (self.addr, " ".join(NAMES)))
            f.write("10.1.2.3 private.example.com\n")
            f.write("127.0.0.1 loop.example.com\n")
            f.write("169.254.169.254 meta.example.com\n")
            f.write("%s cgnat.example.com\n" % "100.64.1.1")

    def _certs(self):
        d = self.tmp
        ca_key, ca, key, csr, crt = (os.path.join(d, n) for n in
                                     ("ca.key", "ca.pem", "srv.key", "srv.csr", "srv.pem"))
        ext = os.path.join(d, "ext.cnf")
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\nbasicConstraints=CA:FALSE\n"
                    "extendedKeyUsage=serverAuth\n" % ",".join("DNS:" + n for n in NAMES))
        run = lambda *a: subprocess.run(a, check=True, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=sbx test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=sbx test upstream")
        run("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key,
            "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext)
        with open(ca, "rb") as f:
            self.ca_pem = f.read()
        return crt, key

    def _start(self):
        if not hasattr(self, "ca_pem"):
            self.cert = self._certs()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*self.cert)
        for port, scheme in ((443, "https"), (80, "http")):
            s = _Server((self.addr, port), _Handler)
            s.scheme = scheme
            s.seen = []
            if scheme == "https":
                s.socket = ctx.wrap_socket(s.socket, server_side=True,
                                           do_handshake_on_connect=False)
            self.servers.append(s)
            threading.Thread(target=s.serve_forever, daemon=True).start()
        self.https, self.http = self.servers

    def env(self):
        return {"SBX_EGRESS_HOSTS": self.hosts,
                "SBX_EGRESS_TEST_UPSTREAMS": "%s:443,%s:80" % (self.addr, self.addr)}

    def install(self, client, sid):
        """Put the test CA and the probe script into a sandbox's workspace."""
        for name, data in (("ca.pem", self.ca_pem), ("probe.py", PROBE.encode())):
            r = client.request("PUT", "/v1/sandboxes/%s/files/%s" % (sid, name), raw=data)
            assert r.status in (200, 201), r

    def close_servers(self):
        for s in self.servers:
            s.shutdown()
            s.server_close()
        self.servers = []

    def close(self):
        self.close_servers()
        shutil.rmtree(self.tmp, ignore_errors=True)


def probe(client, sid, *args):
    import json
    import shlex
    r = client.exec(sid, shell="python3 /workspace/probe.py " + " ".join(
        shlex.quote(a) for a in args), timeout_seconds=60)
    assert r["exit_code"] == 0, r
    return json.loads(r["stdout"])
