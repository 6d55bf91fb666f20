"""The client's own behaviour against httpx.MockTransport (no network): retries only on
503 sandbox_capacity, typed errors with the request id, timeouts, dropped streams."""

import asyncio
import json

import httpx
import pytest

import sbx
from sbx import AsyncSbx, Sbx


def _err(status, code, rid="req_t"):
    return httpx.Response(status, json={"error": {"code": code, "message": "m-" + code}},
                          headers={"x-request-id": rid})


def _client(handler, **kw):
    return Sbx("http://sbx.test", "sbx_k", retry_base=0.001,
               http_client=httpx.Client(transport=httpx.MockTransport(handler)), **kw)


def test_capacity_is_retried_then_succeeds():
    seen = []

    def handler(req):
        seen.append(req)
        return _err(503, "sandbox_capacity") if len(seen) < 3 else httpx.Response(
            201, json={"id": "sb_1", "object": "sandbox"})

    r = _client(handler).sandboxes.create(backend="v2", idempotency_key="k1")
    assert r["id"] == "sb_1"
    assert len(seen) == 3
    for q in seen:
        assert q.headers["idempotency-key"] == "k1"
        assert q.headers["authorization"] == "Bearer sbx_k"
        assert json.loads(q.content) == {"backend": "v2"}


def test_capacity_gives_up_after_max_retries():
    seen = []

    def handler(req):
        seen.append(req)
        return _err(503, "sandbox_capacity")

    with pytest.raises(sbx.ServerError) as ei:
        _client(handler, max_retries=2).sandboxes.create()
    assert (ei.value.status, ei.value.code, ei.value.request_id) == (503, "sandbox_capacity",
                                                                       "req_t")
    assert len(seen) == 3


@pytest.mark.parametrize("status,code,cls", [
    (400, "invalid_ttl", sbx.BadRequestError), (401, "invalid_api_key", sbx.AuthenticationError),
    (403, "admin_required", sbx.PermissionDeniedError), (404, "sandbox_not_found", sbx.NotFoundError),
    (409, "sandbox_busy", sbx.ConflictError), (429, "sandbox_concurrency_limit", sbx.RateLimitError),
    (503, "kernel_unavailable", sbx.ServerError)])
def test_other_errors_are_typed_and_never_retried(status, code, cls):
    seen = []

    def handler(req):
        seen.append(req)
        return _err(status, code, "req_" + code)

    with pytest.raises(cls) as ei:
        _client(handler).sandboxes.get("sb_1")
    e = ei.value
    assert isinstance(e, sbx.SbxError)
    assert (e.status, e.code, e.message, e.request_id) == (status, code, "m-" + code, "req_" + code)
    assert len(seen) == 1


def test_timeout_is_an_sbx_error():
    def handler(req):
        raise httpx.ReadTimeout("slow", request=req)

    with pytest.raises(sbx.SbxTimeoutError) as ei:
        _client(handler).sandboxes.list(timeout=0.1)
    assert ei.value.code == "timeout"


class _Dropping(httpx.SyncByteStream):
    def __iter__(self):
        yield b'data: {"type":"start","exec_id":"ex_42","sandbox_id":"sb_1"}\n\n'
        yield b'data: {"type":"stdout","data":"partial"}\n\n'
        raise httpx.RemoteProtocolError("peer closed connection")


def test_dropped_stream_raises_with_the_exec_id():
    def handler(req):
        assert req.headers["accept"] == "text/event-stream"
        return httpx.Response(200, headers={"content-type": "text/event-stream",
                                            "x-request-id": "req_s"}, stream=_Dropping())

    got = []
    with pytest.raises(sbx.SbxStreamError) as ei:
        for ev in _client(handler).sandboxes.exec_stream("sb_1", shell="x"):
            got.append(ev["type"])
    assert got == ["start", "stdout"]
    e = ei.value
    assert (e.exec_id, e.sandbox_id, e.request_id, e.code) == ("ex_42", "sb_1", "req_s",
                                                               "stream_dropped")
    assert "ex_42" in str(e)


def test_stream_ending_without_its_last_event_is_a_drop():
    def handler(req):
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=b'data: {"type":"start","exec_id":"ex_7"}\n\n')

    with pytest.raises(sbx.SbxStreamError) as ei:
        list(_client(handler).sandboxes.exec_stream("sb_1", shell="x"))
    assert ei.value.exec_id == "ex_7"


def test_paths_env_and_dot_components(monkeypatch):
    seen = []

    def handler(req):
        seen.append(req)
        return httpx.Response(200, json={"object": "file", "path": "x", "size": 1})

    monkeypatch.setenv("SBX_URL", "http://env.test")
    monkeypatch.setenv("SBX_API_KEY", "sbx_env")
    c = Sbx(http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    c.sandboxes.files.put("sb_1", "dir one/x#y.txt", b"z")
    assert seen[-1].url.raw_path == b"/v1/sandboxes/sb_1/files/dir%20one/x%23y.txt"
    assert seen[-1].url.host == "env.test"
    assert seen[-1].headers["authorization"] == "Bearer sbx_env"
    with pytest.raises(sbx.SbxError) as ei:
        c.sandboxes.files.put("sb_1", "a/../b", b"z")
    assert (ei.value.status, ei.value.code) == (0, "invalid_path")
    assert len(seen) == 1


def test_async_client_retries_and_streams():
    seen = []

    def handler(req):
        seen.append(req)
        if len(seen) == 1:
            return _err(503, "sandbox_capacity")
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=(
            b'data: {"type":"start","exec_id":"ex_1","sandbox_id":"sb_1"}\n\n'
            b'data: {"type":"stdout","data":"hi\\n"}\n\n'
            b'data: {"type":"exit","exit_code":0}\n\n'))

    async def main():
        async with AsyncSbx("http://sbx.test", "sbx_k", retry_base=0.001,
                            http_client=httpx.AsyncClient(
                                transport=httpx.MockTransport(handler))) as c:
            return [ev["type"] async for ev in c.sandboxes.exec_stream("sb_1", shell="x")]

    assert asyncio.run(main()) == ["start", "stdout", "exit"]
    assert len(seen) == 2
