"""Custom templates (docs/templates.md): POST /v1/templates builds a template from base with
one apt package and one npm package, streams its progress, is cached by recipe digest, used
by creates, private to its owner, refused with clear 400s when the recipe is bad, failed with
its log when a step fails, and deleted by its owner (409 while a sandbox uses it).

Nothing leaves 127.0.0.1: a fake Debian repository (a .deb made here with dpkg-deb, a
Packages and a Release file, trusted=yes) and a fake npm registry (a packument and a tarball
made with `npm pack`) are served over plain HTTP on a random 127.x.y.z port 80, under the
names deb.debian.org and registry.npmjs.org (SBX_EGRESS_HOSTS), which the build sandbox's
egress allows (SBX_TEMPLATE_REGISTRIES' default). The daemon gets its own template cache
holding only a link to the real base build, so the templates built here go nowhere else.
"""

import gzip
import hashlib
import http.server
import json
import os
import posixpath
import random
import re
import shutil
import subprocess
import tempfile
import threading
import time

import harness
from harness import assert_error
import testserver

DEB = "sbx-hello"
NPM = "sbx-demo"
SOURCE = "deb [trusted=yes] http://deb.debian.org/sbxtest ./"


def _make_deb(d):
    root = os.path.join(d, "pkg")
    os.makedirs(os.path.join(root, "DEBIAN"))
    os.makedirs(os.path.join(root, "usr", "bin"))
    with open(os.path.join(root, "DEBIAN", "control"), "w") as f:
        f.write("Package: %s\nVersion: 1.0\nArchitecture: all\nMaintainer: sbx tests "
                "<tests@sbx.invalid>\nDescription: prints a greeting for the sbx tests\n" % DEB)
    exe = os.path.join(root, "usr", "bin", DEB)
    with open(exe, "w") as f:
        f.write("#!/bin/sh\necho 'hello from the sbx test package'\n")
    os.chmod(exe, 0o755)
    deb = os.path.join(d, "%s_1.0_all.deb" % DEB)
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", root, deb], check=True,
                   stdout=subprocess.DEVNULL)
    data = open(deb, "rb").read()
    packages = open(os.path.join(root, "DEBIAN", "control")).read()
    packages += "Filename: ./%s\nSize: %d\nSHA256: %s\n\n" % (
        os.path.basename(deb), len(data), hashlib.sha256(data).hexdigest())
    pk = packages.encode()
    pgz = gzip.compress(pk)
    release = ("Origin: sbx-test\nLabel: sbx-test\nSuite: stable\nCodename: sbxtest\n"
               "Date: %s\nArchitectures: all amd64\nSHA256:\n %s %d Packages\n %s %d Packages.gz\n"
               % (time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()),
                  hashlib.sha256(pk).hexdigest(), len(pk), hashlib.sha256(pgz).hexdigest(),
                  len(pgz)))
    return {"/sbxtest/Packages": pk, "/sbxtest/Packages.gz": pgz,
            "/sbxtest/Release": release.encode(), "/sbxtest/" + os.path.basename(deb): data}


def _make_npm(d):
    src = os.path.join(d, "npm")
    os.makedirs(src)
    with open(os.path.join(src, "package.json"), "w") as f:
        json.dump({"name": NPM, "version": "1.0.0", "main": "index.js", "license": "MIT"}, f)
    with open(os.path.join(src, "index.js"), "w") as f:
        f.write("module.exports = 'sbx-npm-ok';\n")
    out = subprocess.run(["npm", "pack", "--silent", "--pack-destination", d], cwd=src,
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    tgz = open(os.path.join(d, out), "rb").read()
    import base64
    url = "http://registry.npmjs.org/%s/-/%s-1.0.0.tgz" % (NPM, NPM)
    packument = {"name": NPM, "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": {
        "name": NPM, "version": "1.0.0", "main": "index.js", "dist": {
            "tarball": url, "shasum": hashlib.sha1(tgz).hexdigest(),
            "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()}}}}
    return {"/" + NPM: json.dumps(packument).encode(),
            "/%s/-/%s-1.0.0.tgz" % (NPM, NPM): tgz}


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        # apt asks a flat repository for "..././Packages".
        path = posixpath.normpath(self.path.split("?")[0])
        self.server.seen.append(path)
        body = self.server.files.get(path)
        self.send_response(200 if body is not None else 404)
        body = body if body is not None else b"not here\n"
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/json" if self.path == "/" + NPM
                         else "application/octet-stream")
        self.end_headers()
        self.wfile.write(body)


class _Server(testserver.QuietHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Registries:
    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="sbx-tplreg-")
        files = _make_deb(self.tmp)
        files.update(_make_npm(self.tmp))
        for _ in range(20):
            self.addr = "127.%d.%d.%d" % (random.randint(64, 250), random.randint(1, 250),
                                          random.randint(2, 250))
            try:
                self.srv = _Server((self.addr, 80), _Handler)
                break
            except OSError:
                continue
        else:
            raise AssertionError("no free loopback address for the fake registries")
        self.srv.files = files
        self.srv.seen = []
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.hosts = os.path.join(self.tmp, "hosts")
        with open(self.hosts, "w") as f:
            f.write("%s deb.debian.org registry.npmjs.org\n" % self.addr)
        # A template cache of its own: base only (a link to the real build).
        real = os.path.realpath(os.path.join(
            os.environ.get("SBX_TEMPLATE_CACHE", "/var/cache/sbx/templates"), "base"))
        self.cache = tempfile.mkdtemp(prefix="tpl-build-test-",
                                      dir=os.path.dirname(os.path.dirname(real)))
        os.symlink(real, os.path.join(self.cache, "base"))

    def env(self):
        return {"SBX_EGRESS_HOSTS": self.hosts, "SBX_EGRESS_TEST_UPSTREAMS": "%s:80" % self.addr,
                "SBX_TEMPLATE_CACHE": self.cache, "SBX_TEMPLATE_APT_SOURCES": SOURCE,
                "SBX_TEMPLATE_NPM_REGISTRY": "http://registry.npmjs.org/",
                "SBX_TEMPLATE_BUILDS_MAX": "1"}

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        shutil.rmtree(self.cache, ignore_errors=True)


REG = None


def reg():
    global REG
    if REG is None:
        REG = Registries()
    return REG


class _Shared(harness.Shared):
    def get(self):
        self.kw["extra_env"] = reg().env()
        return super().get()


D = _Shared()


def teardown_module():
    D.close()
    if REG:
        REG.close()


RECIPE = {
    "name": "hello",
    "from": "base",
    "apt_packages": [DEB],
    "npm_packages": [NPM],
    "files": [{"path": "/etc/sbx-hello.conf", "content": "greeting = salut, ș ț\n"},
              {"path": "/usr/local/bin/hi", "content": "#!/bin/sh\necho hi \"$@\"\n",
               "mode": 0o755}],
    "run": ["echo built > /etc/sbx-built && echo step-output-line",
            "hi there > /etc/sbx-hi",
            # The build's egress reaches the registries and nothing else.
            "for u in http://deb.debian.org/sbxtest/Release http://example.com/; do "
            "curl -s -o /dev/null -w \"egress %{http_code} $u\\n\" $u; done"],
    "start_command": "sleep 2; echo started > /tmp/started; sleep 1000",
    "ready_check": "test -f /tmp/started",
}


def build_stream(c, recipe):
    """POST with Accept: text/event-stream: the head, then every event, to the end."""
    it = c.stream("POST", "/v1/templates", recipe, timeout=1200)
    head = next(it)
    return head, [ev for _, ev in it]


def test_build_streams_progress_and_is_used_by_a_create():
    c = D.client("tpl-alice")
    head, events = build_stream(c, RECIPE)
    assert head.status == 200, head
    steps = [e["step"] for e in events if e["type"] == "step"]
    assert steps == ["prepare", "boot", "apt", "npm", "files", "run 1/3", "run 2/3", "run 3/3",
                     "ready", "finish", "seal"], (steps, events[-12:])
    pcts = [e["percent"] for e in events if e["type"] == "step"]
    assert pcts == sorted(pcts) and pcts[0] == 0 and pcts[-1] < 100, pcts
    times = [e["elapsed_ms"] for e in events if "elapsed_ms" in e]
    assert times == sorted(times) and len(times) == len(steps) + 1, times
    logs = [e for e in events if e["type"] == "log"]
    assert any(e["step"] == "apt" and "sbx-hello" in e["line"] for e in logs), logs[-20:]
    assert any(e["step"] == "run 1/3" and e["line"] == "step-output-line" for e in logs), logs
    egress = [e["line"] for e in logs if e["step"] == "run 3/3"]
    assert egress == ["egress 200 http://deb.debian.org/sbxtest/Release",
                      "egress 403 http://example.com/"], egress
    done = events[-1]
    assert done["type"] == "done" and done["status"] == "ready" and done["percent"] == 100, done
    b = done["build"]
    assert b["name"] == "hello" and b["status"] == "ready" and b["owner"] == "tpl-alice", b
    assert b["digest"].startswith("sha256:") and b["size_bytes"] > 100 * 1024 * 1024, b
    # The apt and npm fetches went to the fake registries, through the build's egress.
    seen = reg().srv.seen
    assert "/sbxtest/%s_1.0_all.deb" % DEB in seen and "/" + NPM in seen, seen

    t = c.ok("GET", "/v1/templates/hello")
    assert t["custom"] is True and t["owner"] == "tpl-alice" and t["public"] is False, t
    assert t["digest"] == b["digest"] and t["recipe_digest"] == b["recipe_digest"], t
    assert t["from"] == "base" and t["size_bytes"] == b["size_bytes"], t
    assert t["added_bytes"] > 0, t
    assert DEB in t["contains"]["packages"], t
    base = c.ok("GET", "/v1/templates/base")
    assert t["contains"]["installed_packages"] == base["contains"]["installed_packages"] + 1, t
    assert "%s@1.0.0" % NPM in t["contains"]["npm"], t
    assert t["recipe"]["files"][0] == {"path": "/etc/sbx-hello.conf", "mode": 0o644,
                                       "bytes": len("greeting = salut, ș ț\n".encode())}, t
    assert "hello" in [x["name"] for x in c.ok("GET", "/v1/templates")["data"]]

    sb = c.create_sandbox(template="hello", ttl_seconds=600)
    assert sb["template"] == "hello" and sb["template_digest"] == b["digest"], sb
    sid = sb["id"]
    assert c.sh(sid, DEB).strip() == "hello from the sbx test package"
    assert c.sh(sid, "node -e \"console.log(require('%s'))\"" % NPM).strip() == "sbx-npm-ok"
    assert c.sh(sid, "cat /etc/sbx-hello.conf") == "greeting = salut, ș ț\n"
    assert c.sh(sid, "cat /etc/sbx-built /etc/sbx-hi") == "built\nhi there\n"
    assert c.sh(sid, "stat -c %a /usr/local/bin/hi").strip() == "755"
    # The start command ran at boot (the agent runs /usr/lib/sbx/start), and the create
    # answered only once the ready check passed (the command takes 2 s to get there).
    assert c.sh(sid, "cat /tmp/started") == "started\n"
    # The template's tree is read-only in a normal sandbox, as every template's is (and
    # root's besides: commands run as the user).
    r = c.exec(sid, shell="touch /etc/x")
    assert r["exit_code"] != 0 and "Permission denied" in r["stderr"], r
    mounts = c.sh(sid, "awk '$2 == \"/\" {print $4}' /proc/mounts")
    assert mounts.split(",")[0] == "ro", mounts
    # In use: not deleted.
    assert_error(c.request("DELETE", "/v1/templates/hello"), 409, "template_in_use")
    c.delete_sandbox(sid)


def test_same_recipe_is_cached_and_the_build_can_be_read_back():
    c = D.client("tpl-alice")
    first = c.ok("GET", "/v1/templates/hello")
    n = len(reg().srv.seen)
    r = c.request("POST", "/v1/templates", RECIPE)
    assert r.status == 200 and r.body["cached"] is True and r.body["status"] == "ready", r
    assert r.body["recipe_digest"] == first["recipe_digest"], r
    assert r.body["digest"] == first["digest"], r
    assert len(reg().srv.seen) == n, "a cached recipe fetched nothing"
    # Streamed, a cached recipe is one done event.
    head, events = build_stream(c, RECIPE)
    assert head.status == 200 and [e["type"] for e in events] == ["done"], events
    assert events[0]["cached"] is True, events
    got = c.ok("GET", "/v1/templates/hello/build")
    assert got["status"] == "ready" and got["name"] == "hello", got
    it = c.stream("GET", "/v1/templates/hello/build-events")
    assert next(it).status == 200
    assert [ev["type"] for _, ev in it] == ["done"]


def test_bad_recipes_get_clear_400s():
    c = D.client("tpl-alice")

    def bad(body, status=400, code="invalid_recipe", words=None):
        r = c.request("POST", "/v1/templates", body)
        assert_error(r, status, code)
        if words:
            assert words in r.body["error"]["message"], r.body
    bad({"from": "base"}, words="name is required")
    bad({"name": "Bad_Name"}, code="invalid_template")
    bad({"name": "x" * 40}, code="invalid_template")
    bad({"name": "ok", "from": "nope"}, words="from: no template named nope")
    bad({"name": "ok", "from": "ok"}, words="itself")
    bad({"name": "ok", "apt_packages": ["-oAPT::x=1"]}, words="apt_packages[0]")
    bad({"name": "ok", "apt_packages": ["curl; rm -rf /"]}, words="apt_packages[0]")
    bad({"name": "ok", "npm_packages": ["../evil"]}, words="npm_packages[0]")
    bad({"name": "ok", "apt_packages": ["p%d" % i for i in range(65)]}, words="RECIPE_APT_MAX")
    bad({"name": "ok", "run": ["true"] * 33}, words="RECIPE_RUN_MAX")
    bad({"name": "ok", "run": [""]}, words="run[0] is empty")
    bad({"name": "ok", "run": "true"}, words="run must be an array")
    bad({"name": "ok", "files": [{"path": "/tmp/x", "content": ""}]}, words="files[0].path")
    bad({"name": "ok", "files": [{"path": "/etc/../x", "content": ""}]}, words="files[0].path")
    bad({"name": "ok", "files": [{"path": "etc/x", "content": ""}]}, words="files[0].path")
    bad({"name": "ok", "files": [{"path": "/etc/x", "content": "", "mode": 99999}]},
        words="mode")
    bad({"name": "ok", "files": [{"path": "/x%d" % i, "content": ""} for i in range(33)]},
        words="RECIPE_FILES_MAX")
    bad({"name": "ok", "start_command": "x" * 9000}, words="RECIPE_COMMAND_MAX")
    bad({"name": "ok", "dockerfile": "FROM x"}, words="unknown field dockerfile")
    # The operator's template names are not anyone's to take, nor is public a member's.
    bad({"name": "base", "from": "base"}, words="itself")
    bad({"name": "ok", "public": True}, 403, "admin_required")
    r = c.request("POST", "/v1/templates", raw=b"not json")
    assert_error(r, 400, "invalid_json")


def test_a_failing_step_fails_the_build_with_its_log():
    c = D.client("tpl-alice")
    # The sleep keeps it running while the requests below are made.
    recipe = {"name": "broken",
              "run": ["sleep 2; echo before-the-failure; echo oops >&2; exit 7"]}
    r = c.request("POST", "/v1/templates", recipe)
    assert r.status == 202 and r.body["status"] == "building", r
    assert r.headers["location"] == "/v1/templates/broken/build", r.headers
    # While it runs: the same recipe joins it, another recipe of the name waits its turn, and
    # this daemon builds one template at a time.
    again = c.request("POST", "/v1/templates", recipe)
    assert again.status == 202 and again.body["id"] == r.body["id"], again
    assert_error(c.request("POST", "/v1/templates", dict(recipe, run=["true"])), 409,
                 "template_building")
    assert_error(c.request("POST", "/v1/templates", {"name": "other", "run": ["true"]}), 429,
                 "template_build_limit")
    assert_error(c.request("DELETE", "/v1/templates/base"), 409, "template_builtin")
    it = c.stream("GET", "/v1/templates/broken/build-events", timeout=600)
    assert next(it).status == 200
    events = [ev for _, ev in it]
    # Each line under its stream: stdout, and stderr (which was once dropped, and stdout
    # labelled stderr, by a channel number read as a stream index).
    assert any(e["type"] == "log" and e["line"] == "before-the-failure" and e["stream"] == "stdout"
               for e in events), events
    assert any(e["type"] == "log" and e["line"] == "oops" and e["stream"] == "stderr"
               for e in events), events
    last = events[-1]
    assert last["type"] == "error" and last["status"] == "failed", last
    e = last["error"]
    assert e["step"] == "run 1/1" and e["exit_code"] == 7, e
    assert e["code"] == "template_build_failed" and "exited with 7" in e["message"], e
    assert "before-the-failure" in e["stdout_tail"] and "oops" in e["stderr_tail"], e
    got = c.ok("GET", "/v1/templates/broken/build")
    assert got["status"] == "failed" and got["error"]["exit_code"] == 7, got
    # Nothing was published, and the half-made tree is gone.
    assert_error(c.request("GET", "/v1/templates/broken"), 404, "template_not_found")
    assert_error(c.request("POST", "/v1/sandboxes", {"template": "broken"}), 400,
                 "invalid_template")
    harness.wait_for(lambda: not [n for n in os.listdir(reg().cache) if n.startswith(".build-")],
                     60, what="the failed build's tree to go")


def test_another_user_cannot_see_or_use_a_private_template():
    bob = D.client("tpl-bob")
    assert "hello" not in [t["name"] for t in bob.ok("GET", "/v1/templates")["data"]]
    assert "base" in [t["name"] for t in bob.ok("GET", "/v1/templates")["data"]]
    assert_error(bob.request("GET", "/v1/templates/hello"), 404, "template_not_found")
    assert_error(bob.request("GET", "/v1/templates/hello/build"), 404,
                 "template_build_not_found")
    assert_error(bob.request("POST", "/v1/sandboxes", {"template": "hello"}), 400,
                 "invalid_template")
    assert_error(bob.request("DELETE", "/v1/templates/hello"), 404, "template_not_found")
    # Nobody takes the operator's names.
    assert_error(D.client("tpl-alice").request("POST", "/v1/templates",
                                                {"name": "base", "from": "hello"}),
                 409, "template_exists")
    # Nor another user's name, nor builds from it.
    r = bob.request("POST", "/v1/templates", dict(RECIPE))
    assert_error(r, 409, "template_exists")
    assert_error(bob.request("POST", "/v1/templates", {"name": "mine", "from": "hello"}), 400,
                 "invalid_recipe")


def test_a_template_from_a_custom_template():
    c = D.client("tpl-alice")
    recipe = {"name": "hello-plus", "from": "hello", "run": ["echo plus > /etc/sbx-plus"],
              "start_command": "echo second > /tmp/second; sleep 1000",
              "ready_check": "test -f /tmp/second"}
    r = c.request("POST", "/v1/templates", recipe)
    assert r.status == 202, r
    # Its parent cannot go while it is built from it.
    assert_error(c.request("DELETE", "/v1/templates/hello"), 409, "template_building")
    it = c.stream("GET", "/v1/templates/hello-plus/build-events", timeout=600)
    assert next(it).status == 200
    events = [ev for _, ev in it]
    assert events[-1]["type"] == "done", events[-5:]
    t = c.ok("GET", "/v1/templates/hello-plus")
    assert t["from"] == "hello" and t["added_bytes"] < 1024 * 1024, t
    sb = c.create_sandbox(template="hello-plus", ttl_seconds=300)
    sid = sb["id"]
    # The parent's packages, files and steps are there, and both start commands ran.
    assert c.sh(sid, DEB).strip() == "hello from the sbx test package"
    assert c.sh(sid, "cat /etc/sbx-built /etc/sbx-plus /tmp/second") == "built\nplus\nsecond\n"
    harness.wait_for(lambda: c.exec(sid, shell="cat /tmp/started")["stdout"] == "started\n",
                     30, what="the parent's start command")
    c.delete_sandbox(sid)
    assert c.ok("DELETE", "/v1/templates/hello-plus")["deleted"] is True


def test_delete_by_its_owner():
    c = D.client("tpl-alice")
    admin = D.client()
    assert_error(admin.request("DELETE", "/v1/templates/base"), 409, "template_builtin")
    assert_error(c.request("DELETE", "/v1/templates/nope"), 404, "template_not_found")
    r = c.ok("DELETE", "/v1/templates/hello")
    assert r == {"name": "hello", "object": "template", "deleted": True}, r
    assert_error(c.request("GET", "/v1/templates/hello"), 404, "template_not_found")
    assert_error(c.request("POST", "/v1/sandboxes", {"template": "hello"}), 400,
                 "invalid_template")
    harness.wait_for(lambda: not [n for n in os.listdir(reg().cache)
                                  if re.match(r"(hello-[0-9a-f]{64}|\.build-)", n)],
                     60, what="the deleted template's trees to go")


def test_an_admins_template_is_public():
    admin = D.client()
    bob = D.client("tpl-bob")
    head, events = build_stream(admin, {"name": "shared-tools", "run": ["echo shared > /etc/shared"]})
    assert events[-1]["type"] == "done", events[-5:]
    assert events[-1]["build"]["public"] is True, events[-1]
    t = {x["name"]: x for x in bob.ok("GET", "/v1/templates")["data"]}["shared-tools"]
    assert t["public"] is True and t["owner"] == "admin" and t["custom"] is True, t
    sb = bob.create_sandbox(template="shared-tools", ttl_seconds=300)
    assert bob.sh(sb["id"], "cat /etc/shared") == "shared\n"
    bob.delete_sandbox(sb["id"])
    assert_error(bob.request("DELETE", "/v1/templates/shared-tools"), 403, "template_not_owner")
    assert admin.ok("DELETE", "/v1/templates/shared-tools")["deleted"] is True


def test_a_restart_drops_the_build_under_way():
    c = D.client("tpl-carol")
    r = c.request("POST", "/v1/templates", {"name": "slow", "run": ["sleep 300"]})
    assert r.status == 202, r
    harness.wait_for(lambda: c.ok("GET", "/v1/templates/slow/build").get("step") == "run 1/1",
                     120, what="the slow build to reach its run step")
    sid = c.ok("GET", "/v1/templates/slow/build")["sandbox_id"]
    d = D.get()
    assert os.path.isdir(d.sandbox_dir(sid)), sid
    # A hard stop: sbxd gets no chance to clean anything up itself.
    d.restart(hard=True)
    assert_error(c.request("GET", "/v1/templates/slow/build"), 404, "template_build_not_found")
    assert_error(c.request("GET", "/v1/templates/slow"), 404, "template_not_found")
    # The next start stopped the build's sandbox (it is no pool's) and removed its tree.
    harness.wait_for(lambda: not os.path.exists(d.sandbox_dir(sid)) and
                     not [n for n in os.listdir(reg().cache) if n.startswith(".build-")],
                     90, what="the build's sandbox and tree to go")
    # The name is free to build again.
    r = c.request("POST", "/v1/templates", {"name": "slow", "run": ["true"]})
    assert r.status == 202, r
    it = c.stream("GET", "/v1/templates/slow/build-events", timeout=600)
    assert next(it).status == 200
    assert [ev for _, ev in it][-1]["type"] == "done"
    assert c.ok("DELETE", "/v1/templates/slow")["deleted"] is True
