"""Test harness: a real sbxd on 127.0.0.1 with a private data dir, and an HTTP client.

Standard library only. Used by tests/e2e, tests/security and bench/.

    with Daemon() as d:
        c = d.client()                  # admin
        k = c.create_key("alice")       # member, tool_level sandbox
        a = d.client(k["key"])
        sb = a.create_sandbox(ttl_seconds=600)
        r = a.exec(sb["id"], shell="echo hi")

Every daemon's stderr goes to a log file; its path is recorded in DAEMON_LOGS (and, when
the env SBX_TEST_LOG_DIR is set by tests/run.py, the log is copied there before the data
dir is removed) so that the runner can look for sanitizer reports after each test.

A daemon that ends without being asked (a crash, an abort, a sanitizer's exit), or that
exits badly on SIGTERM, is entered in CRASHES; tests/run.py fails the test during which it
was found, naming the daemon, its exit status and its log's tail. A test that cannot run
here raises Skip(why): the runner counts it as a skip, never as a pass.
"""

import concurrent.futures
import ctypes
import glob
import http.client
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Paths of every daemon stderr log of this process (the runner reads them after each test).
DAEMON_LOGS = []
_log_lock = threading.Lock()
# (what, why, detail) of each daemon found dead or exiting badly; the runner drains it.
CRASHES = []
# The daemons that have a process, so the runner can find one that died between requests.
_RUNNING = []


class Skip(Exception):
    """Raised by a test that cannot run here, with the reason; tests/run.py counts it as a
    skip (and `make test` fails on one it does not expect: EXPECTED_SKIPS there)."""


def _status_words(rc):
    if rc is None:
        return "still running"
    if rc < 0:
        try:
            return "killed by %s" % signal.Signals(-rc).name
        except ValueError:
            return "killed by signal %d" % -rc
    return {23: "exit status 23 (LeakSanitizer's)", 1: "exit status 1 (AddressSanitizer's "
            "default, or an error exit)"}.get(rc, "exit status %d" % rc)


def reap_dead():
    """Every daemon whose process ended without the harness asking goes into CRASHES (and is
    reaped, so a Shared daemon can start afresh for the next test). The runner calls this
    after each test."""
    for d in list(_RUNNING):
        if d.proc is not None and d.proc.poll() is not None:
            d._died("ended on its own")


def build_dir():
    b = os.environ.get("SBX_BUILD", "build-asan")
    if not os.path.isabs(b):
        b = os.path.join(REPO, b)
    return b


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def new_admin_key():
    return "sbx_" + secrets.token_hex(24)


def sanitizer_env(env):
    """The sanitizer settings every sanitized host binary of a test run gets."""
    env.setdefault(
        "ASAN_OPTIONS",
        "detect_leaks=1:abort_on_error=0:halt_on_error=0:strict_string_checks=1:"
        "detect_stack_use_after_return=0:check_initialization_order=1:"
        "detect_invalid_pointer_pairs=0:"
        # abort() and a failed assert() print a report with the stack, which the runner
        # reads, rather than ending the process with no word.
        "handle_abort=1:"
        # A small quarantine keeps a sanitized daemon's RSS meaningful for the tests that
        # check memory stays flat under heavy output.
        "quarantine_size_mb=16",
    )
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=0")
    env.setdefault("LSAN_OPTIONS", "report_objects=0")
    return env


class HTTPError(AssertionError):
    pass


class Response:
    """status, headers (lower-cased dict), body (parsed JSON when it is JSON, else bytes)."""

    def __init__(self, status, headers, body, raw):
        self.status = status
        self.headers = headers
        self.body = body
        self.raw = raw

    def __iter__(self):  # allows: status, headers, body = client.request(...)
        return iter((self.status, self.headers, self.body))

    def __repr__(self):
        return "<%d %s>" % (self.status, self.raw[:400].decode("utf-8", "replace"))


class Client:
    """A tiny HTTP/1.1 JSON client on http.client. One connection per request."""

    def __init__(self, port, key=None, host="127.0.0.1", timeout=60):
        self.host = host
        self.port = port
        self.key = key
        self.timeout = timeout
        self.request_ids = []

    def with_key(self, key):
        return Client(self.port, key, self.host, self.timeout)

    def request(self, method, path, body=None, key="default", headers=None, raw=None,
                timeout=None, check_request_id=True):
        """Returns a Response (unpackable as status, headers, body).

        key="default" uses the client's key, None sends no Authorization header, any
        other string is sent as the bearer token. body is JSON-encoded; raw is sent as is.
        """
        hdrs = {}
        if key == "default":
            key = self.key
        if key is not None:
            hdrs["Authorization"] = "Bearer " + key
        data = None
        if raw is not None:
            data = raw
        elif body is not None:
            data = json.dumps(body).encode()
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        if headers:
            hdrs.update(headers)
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout or self.timeout)
        try:
            conn.putrequest(method, path, skip_accept_encoding=True)
            for k, v in hdrs.items():
                conn.putheader(k, v)
            if data is not None and "Transfer-Encoding" not in hdrs:
                conn.putheader("Content-Length", str(len(data)))
            conn.endheaders()
            if data is not None:
                # The server may answer (413) and close before reading everything: keep
                # going to read its answer.
                try:
                    if hdrs.get("Transfer-Encoding") == "chunked":
                        for i in range(0, len(data), 65536):
                            chunk = data[i:i + 65536]
                            conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        conn.send(b"0\r\n\r\n")
                    else:
                        for i in range(0, len(data), 65536):
                            conn.send(data[i:i + 65536])
                except (BrokenPipeError, ConnectionResetError):
                    pass
            resp = conn.getresponse()
            rawbody = resp.read()
            rh = {k.lower(): v for k, v in resp.getheaders()}
            status = resp.status
        finally:
            conn.close()
        parsed = rawbody
        ctype = rh.get("content-type", "")
        if rawbody and ("json" in ctype or rawbody[:1] in (b"{", b"[")):
            try:
                parsed = json.loads(rawbody)
            except ValueError:
                parsed = rawbody
        if check_request_id:
            rid = rh.get("x-request-id")
            assert rid, "%s %s -> %d without x-request-id" % (method, path, status)
            self.request_ids.append(rid)
        return Response(status, rh, parsed, rawbody)

    def stream(self, method, path, body=None, key="default", headers=None, timeout=None):
        """Server-sent events: yields (monotonic time, event dict) for each data: frame.
        The first item is instead the Response head (status, headers, body None) so the
        caller can check it; an error answer (not a stream) is yielded as that Response
        with its parsed body and the generator ends."""
        hdrs = {"Accept": "text/event-stream", "Content-Type": "application/json"}
        if key == "default":
            key = self.key
        if key is not None:
            hdrs["Authorization"] = "Bearer " + key
        hdrs.update(headers or {})
        data = json.dumps(body).encode() if body is not None else b""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout or self.timeout)
        try:
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            rh = {k.lower(): v for k, v in resp.getheaders()}
            if "text/event-stream" not in rh.get("content-type", ""):
                raw = resp.read()
                yield Response(resp.status, rh, json.loads(raw) if raw else None, raw)
                return
            yield Response(resp.status, rh, None, b"")
            for line in resp:
                line = line.rstrip(b"\r\n")
                if line.startswith(b"data: "):
                    yield time.monotonic(), json.loads(line[6:])
        finally:
            conn.close()

    # --- helpers that expect success ---------------------------------------------------

    def ok(self, method, path, body=None, status=200, **kw):
        r = self.request(method, path, body, **kw)
        if r.status != status:
            raise HTTPError("%s %s: expected %d, got %r" % (method, path, status, r))
        return r.body

    def create_key(self, user, role="member", tool_level="sandbox"):
        return self.ok("POST", "/v1/keys", {"user": user, "role": role,
                                            "tool_level": tool_level}, status=201)

    def delete_key(self, key_id):
        return self.ok("DELETE", "/v1/keys/" + key_id)

    def list_keys(self):
        return self.ok("GET", "/v1/keys")["data"]

    def create_sandbox(self, **fields):
        return self.ok("POST", "/v1/sandboxes", fields, status=201, timeout=120)

    def list_sandboxes(self):
        return self.ok("GET", "/v1/sandboxes")["data"]

    def get_sandbox(self, sid):
        return self.ok("GET", "/v1/sandboxes/" + sid)

    def delete_sandbox(self, sid):
        return self.ok("DELETE", "/v1/sandboxes/" + sid)

    def exec(self, sid, **fields):
        t = fields.get("timeout_seconds")
        to = (t + 60) if isinstance(t, int) and t > 0 else 120
        return self.ok("POST", "/v1/sandboxes/%s/exec" % sid, fields, timeout=to)

    def sh(self, sid, cmd, **fields):
        """exec a shell command that must succeed; returns stdout."""
        r = self.exec(sid, shell=cmd, **fields)
        assert r["exit_code"] == 0, "exec %r failed: %r" % (cmd, r)
        return r["stdout"]


def router_routes(build=None):
    """The router's own list, `sbxd --routes`: (method, pattern) pairs, the one source of the
    routes for the tests that check each (test_audit_rule.py, tests/run.py's route check)."""
    out = subprocess.run([os.path.join(build or build_dir(), "sbxd"), "--routes"],
                         capture_output=True, text=True, check=True).stdout
    return [tuple(line.split(" ", 1)) for line in out.splitlines() if line.strip()]


def test_runtime():
    """The execution backend the suites run on: SBX_TEST_RUNTIME, default gvisor."""
    return os.environ.get("SBX_TEST_RUNTIME") or "gvisor"


class Rerun:
    """Tests of another module run again on another execution backend (docs/runtime.md):

        R = harness.Rerun(os.path.dirname(__file__), "namespaces")
        def test_ns_x():
            R("test_core", "test_x")      # test_core.py loaded afresh, its own daemon
        def teardown_module():
            R.close()
    """

    def __init__(self, folder, runtime):
        self.folder = folder
        self.runtime = runtime
        self.modules = {}

    def module(self, name):
        if name not in self.modules:
            spec = importlib.util.spec_from_file_location(
                "%s_%s" % (self.runtime, name), os.path.join(self.folder, name + ".py"))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            self.modules[name] = mod
        return self.modules[name]

    def __call__(self, module, test):
        old = os.environ.get("SBX_TEST_RUNTIME")
        os.environ["SBX_TEST_RUNTIME"] = self.runtime
        try:
            getattr(self.module(module), test)()
        finally:
            if old is None:
                del os.environ["SBX_TEST_RUNTIME"]
            else:
                os.environ["SBX_TEST_RUNTIME"] = old

    def close(self):
        for mod in self.modules.values():
            td = getattr(mod, "teardown_module", None)
            if td:
                td()


def pg_start(prefix="sbx-pg-"):
    """A throwaway PostgreSQL on 127.0.0.1 (scripts/pg.sh): (its dir, the URL of database sbx)."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    r = subprocess.run([os.path.join(REPO, "scripts", "pg.sh"), "start", tmp],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise AssertionError("scripts/pg.sh could not start PostgreSQL:\n" + r.stderr[-2000:])
    return tmp, r.stdout.strip()


def pg_stop(tmp):
    subprocess.run([os.path.join(REPO, "scripts", "pg.sh"), "stop", tmp], timeout=60)
    shutil.rmtree(tmp, ignore_errors=True)


def pg_store(env):
    """SBX_TEST_PG=DIR (a server scripts/pg.sh started there): every daemon gets a database of
    its own on it as its store, so a suite runs on PostgreSQL (docs/scale-out.md)."""
    pg = os.environ.get("SBX_TEST_PG")
    if not pg or "SBX_STORE" in env:
        return
    r = subprocess.run([os.path.join(REPO, "scripts", "pg.sh"), "createdb", pg,
                        "sbx_" + secrets.token_hex(6)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, "SBX_TEST_PG: no database: " + r.stderr
    env["SBX_STORE"] = r.stdout.strip()


def _sql_literal(v):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    return "'" + str(v).replace("'", "''") + "'"


class _PgRows:
    def __init__(self, rows):
        self.rows = rows

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def fetchall(self):
        return list(self.rows)

    def __iter__(self):
        return iter(self.rows)


class PgStore:
    """What the tests do with sqlite3.connect(<data>/sbx.db), on a PostgreSQL store: execute
    with ? parameters, rows as tuples of JSON-typed values, autocommit (commit is a no-op).
    Quote "user" in the SQL: unquoted it is PostgreSQL's current role."""

    def __init__(self, url):
        self.url = url
        self.psql = (sorted(glob.glob("/usr/lib/postgresql/*/bin/psql")) or ["psql"])[-1]

    def _run(self, sql):
        r = subprocess.run([self.psql, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                            "-d", self.url, "-c", sql], capture_output=True, text=True,
                           timeout=60)
        if r.returncode != 0:
            raise RuntimeError("psql: %s: %s" % (sql, r.stderr.strip()))
        return r.stdout

    def execute(self, sql, params=()):
        parts = sql.split("?")
        assert len(parts) == len(params) + 1, "placeholders and parameters differ: " + sql
        text = parts[0] + "".join(_sql_literal(v) + rest for v, rest in zip(params, parts[1:]))
        if not text.lstrip().upper().startswith("SELECT"):
            self._run(text)
            return _PgRows([])
        out = self._run("SELECT row_to_json(q) FROM (%s) q" % text)
        return _PgRows([tuple(json.loads(line).values()) for line in out.splitlines() if line])

    def executemany(self, sql, seq):
        for params in seq:
            self.execute(sql, params)

    def commit(self):
        pass

    def close(self):
        pass


def store_db(d):
    """The daemon's store for a test to inspect or tamper with: sqlite3 on <data>/sbx.db, or
    PgStore when the daemon runs on PostgreSQL (SBX_TEST_PG)."""
    url = d.extra_env.get("SBX_STORE")
    if url:
        return PgStore(url)
    import sqlite3
    return sqlite3.connect(os.path.join(d.data_dir, "sbx.db"), timeout=10)


def on_postgres(d):
    return bool(d.extra_env.get("SBX_STORE"))


class _PortTaken(Exception):
    """sbxd could not listen on the port it was given: another took it meanwhile."""


class Daemon:
    """One sbxd on 127.0.0.1:<free port> with a private data dir.

    admin_key: a key string to preset with SBX_ADMIN_KEY (default: a generated one);
    None starts without SBX_ADMIN_KEY, so the daemon makes its own (read it from
    data_dir/admin.key).
    listens: names of more listen settings (e.g. SBX_METRICS_LISTEN) the harness gives a
    127.0.0.1 port of their own, picked again with the others when one was taken
    (listen_port(name) says which).
    """

    def __init__(self, admin_key="generate", extra_env=None, build=None, data_dir=None,
                 listens=()):
        self.build = build or build_dir()
        self.binary = os.path.join(self.build, "sbxd")
        self.tmp = tempfile.mkdtemp(prefix="sbx-test-")
        self.data_dir = data_dir or os.path.join(self.tmp, "data")
        self.port = free_port()
        # Every daemon has a preview listener (docs/preview.md); keep it off 8788.
        self.preview_port = free_port()
        self.admin_key = new_admin_key() if admin_key == "generate" else admin_key
        self.preset_key = self.admin_key is not None
        self.extra_env = dict(extra_env or {})
        self.listens = tuple(listens)
        self._pick_listens()
        pg_store(self.extra_env)
        self.proc = None
        self.starts = 0
        self.log_path = os.path.join(self.tmp, "sbxd.log")
        self._logf = None
        self._created = set()   # (key, sandbox id) created through clients of this daemon
        self._clients = []
        with _log_lock:
            DAEMON_LOGS.append(self.log_path)

    # --- process control ---------------------------------------------------------------

    def _pick_listens(self):
        for name in self.listens:
            self.extra_env[name] = "127.0.0.1:%d" % free_port()

    def listen_port(self, name):
        return int(self.extra_env[name].rsplit(":", 1)[1])

    def env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("SBX_") or k in ("SBX_TEMPLATE_CACHE", "SBX_RUNSC",
                                                    "SBX_RUNSC_PLATFORM", "SBX_TEST_ROUTE_LOG")}
        sanitizer_env(env)
        if self.preset_key:
            env["SBX_ADMIN_KEY"] = self.admin_key
        env["SBX_PREVIEW_LISTEN"] = "127.0.0.1:%d" % self.preview_port
        # SBX_TEST_RUNTIME runs the suites on another execution backend (docs/runtime.md).
        if os.environ.get("SBX_TEST_RUNTIME"):
            env["SBX_BACKEND"] = os.environ["SBX_TEST_RUNTIME"]
        env.update(self.extra_env)
        return {k: v for k, v in env.items() if v is not None}  # None: left out

    def start(self, timeout=60):
        """Start sbxd and wait until it answers. Ports are picked free but not held, so with
        test runs side by side another daemon may take ours first (or, across a restart,
        probe it for a moment): a restart tries its own ports again for a few seconds, then
        any start moves to new ones (the clients of this daemon follow it). Only our own
        process's "listening" line counts, never another daemon answering on the port."""
        restart = self.starts > 0
        for attempt in range(8):
            try:
                return self._start(timeout)
            except _PortTaken:
                self.starts -= 1
                if attempt == 7:
                    raise AssertionError("sbxd could not listen; log tail:\n%s" % self.log_tail())
                if restart and attempt < 3:
                    time.sleep(1)
                    continue
                self.port, self.preview_port = free_port(), free_port()
                self._pick_listens()

    def _start(self, timeout):
        assert self.proc is None, "already running"
        if not os.path.exists(self.binary):
            raise AssertionError("no daemon binary at %s (build it first)" % self.binary)
        os.makedirs(self.data_dir, mode=0o700, exist_ok=True)
        self._logf = open(self.log_path, "ab")
        self._logf.write(b"\n=== harness: start #%d on port %d ===\n" % (self.starts + 1, self.port))
        self._logf.flush()
        since = self._logf.tell()
        self.proc = subprocess.Popen(
            [self.binary, "--listen", "127.0.0.1:%d" % self.port, "--data-dir", self.data_dir],
            env=self.env(), stdin=subprocess.DEVNULL, stdout=self._logf, stderr=self._logf,
            cwd=self.tmp)
        self.starts += 1
        _RUNNING.append(self)
        deadline = time.time() + timeout
        listening = b"sbxd listening on 127.0.0.1:%d " % self.port
        while True:
            if self.proc.poll() is not None:
                rc = self.proc.returncode
                self._forget()
                if b"cannot listen on" in self._log_since(since):
                    raise _PortTaken()
                if rc < 0:
                    # A refusal to start is an exit status; a signal is a crash.
                    self._crash("%s during start" % _status_words(rc))
                raise AssertionError("sbxd exited with %d during start; log tail:\n%s"
                                     % (rc, self.log_tail()))
            try:
                if listening in self._log_since(since):
                    r = Client(self.port, timeout=2).request("GET", "/healthz",
                                                             check_request_id=False)
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                self.kill9()
                raise AssertionError("sbxd did not answer /healthz in %ds; log tail:\n%s"
                                     % (timeout, self.log_tail()))
            time.sleep(0.05)
        if not self.preset_key:
            with open(os.path.join(self.data_dir, "admin.key")) as f:
                self.admin_key = f.read().strip()
        return self

    def _forget(self):
        self.proc = None
        if self in _RUNNING:
            _RUNNING.remove(self)
        if self._logf:
            self._logf.close()
            self._logf = None

    def _crash(self, why):
        CRASHES.append(("sbxd on port %d (data %s)" % (self.port, self.data_dir), why,
                        self.log_tail(60)))

    def _died(self, how):
        """Its process ended though nobody asked: a crash, entered in CRASHES."""
        rc = self.proc.returncode
        self._forget()
        self._crash("%s: %s" % (how, _status_words(rc)))
        return rc

    def _wait(self, timeout):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("sbxd did not exit within %ds of SIGTERM" % timeout)
        finally:
            self._forget()

    def stop(self, timeout=30):
        """SIGTERM and wait; returns the exit status. A daemon already dead, or one whose
        exit status after SIGTERM is not 0, is a crash (CRASHES)."""
        if self.proc is None:
            return None
        if self.proc.poll() is not None:
            return self._died("found dead when asked to stop")
        self.proc.send_signal(signal.SIGTERM)
        rc = self._wait(timeout)
        if rc != 0:
            self._crash("%s after SIGTERM" % _status_words(rc))
        return rc

    def kill9(self):
        if self.proc is None:
            return None
        if self.proc.poll() is not None:
            return self._died("found dead when about to be killed")
        self.proc.kill()
        return self._wait(10)

    def restart(self, hard=False):
        """Stop (SIGTERM, or SIGKILL with hard=True) and start again on the same data dir
        and port."""
        if hard:
            self.kill9()
        else:
            self.stop()
        return self.start()

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def _log_since(self, offset):
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read()
        except OSError:
            return b""

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def log_tail(self, n=40):
        return "\n".join(self.log_text().splitlines()[-n:])

    # --- clients -----------------------------------------------------------------------

    def client(self, key="admin"):
        if key == "admin":
            key = self.admin_key
        c = _TrackingClient(self, self.port, key)
        return c

    def sandbox_dir(self, sid):
        return os.path.join(self.data_dir, "sandboxes", sid)

    def cleanup(self):
        """Delete every sandbox created through this daemon's clients, stop it (SIGTERM),
        keep its log where the runner can find it, remove the data dir."""
        try:
            if self.alive():
                for key, sid in sorted(self._created):
                    try:
                        Client(self.port, key, timeout=30).request(
                            "DELETE", "/v1/sandboxes/" + sid, check_request_id=False)
                    except Exception:
                        pass
                self.stop()
            elif self.proc is not None:
                self._died("found dead at clean-up")
        finally:
            self._keep_log()
            # Sandboxes no tracked client made (forks, the chat gateway's, skill rounds, those
            # of the SDKs and the CLI) outlive sbxd by design: end them, or every later test
            # shares the machine with them.
            kill_processes_beneath(self.tmp)
            remove_sandbox_cgroups(self.data_dir)
            # Workspaces are loop-mounted images (the quota): when a daemon or shim died
            # without removing its sandboxes, detach them rather than empty them.
            detach_mounts_beneath(self.tmp)
            # runsc/shim processes still running there would keep files busy; the delete
            # is off the request path, so give it a moment, then remove what we can.
            for _ in range(20):
                try:
                    shutil.rmtree(self.tmp)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.25)
            else:
                shutil.rmtree(self.tmp, ignore_errors=True)

    def _keep_log(self):
        logdir = os.environ.get("SBX_TEST_LOG_DIR")
        if not logdir or not os.path.exists(self.log_path):
            return
        os.makedirs(logdir, exist_ok=True)
        dst = os.path.join(logdir, "sbxd-%s.log" % os.path.basename(self.tmp))
        shutil.copyfile(self.log_path, dst)
        with _log_lock:
            DAEMON_LOGS[:] = [dst if p == self.log_path else p for p in DAEMON_LOGS]

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.cleanup()
        return False


def cmdlines():
    """(pid, argv) of every process on the host, each argv decoded; gone ones skipped."""
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        yield int(p), [a.decode("utf-8", "replace") for a in argv if a]


def kill_processes_beneath(top):
    """SIGKILL every process whose command line names a path below top (shims, runsc and
    its sandbox and gofer, namespaces containers), and wait a little for them to go."""
    mark = os.path.realpath(top) + "/"

    def theirs():
        return [pid for pid, argv in cmdlines()
                if pid != os.getpid() and any(mark in a for a in argv)]
    for _ in range(20):
        pids = theirs()
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.1)


def remove_sandbox_cgroups(data_dir):
    """The empty cgroups (v1 hierarchies and v2) the sandboxes of data_dir leave when their
    shim was killed rather than stopped."""
    try:
        ids = os.listdir(os.path.join(data_dir, "sandboxes"))
    except OSError:
        return
    roots = [os.path.join("/sys/fs/cgroup", h, "sbx") for h in os.listdir("/sys/fs/cgroup")]
    roots.append("/sys/fs/cgroup/sbx")
    for root in roots:
        for sid in ids:
            try:
                os.rmdir(os.path.join(root, sid))
            except OSError:
                pass


def detach_mounts_beneath(top):
    """umount2(MNT_DETACH) every mount at or below top, deepest first."""
    top = os.path.realpath(top)
    try:
        with open("/proc/self/mountinfo") as f:
            points = [line.split()[4].encode().decode("unicode_escape") for line in f]
    except OSError:
        return
    mine = [p for p in points if p == top or p.startswith(top + "/")]
    if not mine:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for p in sorted(mine, key=len, reverse=True):
        libc.umount2(p.encode(), 2)  # MNT_DETACH


class _TrackingClient(Client):
    """A Client that remembers the sandboxes it created so Daemon.cleanup can delete them."""

    def __init__(self, daemon, port, key):
        self.daemon = daemon
        super().__init__(port, key)

    # The daemon's port now: a restart may have moved it (Daemon.start).
    @property
    def port(self):
        return self.daemon.port

    @port.setter
    def port(self, _):
        pass

    def with_key(self, key):
        return _TrackingClient(self.daemon, self.port, key)

    def request(self, method, path, body=None, key="default", **kw):
        r = super().request(method, path, body, key=key, **kw)
        if (method == "POST" and path == "/v1/sandboxes" and r.status == 201
                and isinstance(r.body, dict) and "id" in r.body):
            self.daemon._created.add((self.key if key == "default" else key, r.body["id"]))
        return r


class Shared:
    """A lazily started daemon shared by the tests of one module:

        D = harness.Shared()
        def test_x():
            d = D.get()
        def teardown_module():   # tests/run.py calls it after the module's tests
            D.close()
    """

    def __init__(self, **kw):
        self.kw = kw
        self.d = None
        self.cache = {}

    def get(self):
        if self.d is not None and self.d.proc is not None and self.d.proc.poll() is not None:
            # It died on its own: that is this test's failure (and a CRASHES entry), not
            # something to paper over with a fresh start. The next test starts it again.
            rc = self.d._died("found dead by the next test")
            raise AssertionError("the module's shared sbxd died (%s); log tail:\n%s"
                                 % (_status_words(rc), self.d.log_tail()))
        if self.d is not None and self.d.proc is None:
            # A previous test stopped it on purpose: start it again on the same dir.
            self.d.start()
        if self.d is None:
            self.d = Daemon(**self.kw)
            try:
                self.d.start()
            except Exception:
                self.d.cleanup()
                self.d = None
                raise
        return self.d

    def once(self, name, fn):
        """Memoize fn(daemon) under name (keys, a reusable sandbox...)."""
        if name not in self.cache:
            self.cache[name] = fn(self.get())
        return self.cache[name]

    def client(self, user="admin"):
        """A client for the admin, or for a member user whose sandbox key is made once."""
        if user == "admin":
            return self.get().client()
        k = self.once("key:" + user, lambda d: d.client().create_key(user))
        return self.get().client(k["key"])

    def forget(self, name):
        self.cache.pop(name, None)

    def close(self):
        if self.d is not None:
            self.d.cleanup()
            self.d = None
        self.cache.clear()


# --- assertions ------------------------------------------------------------------------

def refused_start(extra_env, timeout=30):
    """sbxd started with extra_env must refuse to run: returns its error and log tail. Fails
    when it started, and when it neither started nor exited (a hang is not a refusal); the
    check of the words is the caller's, on this text, never on one of its own making."""
    d = Daemon(extra_env=extra_env)
    started, why = False, ""
    try:
        try:
            d.start(timeout=timeout)
            started = True
        except AssertionError as e:
            why = str(e)
    finally:
        d.cleanup()
    assert not started, "sbxd started with %r" % (extra_env,)
    assert "during start" in why, "sbxd did not exit with %r: %s" % (extra_env, why[-800:])
    return why


# Refused starts at once: a start-up under ASan is mostly CPU (7 s each with 8 at once beside
# two other test runs on 2 cores), so more at once only makes each slower.
REFUSED_AT_ONCE = 4


def refused_starts(envs, timeout=30):
    """refused_start for each of envs, REFUSED_AT_ONCE at a time (a daemon each): their
    texts, in envs' order."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=REFUSED_AT_ONCE) as ex:
        return list(ex.map(lambda e: refused_start(e, timeout), envs))


def fpath(sid, path):
    """The files route of one path in a sandbox's workspace (docs/files.md)."""
    return "/v1/sandboxes/%s/files/%s" % (sid, path)


def listing(c, sid, path="", recursive=True):
    """GET …/files?path=&recursive=: the listing's body, asserted 200."""
    r = c.request("GET", "/v1/sandboxes/%s/files?path=%s&recursive=%s"
                  % (sid, path, "true" if recursive else "false"))
    assert r.status == 200, r
    return r.body


def assert_error(r, status, code):
    """r is an error response with this status and code (code may be a tuple of allowed
    codes), in the contract's shape {"error": {"code", "message"}}."""
    codes = code if isinstance(code, tuple) else (code,)
    assert r.status == status, "expected %d %s, got %r" % (status, "/".join(codes), r)
    assert isinstance(r.body, dict), "error body is not a JSON object: %r" % (r,)
    assert set(r.body) == {"error"}, "error body has other fields: %r" % (r.body,)
    e = r.body["error"]
    assert isinstance(e, dict), "error is not an object: %r" % (r.body,)
    assert e.get("code") in codes, "expected code %s, got %r" % ("/".join(codes), r.body)
    assert isinstance(e.get("message"), str) and e["message"], "no message: %r" % (r.body,)
    assert "json" in r.headers.get("content-type", ""), \
        "error content-type %r" % r.headers.get("content-type")


def wait_for(fn, timeout, interval=0.2, what="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out after %ss waiting for %s (last: %r)" % (timeout, what, last))
