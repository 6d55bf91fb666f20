"""The chat gateway (docs/chat.md) through a real sbxd: POST /v1/chat/completions and
POST /v1/messages with the sbx_sandbox tool, played by a scripted model on 127.0.0.1 that
speaks both formats (streaming and not).

The script is named in the user's message ("SCRIPT:<name>"); what the model does next
depends on how many tool results the conversation already has.
"""

import http.client
import http.server
import json
import subprocess
import tempfile
import threading
import time
import urllib.request

import harness
import testserver

OPENAI_SECRET = "sk-openai-" + "t0ps3cr3t" * 3
ANTHROPIC_SECRET = "sk-ant-" + "v3ryh1dd3n" * 3
RO = "Hotărâre AGA: ședință în Țara Bârsei, Iași"

PDF_CODE = (
    "from reportlab.pdfgen import canvas\n"
    "from reportlab.pdfbase import pdfmetrics\n"
    "from reportlab.pdfbase.ttfonts import TTFont\n"
    "import os\n"
    "os.makedirs('/workspace/out', exist_ok=True)\n"
    "pdfmetrics.registerFont(TTFont('DV', '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf'))\n"
    "c = canvas.Canvas('/workspace/out/hotarare.pdf')\n"
    "c.setFont('DV', 14)\n"
    "c.drawString(72, 720, %r)\n"
    "c.save()\n"
    "print('ok')\n" % RO)


class Model:
    """What the scripted model saw: (path, headers, body) of every request."""
    seen = []
    raw = []  # the raw request bodies, for pass-through


def user_text(body):
    for m in body.get("messages", []):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, str):
                return c
            for b in c or []:
                if isinstance(b, dict) and b.get("type") == "text":
                    return b["text"]
    return ""


def tool_results(body, anthropic):
    """The contents of the tool results so far, in order."""
    out = []
    for m in body.get("messages", []):
        if not anthropic and m.get("role") == "tool":
            out.append(m["content"])
        if anthropic and m.get("role") == "user" and isinstance(m.get("content"), list):
            out += [b["content"] for b in m["content"] if b.get("type") == "tool_result"]
    return out


def script(name, results, body):
    """The model's next move: ("tool", name, args-or-raw-string) or ("text", text)."""
    n = len(results)
    if name == "pdf":
        return ("tool", "sandbox_python", {"code": PDF_CODE}) if n == 0 else \
            ("text", "Gata: PDF-ul cu ș și ț e gata.")
    if name == "write":
        return ("tool", "sandbox_bash", {"command": "echo memo-42 > notes.txt; mkdir -p out; echo hi > out/w.txt"}) if n == 0 \
            else ("text", "Saved.")
    if name == "read":
        return ("tool", "sandbox_bash", {"command": "cat notes.txt"}) if n == 0 else \
            ("text", "The file says: " + json.loads(results[0])["stdout"].strip())
    if name == "loop":
        if body.get("tool_choice") in ("none", {"type": "none"}):
            return ("text", "Stopping here.")
        return ("tool", "sandbox_bash", {"command": "echo round %d" % n})
    if name == "bad":
        if n == 0:
            return ("tool", "sandbox_bash", "{not json")
        if n == 1:
            return ("tool", "sandbox_bash", {"command": 5})
        return ("text", "Fixed after: " + " | ".join(results))
    if name == "env":
        return ("tool", "sandbox_bash", {"command": "env; cat /proc/1/environ | tr '\\0' '\\n'"}) \
            if n == 0 else ("text", "Env: " + results[0])
    if name == "long":  # spec 004: sandbox_bash.timeout_seconds 1..3600
        if n < 2:
            return ("tool", "sandbox_bash", {"command": "echo long-%d" % n,
                                             "timeout_seconds": [3600, 3601][n]})
        return ("text", " | ".join(results))
    if name == "foreign":
        return ("tool", "get_weather", {"city": "Iași"})
    if name == "slow":
        return ("tool", "sandbox_bash", {"command": "sleep 1.5; echo woke"}) if n == 0 else \
            ("text", "Slept.")
    if name == "skill":
        return ("tool", "sandbox_bash", {
            "command": "mkdir -p /workspace/out && python3 /workspace/.skills/pdf/scripts/make_pdf.py "
                       "/workspace/out/act.pdf --title 'Proces-verbal' --paragraph 'Târgu Mureș'"}) \
            if n == 0 else ("text", "Done.")
    if name == "bsl":
        if n == 0:
            return ("tool", "sandbox_bash", {
                "command": "printf 'Процедура А()\\n\\tЛишняя = 1;\\nКонецПроцедуры\\n' > m.bsl"})
        if n == 1:
            return ("tool", "sandbox_bsl_check", {"path": "m.bsl"})
        rep = json.loads(results[1])
        return ("text", "Found: " + ",".join("%s@%d" % (g["code"], g["line"])
                                             for f in rep["fileinfos"] for g in f["diagnostics"]))
    return ("text", "hello from the model")


def openai_answer(move, n):
    if move[0] == "text":
        msg = {"role": "assistant", "content": move[1]}
        finish = "stop"
    else:
        args = move[2] if isinstance(move[2], str) else json.dumps(move[2])
        msg = {"role": "assistant", "content": "Working (%d)." % n,
               "tool_calls": [{"id": "call_%d" % n, "type": "function",
                               "function": {"name": move[1], "arguments": args}}]}
        finish = "tool_calls"
    return {"id": "chatcmpl-x", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}


def anthropic_answer(move, n):
    if move[0] == "text":
        content, stop = [{"type": "text", "text": move[1]}], "end_turn"
    else:
        inp = move[2] if not isinstance(move[2], str) else move[2]
        content = [{"type": "text", "text": "Working (%d)." % n},
                   {"type": "tool_use", "id": "toolu_%d" % n, "name": move[1], "input": inp}]
        stop = "tool_use"
    return {"id": "msg_x", "type": "message", "role": "assistant", "model": "claude-x",
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 2}}


PLAIN_SSE_OPENAI = (b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,'
                    b'"delta":{"content":"hel"}}]}\n\n'
                    b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,'
                    b'"delta":{"content":"lo"},"finish_reason":"stop"}]}\n\n'
                    b'data: [DONE]\n\n')
PLAIN_SSE_ANTHROPIC = (b'event: message_start\ndata: {"type":"message_start","message":{}}\n\n'
                       b'event: content_block_delta\ndata: {"type":"content_block_delta",'
                       b'"index":0,"delta":{"type":"text_delta","text":"hello"}}\n\n'
                       b'event: message_stop\ndata: {"type":"message_stop"}\n\n')


class FakeModel(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        body = json.loads(raw)
        Model.seen.append((self.path, dict(self.headers), body))
        Model.raw.append(raw)
        anthropic = self.path == "/v1/messages"
        text = user_text(body)
        if "SCRIPT:badutf" in text:
            return self.send(500, b"\xff\xfe not text \xc8", "text/plain")
        if "SCRIPT:status429" in text:
            return self.send(429, b'{"error":{"message":"slow down"}}', "application/json")
        if body.get("stream"):
            sse = PLAIN_SSE_ANTHROPIC if anthropic else PLAIN_SSE_OPENAI
            return self.send(200, sse, "text/event-stream", chunked=True)
        name = text.split("SCRIPT:", 1)[1].split()[0] if "SCRIPT:" in text else "plain"
        results = tool_results(body, anthropic)
        move = script(name, results, body)
        out = (anthropic_answer if anthropic else openai_answer)(move, len(results))
        self.send(200, json.dumps(out).encode(), "application/json")

    def send(self, status, data, ctype, chunked=False):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in data.split(b"\n\n")[:-1]:  # one frame a chunk, as a model does
                piece += b"\n\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    def log_message(self, *args):
        pass


_srv = testserver.QuietHTTPServer(("127.0.0.1", 0), FakeModel)
threading.Thread(target=_srv.serve_forever, daemon=True).start()
_base = "http://127.0.0.1:%d/v1" % _srv.server_address[1]
D = harness.Shared(extra_env={"SBX_LLM_URL": _base, "SBX_LLM_API_KEY": OPENAI_SECRET,
                              "SBX_LLM_MODEL": "fake-model", "SBX_LLM_ANTHROPIC_URL": _base,
                              "SBX_LLM_ANTHROPIC_API_KEY": ANTHROPIC_SECRET,
                              "SBX_TEST_CHAT_KEEPALIVE_MS": "200"})


def teardown_module():
    D.close()
    _srv.shutdown()
    _srv.server_close()


SBX = [{"type": "sbx_sandbox"}]


def chat(c, script_name, session=None, tools=None, path="/v1/chat/completions", **extra):
    body = {"model": "m", "tools": SBX if tools is None else tools,
            "messages": [{"role": "user", "content": "SCRIPT:%s please" % script_name}]}
    if path == "/v1/messages":
        body["max_tokens"] = 100
    body.update(extra)
    headers = {"x-sbx-session-id": session} if session else {}
    return c.request("POST", path, body, headers=headers, timeout=300)


def seen_for(script_name):
    return [s for s in Model.seen if "SCRIPT:%s " % script_name in user_text(s[2])]


def pdf_text(data):
    with tempfile.NamedTemporaryFile(suffix=".pdf") as f:
        f.write(data)
        f.flush()
        return subprocess.run(["pdftotext", f.name, "-"], capture_output=True,
                              check=True).stdout.decode()


def download(url):
    with urllib.request.urlopen(url, timeout=30) as r:  # a signed link: no key
        return r.read()


def test_a_pdf_written_with_reportlab_comes_back_as_an_artifact_and_a_link():
    c = D.client("chat-pdf")
    r = chat(c, "pdf", session="acte-firma-42")
    assert r.status == 200, r
    msg = r.body["choices"][0]["message"]
    sbx = r.body["sbx_sandbox"]
    assert sbx["session_id"] == "acte-firma-42" and sbx["sandbox_created"] is True, sbx
    assert sbx["rounds"] == 1 and sbx["tool_calls"] == [
        {"round": 1, "name": "sandbox_python", "ok": True}], sbx
    arts = {a["path"]: a for a in sbx["artifacts"]}
    a = arts["out/hotarare.pdf"]
    assert a["mime"] == "application/pdf" and a["url"].startswith("http"), a
    assert msg["content"].startswith("Gata: PDF-ul cu ș și ț e gata."), msg
    assert "\n\n**Files**\n- [hotarare.pdf](%s)" % a["url"] in msg["content"], msg
    assert "tool_calls" not in msg, msg
    # Both calls to the model are billed: the usage is their sum.
    assert r.body["usage"] == {"prompt_tokens": 6, "completion_tokens": 4, "total_tokens": 10}
    data = download(a["url"])
    assert data.startswith(b"%PDF") and len(data) == a["size"], data[:20]
    text = pdf_text(data)
    assert "ș" in text and "ț" in text and "Țara Bârsei" in text, text
    assert r.headers["x-sbx-session-id"] == "acte-firma-42"
    # What the model was sent: the four sandbox tools instead of sbx_sandbox, the fixed
    # instructions first, the operator's key (never the caller's).
    path, headers, body = seen_for("pdf")[0]
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer " + OPENAI_SECRET
    names = [t["function"]["name"] for t in body["tools"]]
    assert names == ["sandbox_bash", "sandbox_python", "sandbox_edit", "sandbox_files"], names
    assert all("sandbox_id" not in t["function"]["parameters"]["properties"]
               for t in body["tools"]), body["tools"]
    assert body["messages"][0]["role"] == "system" and "/workspace/out" in \
        body["messages"][0]["content"], body["messages"][0]
    assert "stream" not in body and body["model"] == "m", body
    second = seen_for("pdf")[1][2]["messages"]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "sandbox_python", second
    assert second[-1]["role"] == "tool" and json.loads(second[-1]["content"])["exit_code"] == 0
    # The tool ran as the caller's own exec: metered to its key and in the audit log.
    usage = c.ok("GET", "/v1/usage")
    assert usage["total"]["exec_ms"] > 0, usage
    # The tool ran as the caller's own exec: it is in the audit log.
    log = D.client("admin").ok("GET", "/v1/audit?sandbox_id=%s" % sbx["sandbox_id"])
    actions = [e["action"] for e in log["data"]]
    assert "sandbox.create" in actions and "exec" in actions and "chat.completion" in actions, \
        actions


def test_the_same_pdf_in_the_anthropic_format():
    c = D.client("chat-pdf")
    r = chat(c, "pdf", session="acte-firma-42", path="/v1/messages")
    assert r.status == 200, r
    sbx = r.body["sbx_sandbox"]
    assert sbx["sandbox_created"] is False, sbx  # the same conversation's sandbox
    text = r.body["content"][-1]["text"]
    url = {a["path"]: a for a in sbx["artifacts"]}["out/hotarare.pdf"]["url"]
    assert text.startswith("Gata") and "- [hotarare.pdf](%s)" % url in text, r.body
    assert [b["type"] for b in r.body["content"]] == ["text"], r.body["content"]
    path, headers, body = seen_for("pdf")[-2]
    assert path == "/v1/messages" and headers["x-api-key"] == ANTHROPIC_SECRET, headers
    assert "Authorization" not in headers and headers["anthropic-version"] == "2023-06-01"
    assert [t["name"] for t in body["tools"]] == ["sandbox_bash", "sandbox_python",
                                                 "sandbox_edit", "sandbox_files"]
    assert "/workspace/out" in body["system"], body["system"]
    last = seen_for("pdf")[-1][2]["messages"][-1]
    assert last["role"] == "user" and last["content"][0]["type"] == "tool_result", last
    assert last["content"][0]["is_error"] is False


def test_a_session_keeps_its_sandbox_and_its_life_is_extended():
    c = D.client("chat-mem")
    r1 = chat(c, "write", session="conv-1")
    assert r1.status == 200, r1
    sid = r1.body["sbx_sandbox"]["sandbox_id"]
    e1 = c.get_sandbox(sid)["expires_at"]
    time.sleep(2)
    r2 = chat(c, "read", session="conv-1")
    assert r2.status == 200, r2
    assert r2.body["sbx_sandbox"]["sandbox_id"] == sid, r2.body
    assert r2.body["sbx_sandbox"]["sandbox_created"] is False
    assert r2.body["choices"][0]["message"]["content"].startswith("The file says: memo-42")
    e2 = c.get_sandbox(sid)["expires_at"]
    assert e2 >= e1 + 1, (e1, e2)
    # Another user's session of the same name is another sandbox.
    other = chat(D.client("chat-other"), "read", session="conv-1")
    assert other.status == 200 and other.body["sbx_sandbox"]["sandbox_id"] != sid, other.body
    # Without the header: a fresh conversation, whose id comes back to go on with.
    r3 = chat(c, "plain")
    new = r3.headers["x-sbx-session-id"]
    assert new.startswith("chat_") and r3.body["sbx_sandbox"]["session_id"] == new
    r4 = chat(c, "plain", session=new)
    assert r4.body["sbx_sandbox"]["sandbox_id"] == r3.body["sbx_sandbox"]["sandbox_id"]
    c.delete_sandbox(r3.body["sbx_sandbox"]["sandbox_id"])
    D.client("chat-other").delete_sandbox(other.body["sbx_sandbox"]["sandbox_id"])
    # The mapping is in the store: a restart keeps the conversation's sandbox.
    D.get().restart()
    r5 = chat(D.client("chat-mem"), "read", session="conv-1")
    assert r5.status == 200 and r5.body["sbx_sandbox"]["sandbox_id"] == sid, r5.body
    assert "memo-42" in r5.body["choices"][0]["message"]["content"]


def test_the_rounds_are_capped_and_the_model_then_answers_without_tools():
    c = D.client("chat-mem")
    before = len(seen_for("loop"))
    r = chat(c, "loop", session="conv-1")
    assert r.status == 200, r
    sbx = r.body["sbx_sandbox"]
    assert sbx["rounds"] == 8 and sbx["round_limit_reached"] is True, sbx
    assert len(sbx["tool_calls"]) == 8 and all(t["ok"] for t in sbx["tool_calls"]), sbx
    calls = seen_for("loop")[before:]
    assert len(calls) == 9, len(calls)
    assert all("tool_choice" not in s[2] for s in calls[:8])
    assert calls[8][2]["tool_choice"] == "none"
    assert r.body["choices"][0]["message"]["content"].startswith("Stopping here.")


def test_a_malformed_tool_call_goes_back_to_the_model_as_a_tool_error():
    c = D.client("chat-mem")
    r = chat(c, "bad", session="conv-1")
    assert r.status == 200, r
    sbx = r.body["sbx_sandbox"]
    assert [t["ok"] for t in sbx["tool_calls"]] == [False, False], sbx
    text = r.body["choices"][0]["message"]["content"]
    first, second = text[len("Fixed after: "):].split(" | ")[:2]
    e1, e2 = json.loads(first)["error"], json.loads(second.split("\n\n**Files**")[0])["error"]
    assert e1["code"] == "invalid_tool_arguments", e1
    assert e2["code"] == "invalid_request" and "command" in e2["message"], e2
    # In the Anthropic format too: an input that is not an object.
    r = chat(c, "bad", session="conv-1", path="/v1/messages")
    assert r.status == 200, r
    assert [t["ok"] for t in r.body["sbx_sandbox"]["tool_calls"]] == [False, False]
    last = seen_for("bad")[-1][2]["messages"][-1]["content"][0]
    assert last["is_error"] is True and "invalid_request" in last["content"], last


def test_sandbox_bash_takes_a_timeout_up_to_3600_seconds():
    c = D.client("chat-long")
    r = chat(c, "long", session="conv-long")
    assert r.status == 200, r
    sbx = r.body["sbx_sandbox"]
    assert [t["ok"] for t in sbx["tool_calls"]] == [True, False], sbx
    first, second = r.body["choices"][0]["message"]["content"].split(" | ")[:2]
    assert json.loads(first.split("\n\n**Files**")[0])["stdout"] == "long-0\n", first
    assert json.loads(second.split("\n\n**Files**")[0])["error"]["code"] == "invalid_timeout"
    # The model was offered the document's bound, and the command ran under it.
    offered = seen_for("long")[0][2]["tools"]
    bash = next(t["function"] for t in offered if t["function"]["name"] == "sandbox_bash")
    assert bash["parameters"]["properties"]["timeout_seconds"]["maximum"] == 3600, bash
    log = D.client("admin").ok("GET", "/v1/audit?sandbox_id=%s&action=exec" % sbx["sandbox_id"])
    assert [e["details"]["timeout_seconds"] for e in log["data"]] == [3600], log


def test_document_skills_turn_the_tool_on_with_their_instructions():
    c = D.client("chat-mem")
    tools = [{"type": "sbx_sandbox", "skills": ["pdf", "docx"]}]
    r = chat(c, "skill", session="conv-1", tools=tools)
    assert r.status == 200, r
    arts = {a["path"]: a for a in r.body["sbx_sandbox"]["artifacts"]}
    assert "Târgu Mureș" in pdf_text(download(arts["out/act.pdf"]["url"]))
    system = seen_for("skill")[-1][2]["messages"][0]["content"]
    assert "Skill pdf" in system and "Skill docx" in system, system
    assert "/workspace/.skills/pdf/scripts/make_pdf.py" in system, system
    # The container form, on /v1/messages, with no tools list at all.
    body = {"model": "claude-x", "max_tokens": 10,
            "container": {"skills": [{"type": "anthropic", "skill_id": "xlsx",
                                      "version": "latest"}]},
            "messages": [{"role": "user", "content": "SCRIPT:plain xlsx"}]}
    r = c.request("POST", "/v1/messages", body, headers={"x-sbx-session-id": "conv-1"},
                  timeout=120)
    assert r.status == 200 and "sbx_sandbox" in r.body, r
    up = seen_for("plain")[-1][2]
    assert "container" not in up and "Skill xlsx" in up["system"], up
    assert [t["name"] for t in up["tools"]][0] == "sandbox_bash"


def test_the_bsl_skill_brings_sandbox_bsl_check():
    """The bsl skill (docs/bsl.md) adds sandbox_bsl_check, bsl_check on the conversation's
    sandbox: the model writes a module, checks it, and reads the fault at its line."""
    c = D.client("chat-mem")
    r = chat(c, "bsl", session="conv-bsl", tools=[{"type": "sbx_sandbox", "skills": ["bsl"]}])
    assert r.status == 200, r
    assert [t["name"] for t in r.body["sbx_sandbox"]["tool_calls"]] == \
        ["sandbox_bash", "sandbox_bsl_check"], r.body["sbx_sandbox"]
    assert all(t["ok"] for t in r.body["sbx_sandbox"]["tool_calls"]), r.body["sbx_sandbox"]
    assert r.body["choices"][0]["message"]["content"] == "Found: UnusedLocalVariable@2", r.body
    up = seen_for("bsl")[0][2]
    names = [t["function"]["name"] for t in up["tools"]]
    assert names == ["sandbox_bash", "sandbox_python", "sandbox_edit", "sandbox_files",
                     "sandbox_bsl_check"], names
    assert "Skill bsl" in up["messages"][0]["content"]


def assert_error(r, status, code):
    assert r.status == status, r
    assert r.body["error"]["code"] == code, r.body


def test_what_the_gateway_refuses():
    c = D.client("chat-mem")
    p = "/v1/chat/completions"
    msgs = [{"role": "user", "content": "hi"}]
    custom = {"model": "m", "messages": msgs,
              "container": {"skills": [{"type": "custom", "skill_id": "mine"}]}}
    for path in (p, "/v1/messages"):
        assert_error(c.request("POST", path, custom), 400, "unsupported_skill")
        assert_error(c.request("POST", path, {"model": "m", "messages": msgs,
                                              "container": {"id": "cntr_1"}}),
                     400, "container_unsupported")
        assert_error(c.request("POST", path, {"model": "m", "messages": msgs,
                                              "container": "cntr_1"}),
                     400, "container_unsupported")
    cases = [
        ({"messages": msgs, "tools": [{"type": "sbx_sandbox", "skills": ["latex"]}]},
         "unsupported_skill"),
        ({"messages": msgs, "tools": [{"type": "sbx_sandbox", "skills": "pdf"}]},
         "invalid_request"),
        ({"messages": msgs, "tools": [{"type": "sbx_sandbox", "image": "x"}]},
         "invalid_request"),
        ({"messages": msgs, "tools": SBX * 2}, "invalid_request"),
        ({"messages": msgs, "tools": {"type": "sbx_sandbox"}}, "invalid_request"),
        ({"tools": SBX}, "invalid_request"),
        ({"messages": [], "tools": SBX}, "invalid_request"),
        ({"messages": ["hi"], "tools": SBX}, "invalid_request"),
        ({"messages": msgs, "tools": SBX, "stream": "yes"}, "invalid_request"),
        ({"messages": msgs, "container": {"skills": [{"type": "anthropic"}]}},
         "invalid_request"),
    ]
    for body, code in cases:
        assert_error(c.request("POST", p, body), 400, code)
    assert_error(c.request("POST", p, raw=b"{not json"), 400, "invalid_json")
    assert_error(c.request("POST", p, raw=b"[1,2]"), 400, "invalid_json")
    assert_error(c.request("POST", p, {"messages": msgs, "tools": SBX},
                           headers={"x-sbx-session-id": "bad id!"}), 400, "invalid_session_id")
    assert_error(c.request("POST", p, {"messages": msgs}, key=None), 401, "missing_api_key")
    # The sandbox's own options are checked by the create, before anything streams.
    for tool, status, code in (({"type": "sbx_sandbox", "egress": "everywhere"}, 400,
                                "invalid_egress"),
                               ({"type": "sbx_sandbox", "template": "no-such"}, 400,
                                "invalid_template"),
                               ({"type": "sbx_sandbox", "template": 5}, 400,
                                "invalid_request")):
        r = c.request("POST", p, {"messages": msgs, "tools": [tool], "stream": True},
                      headers={"x-sbx-session-id": "fresh-%s" % code})
        assert r.status == status and r.body["error"]["code"] == code, (tool, r)
    # The model endpoint failing is a 502 that names its status, never a 500.
    r = c.request("POST", p, {"model": "m", "tools": SBX, "messages": [
        {"role": "user", "content": "SCRIPT:status429"}]}, headers={"x-sbx-session-id": "conv-1"})
    assert_error(r, 502, "upstream_error")
    assert "429" in r.body["error"]["message"] and OPENAI_SECRET not in r.raw.decode()
    r = c.request("POST", p, {"model": "m", "tools": SBX, "messages": [
        {"role": "user", "content": "SCRIPT:badutf"}]}, headers={"x-sbx-session-id": "conv-1"})
    assert_error(r, 502, "upstream_error")  # an answer that is not text is not quoted
    assert r.body["error"]["message"] == ("the model endpoint answered HTTP 500, with a body "
                                          "that is not UTF-8 text"), r.body
    r = c.request("POST", p, {"model": "m", "messages": [
        {"role": "user", "content": "SCRIPT:badutf"}]})
    assert_error(r, 502, "upstream_error")  # nor passed through as if it were JSON


def test_the_sandbox_tool_needs_a_member_key_with_the_sandbox_level():
    admin = D.client("admin")
    basic = admin.create_key("chat-basic", tool_level="basic")["key"]
    viewer = admin.create_key("chat-viewer", role="viewer")["key"]
    c = D.get().client(basic)
    assert_error(chat(c, "plain"), 403, "insufficient_tool_level")
    assert_error(chat(D.get().client(viewer), "plain"), 403, "member_required")
    # Chatting without the tool is any key's.
    r = chat(c, "plain", tools=[])
    assert r.status == 200 and r.body["choices"][0]["message"]["content"] == \
        "hello from the model", r


def test_requests_without_the_tool_pass_through_unchanged():
    c = D.client("chat-mem")
    raw = (b'{"model":"gpt-x","messages":[{"role":"user","content":"SCRIPT:plain \xc8\x99"}],'
           b'"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],'
           b'"temperature":0.5}')
    r = c.request("POST", "/v1/chat/completions", raw=raw)
    assert r.status == 200, r
    assert Model.raw[-1] == raw  # the body as it came
    path, headers, _ = Model.seen[-1]
    assert headers["Authorization"] == "Bearer " + OPENAI_SECRET
    assert r.body == openai_answer(("text", "hello from the model"), 0), r.body
    # Its status too.
    r = c.request("POST", "/v1/chat/completions", {"model": "m", "messages": [
        {"role": "user", "content": "SCRIPT:status429"}]})
    assert r.status == 429 and r.body == {"error": {"message": "slow down"}}, r
    # Anthropic, with the client's version and beta headers carried over.
    body = {"model": "claude-x", "max_tokens": 5,
            "messages": [{"role": "user", "content": "SCRIPT:plain"}]}
    r = c.request("POST", "/v1/messages", body,
                  headers={"anthropic-version": "2099-01-01", "anthropic-beta": "b1"})
    assert r.status == 200 and r.body["content"][0]["text"] == "hello from the model", r
    path, headers, seen = Model.seen[-1]
    assert path == "/v1/messages" and headers["x-api-key"] == ANTHROPIC_SECRET
    assert headers["anthropic-version"] == "2099-01-01" and headers["anthropic-beta"] == "b1"
    assert "Authorization" not in headers and seen == body
    # Streaming: the endpoint's events, byte for byte.
    for path, expect in (("/v1/chat/completions", PLAIN_SSE_OPENAI),
                         ("/v1/messages", PLAIN_SSE_ANTHROPIC)):
        status, ctype, data = raw_post(c, path, dict(body, stream=True))
        assert status == 200 and ctype.startswith("text/event-stream"), (status, ctype)
        assert data == expect, data


def raw_post(c, path, body, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", c.port, timeout=300)
    try:
        h = {"Authorization": "Bearer " + c.key, "Content-Type": "application/json"}
        h.update(headers or {})
        conn.request("POST", path, body=json.dumps(body).encode(), headers=h)
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type", ""), resp.read()
    finally:
        conn.close()


def sse_frames(data):
    """[(event or None, data)] of a text/event-stream body."""
    out = []
    for frame in data.decode().split("\n\n"):
        if not frame.strip() or frame.startswith(":"):  # a keep-alive comment
            continue
        event, payload = None, None
        for line in frame.split("\n"):
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                payload = line[6:]
        out.append((event, payload if payload == "[DONE]" else json.loads(payload)))
    return out


def test_streaming_in_the_openai_format():
    c = D.client("chat-mem")
    body = {"model": "m", "tools": SBX, "stream": True,
            "messages": [{"role": "user", "content": "SCRIPT:pdf now"}]}
    status, ctype, data = raw_post(c, "/v1/chat/completions", body,
                                   {"x-sbx-session-id": "conv-1"})
    assert status == 200 and ctype.startswith("text/event-stream"), (status, data[:300])
    frames = sse_frames(data)
    assert frames[-1] == (None, "[DONE]"), frames[-3:]
    chunks = [f[1] for f in frames[:-1]]
    assert all(ch["object"] == "chat.completion.chunk" for ch in chunks), chunks
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    progress = [ch["sbx_sandbox"] for ch in chunks[:-1] if "sbx_sandbox" in ch]
    assert [(p["type"], p["name"]) for p in progress] == [
        ("tool_call", "sandbox_python"), ("tool_result", "sandbox_python")], progress
    assert progress[0]["arguments"]["code"] == PDF_CODE and progress[1]["ok"] is True
    assert progress[1]["exit_code"] == 0
    text = "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks)
    assert "Working (0)." in text and "Gata: PDF-ul" in text, text
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "stop", last
    url = {a["path"]: a for a in last["sbx_sandbox"]["artifacts"]}["out/hotarare.pdf"]["url"]
    assert "- [hotarare.pdf](%s)" % url in text
    assert download(url).startswith(b"%PDF")


def test_streaming_in_the_anthropic_format():
    c = D.client("chat-mem")
    body = {"model": "claude-x", "max_tokens": 100, "tools": SBX, "stream": True,
            "messages": [{"role": "user", "content": "SCRIPT:write again"}]}
    status, ctype, data = raw_post(c, "/v1/messages", body, {"x-sbx-session-id": "conv-1"})
    assert status == 200 and ctype.startswith("text/event-stream"), (status, data[:300])
    frames = sse_frames(data)
    events = [e for e, _ in frames]
    assert events[0] == "message_start" and events[-2:] == ["message_delta", "message_stop"]
    assert "sbx_tool_call" in events and "sbx_tool_result" in events, events
    for e, d in frames:
        assert d["type"] == e, (e, d)
    call = dict(frames)["sbx_tool_call"]
    assert call["name"] == "sandbox_bash" and call["arguments"]["command"].startswith("echo")
    text = "".join(d["delta"]["text"] for e, d in frames if e == "content_block_delta")
    assert "Working (0)." in text and "Saved." in text and "**Files**" in text, text
    # Each text block opens and closes.
    assert events.count("content_block_start") == events.count("content_block_stop") >= 2
    end = dict(frames)["message_delta"]
    assert end["delta"]["stop_reason"] == "end_turn"
    assert any(a["path"] == "out/w.txt" for a in end["sbx_sandbox"]["artifacts"])


def test_the_upstream_key_never_reaches_the_sandbox_or_the_client():
    c = D.client("chat-mem")
    r = chat(c, "env", session="conv-1")
    assert r.status == 200, r
    assert "PATH=" in r.body["choices"][0]["message"]["content"]  # the env did come back
    for secret in (OPENAI_SECRET, ANTHROPIC_SECRET):
        assert secret not in r.raw.decode(), "leaked to the client"
        assert all(secret not in json.dumps(s[2]) for s in Model.seen), "leaked to the model"
    sid = r.body["sbx_sandbox"]["sandbox_id"]
    out = c.exec(sid, shell="grep -rl -e %s -e %s /proc/*/environ /tmp /workspace "
                            "2>/dev/null; true" % (OPENAI_SECRET, ANTHROPIC_SECRET))
    assert out["stdout"] == "", out


def test_without_an_endpoint_the_gateway_says_so():
    env = {"SBX_LLM_URL": _base}  # no Anthropic endpoint
    with harness.Daemon(extra_env=env) as d:
        c = d.client(d.client().create_key("chat-none")["key"])
        body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
        assert_error(c.request("POST", "/v1/messages", body), 503, "chat_unavailable")
        assert_error(c.request("POST", "/v1/messages", dict(body, tools=SBX)), 503,
                     "chat_unavailable")
        r = c.request("POST", "/v1/chat/completions", body)
        assert r.status == 200, r
    with harness.Daemon() as d:
        c = d.client(d.client().create_key("chat-none")["key"])
        r = c.request("POST", "/v1/chat/completions", {"messages": []})
        assert_error(r, 503, "chat_unavailable")
        assert "SBX_LLM_URL" in r.body["error"]["message"]


def test_a_long_tool_keeps_the_stream_alive():
    c = D.client("chat-mem")
    body = {"model": "m", "tools": SBX, "stream": True,
            "messages": [{"role": "user", "content": "SCRIPT:slow now"}]}
    status, _, data = raw_post(c, "/v1/chat/completions", body, {"x-sbx-session-id": "conv-1"})
    assert status == 200, data[:300]
    # SBX_TEST_CHAT_KEEPALIVE_MS=200 here (15 s by default): comments while the tool ran.
    assert b"\n\n: keep-alive\n\n" in data, data[:600]
    assert sse_frames(data)[-1] == (None, "[DONE]")


def test_two_first_requests_of_a_session_share_one_sandbox():
    c = D.client("chat-race")
    out = []
    threads = [threading.Thread(target=lambda: out.append(chat(c, "plain", session="race-1")))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.status == 200 for r in out), out
    ids = {r.body["sbx_sandbox"]["sandbox_id"] for r in out}
    assert len(ids) == 1, ids
    assert sorted(r.body["sbx_sandbox"]["sandbox_created"] for r in out) == [False, False, True]
    assert [s["id"] for s in c.list_sandboxes()] == list(ids)


def test_a_call_of_the_clients_own_tool_goes_back_to_the_client():
    c = D.client("chat-mem")
    mine = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    r = chat(c, "foreign", session="conv-1", tools=[mine] + SBX)
    assert r.status == 200, r
    choice = r.body["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    call = choice["message"]["tool_calls"][0]["function"]
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": "Iași"}
    assert r.body["sbx_sandbox"]["tool_calls"] == [] and r.body["sbx_sandbox"]["rounds"] == 0
    up = seen_for("foreign")[-1][2]
    assert [t["function"]["name"] for t in up["tools"]][:2] == ["get_weather", "sandbox_bash"]
    # Streamed: as tool-call deltas (OpenAI) and a tool_use block (Anthropic).
    body = {"model": "m", "tools": [mine] + SBX, "stream": True,
            "messages": [{"role": "user", "content": "SCRIPT:foreign now"}]}
    _, _, data = raw_post(c, "/v1/chat/completions", body, {"x-sbx-session-id": "conv-1"})
    chunks = [f[1] for f in sse_frames(data)[:-1]]
    calls = [ch["choices"][0]["delta"]["tool_calls"][0] for ch in chunks
             if "tool_calls" in ch["choices"][0]["delta"]]
    assert len(calls) == 1 and calls[0]["function"]["name"] == "get_weather", chunks
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Iași"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    body = {"model": "claude-x", "max_tokens": 10, "stream": True, "tools": [
        {"name": "get_weather", "input_schema": {"type": "object"}}] + SBX,
        "messages": [{"role": "user", "content": "SCRIPT:foreign now"}]}
    _, _, data = raw_post(c, "/v1/messages", body, {"x-sbx-session-id": "conv-1"})
    frames = sse_frames(data)
    starts = [d["content_block"] for e, d in frames if e == "content_block_start"]
    assert {"type": "tool_use", "id": "toolu_0", "name": "get_weather", "input": {}} in starts
    deltas = [d["delta"]["partial_json"] for e, d in frames
              if e == "content_block_delta" and d["delta"]["type"] == "input_json_delta"]
    assert [json.loads(x) for x in deltas] == [{"city": "Iași"}], deltas
    assert dict(frames)["message_delta"]["delta"]["stop_reason"] == "tool_use"
