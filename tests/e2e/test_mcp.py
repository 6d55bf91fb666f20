"""The agent tools over REST and the MCP server at /mcp, through a real sbxd
(docs/tools.md, docs/mcp.md).

The test_* functions check the REST tool routes and the MCP transport's edges with raw
HTTP; suite_mcp runs tests/mcp/mcp.test.mjs, the official MCP TypeScript SDK client
(pinned in tests/mcp/package.json), calling every tool over Streamable HTTP, and
tests/mcp/stdio.test.mjs, the same client through the stdio bridge (sbx-mcp).
"""

import http.client
import json
import os

import harness
from harness import assert_error

# Short progress and hold periods, so the long-call paths are seen in seconds.
ENV = {"SBX_TEST_MCP_TICK_MS": "1000", "SBX_TEST_MCP_HOLD_MS": "2000"}
D = harness.Shared(extra_env=ENV)
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}}}


def teardown_module():
    D.close()


def user(name):
    k = D.once("key:" + name, lambda d: d.client().create_key(name))
    return D.get().client(k["key"])


def sandbox():
    a = user("alice")
    sb = D.once("sb", lambda d: a.create_sandbox(ttl_seconds=3600))
    return a, sb["id"]


def tool(c, sb, name, args):
    return c.request("POST", "/v1/sandboxes/%s/tools/%s" % (sb, name), args)


# ---- REST: the tools ----------------------------------------------------------------------

def test_tools_list_has_mcp_and_openai_shapes():
    a = user("alice")
    r = a.ok("GET", "/v1/tools")
    names = [t["name"] for t in r["data"]]
    assert "sandbox_bash" in names and "edit_file" in names and len(names) == 16
    for t in r["data"]:
        assert t["inputSchema"]["type"] == "object" and t["outputSchema"]["type"] == "object"
    fns = r["openai"]
    assert [f["function"]["name"] for f in fns] == names
    bash = next(f for f in fns if f["function"]["name"] == "sandbox_bash")
    assert bash["type"] == "function"
    assert bash["function"]["parameters"]["required"] == ["sandbox_id", "command"]
    assert_error(a.request("GET", "/v1/tools", key=None), 401, "missing_api_key")


def test_rest_tool_call_and_edit_route():
    a, sb = sandbox()
    r = tool(a, sb, "sandbox_bash", {"command": "printf 'a = 1\\nb = 2\\n' > conf.py; echo ok"})
    assert r.status == 200, r
    assert r.body["object"] == "tool_result" and r.body["tool"] == "sandbox_bash"
    assert r.body["sandbox_id"] == sb
    assert r.body["result"]["stdout"] == "ok\n" and r.body["result"]["exit_code"] == 0
    # Files written anywhere in the workspace are reported, with where to fetch them.
    assert [f["path"] for f in r.body["result"]["files"]] == ["conf.py"]
    f = r.body["result"]["files"][0]
    assert f["size"] == 12 and len(f["sha256"]) == 64
    assert r.body["result"]["local_paths"]["conf.py"].endswith(
        "/v1/sandboxes/%s/files/conf.py" % sb)
    again = tool(a, sb, "sandbox_bash", {"command": "cat conf.py > /dev/null"}).body["result"]
    assert again["files"] == [] and again["file_count"] == 0 and again["local_paths"] == {}
    odd = tool(a, sb, "sandbox_bash", {"command": "mkdir -p 'a b' && printf z > 'a b/c?d.txt'"})
    url = odd.body["result"]["local_paths"]["a b/c?d.txt"]
    assert url.endswith("/files/a%20b/c%3Fd.txt"), url
    assert a.ok("GET", url.split(str(D.get().port), 1)[1]) == b"z"
    e = a.ok("POST", "/v1/sandboxes/%s/edit" % sb,
             {"path": "conf.py", "old_string": "b = 2", "new_string": "b = 3"})
    assert e["result"]["strategy"] == "exact"
    assert "-b = 2\n+b = 3\n" in e["result"]["diff"]
    assert a.ok("GET", "/v1/sandboxes/%s/files/conf.py" % sb) == b"a = 1\nb = 3\n"
    audit = a.ok("GET", "/v1/audit?action=file.edit")
    assert any(x.get("sandbox_id") == sb for x in audit["data"]), audit


def test_edit_refusals_answer_candidates():
    a, sb = sandbox()
    a.ok("PUT", "/v1/sandboxes/%s/files/dup.txt" % sb, raw=b"x = 1\ny\nx = 1\n")
    r = a.request("POST", "/v1/sandboxes/%s/edit" % sb,
                  {"path": "dup.txt", "old_string": "x = 1", "new_string": "x = 2"})
    assert r.status == 409 and r.body["error"]["code"] == "edit_not_unique", r
    assert [c["line"] for c in r.body["error"]["candidates"]] == [1, 3]
    r = a.request("POST", "/v1/sandboxes/%s/edit" % sb,
                  {"path": "dup.txt", "old_string": "something else entirely", "new_string": "z"})
    assert r.status == 422 and r.body["error"]["code"] == "edit_no_match", r
    assert r.body["error"]["candidates"][0]["score"] < 0.8
    # Nothing changed.
    assert a.ok("GET", "/v1/sandboxes/%s/files/dup.txt" % sb) == b"x = 1\ny\nx = 1\n"
    assert_error(a.request("POST", "/v1/sandboxes/%s/edit" % sb,
                           {"path": "nope.txt", "old_string": "a", "new_string": "b"}),
                 404, "file_not_found")
    assert_error(a.request("POST", "/v1/sandboxes/%s/edit" % sb,
                           {"path": "../x", "old_string": "a", "new_string": "b"}),
                 400, "invalid_path")
    assert_error(a.request("POST", "/v1/sandboxes/%s/edit" % sb, {"path": "dup.txt"}),
                 400, "invalid_request")
    c = a.ok("POST", "/v1/sandboxes/%s/edit" % sb,
             {"path": "new/made.txt", "old_string": "", "new_string": "fresh\n", "create": True})
    assert c["result"]["created"] is True


def test_rest_tool_errors():
    a, sb = sandbox()
    b = user("bob")
    assert_error(tool(a, sb, "no_such_tool", {}), 404, "tool_not_found")
    assert_error(tool(b, sb, "sandbox_bash", {"command": "id"}), 404, "sandbox_not_found")
    assert_error(tool(a, sb, "sandbox_bash", {"command": 1}), 400, "invalid_request")
    assert_error(tool(a, sb, "sandbox_bash", {"command": "id", "sandbox_id": "sb_other"}),
                 400, "invalid_request")
    assert_error(a.request("POST", "/v1/tools/sandbox_bash", {"command": "id"}),
                 400, "invalid_request")
    assert_error(tool(a, sb, "sandbox_list", {}), 400, "invalid_request")
    assert_error(a.request("POST", "/v1/sandboxes/%s/tools/sandbox_bash" % sb, raw=b"{"),
                 400, "invalid_json")
    lst = a.ok("POST", "/v1/tools/sandbox_list")
    assert any(s["id"] == sb for s in lst["result"]["sandboxes"])
    assert not any(s["id"] == sb for s in b.ok("POST", "/v1/tools/sandbox_list")["result"]
                   ["sandboxes"])


def exec_timeouts(c, sb):
    """The timeout of each command run in sb, oldest first, as its audit entry has it."""
    log = D.get().client().ok("GET", "/v1/audit?sandbox_id=%s&action=exec" % sb)["data"]
    return [e["details"]["timeout_seconds"] for e in sorted(log, key=lambda e: e["seq"])]


def test_sandbox_bash_timeout_is_1_to_3600_and_plain_exec_keeps_900():
    a = user("tim")
    sb = a.create_sandbox(ttl_seconds=600)["id"]
    # Spec 004: 1..3600, default 60 — over REST and over MCP alike.
    r = tool(a, sb, "sandbox_bash", {"command": "echo t3600", "timeout_seconds": 3600})
    assert r.status == 200 and r.body["result"]["stdout"] == "t3600\n", r
    assert tool(a, sb, "sandbox_bash", {"command": "true"}).status == 200
    sid = session(a)
    r = mcp(a, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "sandbox_bash",
                           "arguments": {"sandbox_id": sb, "command": "echo t901",
                                         "timeout_seconds": 901}}}, sid)
    assert r.body["result"]["isError"] is False, r.body
    assert r.body["result"]["structuredContent"]["stdout"] == "t901\n"
    assert exec_timeouts(a, sb) == [3600, 60, 901]
    for bad in (0, 3601, "60"):
        assert_error(tool(a, sb, "sandbox_bash", {"command": "true", "timeout_seconds": bad}),
                     400, ("invalid_timeout", "invalid_request"))
    r = mcp(a, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "sandbox_bash",
                           "arguments": {"sandbox_id": sb, "command": "true",
                                         "timeout_seconds": 3601}}}, sid)
    assert r.body["result"]["isError"] is True, r.body
    assert r.body["result"]["_meta"]["sbx/error"]["code"] == "invalid_timeout"
    # Spec 000: a plain command still stops at 900 s, by route and by sandbox_exec.
    assert_error(a.request("POST", "/v1/sandboxes/%s/exec" % sb,
                           {"shell": "true", "timeout_seconds": 901}), 400, "invalid_timeout")
    assert_error(tool(a, sb, "sandbox_exec", {"shell": "true", "timeout_seconds": 901}), 400,
                 "invalid_timeout")
    assert exec_timeouts(a, sb) == [3600, 60, 901], "nothing ran for the refused calls"
    # And the timeout holds: a command past its 1 s is stopped.
    r = tool(a, sb, "sandbox_bash", {"command": "sleep 20; echo late", "timeout_seconds": 1})
    assert r.status == 200 and "late" not in r.body["result"]["stdout"], r
    assert r.body["result"]["exit_code"] != 0, r


# ---- MCP: the transport's edges -------------------------------------------------------------

def mcp(c, msg, session=None, headers=None, method="POST", key="default", raw=None):
    h = {"Accept": "application/json, text/event-stream"}
    if session:
        h["Mcp-Session-Id"] = session
    h.update(headers or {})
    return c.request(method, "/mcp", body=msg, headers=h, key=key, raw=raw)


def session(c):
    r = mcp(c, INIT)
    assert r.status == 200, r
    return r.headers["mcp-session-id"]


def test_mcp_initialize_and_methods():
    a = user("alice")
    r = mcp(a, dict(INIT, params=dict(INIT["params"], protocolVersion="2025-06-18")))
    assert r.status == 200 and r.body["result"]["protocolVersion"] == "2025-06-18"
    assert r.body["id"] == 0 and r.body["jsonrpc"] == "2.0"
    sid = r.headers["mcp-session-id"]
    assert len(sid) == 32 and all(ch in "0123456789abcdef" for ch in sid)
    # An unknown version is answered with ours.
    r = mcp(a, dict(INIT, params=dict(INIT["params"], protocolVersion="2099-01-01")))
    assert r.body["result"]["protocolVersion"] == "2025-11-25"
    r = mcp(a, {"jsonrpc": "2.0", "id": "p1", "method": "ping"}, sid)
    assert r.body == {"jsonrpc": "2.0", "id": "p1", "result": {}}
    r = mcp(a, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
    assert r.status == 202 and not r.body
    r = mcp(a, {"jsonrpc": "2.0", "id": 5, "result": {}}, sid)
    assert r.status == 202
    r = mcp(a, {"jsonrpc": "2.0", "id": 2, "method": "resources/list"}, sid)
    assert r.status == 200 and r.body["error"]["code"] == -32601 and r.body["id"] == 2
    r = mcp(a, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": 7}}, sid)
    assert r.body["error"]["code"] == -32602
    r = mcp(a, {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                "params": {"name": "sandbox_list", "arguments": {}}},
            sid, headers={"MCP-Protocol-Version": "2025-11-25"})
    res = r.body["result"]
    assert res["isError"] is False and "sandboxes" in res["structuredContent"]
    assert json.loads(res["content"][0]["text"]) == res["structuredContent"]


def foreign_host_status(c, sid):
    """A request naming another Host (a DNS-rebound browser's), which http.client's request
    would not send."""
    conn = http.client.HTTPConnection("127.0.0.1", D.get().port, timeout=30)
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    try:
        conn.putrequest("POST", "/mcp", skip_host=True)
        for k, v in [("Host", "evil.example:%d" % D.get().port),
                     ("Authorization", "Bearer " + c.key), ("Mcp-Session-Id", sid),
                     ("Content-Type", "application/json"), ("Content-Length", str(len(body)))]:
            conn.putheader(k, v)
        conn.endheaders(body)
        return conn.getresponse().status
    finally:
        conn.close()


def test_mcp_transport_refusals():
    a = user("alice")
    sid = session(a)
    r = mcp(a, None, sid, method="GET")
    assert r.status == 405 and r.headers.get("allow") == "POST, DELETE"
    for msg, sess, status, code in [
            ({"jsonrpc": "2.0", "id": 1, "method": "ping"}, None, 400, -32000),
            ({"jsonrpc": "2.0", "id": 1, "method": "ping"}, "f" * 32, 404, -32001),
            ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], sid, 400, -32600),
            ({"id": 1, "method": "ping"}, sid, 400, -32600),
            ({"jsonrpc": "2.0", "id": None, "method": "ping"}, sid, 400, -32600)]:
        r = mcp(a, msg, sess)
        assert r.status == status and r.body["error"]["code"] == code, (msg, r)
        assert "id" not in r.body
    r = mcp(a, None, sid, raw=b"{not json")
    assert r.status == 400 and r.body["error"]["code"] == -32700
    r = mcp(a, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid,
            headers={"MCP-Protocol-Version": "1999-01-01"})
    assert r.status == 400
    # Another key cannot use the session.
    r = mcp(user("bob"), {"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid)
    assert r.status == 404
    # DNS rebinding: a browser Origin, a foreign Host.
    r = mcp(a, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid,
            headers={"Origin": "https://evil.example"})
    assert r.status == 403 and r.body["error"]["code"] == -32000
    assert foreign_host_status(a, sid) == 403
    r = mcp(a, INIT, key=None)
    assert r.status == 401
    # DELETE ends it.
    assert mcp(a, None, sid, method="DELETE").status == 204
    assert mcp(a, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid).status == 404
    assert mcp(a, None, sid, method="DELETE").status == 404


def test_mcp_tool_failure_is_a_result():
    a = user("alice")
    sid = session(a)
    r = mcp(a, {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "sandbox_kill", "arguments": {"sandbox_id": "sb_nope"}}}, sid)
    res = r.body["result"]
    assert res["isError"] is True and "structuredContent" not in res
    assert res["content"][0]["text"].startswith("sandbox_not_found: ")
    assert res["_meta"]["sbx/error"]["code"] == "sandbox_not_found"


# ---- the SDK client -------------------------------------------------------------------------

def suite_mcp(ext):
    d = D.get()
    key = D.once("key:alice", lambda d: d.client().create_key("alice"))["key"]
    other = D.once("bob-sb", lambda _: user("bob").create_sandbox(ttl_seconds=900))
    here = os.path.join(harness.REPO, "tests", "mcp")
    ext.tap(["node", "--test", "--test-reporter=tap", "--test-concurrency=1", "mcp.test.mjs",
             "stdio.test.mjs"],
            cwd=here, env={"MCP_URL": "http://127.0.0.1:%d/mcp" % d.port, "SBX_API_KEY": key,
                           "SBX_OTHER_SANDBOX": other["id"],
                           "SBX_MCP_BRIDGE": os.path.join(harness.build_dir(), "sbx-mcp")})
