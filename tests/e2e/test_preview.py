"""Preview URLs (docs/preview.md) through a real sbxd and a real app in a sandbox
(preview_app.py): the route and every bad input, HTTP by path and by host name, an SSE
endpoint streaming, a WebSocket echo, expiry (of new requests and of an open
connection), bad links, and a port where only the host listens, which the preview
never reaches.
"""

import hashlib
import hmac
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse

import harness
import wsclient
from harness import assert_error

DOMAIN = "preview.test"
D = harness.Shared(extra_env={"SBX_PREVIEW_DOMAIN": DOMAIN, "SBX_PREVIEW_SCHEME": "http"})
APP_PORT = 8000
APP = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "preview_app.py"),
           "rb").read()


def teardown_module():
    D.close()


def user(name):
    k = D.once("key:" + name, lambda d: d.client().create_key(name))
    return D.get().client(k["key"])


def start_app(c, sid, port=APP_PORT):
    assert c.request("PUT", "/v1/sandboxes/%s/files/preview_app.py" % sid, raw=APP).status == 200
    c.ok("POST", "/v1/sandboxes/%s/processes" % sid,
         {"command": "python3 /workspace/preview_app.py %d" % port}, status=201)
    # Listening once a connection from inside the sandbox succeeds.
    c.sh(sid, "for i in $(seq 100); do python3 -c 'import socket; "
               "socket.create_connection((\"127.0.0.1\", %d))' 2>/dev/null && exit 0; "
               "sleep 0.1; done; exit 1" % port)


def app_sandbox():
    """alice's sandbox with the app on APP_PORT (made once per module)."""
    c = user("alice")

    sid = D.once("sb:app", lambda d: c.create_sandbox(ttl_seconds=1200)["id"])
    D.once("app:" + sid, lambda d: start_app(c, sid) or True)
    return c, sid


def preview(c, sid, port=APP_PORT, **fields):
    return c.ok("POST", "/v1/sandboxes/%s/preview" % sid, dict(port=port, **fields))


def token_of(url):
    return urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["sbx_preview"][0]


def raw(path, headers=None, method="GET", body=None, timeout=30):
    """One request to the preview listener: (status, headers, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", D.get().preview_port, timeout=timeout)
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def assert_link_error(got, status, code):
    st, hdrs, body = got
    assert st == status, (st, body)
    j = json.loads(body)
    assert set(j) == {"error"} and j["error"]["code"] == code and j["error"]["message"], j
    assert hdrs["content-type"] == "application/json", hdrs


def forge(sid, port, expires):
    """A link signed with the daemon's own key, for an expiry the route would refuse."""
    key = open(os.path.join(D.get().data_dir, "preview-link.key"), "rb").read()
    msg = b"\0".join([b"sbx-artifact-v1", sid.encode(), str(port).encode(), b"preview",
                      str(expires).encode()]) + b"\0"
    return "%d.%s" % (expires, hmac.new(key, msg, hashlib.sha256).hexdigest())


def test_route_answers_a_signed_host_name_link():
    c, sid = app_sandbox()
    t0 = int(time.time())
    r = preview(c, sid)
    assert set(r) == {"object", "sandbox_id", "port", "url", "expires_at"}, r
    assert r["object"] == "preview" and r["sandbox_id"] == sid and r["port"] == APP_PORT
    assert t0 + 900 <= r["expires_at"] <= int(time.time()) + 900, r
    u = urllib.parse.urlsplit(r["url"])
    assert (u.scheme, u.hostname, u.path) == ("http", "%d-%s.%s" % (APP_PORT, sid, DOMAIN), "/")
    assert token_of(r["url"]).startswith("%d." % r["expires_at"])
    r = preview(c, sid, ttl_seconds=60)
    assert t0 + 60 <= r["expires_at"] <= int(time.time()) + 60
    assert preview(c, sid, port=65535, ttl_seconds=3600)["port"] == 65535
    assert preview(c, sid, port=1024)["port"] == 1024
    got = [e for e in c.ok("GET", "/v1/audit?sandbox_id=%s" % sid)["data"]
           if e["action"] == "sandbox.preview"]
    assert len(got) == 4 and got[0]["outcome"] == "ok", got
    assert {"port", "ttl_seconds", "expires_at"} <= set(got[-1]["details"]), got[-1]
    assert "url" not in got[-1]["details"] and "sbx_preview" not in json.dumps(got)


def test_route_bad_input_changes_nothing():
    c, sid = app_sandbox()
    before = len(c.ok("GET", "/v1/audit?sandbox_id=%s" % sid)["data"])
    p = "/v1/sandboxes/%s/preview" % sid
    for body, code in [({}, "invalid_port"), ({"port": "8000"}, "invalid_port"),
                       ({"port": 1023}, "invalid_port"), ({"port": 65536}, "invalid_port"),
                       ({"port": 8080}, "invalid_port"), ({"port": 0}, "invalid_port"),
                       ({"port": 8000.5}, "invalid_port"), ({"port": None}, "invalid_port"),
                       ({"port": 8000, "ttl_seconds": 59}, "invalid_ttl"),
                       ({"port": 8000, "ttl_seconds": 3601}, "invalid_ttl"),
                       ({"port": 8000, "ttl_seconds": "900"}, "invalid_ttl"),
                       ({"port": 8000, "ttl_seconds": 0}, "invalid_ttl"),
                       ({"port": 8000, "host": "10.0.0.1"}, "invalid_request")]:
        assert_error(c.request("POST", p, body), 400, code)
    assert_error(c.request("POST", p, raw=b"{nope"), 400, "invalid_json")
    assert_error(c.request("POST", p, raw=b"[8000]"), 400, "invalid_json")
    assert_error(c.request("POST", "/v1/sandboxes/sb_nothere/preview", {"port": 8000}), 404,
                 "sandbox_not_found")
    assert_error(user("bob").request("POST", p, {"port": 8000}), 404, "sandbox_not_found")
    assert_error(c.request("POST", p, {"port": 8000}, key=None), 401, "missing_api_key")
    assert_error(c.request("GET", p), 405, "method_not_allowed")
    assert len(c.ok("GET", "/v1/audit?sandbox_id=%s" % sid)["data"]) == before
    v1 = c.create_sandbox(backend="v1")["id"]
    assert_error(c.request("POST", "/v1/sandboxes/%s/preview" % v1, {"port": 8000}), 409,
                 "not_supported_on_v1")
    assert [e["action"] for e in c.ok("GET", "/v1/audit?sandbox_id=%s" % v1)["data"]] == [
        "sandbox.create"]
    c.delete_sandbox(v1)


def test_http_by_host_name_and_by_path():
    c, sid = app_sandbox()
    r = preview(c, sid)
    tok = token_of(r["url"])
    host = "%d-%s.%s" % (APP_PORT, sid, DOMAIN)
    # By host name, as a reverse proxy in front forwards it (Host kept).
    st, _, body = raw("/hello?a=1&sbx_preview=%s&b=2" % tok, {"Host": host})
    assert st == 200 and body.startswith(b"hello from the sandbox /hello?a=1&b=2 "), body
    st, _, body = raw("/?sbx_preview=" + tok, {"Host": host.upper() + ":443"})
    assert st == 200 and body.startswith(b"hello from the sandbox / "), body
    # By path: the prefix and the token are the preview's, the server never sees them, and
    # the connection carries one request.
    base = "/p/%s/%d" % (sid, APP_PORT)
    st, _, body = raw(base + "/x/y?sbx_preview=" + tok)
    assert (st, body) == (200, b"hello from the sandbox /x/y connection=close"), body
    st, _, body = raw(base + "?sbx_preview=" + tok)
    assert (st, body) == (200, b"hello from the sandbox / connection=close"), body
    # The cookie instead of the query.
    st, _, body = raw(base + "/c", {"Cookie": "theme=dark; sbx_preview=" + tok})
    assert st == 200 and body.startswith(b"hello from the sandbox /c "), body
    # A body both ways (larger than one frame).
    blob = os.urandom(600 * 1024)
    st, _, body = raw(base + "/echo?sbx_preview=" + tok, method="POST", body=blob,
                      headers={"Content-Type": "application/octet-stream"})
    assert st == 200 and body == blob
    st, hdrs, body = raw(base + "/big?n=3000000&sbx_preview=" + tok)
    assert st == 200 and len(body) == 3000000 and hdrs["content-length"] == "3000000"


def test_sse_streams_through_the_preview():
    c, sid = app_sandbox()
    tok = token_of(preview(c, sid)["url"])
    conn = http.client.HTTPConnection("127.0.0.1", D.get().preview_port, timeout=30)
    t0 = time.time()
    conn.request("GET", "/p/%s/%d/sse?n=6&sbx_preview=%s" % (sid, APP_PORT, tok))
    r = conn.getresponse()
    assert r.status == 200 and r.getheader("Content-Type") == "text/event-stream"
    assert r.getheader("Transfer-Encoding") == "chunked"
    seen = []
    while True:
        line = r.fp.readline()  # http.client hands chunked bodies through read(); parse lines
        if not line:
            break
        if line.startswith(b"data: tick"):
            seen.append(time.time() - t0)
        if len(seen) == 6:
            break
    conn.close()
    # Each event arrived as it was sent, not all at the end (0.1 s apart at the source).
    assert len(seen) == 6, seen
    assert seen[0] < seen[-1] - 0.3, seen


def test_websocket_echo_through_the_preview():
    c, sid = app_sandbox()
    tok = token_of(preview(c, sid)["url"])
    ws = wsclient.connect(D.get().preview_port, "/p/%s/%d/ws?sbx_preview=%s" % (sid, APP_PORT,
                                                                                tok))
    try:
        ws.send_text("hello through the preview")
        op, data = ws.recv()
        assert (op, data) == (1, b"hello through the preview"), (op, data)
        blob = os.urandom(60000)
        ws.send_binary(blob)
        op, data = ws.recv()
        assert (op, data) == (2, blob)
    finally:
        ws.close()
    # By host name too (wsclient names 127.0.0.1 as the Host, so the handshake is ours).
    s = socket.create_connection(("127.0.0.1", D.get().preview_port), timeout=30)
    s.sendall(("GET /ws?sbx_preview=%s HTTP/1.1\r\nHost: %d-%s.%s\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               "Sec-WebSocket-Version: 13\r\n\r\n" % (tok, APP_PORT, sid, DOMAIN)).encode())
    status, hdrs, rest = wsclient._read_http_head(s)
    assert status == 101 and hdrs["sec-websocket-accept"] == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    ws = wsclient.WebSocket(s, rest)
    try:
        ws.send_text("again")
        assert ws.recv() == (1, b"again")
    finally:
        ws.close()


def test_expired_links_and_an_open_connection_cut_at_expiry():
    c, sid = app_sandbox()
    base = "/p/%s/%d" % (sid, APP_PORT)
    gone = forge(sid, APP_PORT, int(time.time()) - 1)
    assert_link_error(raw(base + "/?sbx_preview=" + gone), 410, "preview_expired")
    soon = forge(sid, APP_PORT, int(time.time()) + 2)
    st, _, body = raw(base + "/?sbx_preview=" + soon)
    assert st == 200, body
    # An SSE stream of 10 s opened now is cut when the link expires.
    s = socket.create_connection(("127.0.0.1", D.get().preview_port), timeout=15)
    s.sendall(("GET %s/sse?n=100&sbx_preview=%s HTTP/1.1\r\nHost: x\r\n\r\n"
               % (base, soon)).encode())
    t0 = time.time()
    got = b""
    while True:
        d = s.recv(65536)
        if not d:
            break
        got += d
    s.close()
    assert got.startswith(b"HTTP/1.0 200") or got.startswith(b"HTTP/1.1 200"), got[:80]
    assert b"data: tick 0" in got and time.time() - t0 < 4, (time.time() - t0, got[-80:])
    assert_link_error(raw(base + "/?sbx_preview=" + soon), 410, "preview_expired")


def test_bad_links_are_refused():
    c, sid = app_sandbox()
    tok = token_of(preview(c, sid)["url"])
    base = "/p/%s/%d" % (sid, APP_PORT)
    exp, sig = tok.split(".")
    bad_sig = "%s.%s" % (exp, ("0" if sig[0] != "0" else "1") + sig[1:])
    later = "%d.%s" % (int(exp) + 1, sig)
    for path in [base + "/", base + "/?sbx_preview=", base + "/?sbx_preview=" + bad_sig,
                 base + "/?sbx_preview=" + later, base + "/?sbx_preview=" + exp,
                 "/p/%s/%d/?sbx_preview=%s" % (sid, APP_PORT + 1, tok),
                 "/p/sb_0000000000000000/%d/?sbx_preview=%s" % (APP_PORT, tok)]:
        assert_link_error(raw(path), 403, "invalid_signature")
    assert_link_error(raw("/?sbx_preview=" + tok, {"Host": "%d-%s.%s" % (APP_PORT + 1, sid,
                                                                         DOMAIN)}),
                      403, "invalid_signature")
    for path in ["/", "/p/", "/p/%s/" % sid, "/p/%s/http/" % sid, "/p/%s/99999/" % sid]:
        assert_link_error(raw(path), 404, "preview_not_found")
    assert_link_error(raw("/", {"Host": "8000-%s.elsewhere.test" % sid}), 404,
                      "preview_not_found")
    # Not HTTP at all.
    s = socket.create_connection(("127.0.0.1", D.get().preview_port), timeout=10)
    s.sendall(b"\x16\x03\x01\x02\x00garbage\r\n\r\n")
    resp = s.recv(65536)
    s.close()
    assert resp.startswith(b"HTTP/1.1 400 "), resp
    assert json.loads(resp.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "invalid_request"
    # Two Host headers.
    st = raw(base + "/?sbx_preview=" + tok, {"Host": "a", "host": "b"})
    assert_link_error(st, 400, "invalid_request")
    # A head over 16 KiB.
    st = raw(base + "/?sbx_preview=" + tok, {"X-Big": "a" * 17000})
    assert_link_error(st, 400, "invalid_request")


def test_a_port_with_nothing_inside_and_a_deleted_sandbox():
    c, sid = app_sandbox()
    tok = token_of(preview(c, sid, port=9000)["url"])
    assert_link_error(raw("/p/%s/9000/?sbx_preview=%s" % (sid, tok)), 502,
                      "preview_unreachable")
    other = c.create_sandbox()["id"]
    tok = token_of(preview(c, other)["url"])
    c.delete_sandbox(other)
    assert_link_error(raw("/p/%s/%d/?sbx_preview=%s" % (other, APP_PORT, tok)), 404,
                      "sandbox_not_found")


def test_the_host_is_never_reached():
    """A port where only the host listens: the preview reaches the sandbox's own
    loopback, where nothing listens, and the host's server sees no connection."""
    c, sid = app_sandbox()
    host = socket.socket()
    host.bind(("127.0.0.1", 0))
    host.listen(8)
    port = host.getsockname()[1]
    accepted = []

    def serve():
        host.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = host.accept()
            except OSError:
                continue
            accepted.append(conn)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nHOST")
            conn.close()
    stop = threading.Event()
    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        r = preview(c, sid, port=port)
        for path in ["/p/%s/%d/?sbx_preview=%s" % (sid, port, token_of(r["url"]))]:
            got = raw(path)
            assert_link_error(got, 502, "preview_unreachable")
            assert b"HOST" not in got[2]
        got = raw("/?sbx_preview=" + token_of(r["url"]),
                  {"Host": "%d-%s.%s" % (port, sid, DOMAIN)})
        assert_link_error(got, 502, "preview_unreachable")
        # A request naming the host in its target still goes to the sandbox's port.
        got = raw("http://127.0.0.1:%d/p/%s/%d/?sbx_preview=%s" % (port, sid, port,
                                                                  token_of(r["url"])))
        assert_link_error(got, 502, "preview_unreachable")
    finally:
        stop.set()
        th.join()
        host.close()
    assert accepted == [], "the host's server was reached"
