"""Terminal keystroke echo: one byte typed into a WebSocket terminal until its echo comes
back, beside the same round trip through a PTY on the host, measured in the same run.

  sbx terminal   WebSocket binary message -> sbxd -> agent channel -> PTY in gVisor ->
                 bash's readline echoes -> back the same way (500 keystrokes)
  host pty       os.write to the master of a local PTY running bash, read the echo

Preview throughput (the issue's second figure) is not measured: preview URLs are not
built yet (docs/terminals.md says what is missing).
"""

import os
import pty
import select
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import harness  # noqa: E402
import wsclient  # noqa: E402

KEYS = 500


def _ws_round_trips(ws, n):
    out = []
    for i in range(n):
        if i % 50 == 49:
            ws.send_binary(b"\x15")  # ^U: keep the line short; its redraw is read below
        t0 = time.perf_counter()
        ws.send_binary(b"x")
        got = b""
        while b"x" not in got:
            op, data = ws.recv(10)
            if op == wsclient.OP_BINARY:
                got += data
        out.append(time.perf_counter() - t0)
    return out


def _host_round_trips(n):
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp("bash", ["bash", "--norc", "--noprofile", "-i"])
    try:
        time.sleep(0.3)
        os.read(fd, 65536)
        out = []
        for i in range(n):
            if i % 50 == 49:
                os.write(fd, b"\x15")
                time.sleep(0.01)
                while select.select([fd], [], [], 0.01)[0]:
                    os.read(fd, 65536)
            t0 = time.perf_counter()
            os.write(fd, b"x")
            got = b""
            while b"x" not in got:
                select.select([fd], [], [], 10)
                got += os.read(fd, 65536)
            out.append(time.perf_counter() - t0)
        return out
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)


def run(build, n=KEYS):
    """Returns (rows, notes) like bench_core.run."""
    with harness.Daemon(build=build) as d:
        c = d.client()
        sid = c.create_sandbox()["id"]
        tk = c.ok("POST", "/v1/sandboxes/%s/terminal-ticket" % sid)["ticket"]
        ws = wsclient.connect(d.port, "/v1/sandboxes/%s/terminal?ticket=%s" % (sid, tk))
        ws.recv_json()
        ws.send_binary(b"PS1='$ '\n")
        ws.read_until(b"$ ")
        time.sleep(0.3)
        sbx = _ws_round_trips(ws, n)
        ws.close()
    host = _host_round_trips(n)
    return ([("terminal keystroke echo (WebSocket)", sbx, "host pty echo", host)],
            ["terminal echo: %d keystrokes, one at a time, into bash's readline" % n])


if __name__ == "__main__":
    import bench_core
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(REPO, "build")
    rows, notes = run(build)
    p = bench_core.percentile
    for name, xs, bname, bs in rows:
        print("%s: p50 %.2f ms p95 %.2f ms | %s: p50 %.3f ms p95 %.3f ms | x p50 %.1f" % (
            name, p(xs, 50) * 1e3, p(xs, 95) * 1e3, bname, p(bs, 50) * 1e3, p(bs, 95) * 1e3,
            p(xs, 50) / p(bs, 50)))
    for n_ in notes:
        print("note: " + n_)
