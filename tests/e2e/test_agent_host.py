#!/usr/bin/env python3
"""sbx-agent on the host: the agent binary runs as a child process of this test, with
pipes for fd 0/1, and the test speaks docs/protocol.md to it directly (no daemon, no
sandbox). Standard library only.

    python3 tests/e2e/test_agent_host.py          # uses $SBX_BUILD/sbx-agent, default build/

Each test_* function raises AssertionError on failure; importing the module has no side
effects, so tests/run.py can call them too.
"""

import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HELLO, OPEN, DATA, EOF, WINDOW, EXIT, ERROR, SIGNAL, PING, PONG = range(1, 11)
HEADER = struct.Struct(">IIBBH")
WINDOW_INIT = 1024 * 1024
MAX_STREAMS = 256


def agent_path():
    b = os.environ.get("SBX_BUILD", "build")
    if not os.path.isabs(b):
        b = os.path.join(REPO, b)
    return os.path.join(b, "sbx-agent")


def pid_alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except FileNotFoundError:
        return False
    return st[st.rindex(")") + 2] != "Z"


def pid_gone(pid):
    """True once pid is fully reaped (no /proc entry at all)."""
    return not os.path.exists("/proc/%d" % pid)


def wait_for(pred, timeout=5.0, step=0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


class Agent:
    """One sbx-agent child process and a frame-level client for it."""

    def __init__(self):
        path = agent_path()
        assert os.path.exists(path), "no agent binary at %s (make build)" % path
        self.errlog = tempfile.TemporaryFile()
        self.p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.errlog, bufsize=0)
        self.rfd = self.p.stdout.fileno()
        self.buf = b""
        self.pending = {}  # stream -> list of frames not yet consumed
        self.next_id = 1
        self.hello = self.recv_stream(0, timeout=5)
        assert self.hello[0] == HELLO, self.hello

    # -- transport --
    def send(self, stream, typ, flags=0, payload=b""):
        if isinstance(payload, (dict, list)):
            payload = json.dumps(payload).encode()
        self.p.stdin.write(HEADER.pack(len(payload), stream, typ, flags, 0) + payload)

    def _read_frame(self, timeout):
        end = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 12:
                ln, stream, typ, flags, res = HEADER.unpack_from(self.buf)
                assert res == 0 and 1 <= typ <= 10 and ln <= 256 * 1024, "bad header from agent"
                if len(self.buf) >= 12 + ln:
                    payload = self.buf[12:12 + ln]
                    self.buf = self.buf[12 + ln:]
                    return stream, typ, flags, payload
            left = end - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.rfd], [], [], left)
            if not r:
                return None
            chunk = os.read(self.rfd, 1 << 20)
            if not chunk:
                raise AssertionError("agent closed its output (exit %r): %s"
                                     % (self.p.poll(), self.stderr()))
            self.buf += chunk

    def recv_any(self, timeout=10.0):
        """Next frame on any stream (stashed frames first): (stream, type, flags, payload)."""
        for s, q in self.pending.items():
            if q:
                return (s,) + q.pop(0)
        f = self._read_frame(timeout)
        if f is None:
            raise AssertionError("timed out waiting for a frame")
        return f

    def recv_stream(self, stream, timeout=10.0):
        """Next frame for one stream: (type, flags, payload); others are stashed."""
        q = self.pending.setdefault(stream, [])
        if q:
            return q.pop(0)
        end = time.monotonic() + timeout
        while True:
            f = self._read_frame(max(0.0, end - time.monotonic()))
            if f is None:
                raise AssertionError("timed out waiting for a frame on stream %d" % stream)
            if f[0] == stream:
                return f[1:]
            self.pending.setdefault(f[0], []).append(f[1:])

    def quiet(self, secs):
        """Collect frames arriving within secs (for checking that nothing comes)."""
        out = []
        end = time.monotonic() + secs
        while True:
            f = self._read_frame(max(0.0, end - time.monotonic()))
            if f is None:
                return out
            out.append(f)

    def stderr(self):
        self.errlog.seek(0)
        return self.errlog.read().decode(errors="replace")

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.p.stdout.close()
        self.errlog.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- protocol helpers --
    def open(self, req, stream=None):
        if stream is None:
            stream = self.next_id
            self.next_id += 2
        self.send(stream, OPEN, 0, req)
        return stream

    def collect(self, stream, credit=True, timeout=20.0):
        """Read a stream to its end. Returns dict(out, err, eof, end=(type, json))."""
        res = {"out": b"", "err": b"", "eof": set(), "order": []}
        end = time.monotonic() + timeout
        while True:
            typ, flags, payload = self.recv_stream(stream, max(0.1, end - time.monotonic()))
            res["order"].append(typ)
            if typ == DATA:
                assert flags in (1, 2), "DATA on channel %d" % flags
                assert flags not in res["eof"], "DATA after EOF on channel %d" % flags
                res["out" if flags == 1 else "err"] += payload
                if credit and payload:
                    self.send(stream, WINDOW, flags, struct.pack(">I", len(payload)))
            elif typ == EOF:
                assert flags not in res["eof"], "two EOFs on channel %d" % flags
                res["eof"].add(flags)
            elif typ == WINDOW:
                pass
            elif typ in (EXIT, ERROR):
                res["end"] = (typ, json.loads(payload))
                return res
            else:
                raise AssertionError("unexpected frame type %d on stream %d" % (typ, stream))

    def run(self, argv, **kw):
        req = {"op": "exec", "argv": argv}
        req.update(kw)
        return self.collect(self.open(req))

    def sh(self, script, **kw):
        return self.run(["/bin/sh", "-c", script], **kw)


def exit_of(res):
    typ, body = res["end"]
    assert typ == EXIT, "expected EXIT, got %r" % (res["end"],)
    assert res["eof"] == {1, 2}, "EOFs before EXIT: %r" % res["eof"]
    return body


def error_of(res):
    typ, body = res["end"]
    assert typ == ERROR, "expected ERROR, got %r" % (res["end"],)
    assert set(body) == {"code", "message"}, body
    return body["code"]


# ---------------------------------------------------------------- tests

def test_hello():
    with Agent() as a:
        h = json.loads(a.hello[2])
        assert h["version"] == 1 and h["role"] == "agent", h
        assert len(h["boot_id"]) == 32 and int(h["boot_id"], 16) >= 0, h
        assert h["pid"] == a.p.pid, h
        a.send(0, HELLO, 0, {"version": 1, "role": "daemon"})
        typ, _, payload = a.recv_stream(0)
        h2 = json.loads(payload)
        assert typ == HELLO and h2["boot_id"] == h["boot_id"] and h2["role"] == "agent", h2
    with Agent() as b:
        assert json.loads(b.hello[2])["boot_id"] != h["boot_id"], "boot_id not random"


def test_ping_pong():
    with Agent() as a:
        for payload in (b"", b"abc", bytes(range(256)) * 100):
            a.send(0, PING, 0, payload)
            typ, flags, got = a.recv_stream(0)
            assert typ == PONG and got == payload, (typ, len(got))


def test_exec_channels_and_exit_code():
    with Agent() as a:
        r = a.sh("echo hi; echo err >&2; exit 3")
        e = exit_of(r)
        assert r["out"] == b"hi\n" and r["err"] == b"err\n", r
        assert e["exit_code"] == 3 and e["signal"] == 0 and e["timed_out"] is False, e
        assert isinstance(e["duration_ms"], int) and 0 <= e["duration_ms"] < 5000, e
        assert r["order"][-1] == EXIT and r["order"].count(EOF) == 2


def test_env_and_cwd():
    with Agent() as a, tempfile.TemporaryDirectory() as d:
        r = a.sh('echo "$PATH|$HOME|$LANG|$TERM|$FOO|$A"; pwd',
                 env=["FOO=bar=baz", "LANG=en_US.UTF-8", "A="], cwd=d)
        exit_of(r)
        line, cwd = r["out"].decode().splitlines()
        assert line == ("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|/tmp|"
                        "en_US.UTF-8|dumb|bar=baz|"), line
        assert os.path.realpath(cwd) == os.path.realpath(d), cwd
        # Nothing of the agent's own environment leaks in.
        r = a.run(["/usr/bin/env"])
        names = sorted(l.split("=", 1)[0] for l in r["out"].decode().splitlines())
        assert names == ["HOME", "LANG", "PATH", "TERM"], names
        # Only stdio is inherited (ls's own directory fd is the 3).
        r = a.run(["/bin/ls", "/proc/self/fd"])
        assert r["out"].split() == [b"0", b"1", b"2", b"3"], r["out"]
        # stdin is /dev/null without "stdin": true.
        r = a.sh("readlink /proc/self/fd/0; cat")
        assert r["out"] == b"/dev/null\n", r["out"]


def test_cwd_error():
    with Agent() as a:
        r = a.run(["/bin/true"], cwd="/nonexistent/dir")
        assert error_of(r) == "invalid_cwd", r
        assert r["order"] == [ERROR], r["order"]
        r = a.run(["/bin/true"], cwd="/etc/passwd")
        assert error_of(r) == "invalid_cwd", r
        assert exit_of(a.run(["/bin/true"]))["exit_code"] == 0


def test_request_errors():
    with Agent() as a:
        assert error_of(a.run(["/nonexistent/binary"])) == "spawn_failed"
        assert error_of(a.run(["no-such-command-on-path-xyz"])) == "spawn_failed"
        assert error_of(a.collect(a.open({"op": "frobnicate"}))) == "unknown_op"
        s = a.next_id
        a.next_id += 2
        a.send(s, OPEN, 0, b"{not json")
        assert error_of(a.collect(s)) == "bad_request"
        for bad in ({"argv": ["x"]}, {"op": "exec"}, {"op": "exec", "argv": []},
                    {"op": "exec", "argv": [1]}, {"op": "exec", "argv": ["/bin/true"], "env": ["X"]},
                    {"op": "exec", "argv": ["/bin/true"], "timeout_ms": -1},
                    {"op": "exec", "argv": ["/bin/true"], "stdin": "yes"}, ["exec"]):
            assert error_of(a.collect(a.open(bad))) == "bad_request", bad
        # Even stream ids are the agent's; stream 0 is control.
        a.send(2, OPEN, 0, {"op": "exec", "argv": ["/bin/true"]})
        assert error_of(a.collect(2)) == "bad_stream"
        # Still healthy.
        assert exit_of(a.sh("exit 0"))["exit_code"] == 0


def test_timeout_kills_process_group():
    with Agent() as a:
        t0 = time.monotonic()
        r = a.sh("sleep 100 & echo $!; sleep 100", timeout_ms=500)
        took = time.monotonic() - t0
        e = exit_of(r)
        assert e["timed_out"] is True and e["signal"] == 9 and e["exit_code"] == 137, e
        assert took < 5, took
        bg = int(r["out"].split()[0])
        assert wait_for(lambda: not pid_alive(bg)), "background sleep %d survived" % bg
        # The agent is a subreaper: the orphan is reaped, not left a zombie.
        assert wait_for(lambda: pid_gone(bg)), "background sleep %d not reaped" % bg


def test_signal():
    with Agent() as a:
        s = a.open({"op": "exec", "argv": ["/bin/sh", "-c", "echo ready; exec sleep 100"]})
        typ, ch, payload = a.recv_stream(s)
        assert (typ, ch, payload) == (DATA, 1, b"ready\n"), (typ, ch, payload)
        a.send(s, SIGNAL, 0, {"signal": 15})
        e = exit_of(a.collect(s))
        assert e["signal"] == 15 and e["exit_code"] == 143 and not e["timed_out"], e
        # A malformed SIGNAL does not end a running stream.
        s = a.open({"op": "exec", "argv": ["/bin/sh", "-c", "echo ready; exec sleep 100"]})
        a.recv_stream(s)
        a.send(s, SIGNAL, 0, b"{nope")
        a.send(s, SIGNAL, 0, {"signal": 100000})
        assert a.quiet(0.3) == [], "agent answered a malformed SIGNAL"
        a.send(s, SIGNAL, 0, {"signal": 9})
        assert exit_of(a.collect(s))["signal"] == 9


def test_binary_output_intact():
    data = os.urandom(700 * 1024) + bytes(range(256)) * 64
    with Agent() as a, tempfile.NamedTemporaryFile() as f:
        f.write(data)
        f.flush()
        r = a.run(["/bin/cat", f.name])
        assert exit_of(r)["exit_code"] == 0
        assert r["out"] == data, "stdout differs (%d vs %d bytes)" % (len(r["out"]), len(data))
        r = a.sh("cat %s >&2" % f.name)
        assert r["err"] == data and r["out"] == b""


def test_stdin():
    data = os.urandom(3 * 1024 * 1024 + 17)
    with Agent() as a:
        s = a.open({"op": "exec", "argv": ["/bin/sh", "-c", "cat; echo done >&2"], "stdin": True})
        # Send stdin within the granted window, consuming output as we go.
        sent, credit, out = 0, WINDOW_INIT, b""
        eof_sent = False
        while True:
            while sent < len(data) and credit > 0:
                n = min(65536, credit, len(data) - sent)
                a.send(s, DATA, 0, data[sent:sent + n])
                sent += n
                credit -= n
            if sent == len(data) and not eof_sent:
                a.send(s, EOF, 0)
                eof_sent = True
            typ, ch, payload = a.recv_stream(s)
            if typ == WINDOW:
                assert ch == 0 and len(payload) == 4
                credit += struct.unpack(">I", payload)[0]
                assert credit <= WINDOW_INIT, "more stdin credit than was consumed"
            elif typ == DATA:
                if ch == 1:
                    out += payload
                a.send(s, WINDOW, ch, struct.pack(">I", len(payload)))
            elif typ == EOF:
                pass
            elif typ == EXIT:
                assert json.loads(payload)["exit_code"] == 0
                break
            else:
                raise AssertionError("unexpected frame %d" % typ)
        assert out == data, "stdin round trip differs (%d vs %d)" % (len(out), len(data))


def test_flow_control():
    total = 5 * 1000 * 1000
    with Agent() as a:
        s = a.open({"op": "exec", "argv": ["/bin/sh", "-c", "head -c %d /dev/zero; echo end >&2"
                                           % total]})
        got = 0
        # Withhold credit: the agent may send at most the initial window.
        while True:
            f = a._read_frame(0.7)
            if f is None:
                break
            stream, typ, ch, payload = f
            assert stream == s and typ == DATA and ch == 1, f[:3]
            assert len(payload) <= 64 * 1024, len(payload)
            got += len(payload)
            assert got <= WINDOW_INIT, "agent sent %d bytes past a %d window" % (got, WINDOW_INIT)
        assert got == WINDOW_INIT, "agent stalled at %d, expected the full window" % got
        # The writer is blocked, not finished: grant credit as we consume, and check that
        # the agent never runs ahead of what was granted.
        granted = WINDOW_INIT
        out_len, err, eofs = got, b"", set()
        a.send(s, WINDOW, 1, struct.pack(">I", got))
        granted += got
        while True:
            typ, ch, payload = a.recv_stream(s, timeout=30)
            if typ == DATA and ch == 1:
                out_len += len(payload)
                assert out_len <= granted, "agent sent past its window (%d > %d)" % (out_len,
                                                                                      granted)
                a.send(s, WINDOW, 1, struct.pack(">I", len(payload)))
                granted += len(payload)
            elif typ == DATA and ch == 2:
                err += payload
            elif typ == EOF:
                eofs.add(ch)
            elif typ == EXIT:
                assert json.loads(payload)["exit_code"] == 0
                break
            else:
                raise AssertionError("unexpected frame %d" % typ)
        assert out_len == total and err == b"end\n" and eofs == {1, 2}, (out_len, err, eofs)


def _rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_output_backpressure_when_daemon_stops_reading():
    # 8 streams x 1 MiB windows could queue 8 MiB if the agent kept reading pipes while
    # nobody reads its stdout; it must pause at its output-queue high-water mark instead.
    n, size = 8, 3 * 1000 * 1000
    with Agent() as a:
        base = _rss_kb(a.p.pid)
        ids = [a.open({"op": "exec", "argv": ["/usr/bin/head", "-c", str(size), "/dev/zero"]})
               for _ in range(n)]
        time.sleep(1.0)
        grown = _rss_kb(a.p.pid) - base
        assert grown < 5 * 1024, "agent buffered %d KiB while its reader was stalled" % grown
        for s in ids:
            r = a.collect(s, timeout=60)
            assert exit_of(r)["exit_code"] == 0 and len(r["out"]) == size, len(r["out"])
        a.send(0, PING, 0, b"after")
        assert a.recv_stream(0) == (PONG, 0, b"after")


def test_concurrent_streams():
    n = 20
    # They run side by side, not one after another: each one ends only once all n have
    # started (a barrier of files), so run one at a time the first would never end.
    bar = tempfile.mkdtemp(prefix="sbx-agent-bar-")
    try:
        with Agent() as a:
            ids = [a.open({"op": "exec", "argv": [
                "/bin/sh", "-c",
                "echo start %d; touch %s/%d; while [ $(ls %s | wc -l) -lt %d ]; do sleep 0.01; "
                "done; echo end %d >&2; exit %d" % (i, bar, i, bar, n, i, i)]})
                for i in range(n)]
            for i, s in enumerate(ids):
                r = a.collect(s, timeout=60)
                e = exit_of(r)
                assert e["exit_code"] == i, (i, e)
                assert r["out"] == b"start %d\n" % i and r["err"] == b"end %d\n" % i, (i, r)
    finally:
        shutil.rmtree(bar, ignore_errors=True)


def test_too_many_streams():
    with Agent() as a:
        ids = [a.open({"op": "exec", "argv": ["/bin/sleep", "100"]}) for _ in range(MAX_STREAMS)]
        s = a.open({"op": "exec", "argv": ["/bin/true"]})
        assert error_of(a.collect(s)) == "too_many_streams"
        assert not any(a.pending.get(i) for i in ids), "a sleep stream ended early"
        # A re-HELLO frees them all.
        a.send(0, HELLO, 0, {"version": 1, "role": "daemon"})
        assert a.recv_stream(0)[0] == HELLO
        assert exit_of(a.run(["/bin/true"]))["exit_code"] == 0


def test_rehello_kills_old_streams():
    with Agent() as a:
        s = a.open({"op": "exec", "argv": ["/bin/sh", "-c", "sleep 100 & echo $! $$; wait"]})
        typ, ch, payload = a.recv_stream(s)
        assert typ == DATA and ch == 1, (typ, ch)
        pids = [int(x) for x in payload.split()]
        a.send(0, HELLO, 0, {"version": 1, "role": "daemon"})
        typ, _, _ = a.recv_stream(0)
        assert typ == HELLO
        for pid in pids:
            assert wait_for(lambda: pid_gone(pid)), "pid %d survived re-HELLO" % pid
        late = [f for f in a.quiet(0.4)]
        assert late == [], "frames for a forgotten stream after HELLO: %r" % late
        # Frames for the forgotten stream are ignored; its id can be opened afresh.
        a.send(s, SIGNAL, 0, {"signal": 9})
        a.send(s, WINDOW, 1, struct.pack(">I", 100))
        r = a.collect(a.open({"op": "exec", "argv": ["/bin/echo", "again"]}, stream=s))
        assert exit_of(r)["exit_code"] == 0 and r["out"] == b"again\n"


def test_background_holder_does_not_block_exit():
    with Agent() as a:
        # The holder outlives the stream by far: had the stream waited for it, it would
        # be gone by the time the exit came.
        r = a.sh("sleep 60 & echo $!; exit 5")
        e = exit_of(r)
        assert e["exit_code"] == 5, e
        bg = int(r["out"].split()[0])
        assert not pid_gone(bg), "the stream waited for a background process holding the pipe"
        # Ended later, the orphan is reaped by the agent (a subreaper).
        os.kill(bg, signal.SIGKILL)
        assert wait_for(lambda: pid_gone(bg), timeout=30), "orphan %d left unreaped" % bg


def test_orphans_reaped():
    with Agent() as a:
        r = a.sh("for i in 1 2 3 4 5; do (sleep 0.2; exit 1) & echo $!; done")
        exit_of(r)
        # Each one ended and was reaped: no /proc entry, not even a zombie's.
        kids = [int(x) for x in r["out"].split()]
        assert len(kids) == 5, r
        assert wait_for(lambda: all(pid_gone(k) for k in kids), timeout=30), \
            "orphans left: %r" % [k for k in kids if not pid_gone(k)]
        zombies = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read()
            except OSError:
                continue
            rest = st[st.rindex(")") + 2:].split()
            if rest[0] == "Z" and int(rest[1]) == a.p.pid:
                zombies.append(int(d))
        assert zombies == [], "zombies under the agent: %r" % zombies


def test_ignores_sigterm_and_exits_on_stdin_eof():
    with Agent() as a:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            a.p.send_signal(sig)
        a.send(0, PING, 0, b"still")
        assert a.recv_stream(0) == (PONG, 0, b"still")
        s = a.open({"op": "exec", "argv": ["/bin/sh", "-c", "echo $$; exec sleep 100"]})
        pid = int(a.recv_stream(s)[2])
        a.p.stdin.close()
        assert a.p.wait(timeout=5) == 0
        assert wait_for(lambda: not pid_alive(pid)), "child survived the agent"


def test_malformed_header_is_fatal():
    with Agent() as a:
        a.p.stdin.write(HEADER.pack(0, 0, 0, 0, 0))  # type 0
        assert a.p.wait(timeout=5) == 2
        assert "malformed" in a.stderr()
    with Agent() as a:
        a.p.stdin.write(HEADER.pack(0, 0, PING, 0, 1))  # reserved bits
        assert a.p.wait(timeout=5) == 2
    with Agent() as a:
        a.p.stdin.write(HEADER.pack(256 * 1024 + 1, 0, PING, 0, 0))  # too long
        assert a.p.wait(timeout=5) == 2


def test_stdout_is_only_frames():
    # A child writing to fd 1 must never reach the agent's own stdout unframed.
    with Agent() as a:
        r = a.sh("echo x; echo y > /dev/stdout; echo z >&2")
        assert r["out"] == b"x\ny\n" and r["err"] == b"z\n"
        a.send(0, PING, 0, b"p")
        assert a.recv_stream(0) == (PONG, 0, b"p")


def _main():
    tests = [(n, f) for n, f in globals().items() if n.startswith("test_") and callable(f)]
    passed = failed = 0
    for name, fn in tests:
        t0 = time.monotonic()
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - report every failure and go on
            failed += 1
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e), flush=True)
        else:
            passed += 1
            print("PASS %s (%.1fs)" % (name, time.monotonic() - t0), flush=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(_main())
