"""Generated from _async_client.py by sdk/python/unasync.py: do not edit.

Sbx, the synchronous client (the same surface as AsyncSbx)."""

import time
import json
import os
import random
from typing import Any, Iterator, Dict, Iterable, List, Optional, Union
from urllib.parse import quote

import httpx
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (AcceptConnection, BytesMessage, CloseConnection, Ping,
                            RejectConnection, RejectData, Request, TextMessage)

from ._errors import SbxError, SbxStreamError, SbxTimeoutError, error_for
from ._net import _Socket

Obj = Dict[str, Any]
Event = Dict[str, Any]
Content = Union[str, bytes, Iterable[bytes], Iterator[bytes]]

DEFAULT_URL = "http://127.0.0.1:8787"
RETRY_MAX = 8.0
CHUNK = 1 << 20
EXEC_LAST = frozenset(("exit", "error"))
RUN_CODE_LAST = frozenset(("result", "error"))
LOGS_LAST = frozenset(("exit",))


def _seg(s: Any) -> str:
    return quote(str(s), safe="")


def _wpath(p: str) -> str:
    """A workspace path in a URL: components escaped, slashes kept. `.`/`..` are refused
    here (status 0, no request made): URL normalisation would resolve them."""
    parts = p.split("/")
    if any(c in (".", "..") for c in parts):
        raise SbxError(0, "invalid_path", "path %r has a . or .. component" % p, None)
    return "/".join(quote(c, safe="") for c in parts)


def _fields(d: Dict[str, Any]) -> Obj:
    return {k: v for k, v in d.items() if v is not None}


def _file_chunks(path: str) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while True:
            b = f.read(CHUNK)
            if not b:
                return
            yield b


class _Transport:
    def __init__(self, base_url: Optional[str], api_key: Optional[str], timeout: Optional[float],
                 max_retries: int, retry_base: float, http: Optional[httpx.Client]):
        self.base_url = (base_url or os.environ.get("SBX_URL") or DEFAULT_URL).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("SBX_API_KEY")
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_base = retry_base
        self.http = http or httpx.Client(timeout=None)

    def close(self) -> None:
        self.http.close()

    def url(self, path: str, query: Optional[Dict[str, Any]] = None) -> str:
        u = httpx.URL(self.base_url + path)
        if query:
            q = {k: ("true" if v is True else "false" if v is False else str(v))
                 for k, v in query.items() if v is not None}
            u = u.copy_merge_params(q)
        return str(u)

    def send(self, method: str, path: str, *, query: Optional[Dict[str, Any]] = None,
                   body: Any = None, content: Any = None, stream: bool = False,
                   accept: Optional[str] = None, idempotency_key: Optional[str] = None,
                   timeout: Optional[float] = None) -> httpx.Response:
        """The Response of a 2xx answer (streamed when stream=True: the caller closes it);
        raises SbxError otherwise. Only 503 sandbox_capacity is retried, with backoff."""
        headers = {}
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key
        if accept:
            headers["Accept"] = accept
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        elif content is not None:
            data = content
            headers["Content-Type"] = "application/octet-stream"
        replayable = not (content is not None and not isinstance(content, (str, bytes)))
        t = timeout if timeout is not None else self.timeout
        attempt = 0
        while True:
            req = self.http.build_request(method, self.url(path, query), headers=headers,
                                          content=data, timeout=httpx.Timeout(t))
            try:
                res = self.http.send(req, stream=True)
            except httpx.TimeoutException as e:
                raise SbxTimeoutError("no answer within %s s (%s)" % (t, e)) from e
            if res.is_success:
                if not stream:
                    try:
                        res.read()
                    except httpx.TimeoutException as e:
                        raise SbxTimeoutError("answer not read within %s s" % t) from e
                    finally:
                        res.close()
                return res
            try:
                res.read()
            finally:
                res.close()
            err = self._error(res)
            if not (err.status == 503 and err.code == "sandbox_capacity" and replayable
                    and attempt < self.max_retries):
                raise err
            backoff = min(RETRY_MAX, self.retry_base * 2 ** attempt)
            time.sleep(backoff / 2 + random.random() * backoff / 2)
            attempt += 1

    @staticmethod
    def _error(res: httpx.Response) -> SbxError:
        code, message = "http_%d" % res.status_code, res.reason_phrase or ""
        try:
            e = res.json()["error"]
            code, message = e["code"], e["message"]
        except (ValueError, KeyError, TypeError):
            pass
        return error_for(res.status_code, code, message, res.headers.get("x-request-id"))

    def json(self, method: str, path: str, **kw: Any) -> Any:
        res = self.send(method, path, **kw)
        return res.json()

    def events(self, method: str, path: str, last: frozenset,
                     sandbox_id: Optional[str] = None, **kw: Any) -> Iterator[Event]:
        """The JSON events of a text/event-stream answer, each as it arrives. An answer that
        ends before one of `last` raises SbxStreamError with the exec id."""
        res = self.send(method, path, stream=True, accept="text/event-stream", **kw)
        rid = res.headers.get("x-request-id")
        exec_id = None
        try:
            if "text/event-stream" not in res.headers.get("content-type", ""):
                res.read()
                yield res.json()  # a replayed idempotent answer: one final object
                return
            data: List[str] = []
            try:
                for line in res.iter_lines():
                    line = line.rstrip("\r\n")
                    if line.startswith("data:"):
                        data.append(line[6:] if line[5:6] == " " else line[5:])
                        continue
                    if line or not data:
                        continue
                    ev = json.loads("\n".join(data))
                    data = []
                    if ev.get("type") == "start":
                        exec_id = ev.get("exec_id", exec_id)
                        sandbox_id = ev.get("sandbox_id", sandbox_id)
                    yield ev
                    if ev.get("type") in last:
                        return
            except httpx.TimeoutException as e:
                raise SbxTimeoutError("stream not finished in time", rid) from e
            except httpx.TransportError as e:
                raise SbxStreamError("the event stream dropped (%s)%s" % (
                    e, " (exec %s)" % exec_id if exec_id else ""), exec_id, sandbox_id, rid) from e
            raise SbxStreamError("the event stream ended before its last event%s" % (
                " (exec %s)" % exec_id if exec_id else ""), exec_id, sandbox_id, rid)
        finally:
            res.close()


def _download(t: _Transport, url_path: str, local_path: str,
                    timeout: Optional[float]) -> int:
    res = t.send("GET", url_path, stream=True, timeout=timeout)
    tmp = "%s.sbx-%d" % (local_path, os.getpid())
    n = 0
    try:
        with open(tmp, "xb") as f:
            for chunk in res.iter_bytes():
                f.write(chunk)
                n += len(chunk)
        os.replace(tmp, local_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    finally:
        res.close()
    return n


class _Resource:
    def __init__(self, t: _Transport):
        self._t = t


class Files(_Resource):
    def put(self, id: str, path: str, content: Content, *,
                  idempotency_key: Optional[str] = None, timeout: Optional[float] = None) -> Obj:
        """Upload a str, bytes or an iterator of bytes (streamed as it is read)."""
        return self._t.json("PUT", "/v1/sandboxes/%s/files/%s" % (_seg(id), _wpath(path)),
                                  content=content, idempotency_key=idempotency_key,
                                  timeout=timeout)

    def put_file(self, id: str, path: str, local_path: str, *,
                       timeout: Optional[float] = None) -> Obj:
        """Upload a local file, streamed from disk (never held in memory)."""
        os.stat(local_path)  # a missing file fails here, not as a half-sent upload
        return self.put(id, path, _file_chunks(local_path), timeout=timeout)

    def get(self, id: str, path: str, *, timeout: Optional[float] = None) -> bytes:
        """The whole file in memory: for small files (see download)."""
        res = self._t.send("GET", "/v1/sandboxes/%s/files/%s" % (_seg(id), _wpath(path)),
                                 timeout=timeout)
        return res.content

    def download(self, id: str, path: str, local_path: str, *,
                       timeout: Optional[float] = None) -> int:
        """Stream a file into local_path (written beside it, then renamed); the bytes written."""
        return _download(self._t, "/v1/sandboxes/%s/files/%s" % (_seg(id), _wpath(path)),
                               local_path, timeout)

    def list(self, id: str, path: Optional[str] = None, recursive: Optional[bool] = None, *,
                   timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", "/v1/sandboxes/%s/files" % _seg(id),
                                  query={"path": path, "recursive": recursive}, timeout=timeout)

    def delete(self, id: str, path: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("DELETE",
                                  "/v1/sandboxes/%s/files/%s" % (_seg(id), _wpath(path)),
                                  timeout=timeout)


class Execs(_Resource):
    def get(self, id: str, exec_id: str, *, timeout: Optional[float] = None) -> Obj:
        """An exec's record: status running / exited / timed_out / interrupted / failed."""
        return self._t.json("GET", "/v1/sandboxes/%s/execs/%s" % (_seg(id), _seg(exec_id)),
                                  timeout=timeout)


class Sessions(_Resource):
    def create(self, id: str, *, session_id: Optional[str] = None,
                     env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
                     command_timeout_ms: Optional[int] = None,
                     timeout: Optional[float] = None) -> Obj:
        body = _fields({"id": session_id, "env": env, "cwd": cwd,
                        "command_timeout_ms": command_timeout_ms})
        return self._t.json("POST", "/v1/sandboxes/%s/sessions" % _seg(id), body=body,
                                  timeout=timeout)

    def list(self, id: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", "/v1/sandboxes/%s/sessions" % _seg(id), timeout=timeout)

    def delete(self, id: str, session_id: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json(
            "DELETE", "/v1/sandboxes/%s/sessions/%s" % (_seg(id), _seg(session_id)),
            timeout=timeout)


class Processes(_Resource):
    def _p(self, id: str, pid: Union[str, int], tail: str = "") -> str:
        return "/v1/sandboxes/%s/processes/%s%s" % (_seg(id), _seg(pid), tail)

    def start(self, id: str, command: str, *, session_id: Optional[str] = None,
                    env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
                    timeout: Optional[float] = None) -> Obj:
        body = _fields({"command": command, "session_id": session_id, "env": env, "cwd": cwd})
        return self._t.json("POST", "/v1/sandboxes/%s/processes" % _seg(id), body=body,
                                  timeout=timeout)

    def list(self, id: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", "/v1/sandboxes/%s/processes" % _seg(id),
                                  timeout=timeout)

    def get(self, id: str, process_id: Union[str, int], *,
                  timeout: Optional[float] = None) -> Obj:
        """By proc_N id or pid."""
        return self._t.json("GET", self._p(id, process_id), timeout=timeout)

    def kill(self, id: str, process_id: Union[str, int], *,
                   timeout: Optional[float] = None) -> Obj:
        """SIGKILL to the process group; answered once it is reaped."""
        return self._t.json("DELETE", self._p(id, process_id), timeout=timeout)

    def signal(self, id: str, process_id: Union[str, int], signal: Union[str, int], *,
                     timeout: Optional[float] = None) -> Obj:
        return self._t.json("POST", self._p(id, process_id, "/signal"),
                                  body={"signal": signal}, timeout=timeout)

    def logs(self, id: str, process_id: Union[str, int], *,
                   timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", self._p(id, process_id, "/logs"), timeout=timeout)

    def logs_stream(self, id: str, process_id: Union[str, int], *,
                    timeout: Optional[float] = None) -> Iterator[Event]:
        """Follow the output: what the ring holds, then live output, then `exit`."""
        return self._t.events("GET", self._p(id, process_id, "/logs"), LOGS_LAST, id,
                              timeout=timeout)


class Kernel(_Resource):
    def reset(self, id: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("POST", "/v1/sandboxes/%s/kernel/reset" % _seg(id),
                                  timeout=timeout)

    def interrupt(self, id: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("POST", "/v1/sandboxes/%s/kernel/interrupt" % _seg(id),
                                  timeout=timeout)


class Pty(_Resource):
    def exec_command(self, id: str, command: str, *, rows: Optional[int] = None,
                           cols: Optional[int] = None, grace_seconds: Optional[float] = None,
                           timeout: Optional[float] = None) -> Obj:
        """Runs `bash -c command` in a PTY; `session_id` when it is still running."""
        body = _fields({"command": command, "rows": rows, "cols": cols,
                        "grace_seconds": grace_seconds})
        return self._t.json("POST", "/v1/sandboxes/%s/pty" % _seg(id), body=body,
                                  timeout=timeout)

    def write_stdin(self, id: str, pty_id: str, input: str, *, since: Optional[int] = None,
                          wait_seconds: Optional[float] = None,
                          timeout: Optional[float] = None) -> Obj:
        body = _fields({"input": input, "since": since, "wait_seconds": wait_seconds})
        return self._t.json("POST",
                                  "/v1/sandboxes/%s/pty/%s/input" % (_seg(id), _seg(pty_id)),
                                  body=body, timeout=timeout)

    def read(self, id: str, pty_id: str, *, since: Optional[int] = None,
                   wait_seconds: Optional[float] = None, timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", "/v1/sandboxes/%s/pty/%s" % (_seg(id), _seg(pty_id)),
                                  query={"since": since, "wait_seconds": wait_seconds},
                                  timeout=timeout)

    def delete(self, id: str, pty_id: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("DELETE", "/v1/sandboxes/%s/pty/%s" % (_seg(id), _seg(pty_id)),
                                  timeout=timeout)


class Egress(_Resource):
    def get(self, id: str, *, limit: Optional[int] = None, before: Optional[str] = None,
                  timeout: Optional[float] = None) -> Obj:
        """The policy and the connection log, newest first."""
        return self._t.json("GET", "/v1/sandboxes/%s/egress" % _seg(id),
                                  query={"limit": limit, "before": before}, timeout=timeout)

    def put(self, id: str, policy: Obj, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("PUT", "/v1/sandboxes/%s/egress" % _seg(id), body=policy,
                                  timeout=timeout)


class Sandboxes(_Resource):
    def __init__(self, t: _Transport):
        super().__init__(t)
        self.files = Files(t)
        self.execs = Execs(t)
        self.sessions = Sessions(t)
        self.processes = Processes(t)
        self.kernel = Kernel(t)
        self.pty = Pty(t)
        self.egress = Egress(t)

    def _p(self, id: str, tail: str = "") -> str:
        return "/v1/sandboxes/%s%s" % (_seg(id), tail)

    def create(self, *, idempotency_key: Optional[str] = None,
                     timeout: Optional[float] = None, **fields: Any) -> Obj:
        """fields: template, ttl_seconds, env, backend, snapshot_id, egress,
        enable_default_session, volumes ([{volume, path, read_only?}])."""
        return self._t.json("POST", "/v1/sandboxes", body=_fields(fields),
                                  idempotency_key=idempotency_key, timeout=timeout)

    def list(self, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", "/v1/sandboxes", timeout=timeout)

    def get(self, id: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", self._p(id), timeout=timeout)

    def delete(self, id: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("DELETE", self._p(id), timeout=timeout)

    def exec(self, id: str, *, idempotency_key: Optional[str] = None,
                   timeout: Optional[float] = None, **fields: Any) -> Obj:
        """fields: shell, or language + code; timeout_seconds, cwd, env, session_id, inputs."""
        return self._t.json("POST", self._p(id, "/exec"), body=_fields(fields),
                                  idempotency_key=idempotency_key, timeout=timeout)

    def exec_stream(self, id: str, *, idempotency_key: Optional[str] = None,
                    timeout: Optional[float] = None, **fields: Any) -> Iterator[Event]:
        """Events as they arrive: start, stdout/stderr chunks, then exit (or error). A dropped
        stream raises SbxStreamError with the exec id."""
        return self._t.events("POST", self._p(id, "/exec"), EXEC_LAST, id, body=_fields(fields),
                              idempotency_key=idempotency_key, timeout=timeout)

    def run(self, *, idempotency_key: Optional[str] = None,
                  timeout: Optional[float] = None, **fields: Any) -> Obj:
        """Create a sandbox, run one command, destroy it: the sandbox and exec fields in one."""
        return self._t.json("POST", "/v1/sandboxes/run", body=_fields(fields),
                                  idempotency_key=idempotency_key, timeout=timeout)

    def run_stream(self, *, idempotency_key: Optional[str] = None,
                   timeout: Optional[float] = None, **fields: Any) -> Iterator[Event]:
        return self._t.events("POST", "/v1/sandboxes/run", EXEC_LAST, None, body=_fields(fields),
                              idempotency_key=idempotency_key, timeout=timeout)

    def artifacts(self, id: str, *, timeout: Optional[float] = None) -> Obj:
        """Collect, hash and scan /workspace/out; clean files get signed links."""
        return self._t.json("GET", self._p(id, "/artifacts"), timeout=timeout)

    def run_code(self, id: str, code: str, *, timeout_seconds: Optional[int] = None,
                       timeout: Optional[float] = None) -> Obj:
        """A cell in the sandbox's persistent Python kernel."""
        return self._t.json("POST", self._p(id, "/run_code"),
                                  body=_fields({"code": code, "timeout_seconds": timeout_seconds}),
                                  timeout=timeout)

    def run_code_stream(self, id: str, code: str, *, timeout_seconds: Optional[int] = None,
                        timeout: Optional[float] = None) -> Iterator[Event]:
        return self._t.events("POST", self._p(id, "/run_code"), RUN_CODE_LAST, id,
                              body=_fields({"code": code, "timeout_seconds": timeout_seconds}),
                              timeout=timeout)

    def pause(self, id: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("POST", self._p(id, "/pause"), timeout=timeout)

    def resume(self, id: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("POST", self._p(id, "/resume"), timeout=timeout)

    def restart(self, id: str, *, timeout: Optional[float] = None) -> Obj:
        """A failed sandbox (or a running one, stopped first) starts cold from its
        workspace: the sandbox, restored false."""
        return self._t.json("POST", self._p(id, "/restart"), timeout=timeout)

    def fork(self, id: str, *, count: Optional[int] = None,
                   ttl_seconds: Optional[int] = None, timeout: Optional[float] = None) -> Obj:
        return self._t.json("POST", self._p(id, "/fork"),
                                  body=_fields({"count": count, "ttl_seconds": ttl_seconds}),
                                  timeout=timeout)

    def snapshot(self, id: str, *, timeout: Optional[float] = None) -> Obj:
        """A v1 workspace snapshot (snapshot_id on create starts from it)."""
        return self._t.json("POST", self._p(id, "/snapshot"), timeout=timeout)

    def preview(self, id: str, port: Optional[int] = None, *,
                      ttl_seconds: Optional[int] = None, timeout: Optional[float] = None) -> Obj:
        """A signed URL (no key needed) to a port inside the sandbox."""
        return self._t.json("POST", self._p(id, "/preview"),
                                  body=_fields({"port": port, "ttl_seconds": ttl_seconds}),
                                  timeout=timeout)

    def terminal_ticket(self, id: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("POST", self._p(id, "/terminal-ticket"), timeout=timeout)

    def terminal_url(self, id: str, *, cols: Optional[int] = None,
                           rows: Optional[int] = None, pty_id: Optional[str] = None,
                           provision: bool = False,
                           timeout: Optional[float] = None) -> str:
        """A ws:// URL for the terminal WebSocket (with a fresh single-use ticket), for any
        WebSocket client. provision: resume a paused (or restart a stopped) sandbox first."""
        ticket = (self.terminal_ticket(id, timeout=timeout))["ticket"]
        u = self._t.url(self._p(id, "/terminal"),
                        {"ticket": ticket, "cols": cols, "rows": rows, "pty_id": pty_id,
                         "provision": 1 if provision else None})
        return "ws" + u[4:] if u.startswith("http") else u

    def terminal(self, id: str, *, cols: Optional[int] = None, rows: Optional[int] = None,
                       pty_id: Optional[str] = None, provision: bool = False,
                       timeout: Optional[float] = None) -> "Terminal":
        """An interactive shell over WebSocket (a ticket is fetched first); pty_id re-attaches;
        provision resumes a paused sandbox (or restarts a stopped one) first. A sandbox that
        cannot open one raises SbxError with the server's code (SANDBOX_PAUSED,
        SANDBOX_STOPPED, TERMINAL_UNSUPPORTED)."""
        url = self.terminal_url(id, cols=cols, rows=rows, pty_id=pty_id,
                                      provision=provision, timeout=timeout)
        return Terminal.open(url, timeout)


class Terminal:
    """An interactive terminal over the sandbox's WebSocket (docs/terminals.md). `ready` is
    the server's first message (`pty_id` re-attaches later); iterate for
    {"type": "data", "data": bytes} and the JSON control messages (`exited`, `error`), ending
    with {"type": "close", "code", "reason"}. Leaving detaches; the shell keeps running for the
    grace period."""

    def __init__(self, sock: _Socket, ws: WSConnection):
        self._sock = sock
        self._ws = ws
        self._queue: List[Obj] = []
        self._text = ""
        self._out = b""
        self._closed = False
        self.ready: Obj = {}

    @classmethod
    def open(cls, url: str, timeout: Optional[float] = None) -> "Terminal":
        """Connects to a terminal URL (Sandboxes.terminal_url); SbxError if sbxd refuses."""
        u = httpx.URL(url)
        tls = u.scheme == "wss"
        port = u.port or (443 if tls else 80)
        sock = _Socket.connect(u.host, port, tls, timeout)
        ws = WSConnection(ConnectionType.CLIENT)
        t = cls(sock, ws)
        try:
            sock.write(ws.send(Request(host="%s:%d" % (u.host, port),
                                             target=u.raw_path.decode())))
            t._handshake()
            first = t.recv()
            if first and first.get("type") == "error":  # spec 002: refused after the upgrade
                raise SbxError(0, first.get("code") or "terminal_closed",
                               "the terminal was refused: %s" % first.get("code"), None)
            if not first or first.get("type") != "ready":
                raise SbxError(0, "terminal_closed", "no ready message: %r" % (first,), None)
            t.ready = first
        except BaseException:
            sock.close()
            raise
        return t

    def _handshake(self) -> None:
        status, headers, body = 0, {}, b""
        while True:
            data = self._sock.read()
            self._ws.receive_data(data or None)
            for ev in self._ws.events():
                if isinstance(ev, AcceptConnection):
                    self._take(self._ws.events())
                    return
                if isinstance(ev, RejectConnection):
                    status = ev.status_code
                    headers = {k.decode().lower(): v.decode() for k, v in ev.headers}
                    if not ev.has_body:
                        data = b""
                elif isinstance(ev, RejectData):
                    body += ev.data
                    if ev.body_finished:
                        data = b""
            if not data:
                break
        code, message = "http_%d" % status, "the terminal was refused"
        try:
            e = json.loads(body)["error"]
            code, message = e["code"], e["message"]
        except (ValueError, KeyError, TypeError):
            pass
        raise error_for(status, code, message, headers.get("x-request-id"))

    def _take(self, events: Iterable[Any]) -> None:
        for ev in events:
            if isinstance(ev, BytesMessage):
                self._queue.append({"type": "data", "data": bytes(ev.data)})
            elif isinstance(ev, TextMessage):
                self._text += ev.data
                if ev.message_finished:
                    self._queue.append(json.loads(self._text))
                    self._text = ""
            elif isinstance(ev, Ping):
                self._out += self._ws.send(ev.response())
            elif isinstance(ev, CloseConnection):
                self._queue.append({"type": "close", "code": ev.code, "reason": ev.reason})
                if self._ws.state == ConnectionState.REMOTE_CLOSING:
                    self._out += self._ws.send(ev.response())
                self._closed = True

    def recv(self) -> Optional[Obj]:
        """The next message, or None once the socket is closed."""
        while not self._queue:
            if self._closed:
                return None
            data = self._sock.read()
            self._ws.receive_data(data or None)
            self._take(self._ws.events())
            if self._out:
                self._sock.write(self._out)
                self._out = b""
            if not data and not self._queue:
                self._closed = True
        return self._queue.pop(0)

    def write(self, data: Union[str, bytes]) -> None:
        """Keystrokes to the shell."""
        b = data.encode() if isinstance(data, str) else data
        self._sock.write(self._ws.send(BytesMessage(data=b)))

    def resize(self, cols: int, rows: int) -> None:
        msg = json.dumps({"type": "resize", "cols": cols, "rows": rows})
        self._sock.write(self._ws.send(TextMessage(data=msg)))

    def close(self) -> None:
        if self._ws.state == ConnectionState.OPEN:
            try:
                self._sock.write(self._ws.send(CloseConnection(code=1000)))
            except OSError:
                pass
        self._closed = True
        self._sock.close()

    def _messages(self) -> Iterator[Obj]:
        while True:
            m = self.recv()
            if m is None:
                return
            yield m
            if m["type"] == "close":
                return

    def __iter__(self) -> Iterator[Obj]:
        return self._messages()

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Audit(_Resource):
    def list(self, *, timeout: Optional[float] = None, **query: Any) -> Obj:
        """query: sandbox_id, user, action, since, until, limit, after."""
        return self._t.json("GET", "/v1/audit", query=query, timeout=timeout)

    def verify(self, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", "/v1/audit/verify", timeout=timeout)


class Keys(_Resource):
    def create(self, user: str, *, role: Optional[str] = None,
                     tool_level: Optional[str] = None, timeout: Optional[float] = None) -> Obj:
        body = _fields({"user": user, "role": role, "tool_level": tool_level})
        return self._t.json("POST", "/v1/keys", body=body, timeout=timeout)

    def list(self, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", "/v1/keys", timeout=timeout)

    def delete(self, key_id: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("DELETE", "/v1/keys/%s" % _seg(key_id), timeout=timeout)


class SandboxScope:
    """`with client.sandbox(**fields) as sb:` creates a sandbox, deletes it on exit."""

    def __init__(self, sandboxes: Sandboxes, fields: Dict[str, Any]):
        self._sandboxes = sandboxes
        self._fields = fields
        self.sandbox: Optional[Obj] = None

    def __enter__(self) -> Obj:
        self.sandbox = self._sandboxes.create(**self._fields)
        return self.sandbox

    def __exit__(self, *exc: Any) -> None:
        if self.sandbox is not None:
            try:
                self._sandboxes.delete(self.sandbox["id"])
            except SbxError as e:
                if e.code != "sandbox_not_found":
                    raise


class VolumeFiles(_Resource):
    """Files on a volume without a sandbox (docs/volumes.md); id is a volume's id or name."""

    def _p(self, id: str, path: str) -> str:
        return "/v1/volumes/%s/files/%s" % (_seg(id), _wpath(path))

    def put(self, id: str, path: str, content: Content, *,
                  timeout: Optional[float] = None) -> Obj:
        """Upload a str, bytes or an iterator of bytes; 507 volume_full past its size."""
        return self._t.json("PUT", self._p(id, path), content=content, timeout=timeout)

    def put_file(self, id: str, path: str, local_path: str, *,
                       timeout: Optional[float] = None) -> Obj:
        os.stat(local_path)
        return self.put(id, path, _file_chunks(local_path), timeout=timeout)

    def get(self, id: str, path: str, *, timeout: Optional[float] = None) -> bytes:
        res = self._t.send("GET", self._p(id, path), timeout=timeout)
        return res.content

    def download(self, id: str, path: str, local_path: str, *,
                       timeout: Optional[float] = None) -> int:
        return _download(self._t, self._p(id, path), local_path, timeout)

    def list(self, id: str, path: Optional[str] = None, recursive: Optional[bool] = None, *,
                   timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", "/v1/volumes/%s/files" % _seg(id),
                                  query={"path": path, "recursive": recursive}, timeout=timeout)

    def stat(self, id: str, path: str = "", *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", "/v1/volumes/%s/stat" % _seg(id), query={"path": path},
                                  timeout=timeout)

    def mkdir(self, id: str, path: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("POST", "/v1/volumes/%s/directories" % _seg(id),
                                  body={"path": path}, timeout=timeout)

    def delete(self, id: str, path: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("DELETE", self._p(id, path), timeout=timeout)


class Volumes(_Resource):
    """Named storage that outlives sandboxes (docs/volumes.md). Mount at create:
    sandboxes.create(volumes=[{"volume": "data", "path": "/data"}])."""

    def __init__(self, t: _Transport):
        super().__init__(t)
        self.files = VolumeFiles(t)

    def create(self, name: str, *, size_mb: Optional[int] = None,
                     timeout: Optional[float] = None) -> Obj:
        return self._t.json("POST", "/v1/volumes",
                                  body=_fields({"name": name, "size_mb": size_mb}),
                                  timeout=timeout)

    def list(self, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", "/v1/volumes", timeout=timeout)

    def get(self, id: str, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", "/v1/volumes/%s" % _seg(id), timeout=timeout)

    def delete(self, id: str, *, timeout: Optional[float] = None) -> Obj:
        """409 volume_in_use while a live sandbox mounts it."""
        return self._t.json("DELETE", "/v1/volumes/%s" % _seg(id), timeout=timeout)


class Sbx:
    """The sbx client. base_url / api_key default to the env SBX_URL / SBX_API_KEY; timeout
    (seconds, per call unless given to the call) bounds each wait for the server; max_retries
    applies to 503 sandbox_capacity only."""

    def __init__(self, base_url: Optional[str] = None, api_key: Optional[str] = None, *,
                 timeout: Optional[float] = None, max_retries: int = 3, retry_base: float = 0.5,
                 http_client: Optional[httpx.Client] = None):
        self._t = _Transport(base_url, api_key, timeout, max_retries, retry_base,
                                  http_client)
        self.base_url = self._t.base_url
        self.sandboxes = Sandboxes(self._t)
        self.audit = Audit(self._t)
        self.keys = Keys(self._t)
        self.volumes = Volumes(self._t)

    def sandbox(self, **fields: Any) -> SandboxScope:
        return SandboxScope(self.sandboxes, fields)

    def health(self, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", "/healthz", timeout=timeout)

    def openapi(self, *, timeout: Optional[float] = None) -> Obj:
        return self._t.json("GET", "/openapi.json", timeout=timeout)

    def close(self) -> None:
        self._t.close()

    def __enter__(self) -> "Sbx":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
