#!/usr/bin/env python3
"""An agent's job, step by step: what bench_workload.py times on the host, on the namespaces
backend and on gVisor. The same file runs in all three, with the template's own binaries
(git, gcc, node/npm, pip, sqlite, tar, rg), standard library only.

    python3 job.py prepare DIR     make the inputs (untimed): a repository with history, an
                                   npm registry's packages, wheels, C sources, a test suite
    python3 job.py run DIR         run the steps in DIR/run, print one JSON object
                                   {"steps": [[name, seconds], ...]}

Every step is a command an agent runs; each is timed alone, start to end, by this process.
"""

import hashlib
import base64
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPO_FILES = 3000       # files in the repository (about 12 MB of text)
REPO_COMMITS = 6        # commits of history before the clone
NPM_PACKAGES = 40       # packages the Node project depends on
NPM_FILES = 60          # files in each package (2 400 in node_modules)
WHEELS = 20             # wheels pip installs
WHEEL_FILES = 40        # modules in each wheel
C_FILES = 80            # translation units make -j builds
PY_TESTS = 400          # unittest cases
SQL_TX = 300            # SQLite transactions
SQL_QUERIES = 2000      # SQLite queries

ENV_EXTRA = {
    "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@sbx",
    "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@sbx",
    "GIT_CONFIG_NOSYSTEM": "1",
    # No background `git gc --auto`: it would race the next step (rm -rf of a tree it writes)
    # and load the machine during steps that are not git's.
    "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "gc.auto", "GIT_CONFIG_VALUE_0": "0", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    "npm_config_update_notifier": "false", "npm_config_audit": "false", "npm_config_fund": "false",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONDONTWRITEBYTECODE": "",
}


def sh(cmd, cwd, env=None, quiet=True):
    e = dict(os.environ)
    e.update(ENV_EXTRA)
    e["HOME"] = cwd
    if env:
        e.update(env)
    r = subprocess.run(cmd, cwd=cwd, env=e, shell=isinstance(cmd, str), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE if quiet else None, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        out = (r.stdout or b"").decode(errors="replace")[-2000:]
        raise SystemExit("step failed (%s): %s\n%s" % (r.returncode, cmd, out))
    return r.stdout


def text_file(i, rev=0):
    """A source-like file of a few KB whose bytes depend on its index and revision."""
    lines = ["# file %d revision %d" % (i, rev)]
    for j in range(40 + i % 60):
        lines.append("def f_%d_%d(x):\n    return x * %d + %d  # needle%d" % (i, j, j, rev, j % 7))
    return "\n".join(lines) + "\n"


def prepare_repo(d):
    src = os.path.join(d, "src")
    os.makedirs(src)
    sh("git init -q -b main . && git config user.name b && git config user.email b@b", src)
    per = REPO_FILES // REPO_COMMITS
    for c in range(REPO_COMMITS):
        for i in range(REPO_FILES if c == 0 else per):
            k = i if c == 0 else (c * 97 + i * 13) % REPO_FILES
            p = os.path.join(src, "pkg%02d" % (k % 30), "mod%02d" % (k // 30 % 10), "f%04d.py" % k)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text_file(k, c))
        sh("git add -A && git commit -qm 'commit %d'" % c, src)
    sh("git clone -q --bare src src.git && rm -rf src", d)


def tgz(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in files:
            ti = tarfile.TarInfo("package/" + name)
            ti.size = len(data)
            ti.mode = 0o644
            ti.mtime = 1700000000
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def prepare_npm(d):
    reg = os.path.join(d, "registry")
    os.makedirs(reg)
    for p in range(NPM_PACKAGES):
        name = "bench-pkg-%02d" % p
        deps = {"bench-pkg-%02d" % q: "^1.0.0" for q in (p + 1, p + 7) if q < NPM_PACKAGES}
        manifest = {"name": name, "version": "1.0.0", "main": "index.js", "dependencies": deps}
        files = [("package.json", json.dumps(manifest).encode())]
        files.append(("index.js", ("module.exports = require('./lib/m0.js');\n").encode()))
        for i in range(NPM_FILES - 2):
            files.append(("lib/m%d.js" % i,
                          ("exports.v%d = function (x) { return x + %d; };\n" % (i, i) * 20).encode()))
        data = tgz(files)
        with open(os.path.join(reg, name + "-1.0.0.tgz"), "wb") as f:
            f.write(data)
        doc = dict(manifest)
        doc["dist"] = {"shasum": hashlib.sha1(data).hexdigest(),
                       "integrity": "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode(),
                       "tarball": "TARBALL/%s-1.0.0.tgz" % name}
        with open(os.path.join(reg, name + ".json"), "w") as f:
            json.dump({"name": name, "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": doc}}, f)


def prepare_wheels(d):
    wd = os.path.join(d, "wheels")
    os.makedirs(wd)
    for w in range(WHEELS):
        name, ver = "benchwheel%02d" % w, "1.0"
        dist = "%s-%s.dist-info" % (name, ver)
        files = [("%s/__init__.py" % name, "from .m0 import *\n")]
        for i in range(WHEEL_FILES):
            files.append(("%s/m%d.py" % (name, i), "def g%d(x):\n    return x + %d\n" % (i, i) * 10))
        files.append((dist + "/METADATA", "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, ver)))
        files.append((dist + "/WHEEL", "Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
        record = []
        for n, data in files:
            h = base64.urlsafe_b64encode(hashlib.sha256(data.encode()).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (n, h, len(data.encode())))
        record.append(dist + "/RECORD,,")
        files.append((dist + "/RECORD", "\n".join(record) + "\n"))
        with zipfile.ZipFile(os.path.join(wd, "%s-%s-py3-none-any.whl" % (name, ver)), "w") as z:
            for n, data in files:
                z.writestr(n, data)


def prepare_c(d):
    cd = os.path.join(d, "csrc")
    os.makedirs(cd)
    for i in range(C_FILES):
        body = ["#include <stdio.h>", "#include <string.h>", "int u%d(int x);" % i]
        body += ["static int s%d_%d(int x) { return x * %d + (int)strlen(\"%d\"); }" % (i, j, j, j)
                 for j in range(30)]
        body.append("int u%d(int x) { return %s; }" % (i, " + ".join("s%d_%d(x)" % (i, j) for j in range(30))))
        with open(os.path.join(cd, "u%03d.c" % i), "w") as f:
            f.write("\n".join(body) + "\n")
    with open(os.path.join(cd, "main.c"), "w") as f:
        f.write("#include <stdio.h>\n%s\nint main(void) { long t = 0; %s printf(\"%%ld\\n\", t); return 0; }\n" % (
            "\n".join("int u%d(int x);" % i for i in range(C_FILES)),
            " ".join("t += u%d(1);" % i for i in range(C_FILES))))
    with open(os.path.join(cd, "Makefile"), "w") as f:
        f.write("SRC := $(wildcard *.c)\nOBJ := $(SRC:.c=.o)\nCFLAGS := -O1\n"
                "prog: $(OBJ)\n\t$(CC) -o $@ $^\n%.o: %.c\n\t$(CC) $(CFLAGS) -c -o $@ $<\n")


def prepare_tests(d):
    td = os.path.join(d, "pytests")
    os.makedirs(os.path.join(td, "tests"))
    with open(os.path.join(td, "mylib.py"), "w") as f:
        f.write("import json, os, tempfile\n"
                "def roundtrip(obj, d):\n"
                "    p = os.path.join(d, 'x.json')\n"
                "    with open(p, 'w') as f:\n        json.dump(obj, f)\n"
                "    with open(p) as f:\n        return json.load(f)\n"
                "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n")
    per = 20
    for m in range(PY_TESTS // per):
        lines = ["import os, tempfile, unittest", "import mylib", "",
                 "class T%d(unittest.TestCase):" % m]
        for t in range(per):
            if t % 2:
                lines.append("    def test_%d(self):\n        with tempfile.TemporaryDirectory() as d:\n"
                             "            self.assertEqual(mylib.roundtrip({'k': %d}, d), {'k': %d})" % (t, t, t))
            else:
                lines.append("    def test_%d(self):\n        self.assertEqual(mylib.fib(%d) >= 0, True)" % (t, 200 + t))
        with open(os.path.join(td, "tests", "test_m%02d.py" % m), "w") as f:
            f.write("\n".join(lines) + "\n")
    open(os.path.join(td, "tests", "__init__.py"), "w").close()


def prepare(d):
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    prepare_repo(d)
    prepare_npm(d)
    prepare_wheels(d)
    prepare_c(d)
    prepare_tests(d)


class Registry:
    """npm's registry protocol for the prepared packages, on 127.0.0.1 (the sandbox's own
    loopback when the job runs inside one)."""

    def __init__(self, reg):
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                name = self.path.strip("/").split("/")[-1]
                p = os.path.join(reg, name if name.endswith(".tgz") else name + ".json")
                try:
                    with open(p, "rb") as f:
                        data = f.read()
                except OSError:
                    self.send_error(404)
                    return
                if not name.endswith(".tgz"):
                    data = data.replace(b"TARBALL", outer.url.encode())
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream" if name.endswith(".tgz")
                                 else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.srv.server_address[1]
        self.t = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.t.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def step_sqlite(db):
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT, n INTEGER)")
    con.execute("CREATE INDEX kv_n ON kv(n)")
    con.commit()
    for t in range(SQL_TX):
        with con:
            for i in range(10):
                k = t * 10 + i
                con.execute("INSERT INTO kv VALUES (?, ?, ?)", (k, "value %d" % k, k % 97))
    total = 0
    for q in range(SQL_QUERIES):
        total += con.execute("SELECT count(*) FROM kv WHERE n = ?", (q % 97,)).fetchone()[0]
    con.close()
    return total


def step_cpu():
    s = 0
    for i in range(3_000_000):
        s += i * i % 7
    return s


def run(d):
    w = os.path.join(d, "run")
    if os.path.exists(w):
        shutil.rmtree(w)
    os.makedirs(w)
    steps = []

    def timed(name, fn):
        t0 = time.perf_counter()
        fn()
        steps.append([name, time.perf_counter() - t0])

    repo = os.path.join(w, "repo")
    timed("python CPU loop", step_cpu)
    timed("git clone (%d files, %d commits)" % (REPO_FILES, REPO_COMMITS),
          lambda: sh(["git", "clone", "-q", "file://" + os.path.join(d, "src.git"), repo], w))

    def edit():
        for i in range(0, REPO_FILES, 30):
            p = os.path.join(repo, "pkg%02d" % (i % 30), "mod%02d" % (i // 30 % 10), "f%04d.py" % i)
            with open(p, "a") as f:
                f.write("# edited\n")
        os.makedirs(os.path.join(repo, "new"))
        for i in range(50):
            with open(os.path.join(repo, "new", "n%02d.py" % i), "w") as f:
                f.write(text_file(i, 99))
    edit()
    timed("git status", lambda: sh("git status --porcelain >/dev/null", repo))
    timed("git add + commit", lambda: sh("git add -A && git commit -qm edit", repo))

    proj = os.path.join(w, "nodeproj")
    os.makedirs(proj)
    with open(os.path.join(proj, "package.json"), "w") as f:
        json.dump({"name": "proj", "version": "1.0.0", "private": True,
                   "dependencies": {"bench-pkg-%02d" % p: "^1.0.0" for p in range(0, NPM_PACKAGES, 3)}}, f)
    reg = Registry(os.path.join(d, "registry"))
    try:
        timed("npm install (%d packages, %d files)" % (NPM_PACKAGES, NPM_PACKAGES * NPM_FILES),
              lambda: sh(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error",
                          "--registry", reg.url + "/", "--cache", os.path.join(w, ".npm")], proj))
    finally:
        reg.close()
    timed("pip install (%d local wheels)" % WHEELS,
          lambda: sh([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--break-system-packages",
                      "--no-compile", "--find-links", os.path.join(d, "wheels"),
                      "--target", os.path.join(w, "pylib")] + ["benchwheel%02d" % i for i in range(WHEELS)], w))
    csrc = os.path.join(w, "csrc")
    shutil.copytree(os.path.join(d, "csrc"), csrc)
    timed("make -j2 (%d C files)" % C_FILES, lambda: sh("make -s -j2 && ./prog >/dev/null", csrc))
    pyt = os.path.join(w, "pytests")
    shutil.copytree(os.path.join(d, "pytests"), pyt)
    timed("python unittest (%d tests)" % PY_TESTS,
          lambda: sh([sys.executable, "-m", "unittest", "discover", "-q", "-s", "tests", "-t", "."], pyt))
    timed("sqlite (%d transactions, %d queries)" % (SQL_TX, SQL_QUERIES),
          lambda: step_sqlite(os.path.join(w, "bench.db")))
    timed("tar czf the repository", lambda: sh("tar czf repo.tgz repo", w))
    os.makedirs(os.path.join(w, "untar"))
    timed("tar xzf it", lambda: sh("tar xzf ../repo.tgz", os.path.join(w, "untar")))
    timed("find + rg over the tree",
          lambda: sh("find . -type f | wc -l >/dev/null && rg -c needle3 . >/dev/null", w))
    timed("rm -rf the work", lambda: shutil.rmtree(w))
    json.dump({"steps": steps}, sys.stdout)
    print()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("prepare", "run"):
        raise SystemExit(__doc__)
    (prepare if sys.argv[1] == "prepare" else run)(os.path.abspath(sys.argv[2]))
