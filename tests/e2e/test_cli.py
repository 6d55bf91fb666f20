"""The `sbx` command-line client (docs/cli.md), the real binary of the test build against a
real sbxd: usage and exit codes, config and login, create/ls/get/rm, exec streamed live,
run, cp both ways with and without a terminal, files and artifacts, the Python REPL and
the WebSocket terminal driven through pseudo-terminals, and the life-cycle commands.

One daemon and one sandbox (alice's) serve most tests; tests that need their own
sandboxes remove them.
"""

import errno
import fcntl
import hashlib
import json
import os
import pty
import re
import select
import shutil
import socket
import signal
import struct
import subprocess
import tempfile
import termios
import time

import harness

D = harness.Shared()
SAN_MARKS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")


TMP_DIRS = []


def tmpdir(prefix):
    d = tempfile.mkdtemp(prefix=prefix)
    TMP_DIRS.append(d)
    return d


def teardown_module():
    D.close()
    for d in TMP_DIRS:
        shutil.rmtree(d, ignore_errors=True)


def sbx_bin():
    return os.path.join(harness.build_dir(), "sbx")


def alice_key():
    return D.once("key:alice", lambda d: d.client().create_key("alice"))["key"]


def base_env(key=None, url=None, home=None):
    d = D.get()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SBX_")}
    harness.sanitizer_env(env)
    env["SBX_URL"] = url or "http://127.0.0.1:%d" % d.port
    if key is not False:
        env["SBX_API_KEY"] = key or alice_key()
    env["HOME"] = home or D.once("home", lambda d: tmpdir("sbx-cli-home-"))
    env.pop("XDG_CONFIG_HOME", None)
    return env


class Result:
    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err

    def __repr__(self):
        return "<rc %d out %r err %r>" % (self.rc, self.out[:600], self.err[:600])


def no_sanitizer_report(text):
    for m in SAN_MARKS:
        assert m not in text, "sanitizer report from sbx:\n%s" % text[-4000:]


def sbx(*args, env=None, input=None, timeout=120, **envkw):
    p = subprocess.run([sbx_bin()] + list(args), env=env or base_env(**envkw),
                       input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    no_sanitizer_report(err)
    return Result(p.returncode, out, err)


def ok(*args, **kw):
    r = sbx(*args, **kw)
    assert r.rc == 0, "sbx %s: %r" % (" ".join(args), r)
    return r


def sandbox():
    """alice's shared sandbox."""
    return D.once("sb", lambda d: ok("create", "--ttl", "1h").out.strip())


# --- pseudo-terminals ------------------------------------------------------------------

class Pty:
    """sbx on a pseudo-terminal (its stdin, stdout and stderr), as a person would run it."""

    def __init__(self, args, rows=24, cols=80, env=None):
        # Everything the child needs is computed before the fork: the child must not touch
        # the shared daemon object (it would see a daemon that is not its child as dead).
        env = env or base_env()
        binary = sbx_bin()
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
                os.execve(binary, [binary] + args, env)
            finally:
                os._exit(127)
        self.buf = b""
        self.status = None

    def send(self, data):
        os.write(self.fd, data if isinstance(data, bytes) else data.encode())

    def resize(self, rows, cols):
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def _read(self, timeout):
        r, _, _ = select.select([self.fd], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.fd, 65536)
        except OSError as e:
            if e.errno == errno.EIO:  # the other side is closed
                return None
            raise
        if not data:
            return None
        self.buf += data
        return True

    def expect(self, pattern, timeout=60):
        """Wait until the output (since the last match) matches; return the match."""
        rx = re.compile(pattern.encode() if isinstance(pattern, str) else pattern)
        deadline = time.time() + timeout
        while True:
            m = rx.search(self.buf)
            if m:
                self.buf = self.buf[m.end():]
                return m
            left = deadline - time.time()
            if left <= 0 or self._read(left) is None:
                raise AssertionError("no %r in the output; got %r" % (pattern, self.buf[-2000:]))

    def wait(self, timeout=60):
        deadline = time.time() + timeout
        while self.status is None:
            pid, st = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = os.waitstatus_to_exitcode(st)
                break
            if time.time() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                raise AssertionError("sbx did not exit; output %r" % self.buf[-2000:])
            self._read(0.2)
        while self._read(0.1):
            pass
        os.close(self.fd)
        no_sanitizer_report(self.buf.decode("utf-8", "replace"))
        return self.status


# --- usage, errors, config ---------------------------------------------------------------

def test_help_lists_every_command_and_usage_errors_exit_2():
    r = ok("help")
    for cmd in ("create", "ls", "get", "rm", "exec", "run", "cp", "files", "artifacts", "code",
                "terminal", "pause", "resume", "fork", "snapshot", "preview", "logs", "egress",
                "keys", "audit", "login"):
        assert re.search(r"^  %s " % cmd, r.out, re.M), "help lacks %s: %s" % (cmd, r.out)
    h = ok("help", "exec")
    assert "usage: sbx exec ID" in h.out and "--timeout" in h.out, h
    assert ok("exec", "--help").out == h.out
    for args, what in ((["nope"], "unknown command"), (["create", "--ttl", "soon"], "--ttl"),
                       (["get"], "missing argument"), (["get", "a", "b"], "too many"),
                       (["create", "--frobnicate"], "unknown option"),
                       (["exec", sandbox()], "missing the command"),
                       (["cp", "a", "b"], "ID:PATH"), (["help", "nope"], "unknown command"),
                       (["fork", "x", "-n", "zero"], "bad value")):
        r = sbx(*args)
        assert r.rc == 2, "%s: %r" % (args, r)
        assert what in r.err, "%s: %r" % (args, r)
    assert sbx().rc == 2


def test_api_errors_exit_3_with_code_message_and_request_id():
    r = sbx("get", "sb_doesnotexist")
    assert r.rc == 3, r
    m = re.search(r"error sandbox_not_found: .+\(HTTP 404, request (req_\w+)\)", r.err)
    assert m, r
    r = sbx("ls", key="sbx_not_a_real_key_0123456789")
    assert r.rc == 3 and "invalid_api_key" in r.err, r
    r = sbx("--json", "get", "sb_doesnotexist")
    assert r.rc == 3 and r.out == "", r


def test_connection_failure_exits_4():
    # A port bound here and never listened on: refused, and no other daemon can take it.
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", 0))
        r = sbx("ls", url="http://127.0.0.1:%d" % s.getsockname()[1])
    finally:
        s.close()
    assert r.rc == 4 and "cannot reach the server" in r.err, r


def test_login_writes_a_0600_config_that_later_commands_use():
    home = tmpdir("sbx-cli-login-")
    url = "http://127.0.0.1:%d" % D.get().port
    env = base_env(key=False, home=home)
    del env["SBX_URL"]
    r = sbx("login", "--url", url, env=env, input=(alice_key() + "\n").encode())
    assert r.rc == 0, r
    path = os.path.join(home, ".config", "sbx", "config")
    st = os.stat(path)
    assert st.st_mode & 0o777 == 0o600, oct(st.st_mode)
    assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
    assert json.load(open(path)) == {"url": url, "api_key": alice_key()}
    assert alice_key() not in r.out + r.err, "login echoed the key"
    r = sbx("ls", env=env)
    assert r.rc == 0 and r.out.startswith("ID "), r
    # A key that does not work is not saved.
    r = sbx("login", "--url", url, env=env, input=b"sbx_wrong_key_0123456789abcdef\n")
    assert r.rc == 3 and "invalid_api_key" in r.err, r
    assert json.load(open(path))["api_key"] == alice_key()
    # On a terminal the key is asked for without echo.
    os.remove(path)
    t = Pty(["login", "--url", url], env=env)
    t.expect(r"API key: ")
    t.send(alice_key() + "\n")
    t.expect(r"logged in to ")
    assert t.wait() == 0
    assert alice_key().encode() not in t.buf
    assert json.load(open(path))["api_key"] == alice_key()
    # A config file others can read is refused, not used.
    os.chmod(path, 0o644)
    r = sbx("ls", env=env)
    assert r.rc == 1 and "0600" in r.err, r
    # The environment wins over the file.
    env2 = base_env(key="sbx_env_key_wins_0123456789ab", home=home)
    os.chmod(path, 0o600)
    r = sbx("ls", env=env2)
    assert r.rc == 3 and "invalid_api_key" in r.err, r


# --- sandboxes ---------------------------------------------------------------------------

def test_create_ls_get_rm():
    sid = ok("create", "--ttl", "10m", "-e", "FOO=bar", "-e", "N=1", "--allow",
             "example.com").out.strip()
    assert re.fullmatch(r"sb_\w+", sid), sid
    try:
        r = ok("ls")
        lines = r.out.splitlines()
        head = lines[0]
        assert head.split() == ["ID", "STATUS", "TEMPLATE", "BACKEND", "CREATED", "EXPIRES"], r
        row = next(line for line in lines if line.startswith(sid))
        # Aligned: every column starts where its header does.
        for col in ("STATUS", "TEMPLATE", "BACKEND", "CREATED", "EXPIRES"):
            i = head.index(col)
            assert row[i - 2:i] == "  " and row[i] != " ", (col, head, row)
        assert "running" in row and re.search(r"(just now|\d+s ago)\s+in (9|10)m$", row), row
        g = ok("get", sid).out
        assert re.search(r"^status\s+running$", g, re.M) and re.search(r"^env\s+FOO N$", g, re.M)
        assert re.search(r"^egress\s+allowlist example.com$", g, re.M), g
        j = json.loads(ok("--json", "get", sid).out)
        assert j["id"] == sid and j["env"] == {"FOO": "bar", "N": "1"}, j
        listed = json.loads(ok("ls", "--json").out)
        assert listed["object"] == "list" and sid in [s["id"] for s in listed["data"]]
    finally:
        r = ok("rm", sid)
    assert r.out.strip() == sid
    r = sbx("get", sid)
    assert r.rc == 3 and "sandbox_not_found" in r.err, r


def test_exec_streams_live_and_exits_with_the_commands_code():
    sid = sandbox()
    r = sbx("exec", sid, "--", "echo out; echo err >&2; exit 7")
    assert (r.rc, r.out, r.err) == (7, "out\n", "err\n"), r
    # Several words reach the command as exactly those arguments.
    r = ok("exec", sid, "--", "printf", "%s|\\n", "a b", "c'd", "$HOME")
    assert r.out == "a b|\nc'd|\n$HOME|\n", r
    r = ok("exec", "-e", "GREETING=hi there", "--cwd", "/tmp", sid, "echo $GREETING; pwd")
    assert r.out == "hi there\n/tmp\n", r
    # Live: the first line arrives while the command still runs.
    p = subprocess.Popen([sbx_bin(), "exec", sid, "--", "echo first; sleep 5; echo second"],
                         env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = p.stdout.readline()
        assert first == b"first\n", first
        assert p.poll() is None, "sbx exited before the command's second line"
        rest, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert rest == b"second\n" and p.returncode == 0, (rest, err)
    no_sanitizer_report(err.decode())
    # Bytes that are not UTF-8 come through as they are.
    r = subprocess.run([sbx_bin(), "exec", sid, "printf '\\377\\376ok'"], env=base_env(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert r.stdout == b"\xff\xfeok" and r.returncode == 0, r
    # A stream past the server's 1 MiB limit says so on stderr.
    r = sbx("exec", sid, "head -c 1200000 /dev/zero | tr '\\0' a")
    assert r.rc == 0 and len(r.out) == 1048576 and "stdout truncated" in r.err, \
        (r.rc, len(r.out), r.err)
    j = json.loads(sbx("--json", "exec", sid, "--", "echo j; exit 3").out)
    assert j["object"] == "exec" and j["stdout"] == "j\n" and j["exit_code"] == 3, j
    # A named session keeps its own directory.
    c = D.get().client(alice_key())
    c.ok("POST", "/v1/sandboxes/%s/sessions" % sid, {"id": "work", "cwd": "/tmp"}, status=201)
    ok("exec", sid, "--session", "work", "cd /var")
    assert ok("exec", sid, "--session", "work", "pwd").out == "/var\n"
    assert ok("exec", sid, "pwd").out == "/workspace\n"
    r = sbx("exec", sid, "--timeout", "1", "sleep 30")
    assert r.rc == 137 and "timed out" in r.err, r
    r = sbx("exec", "sb_doesnotexist", "true")
    assert r.rc == 3 and "sandbox_not_found" in r.err, r


def test_run_creates_runs_downloads_and_deletes():
    tmp = tmpdir("sbx-cli-run-")
    src = os.path.join(tmp, "job.py")
    with open(src, "w") as f:
        f.write("import os, sys\nos.makedirs('out/sub', exist_ok=True)\n"
                "open('out/result.txt', 'w').write('42\\n')\n"
                "open('out/sub/data.bin', 'wb').write(bytes(range(256)) * 40)\n"
                "print('hello from run'); sys.stderr.write('warn\\n'); sys.exit(3)\n")
    before = {s["id"] for s in json.loads(ok("--json", "ls").out)["data"]}
    outdir = os.path.join(tmp, "results")
    r = sbx("run", src, "-o", outdir, "--ttl", "5m")
    assert r.rc == 3, r
    assert "hello from run\n" in r.out and "warn\n" in r.err, r
    assert open(os.path.join(outdir, "result.txt")).read() == "42\n"
    data = open(os.path.join(outdir, "sub", "data.bin"), "rb").read()
    assert data == bytes(range(256)) * 40
    assert hashlib.sha256(data).hexdigest() in r.out, r
    after = {s["id"] for s in json.loads(ok("--json", "ls").out)["data"]}
    assert after == before, "run left a sandbox behind: %s" % (after - before)
    # --json: one document, the exec's answer; the artifacts are still saved.
    out2 = os.path.join(tmp, "results2")
    r = sbx("--json", "run", src, "-o", out2)
    j = json.loads(r.out)
    assert r.rc == 3 and j["object"] == "exec" and j["exit_code"] == 3, r
    assert open(os.path.join(out2, "result.txt")).read() == "42\n"
    sh = os.path.join(tmp, "script.txt")
    with open(sh, "w") as f:
        f.write("echo \"bash $BASH_VERSION\" | cut -c1-6\n")
    assert ok("run", "-l", "bash", sh).out == "bash 5\n"
    r = sbx("run", sh)
    assert r.rc == 2 and "-l" in r.err, r


def test_cp_both_ways_files_and_directories():
    sid = sandbox()
    tmp = tmpdir("sbx-cli-cp-")
    tree = os.path.join(tmp, "tree")
    os.makedirs(os.path.join(tree, "a", "b"))
    with open(os.path.join(tree, "top.txt"), "w") as f:
        f.write("top\n")
    big = os.urandom(6 * 1024 * 1024)
    with open(os.path.join(tree, "a", "b", "big.bin"), "wb") as f:
        f.write(big)
    r = ok("cp", tree, sid + ":up/")
    # Piped: no progress bar, even for the 6 MiB file.
    assert "%" not in r.err and "\r" not in r.err, r
    # A subshell: the default session would keep the `cd` for the next commands.
    r = ok("exec", sid, "(cd up/tree && find . -type f | sort && sha256sum a/b/big.bin)")
    assert r.out.startswith("./a/b/big.bin\n./top.txt\n"), r
    assert hashlib.sha256(big).hexdigest() in r.out
    ls = ok("files", "ls", sid, "up/tree", "-r").out.splitlines()
    assert ls[0].split() == ["TYPE", "MODE", "SIZE", "MODIFIED", "PATH"], ls
    assert any(re.match(r"file\s+0644\s+6\.0 MiB\s+(just now|\d+s ago)\s+up/tree/a/b/big.bin$",
                        line) for line in ls), ls
    # Back: the directory into an existing local directory keeps its name; an empty
    # directory comes too (the API has no call to make one, so only this way round).
    ok("exec", sid, "mkdir up/tree/empty")
    back = os.path.join(tmp, "back")
    os.makedirs(back)
    ok("cp", sid + ":up/tree", back)
    assert open(os.path.join(back, "tree", "a", "b", "big.bin"), "rb").read() == big
    assert open(os.path.join(back, "tree", "top.txt")).read() == "top\n"
    assert os.path.isdir(os.path.join(back, "tree", "empty"))
    # One file, to a new name and to stdout; from stdin.
    ok("cp", sid + ":up/tree/top.txt", os.path.join(tmp, "renamed.txt"))
    assert open(os.path.join(tmp, "renamed.txt")).read() == "top\n"
    assert ok("cp", sid + ":/workspace/up/tree/top.txt", "-").out == "top\n"
    j = json.loads(ok("--json", "cp", "-", sid + ":from-stdin.txt", input=b"piped in\n").out)
    assert j["object"] == "file" and j["path"] == "from-stdin.txt" and j["size"] == 9, j
    r = sbx("cp", sid + ":up/tree", "-")
    assert r.rc == 2 and "directory" in r.err, r
    assert ok("exec", sid, "cat from-stdin.txt").out == "piped in\n"
    r = sbx("cp", sid + ":no/such/file", os.path.join(tmp, "x"))
    assert r.rc == 3 and "file_not_found" in r.err, r
    assert not os.path.exists(os.path.join(tmp, "x")) and \
        not os.path.exists(os.path.join(tmp, "x.sbx-partial"))
    r = sbx("cp", os.path.join(tmp, "missing"), sid + ":x")
    assert r.rc == 1 and "No such file" in r.err, r


def test_cp_shows_a_progress_bar_on_a_terminal():
    sid = sandbox()
    tmp = tmpdir("sbx-cli-bar-")
    path = os.path.join(tmp, "big.bin")
    with open(path, "wb") as f:
        f.write(os.urandom(8 * 1024 * 1024))
    small = os.path.join(tmp, "small.txt")
    with open(small, "w") as f:
        f.write("x")
    t = Pty(["cp", path, sid + ":bar/big.bin"])
    t.expect(r"big\.bin\s+\[#*\s*\]\s+\d+% ")
    t.expect(r"100% 8\.0 MiB / 8\.0 MiB")
    assert t.wait() == 0
    t = Pty(["cp", sid + ":bar/big.bin", os.path.join(tmp, "back.bin")])
    t.expect(r"100% 8\.0 MiB / 8\.0 MiB")
    assert t.wait() == 0
    assert open(os.path.join(tmp, "back.bin"), "rb").read() == open(path, "rb").read()
    t = Pty(["cp", small, sid + ":bar/small.txt"])
    assert t.wait() == 0
    assert b"%" not in t.buf, t.buf


def test_artifacts_list_and_download_verify_sha256():
    sid = sandbox()
    ok("exec", sid, "mkdir -p out/deep && echo one > out/one.txt && "
       "head -c 100000 /dev/urandom > out/deep/r.bin")
    r = ok("artifacts", sid)
    lines = r.out.splitlines()
    assert lines[0].split() == ["PATH", "SIZE", "MIME", "SCAN", "SHA256"], r
    assert any(line.startswith("out/one.txt ") and "text/plain" in line for line in lines), r
    dest = tmpdir("sbx-cli-art-")
    r = ok("artifacts", sid, "--download", dest)
    listing = json.loads(ok("--json", "artifacts", sid).out)["data"]
    for a in listing:
        local = os.path.join(dest, a["path"][len("out/"):])
        assert hashlib.sha256(open(local, "rb").read()).hexdigest() == a["sha256"], a
        assert "%s  sha256 %s ok" % (local, a["sha256"]) in r.out, r
    assert open(os.path.join(dest, "one.txt")).read() == "one\n"


def test_logs_of_a_background_process():
    sid = sandbox()
    c = D.get().client(alice_key())
    p = c.ok("POST", "/v1/sandboxes/%s/processes" % sid,
             {"command": "for i in 1 2 3; do echo line$i; sleep 0.3; done; echo bad >&2"},
             status=201)
    r = ok("logs", sid, p["id"], "-f")
    assert r.out == "line1\nline2\nline3\n" and r.err == "bad\n", r
    r = ok("logs", sid, p["id"])
    assert r.out == "line1\nline2\nline3\n" and r.err == "bad\n", r
    r = sbx("logs", sid, "proc_999")
    assert r.rc == 3 and "process_not_found" in r.err, r


# --- the kernel and the terminal through a pseudo-terminal --------------------------------

def test_code_cells_from_the_command_line():
    sid = sandbox()
    ok("code", sid, "-c", "x = 41")
    r = ok("code", sid, "-c", "print('p'); x + 1")
    assert r.out == "p\n42\n", r
    r = sbx("code", sid, "-c", "1/0")
    assert r.rc == 1 and "ZeroDivisionError" in r.err and "Traceback" in r.err, r
    r = ok("code", sid, input=b"def g():\n    return x * 2\n\nprint(g())\n")
    assert r.out == "82\n", r
    j = json.loads(ok("--json", "code", sid, "-c", "x").out)
    assert j["object"] == "run_code" and j["result"] == "41", j
    # --reset starts a fresh kernel: the variable is gone.
    r = sbx("code", sid, "--reset", "-c", "x")
    assert r.rc == 1 and "NameError" in r.err, r
    ok("code", sid, "-c", "x = 41")


def test_code_repl_multiline_and_ctrl_c_keeps_state():
    sid = sandbox()
    t = Pty(["code", sid])
    t.expect(r">>> ")
    t.send("y = 5\n")
    t.expect(r">>> ")
    t.send("def f(n):\n")
    t.expect(r"\.\.\. ")
    t.send("    return n * y\n")
    t.expect(r"\.\.\. ")
    t.send("\n")
    t.expect(r">>> ")
    t.send("f(2)\n")
    t.expect(r"\r\n10\r\n>>> ")
    t.send("[1,\n")
    t.expect(r"\.\.\. ")
    t.send(" 2]\n")
    t.expect(r"\[1, 2\]\r\n>>> ")
    t.send("import time; print('sleeping', flush=True); time.sleep(120)\n")
    t.expect(r"\r\nsleeping\r\n")
    t.send("\x03")
    t.expect(r"KeyboardInterrupt", timeout=30)
    t.expect(r">>> ")
    t.send("y\n")
    t.expect(r"\r\n5\r\n>>> ")
    # ^C at the prompt drops the half-typed input.
    t.send("z = (\n")
    t.expect(r"\.\.\. ")
    t.send("\x03")
    t.expect(r"KeyboardInterrupt\r\n>>> ")
    t.send("\x04")
    assert t.wait() == 0


def test_terminal_resize_detach_and_reattach():
    sid = sandbox()
    t = Pty(["terminal", sid], rows=30, cols=100)
    t.expect(r"[$#] ")
    t.send("stty size; echo END1\r")
    t.expect(r"30 100\r\nEND1")
    t.resize(40, 120)
    # The new size travels SIGWINCH -> sbx -> daemon -> agent; on a loaded host that can
    # take longer than any fixed sleep, so ask until the shell sees it.
    deadline = time.time() + 30
    while True:
        t.send("stty size; echo END2\r")
        m = t.expect(r"(\d+ \d+)\r\nEND2")
        if m.group(1) == b"40 120":
            break
        assert m.group(1) == b"30 100" and time.time() < deadline, m.group(0)
        time.sleep(0.2)
    # Typed and detached at once: the line still reaches the shell (the client waits for the
    # server's close frame before it lets the socket go).
    t.send("export MARK=zz$((4*2))\r\x1d")
    m = t.expect(r"sbx terminal %s --attach (\S+)" % sid)
    pty_id = m.group(1).decode()
    assert t.wait() == 0
    t = Pty(["terminal", sid, "--attach", pty_id])
    t.expect(r"[$#] ")
    t.send("echo got-$MARK\r")
    t.expect(r"got-zz8")
    # A second client takes the shell over: the first is told, says how to come back, exits 0.
    t2 = Pty(["terminal", sid, "--attach", pty_id])
    t.expect(r"terminal: DETACHED")
    t.expect(r"sbx terminal %s --attach %s" % (sid, pty_id))
    assert t.wait() == 0
    t2.expect(r"got-zz8")  # the replayed screen
    t2.send("exit 5\r")
    assert t2.wait() == 5
    r = sbx("terminal", sid, "--attach", "pty_nope")
    assert r.rc == 3 and re.search(r"pty_not_found: .*\(HTTP 404, request req_\w+\)", r.err), r


def test_terminal_on_a_paused_sandbox_says_so_and_provision_resumes_it():
    sid = ok("create", "--ttl", "10m", "--backend", "v2").out.strip()
    try:
        ok("pause", sid)
        t = Pty(["terminal", sid])
        t.expect(r"terminal: SANDBOX_PAUSED")
        assert t.wait() == 3
        assert re.search(r"^status\s+paused$", ok("get", sid).out, re.M)
        t = Pty(["terminal", sid, "--provision"])
        t.expect(r"[$#] ")
        t.send("echo awake-$((6*7))\r")
        t.expect(r"awake-42")
        t.send("exit\r")
        assert t.wait() == 0
        assert re.search(r"^status\s+running$", ok("get", sid).out, re.M)
    finally:
        ok("rm", sid)


# --- life cycle, egress, preview, admin ----------------------------------------------------

def test_pause_resume_fork():
    sid = ok("create", "--ttl", "10m", "--backend", "v2").out.strip()
    try:
        ok("exec", sid, "echo kept > k.txt")
        r = ok("pause", sid)
        assert re.match(r"%s paused \(.+ snapshot, \d+ ms\)$" % sid, r.out.strip()), r
        assert re.search(r"^status\s+paused$", ok("get", sid).out, re.M)
        r = ok("resume", sid)
        assert re.match(r"%s running \(\d+ ms\)$" % sid, r.out.strip()), r
        assert ok("exec", sid, "cat k.txt").out == "kept\n"
        r = ok("fork", sid, "-n", "1", "--ttl", "5m")
        forks = r.out.split()
        assert len(forks) == 1 and forks[0] != sid, r
        assert ok("exec", forks[0], "cat k.txt").out == "kept\n"
        ok("rm", *forks)
    finally:
        ok("rm", sid)


def test_egress_and_preview():
    sid = sandbox()
    r = ok("egress", sid)
    assert r.out.startswith("policy: none"), r
    r = ok("egress", sid, "--allow", "example.com", "--allow", "example.org")
    assert r.out.startswith("policy: allowlist example.com, example.org"), r
    j = json.loads(ok("--json", "egress", sid).out)
    assert j["policy"]["domains"] == ["example.com", "example.org"], j
    ok("egress", sid, "--no-egress")
    r = sbx("egress", sid, "--allow", "a.com", "--preset", "pypi")
    assert r.rc == 2, r
    r = sbx("egress", sid, "--preset", "nope")
    assert r.rc == 3 and "egress_unknown_preset" in r.err, r
    r = ok("preview", sid, "3000", "--ttl", "2m")
    assert re.match(r"https?://\S+", r.out.strip()) and sid in r.out, r
    r = sbx("preview", sid, "80")
    assert r.rc == 3 and "invalid_port" in r.err, r


def test_keys_and_audit():
    admin = D.get().admin_key
    r = ok("keys", "create", "carol", "--tool-level", "basic", key=admin)
    key = r.out.strip()
    assert key.startswith("sbx_") and "shown only once" in r.err, r
    kid = re.search(r"key (\S+) for carol", r.err).group(1)
    r = ok("keys", key=admin)
    row = next(line for line in r.out.splitlines() if line.startswith(kid))
    assert "carol" in row and "member" in row and "basic" in row, r
    assert key not in r.out
    r = sbx("keys", "ls")
    assert r.rc == 3 and "admin_required" in r.err, r
    ok("keys", "rm", kid, key=admin)
    r = sbx("ls", key=key)
    assert r.rc == 3 and "invalid_api_key" in r.err, r
    r = ok("audit", "--verify", key=admin)
    assert re.match(r"ok: \d+ entries checked$", r.out.strip()), r
    r = ok("audit", "--action", "sandbox.create", "--limit", "5")
    lines = r.out.splitlines()
    assert lines[0].split() == ["SEQ", "WHEN", "USER", "ACTION", "SANDBOX", "OUTCOME", "REQUEST"]
    assert len(lines) > 1 and all(" sandbox.create " in line for line in lines[1:]), r
    r = sbx("audit", "--limit", "0")
    assert r.rc == 2, r


def test_ctrl_c_stops_exec_and_run_cleans_up():
    sid = sandbox()
    p = subprocess.Popen([sbx_bin(), "exec", sid, "--", "echo started; sleep 60"],
                         env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"started\n"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, (p.returncode, err)
    no_sanitizer_report(err.decode())
    # run: the sandbox it made is deleted after a ^C too.
    tmp = tmpdir("sbx-cli-int-")
    src = os.path.join(tmp, "slow.sh")
    with open(src, "w") as f:
        f.write("echo running\nsleep 120\n")
    before = {s["id"] for s in json.loads(ok("--json", "ls").out)["data"]}
    p = subprocess.Popen([sbx_bin(), "run", src], env=base_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    assert p.stdout.readline() == b"running\n"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, (p.returncode, err)
    no_sanitizer_report(err.decode())
    after = {s["id"] for s in json.loads(ok("--json", "ls").out)["data"]}
    assert after == before, "run left %s behind after ^C" % (after - before)


def test_v1_snapshot_and_create_from_it():
    v1 = ok("create", "--backend", "v1", "--ttl", "10m").out.strip()
    made = [v1]
    try:
        ok("exec", v1, "echo saved > s.txt")
        snap = ok("snapshot", v1).out.strip()
        assert snap.startswith("snap_"), snap
        copy = ok("create", "--snapshot", snap, "--ttl", "10m").out.strip()
        made.append(copy)
        assert ok("exec", copy, "cat s.txt").out == "saved\n"
        r = sbx("pause", v1)
        assert r.rc == 3 and "not_supported_on_v1" in r.err, r
    finally:
        ok("rm", *made)


def test_bash_completion():
    sid = sandbox()
    script = os.path.join(harness.REPO, "share", "completion", "sbx.bash")
    env = base_env()
    env["PATH"] = harness.build_dir() + ":" + env.get("PATH", "")

    def complete(*words):
        line = " ".join("'%s'" % w for w in words)
        p = subprocess.run(["bash", "-c", "source %s; COMP_WORDS=(sbx %s); COMP_CWORD=%d; _sbx; "
                            "printf '%%s\\n' \"${COMPREPLY[@]}\"" % (script, line, len(words))],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
        assert p.returncode == 0, p
        no_sanitizer_report(p.stderr.decode())
        return p.stdout.decode().split()

    assert complete("cr") == ["create"]
    assert set(complete("")) >= {"exec", "terminal", "code", "--json"}
    assert sid in complete("exec", "")
    assert sid in complete("--json", "terminal", "")
    assert complete("run", "--backend", "") == ["v1", "v2"]
    assert complete("logs", "--f") == ["--follow"]
    assert sid + ":" in complete("cp", "sb_")
    assert complete("keys", "") == ["ls", "create", "rm"]


def test_volume_create_ls_cp_mount_rm():
    """`sbx volume create|ls|rm|cp` and `sbx create --volume` (docs/volumes.md)."""
    vid = ok("volume", "create", "cli-vol", "--size", "32").out.strip()
    assert vid.startswith("vol_"), vid
    assert "cli-vol" in ok("volume", "ls").out
    src = tmpdir("sbx-cli-vol-")
    with open(os.path.join(src, "a.txt"), "w") as f:
        f.write("via the cli")
    ok("volume", "cp", os.path.join(src, "a.txt"), "cli-vol:in/a.txt")
    sid = ok("create", "--ttl", "10m", "--volume", "cli-vol:/data:ro").out.strip()
    try:
        r = sbx("exec", sid, "--", "cat /data/in/a.txt; touch /data/x")
        assert "via the cli" in r.out and r.rc != 0, r  # read-only: the touch fails
        r = sbx("volume", "rm", "cli-vol")
        assert r.rc == 3 and "volume_in_use" in r.err, r
    finally:
        ok("rm", sid)
    ok("volume", "cp", "%s:in/a.txt" % vid, os.path.join(src, "back.txt"))
    with open(os.path.join(src, "back.txt")) as f:
        assert f.read() == "via the cli"
    assert sbx("volume", "frob").rc == 2
    ok("volume", "rm", vid)
    assert "cli-vol" not in ok("volume", "ls").out
