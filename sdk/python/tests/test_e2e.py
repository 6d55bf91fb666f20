"""Sbx and AsyncSbx through a real sbxd. The module's sandbox `sb` is shared; tests that
need more create their own and delete it, so the key never holds more than 3 running."""

import asyncio
import hashlib
import os

import httpx
import pytest
import yaml

import sbx
from conftest import DOC
from sbx import AsyncSbx, Sbx


def test_spec_000_python_example(client):
    # Spec 000, section SDK-uri, names adapted (Codai -> Sbx); the url input becomes an
    # inline one (tests never leave 127.0.0.1), and out/ is made first (a fresh workspace
    # has none).
    client = Sbx(api_key=os.environ["SBX_API_KEY"])
    sb = client.sandboxes.create(ttl_seconds=1800)
    client.sandboxes.files.put(sb["id"], "in/date.csv", "client,suma\nSC Exemplu SRL,1200\n")
    out = ""
    for ev in client.sandboxes.exec_stream(sb["id"], language="python",
                                           code="print(open('in/date.csv').read())"):
        if ev["type"] == "stdout":
            print(ev["data"], end="")
            out += ev["data"]
    result = client.sandboxes.run(shell="mkdir -p out && weasyprint in/page.html out/page.pdf",
                                  inputs=[{"path": "in/page.html",
                                           "content": "<h1>Hotarare AGA</h1>"}])
    client.sandboxes.delete(sb["id"])
    assert out == "client,suma\nSC Exemplu SRL,1200\n\n"
    assert result["exit_code"] == 0, result["stderr"]
    pdf = [a for a in result["artifacts"] if a["path"] == "out/page.pdf"]
    assert pdf and pdf[0]["mime"] == "application/pdf", result["artifacts"]
    with pytest.raises(sbx.NotFoundError):
        client.sandboxes.get(sb["id"])


def test_spec_000_v2_preview_example(client):
    # Spec 000, Sandbox-uri v2: the spec's "desktop" template is not built here; base is.
    sb = client.sandboxes.create(backend="v2", template="base")
    try:
        p = client.sandboxes.preview(sb["id"], 6080, ttl_seconds=600)
        print(p["url"], p["expires_at"])
        assert p["url"].startswith("http") and p["expires_at"] > sb["created_at"]
    finally:
        client.sandboxes.delete(sb["id"])


def test_first_stdout_event_arrives_while_the_command_runs(client, sb):
    seen, status_at_first = [], None
    exec_id = None
    for ev in client.sandboxes.exec_stream(sb["id"], shell="echo first; sleep 2; echo second"):
        seen.append(ev["type"])
        if ev["type"] == "start":
            exec_id = ev["exec_id"]
        if ev["type"] == "stdout" and status_at_first is None:
            assert ev["data"] == "first\n"
            status_at_first = client.sandboxes.execs.get(sb["id"], exec_id)["status"]
    assert status_at_first == "running"
    assert seen[0] == "start" and seen[-1] == "exit"
    assert client.sandboxes.execs.get(sb["id"], exec_id)["stdout"] == "first\nsecond\n"


def test_exec_idempotency_and_errors(client, sb):
    r = client.sandboxes.exec(sb["id"], language="python", code="print(6*7)")
    assert (r["stdout"], r["exit_code"]) == ("42\n", 0)
    a = client.sandboxes.exec(sb["id"], shell="echo once", idempotency_key="py-1")
    b = client.sandboxes.exec(sb["id"], shell="echo once", idempotency_key="py-1")
    assert a["id"] == b["id"]
    with pytest.raises(sbx.ConflictError) as ei:
        client.sandboxes.exec(sb["id"], shell="echo other", idempotency_key="py-1")
    assert ei.value.code == "idempotency_key_mismatch"
    with pytest.raises(sbx.NotFoundError) as ei:
        client.sandboxes.get("sb_doesnotexist")
    assert ei.value.code == "sandbox_not_found" and ei.value.request_id and ei.value.message
    with pytest.raises(sbx.BadRequestError) as ei:
        client.sandboxes.exec(sb["id"], shell="true", timeout_seconds=0)
    assert ei.value.code == "invalid_timeout"
    with pytest.raises(sbx.AuthenticationError) as ei:
        Sbx(api_key="sbx_" + "x" * 40).sandboxes.list()
    assert ei.value.code == "invalid_api_key"


def test_files_streamed_through_disk(client, sb, tmp_path):
    client.sandboxes.files.put(sb["id"], "docs/a b.txt", "hello")
    assert client.sandboxes.files.get(sb["id"], "docs/a b.txt") == b"hello"
    ls = client.sandboxes.files.list(sb["id"], path="docs")
    assert [e["path"] for e in ls["data"]] == ["docs/a b.txt"]
    big = tmp_path / "big.bin"
    block = bytes((i * 31 + 7) & 0xFF for i in range(1 << 16))
    h = hashlib.sha256()
    with open(big, "wb") as f:
        for i in range(400):  # 25 MiB
            f.write(block)
            h.update(block)
    up = client.sandboxes.files.put_file(sb["id"], "big/big.bin", str(big))
    assert up["size"] == big.stat().st_size
    back = tmp_path / "back.bin"
    assert client.sandboxes.files.download(sb["id"], "big/big.bin", str(back)) == up["size"]
    with open(back, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == h.hexdigest()
    inside = client.sandboxes.exec(sb["id"], shell="sha256sum big/big.bin")
    assert inside["stdout"].split()[0] == h.hexdigest()
    client.sandboxes.files.delete(sb["id"], "big")
    with pytest.raises(sbx.NotFoundError) as ei:
        client.sandboxes.files.get(sb["id"], "big/big.bin")
    assert ei.value.code == "file_not_found"


def test_sessions_processes_and_logs(client, sb):
    client.sandboxes.sessions.create(sb["id"], session_id="py")
    client.sandboxes.exec(sb["id"], shell="cd /tmp && export A=1", session_id="py")
    assert client.sandboxes.exec(sb["id"], shell="echo $A $PWD",
                                 session_id="py")["stdout"] == "1 /tmp\n"
    assert "py" in [s["id"] for s in client.sandboxes.sessions.list(sb["id"])["data"]]
    client.sandboxes.sessions.delete(sb["id"], "py")

    p = client.sandboxes.processes.start(sb["id"], "for i in 1 2 3; do echo l$i; sleep 0.2; done")
    out, exit_ev = "", None
    for ev in client.sandboxes.processes.logs_stream(sb["id"], p["id"]):
        if ev["type"] == "stdout":
            out += ev["data"]
        if ev["type"] == "exit":
            exit_ev = ev
    assert out == "l1\nl2\nl3\n" and exit_ev["status"] == "completed"
    assert client.sandboxes.processes.logs(sb["id"], p["id"])["stdout"] == out
    q = client.sandboxes.processes.start(sb["id"], "sleep 300")
    assert q["id"] in [x["id"] for x in client.sandboxes.processes.list(sb["id"])["data"]]
    client.sandboxes.processes.signal(sb["id"], q["id"], "SIGSTOP")
    assert client.sandboxes.processes.kill(sb["id"], q["id"])["status"] == "killed"
    assert client.sandboxes.processes.get(sb["id"], q["id"])["status"] == "killed"


def test_run_code_kernel_and_pty(client, sb):
    client.sandboxes.run_code(sb["id"], "x = 40")
    assert client.sandboxes.run_code(sb["id"], "x + 2")["result"] == "42"
    evs = list(client.sandboxes.run_code_stream(sb["id"], 'print("hi")\nx'))
    assert evs[0]["type"] == "start" and evs[-1]["type"] == "result"
    assert "".join(e["data"] for e in evs if e["type"] == "stdout") == "hi\n"
    assert client.sandboxes.kernel.interrupt(sb["id"])["object"] == "kernel"
    assert client.sandboxes.kernel.reset(sb["id"])["restarted"] is True
    assert client.sandboxes.run_code(sb["id"], "x")["error"]["name"] == "NameError"

    p = client.sandboxes.pty.exec_command(sb["id"], 'read line; echo "got $line"',
                                          grace_seconds=0)
    assert p["alive"] is True
    out = client.sandboxes.pty.write_stdin(sb["id"], p["session_id"], "abc\n",
                                           wait_seconds=10)["stdout"]
    # The answer ends once the output has been quiet for 100 ms: on a loaded host the
    # terminal's echo of the input can come that long before the command's own line.
    for _ in range(6):
        if "got abc" in out:
            break
        out += client.sandboxes.pty.read(sb["id"], p["session_id"], wait_seconds=5)["stdout"]
    assert "got abc" in out, out
    assert "got abc" in client.sandboxes.pty.read(sb["id"], p["session_id"], since=0)["stdout"]
    client.sandboxes.pty.delete(sb["id"], p["session_id"])


def test_terminal_over_websocket(client, sb):
    with client.sandboxes.terminal(sb["id"], cols=100, rows=30) as t:
        assert t.ready["pty_id"]
        t.resize(120, 40)
        t.write("echo sum-$((40+2)); stty size; exit\n")
        screen, exited, last = b"", None, None
        for m in t:
            if m["type"] == "data":
                screen += m["data"]
            if m["type"] == "exited":
                exited = m
            last = m
    assert b"sum-42" in screen and b"40 120" in screen, screen
    assert exited["exit_code"] == 0 and last["type"] == "close"
    # A ticket is single use: the refusal before the upgrade is a typed error.
    url = client.sandboxes.terminal_url(sb["id"])
    sbx.Terminal.open(url).close()
    with pytest.raises(sbx.AuthenticationError) as ei:
        sbx.Terminal.open(url)
    assert ei.value.code == "invalid_ticket" and ei.value.request_id


def test_terminal_on_a_paused_sandbox_and_provision(client):
    with client.sandbox(ttl_seconds=900) as s:
        client.sandboxes.pause(s["id"])
        # Refused after the upgrade with spec 002's frame: a typed error with its code.
        with pytest.raises(sbx.SbxError) as ei:
            client.sandboxes.terminal(s["id"])
        assert ei.value.code == "SANDBOX_PAUSED", ei.value
        assert client.sandboxes.get(s["id"])["status"] == "paused"
        with client.sandboxes.terminal(s["id"], provision=True) as t:
            assert t.ready["type"] == "ready" and t.ready["pty_id"]
            t.write("exit\n")
            assert [m for m in t if m["type"] == "exited"][0]["exit_code"] == 0
        assert client.sandboxes.get(s["id"])["status"] == "running"


def test_egress_preview_fork_pause_resume(client, sb):
    assert client.sandboxes.egress.get(sb["id"])["policy"]["mode"] == "none"
    s = client.sandboxes.egress.put(sb["id"], {"mode": "allowlist", "domains": ["example.com"]})
    assert s["egress"]["domains"] == ["example.com"]
    client.sandboxes.egress.put(sb["id"], {"mode": "none"})
    p = client.sandboxes.preview(sb["id"], 6080, ttl_seconds=600)
    assert p["port"] == 6080 and p["url"] and p["expires_at"]
    client.sandboxes.files.put(sb["id"], "state.txt", "kept")
    f = client.sandboxes.fork(sb["id"], count=1)
    try:
        assert f["parent_id"] == sb["id"] and "error" not in f["data"][0]
        assert client.sandboxes.files.get(f["data"][0]["id"], "state.txt") == b"kept"
    finally:
        client.sandboxes.delete(f["data"][0]["id"])
    assert client.sandboxes.pause(sb["id"])["status"] == "paused"
    with pytest.raises(sbx.ConflictError) as ei:
        client.sandboxes.exec(sb["id"], shell="true")
    assert ei.value.code == "sandbox_not_running"
    back = client.sandboxes.resume(sb["id"])
    assert back["status"] == "running" and isinstance(back["restored"], bool)
    with pytest.raises(sbx.ConflictError) as ei:
        client.sandboxes.snapshot(sb["id"])
    assert ei.value.code == "not_supported_on_v2"


def test_keys_and_audit(client, sb):
    k = client.keys.create("py-member", role="member", tool_level="sandbox")
    assert k["key"].startswith("sbx_")
    assert k["id"] in [x["id"] for x in client.keys.list()["data"]]
    member = Sbx(api_key=k["key"])
    with pytest.raises(sbx.NotFoundError):
        member.sandboxes.get(sb["id"])
    with pytest.raises(sbx.PermissionDeniedError) as ei:
        member.keys.list()
    assert ei.value.code == "admin_required"
    client.keys.delete(k["id"])
    with pytest.raises(sbx.AuthenticationError):
        member.sandboxes.list()
    page = client.audit.list(sandbox_id=sb["id"], limit=5)
    assert page["data"] and all(e["sandbox_id"] == sb["id"] for e in page["data"])
    assert client.audit.verify()["ok"] is True
    assert client.health()["status"] == "ok"
    assert client.openapi()["openapi"] == "3.1.0"


def test_context_manager_deletes_the_sandbox(client):
    with client.sandbox(ttl_seconds=300) as s:
        assert client.sandboxes.get(s["id"])["status"] == "running"
    with pytest.raises(sbx.NotFoundError):
        client.sandboxes.get(s["id"])


def test_async_client_same_surface(client):
    async def main():
        async with AsyncSbx() as c:
            async with c.sandbox(ttl_seconds=300) as s:
                await c.sandboxes.files.put(s["id"], "a.txt", "async")
                types, out = [], ""
                async for ev in c.sandboxes.exec_stream(s["id"], shell="cat a.txt"):
                    types.append(ev["type"])
                    if ev["type"] == "stdout":
                        out += ev["data"]
                r = await c.sandboxes.run_code(s["id"], "1 + 1")
                screen = b""
                async with await c.sandboxes.terminal(s["id"]) as t:
                    await t.write("echo term-$((1+1)); exit\n")
                    async for m in t:
                        if m["type"] == "data":
                            screen += m["data"]
                return s["id"], types, out, r["result"], screen

    sid, types, out, result, screen = asyncio.run(main())
    assert (types[0], types[-1], out, result) == ("start", "exit", "async", "2")
    assert b"term-2" in screen
    with pytest.raises(sbx.NotFoundError):
        client.sandboxes.get(sid)


def test_list_run_artifacts_and_links(client, sb, checker):
    assert sb["id"] in [x["id"] for x in client.sandboxes.list()["data"]]
    r = client.sandboxes.run(shell="mkdir -p out && printf report > out/r.txt")
    assert r["exit_code"] == 0 and [a["path"] for a in r["artifacts"]] == ["out/r.txt"]
    client.sandboxes.exec(sb["id"], shell="mkdir -p out && printf mine > out/m.txt")
    arts = client.sandboxes.artifacts(sb["id"])["data"]
    link = [a for a in arts if a["path"] == "out/m.txt"][0]["url"]
    # The links need no key; the raw requests go through the same OpenAPI check.
    with httpx.Client(event_hooks={"response": [checker]}) as h:
        assert h.get(link).content == b"mine"
        assert h.get(link.replace("sig=", "sig=0")).status_code == 403
        term = client.sandboxes.terminal_url(sb["id"]).replace("ws://", "http://", 1)
        assert h.get(term).status_code == 426  # not a WebSocket handshake


def test_volumes_outlive_sandboxes(client, tmp_path):
    vol = client.volumes.create("sdk-vol", size_mb=32)
    assert vol["object"] == "volume" and vol["size_mb"] == 32, vol
    client.volumes.files.put(vol["id"], "in/a.txt", "from the sdk")
    assert client.volumes.files.stat("sdk-vol", "in/a.txt")["size"] == 12
    client.volumes.files.mkdir(vol["id"], "made")
    names = [e["path"] for e in client.volumes.files.list(vol["id"], recursive=True)["data"]]
    assert names == ["in", "in/a.txt", "made"], names
    with client.sandbox(ttl_seconds=600, volumes=[{"volume": "sdk-vol", "path": "/data"}]) as s:
        r = client.sandboxes.exec(s["id"], shell="cat /data/in/a.txt; echo x > /data/made/b")
        assert r["stdout"] == "from the sdk", r
        with pytest.raises(sbx.SbxError) as e:
            client.volumes.delete(vol["id"])
        assert e.value.code == "volume_in_use"
    dst = str(tmp_path / "b")
    assert client.volumes.files.download(vol["id"], "made/b", dst) == 2
    assert open(dst).read() == "x\n"
    client.volumes.files.delete(vol["id"], "made/b")
    assert [v["id"] for v in client.volumes.list()["data"]].count(vol["id"]) == 1
    client.volumes.delete(vol["id"])
    with pytest.raises(sbx.NotFoundError):
        client.volumes.get(vol["id"])


def test_answers_matched_the_openapi_document(client, checker):
    """Runs last: the answers checked above (openapi_check.py) reached every operation of
    the core fragment (other features' fragments have their own tests)."""
    with open(os.path.join(os.path.dirname(DOC), "openapi", "core.yaml")) as f:
        core = yaml.safe_load(f)["paths"]
    seen = {(m, t) for m, t, _ in checker.seen}
    ops = {(m.upper(), t) for t, item in core.items() for m in item
           if m in ("get", "put", "post", "delete")}
    assert sorted(ops - seen) == []
