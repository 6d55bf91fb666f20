"""First contact (docs/troubleshooting in README, docs/preview.md, docs/api-contract.md):
CORS for browser apps, preview links that turn into a cookie session on a page load,
waiting for a port, and refusals that name their real cause.
"""

import http.client
import json
import re
import urllib.parse

import harness
from harness import assert_error

APP_ORIGIN = "http://app.test"
D = harness.Shared(extra_env={"SBX_CORS_ORIGINS": APP_ORIGIN + ", http://other-app.test",
                              "SBX_TERMINAL_ORIGINS": APP_ORIGIN, "SBX_MAX_PER_KEY": "3"})
PORT = 8000


def teardown_module():
    D.close()


def api(method, path, headers):
    d = D.get()
    conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
    conn.request(method, path, headers=headers)
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def preview_get(path, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", D.get().preview_port, timeout=30)
    conn.request("GET", path, headers=headers or {})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def user(name):
    k = D.once("key:" + name, lambda d: d.client().create_key(name))
    return D.get().client(k["key"]), k


def server_sandbox():
    """bob's sandbox serving /workspace/site with python3 -m http.server on PORT."""
    c, _ = user("bob")

    def make(d):
        sid = c.create_sandbox(ttl_seconds=1200)["id"]
        c.sh(sid, "mkdir -p /workspace/site/docs && echo 'hello from a file' > "
                  "/workspace/site/docs/note.txt && echo top > /workspace/site/top.txt")
        c.ok("POST", "/v1/sandboxes/%s/processes" % sid,
             {"command": "cd /workspace/site && exec python3 -m http.server %d" % PORT},
             status=201)
        c.ok("POST", "/v1/sandboxes/%s/preview" % sid, {"port": PORT, "wait_seconds": 20})
        return sid
    return c, D.once("sb:server", make)


# --- CORS --------------------------------------------------------------------------------

def test_preflight_from_an_allowed_origin():
    st, h, body = api("OPTIONS", "/v1/sandboxes", {
        "Origin": APP_ORIGIN, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert st == 204, (st, body)
    assert h["access-control-allow-origin"] == APP_ORIGIN, h
    assert "Origin" in h["vary"], h
    allowed = [x.strip().lower() for x in h["access-control-allow-headers"].split(",")]
    for need in ("authorization", "content-type", "idempotency-key", "accept"):
        assert need in allowed, allowed
    assert "POST" in h["access-control-allow-methods"] and "DELETE" in \
        h["access-control-allow-methods"], h
    assert "access-control-allow-credentials" not in h, h


def test_answers_to_an_allowed_origin_expose_the_request_id():
    key = D.get().admin_key
    st, h, body = api("GET", "/v1/keys", {"Origin": "http://other-app.test",
                                          "Authorization": "Bearer " + key})
    assert st == 200, body
    assert h["access-control-allow-origin"] == "http://other-app.test", h
    assert "x-request-id" in h["access-control-expose-headers"], h
    assert "access-control-allow-credentials" not in h
    # Errors carry it too, so a browser app can read the API's error body.
    st, h, body = api("GET", "/v1/sandboxes/sb_nope", {"Origin": APP_ORIGIN,
                                                       "Authorization": "Bearer " + key})
    assert st == 404 and h["access-control-allow-origin"] == APP_ORIGIN, (st, h)


def test_a_refused_origin_gets_no_cors_headers():
    st, h, body = api("OPTIONS", "/v1/sandboxes", {
        "Origin": "http://evil.test", "Access-Control-Request-Method": "POST"})
    assert st == 403, (st, body)
    assert json.loads(body)["error"]["code"] == "origin_not_allowed"
    assert "SBX_CORS_ORIGINS" in json.loads(body)["error"]["message"]
    assert "access-control-allow-origin" not in h, h
    st, h, body = api("GET", "/healthz", {"Origin": "http://evil.test"})
    assert st == 200 and "access-control-allow-origin" not in h, h


def test_no_cors_unless_configured():
    d = harness.Daemon()
    try:
        d.start()
        conn = http.client.HTTPConnection("127.0.0.1", d.port, timeout=30)
        conn.request("OPTIONS", "/v1/sandboxes", headers={
            "Origin": APP_ORIGIN, "Access-Control-Request-Method": "GET"})
        r = conn.getresponse()
        r.read()
        assert r.status == 403 and r.getheader("Access-Control-Allow-Origin") is None
    finally:
        d.cleanup()


# --- preview sessions ---------------------------------------------------------------------

def test_wait_seconds_waits_for_the_port_then_the_link_works():
    c, sid = server_sandbox()
    r = c.ok("POST", "/v1/sandboxes/%s/preview" % sid, {"port": PORT, "wait_seconds": 20})
    # Listening now: an API client fetching the link gets the listing at once.
    u = urllib.parse.urlsplit(r["url"])
    st, _, body = preview_get(u.path + "?" + u.query)
    assert st == 200 and b"top.txt" in body, (st, body[:300])


def test_a_page_load_trades_the_token_for_a_cookie_and_links_work():
    c, sid = server_sandbox()
    r = c.ok("POST", "/v1/sandboxes/%s/preview" % sid, {"port": PORT, "wait_seconds": 20})
    u = urllib.parse.urlsplit(r["url"])
    nav = {"Accept": "text/html,application/xhtml+xml", "Sec-Fetch-Mode": "navigate"}
    st, h, body = preview_get(u.path + "?" + u.query, nav)
    assert st == 302, (st, body)
    assert h["location"] == u.path, h  # the same page without the token
    cookie = h["set-cookie"]
    attrs = [a.strip() for a in cookie.split(";")]
    assert attrs[0].startswith("sbx_preview=") and "HttpOnly" in attrs, cookie
    assert "SameSite=Lax" in attrs and "Path=/p/%s/%d" % (sid, PORT) in attrs, cookie
    assert "Secure" not in attrs, cookie  # served over plain HTTP here
    max_age = int([a for a in attrs if a.startswith("Max-Age=")][0][8:])
    assert 0 < max_age <= 900, cookie
    jar = {"Cookie": attrs[0]}
    st, _, listing = preview_get(h["location"], dict(nav, **jar))
    assert st == 200 and b'href="docs/"' in listing, listing[:400]
    # Follow the links of the listing as a browser would, with the cookie only.
    st, _, sub = preview_get(h["location"] + "docs/", dict(nav, **jar))
    assert st == 200 and b"note.txt" in sub, sub[:400]
    st, _, note = preview_get(h["location"] + "docs/note.txt", jar)
    assert st == 200 and note == b"hello from a file\n", note
    # Without the cookie the same link is refused, as before.
    st, _, body = preview_get(h["location"] + "docs/note.txt")
    assert st == 403 and json.loads(body)["error"]["code"] == "invalid_signature", body


def test_the_cookie_is_useless_for_another_port_or_sandbox():
    c, sid = server_sandbox()
    r = c.ok("POST", "/v1/sandboxes/%s/preview" % sid, {"port": PORT, "wait_seconds": 20})
    u = urllib.parse.urlsplit(r["url"])
    st, h, _ = preview_get(u.path + "?" + u.query, {"Sec-Fetch-Mode": "navigate"})
    jar = {"Cookie": h["set-cookie"].split(";")[0]}
    st, _, body = preview_get("/p/%s/%d/" % (sid, PORT + 1), jar)
    assert st == 403 and json.loads(body)["error"]["code"] == "invalid_signature", body
    other = c.create_sandbox(ttl_seconds=300)["id"]
    st, _, body = preview_get("/p/%s/%d/" % (other, PORT), jar)
    assert st == 403 and json.loads(body)["error"]["code"] == "invalid_signature", body


def test_api_clients_keep_getting_the_app_itself():
    c, sid = server_sandbox()
    r = c.ok("POST", "/v1/sandboxes/%s/preview" % sid, {"port": PORT, "wait_seconds": 20})
    u = urllib.parse.urlsplit(r["url"])
    # curl, the SDKs, fetch(): no Sec-Fetch-Mode: navigate, no text/html -> no redirect.
    st, h, body = preview_get(u.path + "?" + u.query, {"Accept": "*/*"})
    assert st == 200 and "set-cookie" not in h, (st, h)


def test_waiting_for_a_port_that_never_opens_ends_in_504():
    c, sid = server_sandbox()
    r = c.request("POST", "/v1/sandboxes/%s/preview" % sid, {"port": 9123, "wait_seconds": 1})
    assert_error(r, 504, "preview_port_timeout")
    assert "port 9123" in r.body["error"]["message"], r.body
    for bad in (-1, 61, "3", 1.5):
        r = c.request("POST", "/v1/sandboxes/%s/preview" % sid, {"port": PORT, "wait_seconds": bad})
        assert_error(r, 400, "invalid_request")


# --- refusals that name their cause ---------------------------------------------------------

def test_pause_names_the_listening_port_that_blocks_it():
    c, sid = server_sandbox()
    r = c.request("POST", "/v1/sandboxes/%s/pause" % sid)
    assert_error(r, 409, "snapshot_unsupported")
    assert "listens on TCP port %d" % PORT in r.body["error"]["message"], r.body


def test_pause_names_an_open_incoming_preview_connection():
    c, _ = user("carol")
    sid = c.create_sandbox(ttl_seconds=300)["id"]
    # A server that accepts one connection, then stops listening and keeps it open.
    c.ok("POST", "/v1/sandboxes/%s/processes" % sid, {"command": (
        "python3 -c \"import socket,time; s=socket.socket(); "
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', 8001)); "
        "s.listen(1); a,_=s.accept(); s.close(); time.sleep(60)\"")}, status=201)
    r = c.ok("POST", "/v1/sandboxes/%s/preview" % sid, {"port": 8001, "wait_seconds": 20})
    # The probe of wait_seconds took the one accept: make a fresh server for the real one.
    c.ok("POST", "/v1/sandboxes/%s/processes" % sid, {"command": (
        "python3 -c \"import socket,time; s=socket.socket(); "
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', 8002)); "
        "s.listen(1); a,_=s.accept(); s.close(); time.sleep(60)\"")}, status=201)
    r = c.ok("POST", "/v1/sandboxes/%s/preview" % sid, {"port": 8002})
    c.sh(sid, "for i in $(seq 100); do grep -q ':1F42 .* 0A' /proc/net/tcp && exit 0; "
              "sleep 0.1; done; exit 1")
    u = urllib.parse.urlsplit(r["url"])
    conn = http.client.HTTPConnection("127.0.0.1", D.get().preview_port, timeout=30)
    conn.putrequest("GET", u.path + "?" + u.query)
    conn.endheaders()
    # The server accepted and closed its listener; our connection stays open through
    # the agent while we pause.
    c.sh(sid, "for i in $(seq 100); do grep -q ':1F42 .* 0A' /proc/net/tcp || exit 0; "
              "sleep 0.1; done; exit 1")
    r = c.request("POST", "/v1/sandboxes/%s/pause" % sid)
    conn.close()
    assert_error(r, 409, "snapshot_unsupported")
    msg = r.body["error"]["message"]
    assert "incoming preview connection to port 8002" in msg and "egress" not in msg, msg


def test_a_limit_refusal_says_what_counts():
    c, _ = user("dave")
    a = c.create_sandbox(ttl_seconds=300)["id"]
    kids = c.ok("POST", "/v1/sandboxes/%s/fork" % a, {"count": 1})
    kid = kids["data"][0]["id"]
    b = c.create_sandbox(ttl_seconds=300)["id"]
    r = c.request("POST", "/v1/sandboxes", {"ttl_seconds": 60})
    assert_error(r, 429, "sandbox_concurrency_limit")
    msg = r.body["error"]["message"]
    assert "at most 3 running sandboxes per key" in msg, msg
    assert re.search(r"%s, %s \(fork copy of %s\), %s" % (a, kid, a, b), msg), msg


def test_a_refused_terminal_is_logged_with_its_reason():
    c, sid = server_sandbox()
    t = c.ok("POST", "/v1/sandboxes/%s/terminal-ticket" % sid, {})
    st, h, body = api("GET", "/v1/sandboxes/%s/terminal?ticket=%s" % (sid, t["ticket"]), {
        "Origin": "http://evil.test", "Upgrade": "websocket", "Connection": "Upgrade",
        "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    assert st == 403 and json.loads(body)["error"]["code"] == "origin_not_allowed", (st, body)
    log = D.get().log_text()
    line = [x for x in log.splitlines() if "terminal %s refused" % sid in x]
    assert line and h["x-request-id"] in line[-1] and "http://evil.test" in line[-1], line
    assert "origin_not_allowed" in line[-1], line
