"""A small RFC 6455 WebSocket client on the standard library, for the tests.

    ws = wsclient.connect(port, "/v1/sandboxes/sb/terminal?ticket=...", origin=None)
    ws.send_binary(b"ls\\n"); ws.send_text('{"type":"resize","cols":100,"rows":40}')
    op, data = ws.recv()          # whole messages; pings are answered on the way
    ws.close()

Client frames are masked (as the RFC requires); send_* can split a message into
fragments; recv reassembles fragmented messages and answers pings with pongs.
connect() raises HandshakeError (with .status, .body) when the server answers the
upgrade request with anything but 101.
"""

import base64
import hashlib
import json
import os
import socket
import struct
import time

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10


class HandshakeError(AssertionError):
    def __init__(self, status, headers, body):
        super().__init__("handshake answered %d: %r" % (status, body))
        self.status = status
        self.headers = headers
        self.body = body


class Closed(Exception):
    def __init__(self, code, reason):
        super().__init__("closed %s %r" % (code, reason))
        self.code = code
        self.reason = reason


def _read_http_head(sock):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("connection closed during the handshake: %r" % buf)
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, rest


def connect(port, path, origin=None, headers=None, host="127.0.0.1", timeout=30, key=None):
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = key or base64.b64encode(os.urandom(16)).decode()
    req = ["GET %s HTTP/1.1" % path, "Host: %s:%d" % (host, port), "Upgrade: websocket",
           "Connection: Upgrade", "Sec-WebSocket-Key: " + key, "Sec-WebSocket-Version: 13"]
    if origin:
        req.append("Origin: " + origin)
    for k, v in (headers or {}).items():
        req.append("%s: %s" % (k, v))
    sock.sendall(("\r\n".join(req) + "\r\n\r\n").encode())
    status, hdrs, rest = _read_http_head(sock)
    if status != 101:
        # An error answer: read its body (Content-Length or until close).
        n = int(hdrs.get("content-length", "0") or 0)
        while len(rest) < n:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        sock.close()
        try:
            body = json.loads(rest) if rest else None
        except ValueError:
            body = rest
        raise HandshakeError(status, hdrs, body)
    want = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    assert hdrs.get("sec-websocket-accept") == want, hdrs
    assert hdrs.get("upgrade", "").lower() == "websocket", hdrs
    return WebSocket(sock, rest)


class WebSocket:
    def __init__(self, sock, buffered=b""):
        self.sock = sock
        self.buf = bytearray(buffered)
        self.closed = None      # (code, reason) once the server's close frame arrived
        self.pongs = []

    # --- sending -----------------------------------------------------------------------

    def _frame(self, op, payload, fin=True, mask=True):
        b0 = (0x80 if fin else 0) | op
        n = len(payload)
        mbit = 0x80 if mask else 0
        if n < 126:
            head = struct.pack("!BB", b0, mbit | n)
        elif n < 65536:
            head = struct.pack("!BBH", b0, mbit | 126, n)
        else:
            head = struct.pack("!BBQ", b0, mbit | 127, n)
        if not mask:
            return head + payload
        m = os.urandom(4)
        body = bytes(b ^ m[i & 3] for i, b in enumerate(payload)) if n < 4096 else \
            _xor(payload, m)
        return head + m + body

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, op, payload, fragments=1, mask=True):
        if isinstance(payload, str):
            payload = payload.encode()
        if fragments <= 1:
            self.sock.sendall(self._frame(op, payload, mask=mask))
            return
        size = max(1, -(-len(payload) // fragments))
        parts = [payload[i:i + size] for i in range(0, len(payload), size)] or [b""]
        out = b""
        for i, p in enumerate(parts):
            out += self._frame(op if i == 0 else OP_CONT, p, fin=(i == len(parts) - 1),
                               mask=mask)
        self.sock.sendall(out)

    def send_binary(self, data, fragments=1):
        self.send(OP_BINARY, data, fragments)

    def send_text(self, text, fragments=1):
        self.send(OP_TEXT, text, fragments)

    def send_json(self, obj):
        self.send_text(json.dumps(obj))

    def ping(self, payload=b"p"):
        self.sock.sendall(self._frame(OP_PING, payload))

    # --- receiving ---------------------------------------------------------------------

    def _need(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("no frame in time")
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed by the server")
            self.buf += chunk

    def _frame_in(self, deadline):
        self._need(2, deadline)
        b0, b1 = self.buf[0], self.buf[1]
        assert not (b1 & 0x80), "server frames must not be masked"
        n = b1 & 0x7F
        off = 2
        if n == 126:
            self._need(4, deadline)
            n = struct.unpack("!H", self.buf[2:4])[0]
            off = 4
        elif n == 127:
            self._need(10, deadline)
            n = struct.unpack("!Q", self.buf[2:10])[0]
            off = 10
        self._need(off + n, deadline)
        payload = bytes(self.buf[off:off + n])
        del self.buf[:off + n]
        return bool(b0 & 0x80), b0 & 0x0F, payload

    def recv(self, timeout=30):
        """The next whole data message as (OP_TEXT|OP_BINARY, bytes). Raises Closed when
        the server closes (after answering its close frame)."""
        deadline = time.monotonic() + timeout
        msg_op, parts = None, []
        while True:
            fin, op, payload = self._frame_in(deadline)
            if op == OP_PING:
                self.sock.sendall(self._frame(OP_PONG, payload))
                continue
            if op == OP_PONG:
                self.pongs.append(payload)
                continue
            if op == OP_CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                reason = payload[2:].decode("utf-8", "replace")
                self.closed = (code, reason)
                try:
                    self.sock.sendall(self._frame(OP_CLOSE, payload[:2]))
                except OSError:
                    pass
                raise Closed(code, reason)
            if op != OP_CONT:
                msg_op = op
            parts.append(payload)
            if fin:
                return msg_op, b"".join(parts)

    def recv_json(self, timeout=30):
        """The next text message, parsed (binary messages before it are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            op, data = self.recv(max(0.01, deadline - time.monotonic()))
            if op == OP_TEXT:
                return json.loads(data)

    def read_until(self, needle, timeout=30):
        """Terminal output (binary messages) up to and including needle (bytes or str);
        returns (output, control messages seen meanwhile)."""
        if isinstance(needle, str):
            needle = needle.encode()
        deadline = time.monotonic() + timeout
        out, controls = b"", []
        while needle not in out:
            op, data = self.recv(max(0.01, deadline - time.monotonic()))
            if op == OP_BINARY:
                out += data
            else:
                controls.append(json.loads(data))
        return out, controls

    def close(self, code=1000, reason=b""):
        try:
            self.sock.sendall(self._frame(OP_CLOSE, struct.pack("!H", code) + reason))
            deadline = time.monotonic() + 5
            while self.closed is None:
                fin, op, payload = self._frame_in(deadline)
                if op == OP_CLOSE:
                    self.closed = (struct.unpack("!H", payload[:2])[0]
                                   if len(payload) >= 2 else None, "")
        except (OSError, ConnectionError):
            pass
        finally:
            self.sock.close()

    def abort(self):
        """Drop the TCP connection without a close frame."""
        self.sock.close()


def _xor(data, mask):
    n = len(data)
    m = int.from_bytes((mask * (n // 4 + 1))[:n], "big")
    return (int.from_bytes(data, "big") ^ m).to_bytes(n, "big")
