"""The app the preview tests (and bench_preview) run inside a sandbox: python3 preview_app.py PORT.

GET /hello[?x]   -> "hello from the sandbox <path>" and the Connection header it saw
GET /sse?n=N     -> N server-sent events, 100 ms apart (chunked)
GET /big?n=N     -> N bytes, Content-Length
POST /echo       -> the body back
GET /ws          -> a WebSocket echo (RFC 6455, text and binary)
"""
import base64
import hashlib
import http.server
import struct
import sys
import time

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class H(http.server.BaseHTTPRequestHandler):
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
        if self.path.startswith("/sse"):
            n = int(self.path.split("n=")[1]) if "n=" in self.path else 3
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(n):
                ev = ("data: tick %d %.3f\n\n" % (i, time.time())).encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                self.wfile.flush()
                time.sleep(0.1)
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path.startswith("/big"):
            n = int(self.path.split("n=")[1])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"x" * 65536
            while n > 0:
                self.wfile.write(chunk[:n])
                n -= min(n, len(chunk))
            return
        if self.path.startswith("/ws"):
            return self._ws()
        body = ("hello from the sandbox %s connection=%s" % (
            self.path, self.headers.get("Connection", ""))).encode()
        self._send(200, body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self._send(200, self.rfile.read(n), "application/octet-stream")

    def _ws(self):
        self.close_connection = True
        key = self.headers["Sec-WebSocket-Key"]
        acc = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", acc)
        self.end_headers()
        self.wfile.flush()
        r = self.rfile
        while True:
            h = r.read(2)
            if len(h) < 2:
                return
            op, ln = h[0] & 0x0F, h[1] & 0x7F
            if ln == 126:
                ln = struct.unpack("!H", r.read(2))[0]
            elif ln == 127:
                ln = struct.unpack("!Q", r.read(8))[0]
            mask = r.read(4) if h[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(r.read(ln)))
            if op == 8:
                self.wfile.write(b"\x88\x00")
                return
            if op in (1, 2):
                hdr = bytes([0x80 | op])
                if len(data) < 126:
                    hdr += bytes([len(data)])
                else:
                    hdr += bytes([126]) + struct.pack("!H", len(data))
                self.wfile.write(hdr + data)
                self.wfile.flush()


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
