"""HTTP strictness (docs/api-contract.md, "Requests sbxd refuses"): control bytes (a NUL
decoded from %00 among them) and invalid UTF-8 in a path, a query or a header value are
refused with 400 on both listeners;
too many header lines is 431; a slow request head and an idle keep-alive connection are cut
off while normal requests still pass; one address holds a bounded number of connections;
requests that wait on purpose (a long exec, an SSE stream) are not cut."""

import socket
import time

import harness

D = harness.Shared(extra_env={"SBX_HTTP_IDLE_SECONDS": "2", "SBX_HTTP_PER_ADDRESS": "24"})


def teardown_module():
    D.close()


def raw(port, data, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    out = b""
    try:
        while b"\r\n\r\n" not in out or len(out.split(b"\r\n\r\n", 1)[1]) < 2:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (socket.timeout, ConnectionResetError):
        pass  # a connection the daemon refused: no status
    s.close()
    head = out.split(b"\r\n", 1)[0]
    return int(head.split()[1]) if head.startswith(b"HTTP/1.1 ") else None, out


def req(target=b"/healthz", headers=b""):
    return b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n"


def test_control_bytes_and_bad_utf8_in_header_values_are_refused():
    d = D.get()
    for bad in (b"a\x01b", b"a\x7fb", b"a\x1bb", b"\xff\xfe", b"caf\xc3"):
        st, out = raw(d.port, req(headers=b"X-A: " + bad + b"\r\n"))
        assert st == 400 and b"header X-A" in out, (bad, out)
    st, out = raw(d.port, req(b"/v1/keys", b"Authorization: Bearer " + d.admin_key.encode() +
                              b"\x01zz\r\n"))
    assert st == 400 and b"Authorization" in out, out  # a key followed by junk is no key
    st, out = raw(d.port, req(headers=b"X-A: tab\tand caf\xc3\xa9 are fine\r\n"))
    assert st == 200, out
    st, out = raw(d.port, req(b"/v1/keys", b"Authorization: Bearer " + d.admin_key.encode() +
                              b"\r\n"))
    assert st == 200, out


def test_bad_bytes_in_the_path_and_the_query_are_refused():
    d = D.get()
    for target in (b"/v1/sandboxes/x%00y", b"/healthz%01", b"/healthz%ff", b"/x%7f"):
        st, out = raw(d.port, req(target))
        assert st == 400 and b"invalid_path" in out, (target, out)
    for target in (b"/healthz?a=%00", b"/healthz?a=%0a", b"/healthz?a=%e2%82"):
        st, out = raw(d.port, req(target))
        assert st == 400 and b"query parameter a" in out, (target, out)
    st, out = raw(d.port, req(b"/healthz?a=%c8%99"))  # ș
    assert st == 200, out


def test_too_many_header_lines():
    d = D.get()
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(150))
    st, out = raw(d.port, req(headers=many))
    assert st == 431 and b"too_many_headers" in out, out


def test_a_slow_request_head_is_cut_off_and_others_still_pass():
    d = D.get()
    slow = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    slow.sendall(b"GET /healthz HTTP/1.1\r\nHo")
    t0 = time.time()
    # Meanwhile the daemon answers everyone else.
    assert raw(d.port, req())[0] == 200
    slow.settimeout(8)
    got = slow.recv(4096)  # the daemon closes it: b"" (or a reset)
    assert got == b"" and time.time() - t0 < 7, got
    slow.close()


def test_an_idle_keep_alive_connection_is_closed():
    d = D.get()
    s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    s.sendall(req())
    first = s.recv(65536)
    assert first.startswith(b"HTTP/1.1 200"), first
    time.sleep(3)
    s.settimeout(5)
    assert s.recv(4096) == b""  # closed by the daemon while idle
    s.close()


def test_one_address_holds_a_bounded_number_of_connections():
    d = D.get()
    idle = [socket.create_connection(("127.0.0.1", d.port), timeout=5) for _ in range(24)]
    try:
        extra = socket.create_connection(("127.0.0.1", d.port), timeout=5)
        try:
            extra.sendall(req())
            got = extra.recv(4096)
        except (ConnectionResetError, BrokenPipeError):
            got = b""
        assert got == b"", got  # closed without an answer
        extra.close()
    finally:
        for s in idle:
            s.close()
    deadline = time.time() + 5
    while time.time() < deadline and raw(d.port, req())[0] != 200:
        time.sleep(0.1)
    assert raw(d.port, req())[0] == 200


def test_requests_that_wait_on_purpose_are_not_idle():
    c = D.client("waiter")
    sid = c.create_sandbox(ttl_seconds=300)["id"]
    r = c.exec(sid, shell="sleep 4; echo done")
    assert r["exit_code"] == 0 and r["stdout"] == "done\n", r
    it = c.stream("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "echo a; sleep 4; echo b"})
    head = next(it)
    assert head.status == 200, head
    events = [e for _, e in it]
    out = "".join(e.get("data", "") for e in events if e.get("type") == "stdout")
    assert out == "a\nb\n" and events[-1]["type"] == "exit", events


def test_the_preview_listener_refuses_the_same():
    d = D.get()
    st, out = raw(d.preview_port, b"GET /p/sb_x/8000/ HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n")
    assert st == 400 and b"invalid_request" in out, out
    st, out = raw(d.preview_port, b"GET /p/sb_x/8000/ HTTP/1.1\r\nHost: x\r\nX-A: \xff\r\n\r\n")
    assert st == 400, out
    for target in (b"/p/sb_x/8000/a\x00b", b"/p/sb_x/8000/\x00"):  # a raw NUL in the target
        st, out = raw(d.preview_port, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert st == 400 and b"invalid_request" in out, (target, out)


def put_raw(d, target, body, key=None):
    key = key or d.admin_key
    return raw(d.port, b"PUT " + target + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
               key.encode() + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


def test_a_raw_nul_in_the_path_is_refused_and_nothing_is_written():
    # libmicrohttpd 0.9.75 cuts the target at a raw NUL ("trunc\0/../x" would be "trunc").
    c = D.client()
    sid = D.once("nul_sb", lambda d: c.create_sandbox(ttl_seconds=300)["id"])
    d = D.get()
    base = b"/v1/sandboxes/" + sid.encode() + b"/files/"
    for target in (base + b"trunc\x00/../x", base + b"trunc\x00", base + b"\x00trunc",
                   base + b"trunc?a=\x00b"):
        st, out = put_raw(d, target, b"data")
        assert st == 400 and b"invalid_path" in out and b"NUL" in out, (target, out)
    listing = c.ok("GET", "/v1/sandboxes/%s/files?path=" % sid)
    assert not [f for f in listing["data"] if "trunc" in f["path"]], listing
    # The same request without the NUL is written.
    st, out = put_raw(d, base + b"trunc", b"data")
    assert st == 200, out


def test_a_raw_nul_in_a_header_value_is_refused():
    d = D.get()
    key = d.admin_key.encode()
    for hdr in (b"Authorization: Bearer " + key + b"\x00zz\r\n",
                b"Authorization: Bearer " + key + b"\x00\r\n",  # a NUL at the very end
                b"X-A: \x00\r\n",
                b"X-A: a\x00: b\r\n"):
        for last in (True, False):  # the last header line, or one among others
            heads = hdr + (b"" if last else b"X-After: 1\r\n")
            st, out = raw(d.port, req(b"/v1/keys", heads))
            assert st == 400 and b"invalid_request" in out, (heads, out)
    # Bare LF line ends with a trailing NUL: still seen.
    st, out = raw(d.port, b"GET /v1/keys HTTP/1.1\nHost: x\nAuthorization: Bearer " + key +
                  b"\x00\n\n")
    assert st == 400 and b"invalid_request" in out, out
    # A folded (obs-fold) header line is refused too (RFC 9112 5.2).
    st, out = raw(d.port, req(b"/healthz", b"X-A: a\r\n b\r\n"))
    assert st == 400, out
    # Well-formed heads still pass: CRLF, bare LF, extra spaces, empty values, many headers.
    for head in (req(b"/v1/keys", b"Authorization: Bearer " + key + b"\r\n"),
                 b"GET /v1/keys HTTP/1.1\nHost: x\nAuthorization: Bearer " + key + b"\n\n",
                 req(b"/v1/keys", b"X-Empty:\r\nX-Sp:    v  \r\nAuthorization:Bearer " + key +
                     b"\r\nCookie: a=1; b=\"two\"\r\n"),
                 req(b"/healthz?a=b&c=%41", b"".join(b"X-H%d: v\r\n" % i for i in range(40)))):
        st, out = raw(d.port, head)
        assert st == 200, (head, out)


def test_a_nul_between_requests_on_one_connection_is_refused():
    # The second request of a keep-alive connection is read into the same buffer.
    d = D.get()
    key = d.admin_key.encode()
    s = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    s.sendall(req(b"/healthz"))
    first = s.recv(65536)
    assert first.startswith(b"HTTP/1.1 200"), first
    s.sendall(req(b"/v1/keys", b"Authorization: Bearer " + key + b"\x00zz\r\n"))
    second = s.recv(65536)
    assert second.startswith(b"HTTP/1.1 400") and b"invalid_request" in second, second
    s.close()


def test_an_error_message_cut_inside_a_character_still_answers():
    # The message quotes at most 64 bytes of the name: the 64th is the first half of "ș".
    c = D.client("cutter")
    st, _, body = c.request("POST", "/v1/sandboxes", {"env": {"a" * 63 + "ș-x": "v"}})
    assert st == 400 and body["error"]["code"] == "invalid_env", body
    assert body["error"]["message"].startswith("env: " + "a" * 63 + " is not"), body
    st, _, _ = c.request("GET", "/healthz")
    assert st == 200
