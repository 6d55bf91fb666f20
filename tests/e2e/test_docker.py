"""The docker backend (docs/runtime.md "Docker") against a private dockerd from Debian's
docker.io: its own data root, exec root and socket in a temp dir, --bridge=none
--iptables=false (nothing on the machine changes), runsc registered as a runtime with
--network=none; stopped at the end. The base template goes into it through
POST /v1/templates/base/docker-image; sandboxes are then made on it through the API and
used: exec, files, artifacts, a terminal, the egress proxy as the only way out, a kill -9
of sbxd in the middle, runc and runsc.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import egress_upstream as eu
import harness
import wsclient
from harness import assert_error, wait_for

ENGINE = {}
D = harness.Shared()


def engine():
    """The private dockerd: its socket path (started once per module)."""
    if "sock" in ENGINE:
        return ENGINE["sock"]
    dockerd = shutil.which("dockerd")
    assert dockerd, "dockerd is missing: scripts/deps.sh installs docker.io"
    tmp = tempfile.mkdtemp(prefix="sbx-dockerd-", dir="/tmp")
    sock = os.path.join(tmp, "docker.sock")
    conf = os.path.join(tmp, "daemon.json")
    with open(conf, "w") as f:
        json.dump({"runtimes": {"runsc": {"path": shutil.which("runsc") or "/usr/bin/runsc",
                                          "runtimeArgs": ["--network=none"]}}}, f)
    log = open(os.path.join(tmp, "dockerd.log"), "ab")
    proc = subprocess.Popen(
        [dockerd, "--data-root", os.path.join(tmp, "data"), "--exec-root",
         os.path.join(tmp, "exec"), "--host", "unix://" + sock, "--pidfile",
         os.path.join(tmp, "dockerd.pid"), "--config-file", conf, "--bridge=none",
         "--iptables=false", "--ip6tables=false"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    ENGINE.update(tmp=tmp, proc=proc, sock=sock)
    wait_for(lambda: engine_get("/_ping") == b"OK", timeout=60, what="dockerd answering")
    D.kw["extra_env"] = dict(up().env(), SBX_BACKEND="docker", SBX_DOCKER_HOST=sock)
    return sock


def engine_get(path):
    import socket
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(ENGINE["sock"])
        s.sendall(b"GET %s HTTP/1.0\r\nHost: d\r\n\r\n" % path.encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        return data.split(b"\r\n\r\n", 1)[1]
    except OSError:
        return None
    finally:
        s.close()


def engine_req(method, path, body=None):
    """One request to the private engine: (status, parsed body or None)."""
    import http.client
    import socket

    class Conn(http.client.HTTPConnection):
        def connect(self):
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.connect(ENGINE["sock"])
    c = Conn("docker", timeout=60)
    try:
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data,
                  headers={"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        raw = r.read()
        return r.status, json.loads(raw) if raw.strip() else None
    finally:
        c.close()


def containers():
    return json.loads(engine_get("/containers/json?all=1"))


def docker_config(name, **docker):
    """A stored docker configuration on sbx-base with these docker fields."""
    a = admin()
    imported()
    return a.ok("POST", "/v1/sandbox-configs", {
        "name": name, "config": {"backend": "docker",
                                 "docker": dict({"image": "sbx-base"}, **docker)}},
        status=201)["id"]


class engine_paused:
    """The private dockerd stopped (SIGSTOP) for the with-block: it accepts connections
    (the kernel does) and answers nothing, as a hung engine."""

    def __enter__(self):
        os.kill(ENGINE["proc"].pid, signal.SIGSTOP)

    def __exit__(self, *exc):
        os.kill(ENGINE["proc"].pid, signal.SIGCONT)


def up():
    if "u" not in ENGINE:
        ENGINE["u"] = eu.Upstreams()
    return ENGINE["u"]


def teardown_module():
    D.close()
    if "u" in ENGINE:
        ENGINE.pop("u").close()
    proc = ENGINE.get("proc")
    if proc:
        # Containers sbxd left (a failed test's) go with the engine's data root.
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        subprocess.run(["umount", "-R", ENGINE["tmp"]], stderr=subprocess.DEVNULL)
        shutil.rmtree(ENGINE["tmp"], ignore_errors=True)


def admin():
    engine()
    return D.get().client()


def imported():
    """The base template, imported into the engine once, as an operator does it: with the
    CLI's `sbx template export --docker base` (POST /v1/templates/base/docker-image)."""
    def make(d):
        p = cli(d.client().key, "--json", "template", "export", "--docker", "base")
        assert p.returncode == 0, p
        return json.loads(p.stdout)
    engine()
    return D.once("image", make)


def cli(key, *args):
    """The sbx CLI against the shared daemon with key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SBX_")}
    harness.sanitizer_env(env)
    env.update(SBX_URL="http://127.0.0.1:%d" % D.get().port, SBX_API_KEY=key,
               HOME=ENGINE["tmp"])
    return subprocess.run([os.path.join(harness.build_dir(), "sbx")] + list(args), env=env,
                          capture_output=True, text=True, timeout=600)


def client():
    imported()
    return D.once("alice", lambda d: d.client(d.client().create_key("alice")["key"]))


def sandbox(name="main", **fields):
    c = client()
    return c, D.once("sb:" + name, lambda d: c.create_sandbox(ttl_seconds=1800, **fields))["id"]


def test_template_imported_as_image():
    img = imported()
    assert img["object"] == "docker_image" and img["template"] == "base", img
    assert img["image"] == "sbx-base" and img["id"].startswith("sha256:"), img
    assert img["digest"].startswith("sha256:"), img
    tags = [t for i in json.loads(engine_get("/images/json")) for t in i["RepoTags"] or []]
    assert "sbx-base:latest" in tags, tags
    c = client()
    assert_error(c.request("POST", "/v1/templates/base/docker-image"), 403, "admin_required")
    assert_error(admin().request("POST", "/v1/templates/nosuch/docker-image"), 404,
                 "template_not_found")
    p = cli(c.key, "template", "export", "--docker", "base")
    assert p.returncode == 3 and "admin_required" in p.stderr, p
    p = cli(c.key, "template", "export", "base")
    assert p.returncode == 2 and "--docker" in p.stderr, p


def test_exec_runs_in_a_container_with_the_agent_as_init():
    c, sid = sandbox()
    sb = c.get_sandbox(sid)
    assert sb["runtime"] == "docker", sb
    out = c.sh(sid, "cat /proc/1/cmdline | tr '\\0' ' '; echo; id -un; hostname")
    assert out.splitlines() == ["/opt/sbx/sbx-agent ", "user", "sandbox"], out
    mine = [x for x in containers() if x["Labels"].get("sbx.id") == sid]
    assert len(mine) == 1 and mine[0]["Names"] == ["/sbx-" + sid], mine
    assert mine[0]["Image"] == "sbx-base" and mine[0]["State"] == "running", mine
    r = c.exec(sid, shell="exit 3")
    assert r["exit_code"] == 3, r


def test_limits_are_the_engines():
    c, sid = sandbox()
    info = json.loads(engine_get("/containers/sbx-%s/json" % sid))
    hc = info["HostConfig"]
    sb = c.get_sandbox(sid)
    assert hc["Memory"] == sb["limits"]["memory_mb"] << 20, (hc["Memory"], sb["limits"])
    assert hc["MemorySwap"] == hc["Memory"], hc
    assert hc["PidsLimit"] == sb["limits"]["pids"], hc
    assert hc["NetworkMode"] == "none" and hc["ReadonlyRootfs"] is True, hc


def test_files_and_artifacts():
    c, sid = sandbox()
    body = "ș ț ă\n".encode()
    r = c.request("PUT", "/v1/sandboxes/%s/files/in/a.txt" % sid, raw=body)
    assert r.status == 200, r
    assert c.sh(sid, "cat /workspace/in/a.txt").encode() == body
    c.sh(sid, "mkdir -p /workspace/out && printf 'hello' > /workspace/out/notes.txt")
    assert c.request("GET", "/v1/sandboxes/%s/files/out/notes.txt" % sid).raw == b"hello"
    r = c.request("GET", "/v1/sandboxes/%s/artifacts" % sid)
    assert r.status == 200, r
    arts = {a["path"]: a for a in r.body["data"]}
    assert arts["out/notes.txt"]["size"] == 5, arts


def test_a_volume_is_mounted_in_the_container():
    """A volume on the docker backend: the container binds it where the create says, a
    write inside is read through the volume's routes, and read_only holds."""
    c = client()
    vid = c.ok("POST", "/v1/volumes", {"name": "dock-vol"}, status=201)["id"]
    sid = c.create_sandbox(ttl_seconds=600, volumes=[{"volume": vid, "path": "/data"},
                                                     {"volume": vid, "path": "/ro",
                                                      "read_only": True}])["id"]
    try:
        assert c.sh(sid, "echo from-docker > /data/d.txt && cat /ro/d.txt") == "from-docker\n"
        assert c.request("GET", "/v1/volumes/%s/files/d.txt" % vid).raw == b"from-docker\n"
        r = c.exec(sid, shell="touch /ro/x")
        assert r["exit_code"] != 0 and "Read-only" in r["stderr"], r
        binds = json.loads(engine_get("/containers/sbx-%s/json" % sid))["HostConfig"]["Binds"]
        assert any(b.endswith(":/data:rw") for b in binds), binds
        assert any(b.endswith(":/ro:ro") for b in binds), binds
    finally:
        c.delete_sandbox(sid)
        c.ok("DELETE", "/v1/volumes/" + vid)


def test_terminal():
    c, sid = sandbox()
    tk = c.ok("POST", "/v1/sandboxes/%s/terminal-ticket" % sid)["ticket"]
    ws = wsclient.connect(D.get().port, "/v1/sandboxes/%s/terminal?ticket=%s&cols=80&rows=24"
                          % (sid, tk))
    ready = ws.recv_json()
    assert ready["type"] == "ready" and ready["backend"] == "docker", ready
    ws.send_binary(b"echo $((6*7))x\n")
    out, _ = ws.read_until("42x", 20)
    ws.close()


def test_no_route_out_but_the_egress_proxy_reaches_allowed_hosts():
    c, sid = sandbox("egress", egress={"mode": "allowlist", "domains": ["allowed.example.com"]})
    up().install(c, sid)
    # No interface but loopback, no route: a direct connection cannot leave.
    out = c.sh(sid, "cat /proc/net/route | wc -l; ls /sys/class/net")
    assert out.split() == ["1", "lo"], out
    connect = "python3 -c \"import socket; socket.create_connection(('%s', %d), 3)\""
    r = c.exec(sid, shell=connect % ("1.1.1.1", 443))
    assert r["exit_code"] != 0 and "Network is unreachable" in r["stderr"], r
    # The upstream's 127.x address is the container's own loopback: nothing listens there.
    r = c.exec(sid, shell=connect % (up().addr, 443))
    assert r["exit_code"] != 0 and "Connection refused" in r["stderr"], r
    r = eu.probe(c, sid, "fetch", "https://allowed.example.com/x")
    assert r == {"ok": True, "status": 200,
                 "body": "hello from allowed.example.com via https"}, r
    r = eu.probe(c, sid, "connect", "other.example.com:443")
    assert r["status_line"].startswith("HTTP/1.1 403"), r


def test_sandbox_survives_kill9_of_sbxd():
    c, sid = sandbox("restart")
    c.sh(sid, "echo before > /workspace/mark; sleep 600 >/dev/null 2>&1 &")
    D.get().restart(hard=True)
    c2 = D.get().client(c.key)
    out = c2.sh(sid, "cat /workspace/mark; pgrep -c sleep")
    assert out.split() == ["before", "1"], out
    assert c2.get_sandbox(sid)["status"] == "running"
    c2.delete_sandbox(sid)  # at most 3 running per key


def test_delete_removes_the_container():
    c, sid = sandbox("gone")
    assert any(x["Labels"].get("sbx.id") == sid for x in containers())
    c.delete_sandbox(sid)
    wait_for(lambda: not any(x["Labels"].get("sbx.id") == sid for x in containers()),
             timeout=30, what="the container removed")


def test_runsc_runtime_through_a_configuration():
    info = json.loads(engine_get("/info"))
    assert "runsc" in info["Runtimes"], info["Runtimes"]
    a = admin()
    cfg = a.ok("POST", "/v1/sandbox-configs", {
        "name": "docker-runsc", "config": {
            "backend": "docker",
            "docker": {"image": "sbx-base", "runtime": "runsc", "network_mode": "none",
                       "memory_limit_mb": 512, "pids_limit": 128, "cpu_limit": 1}}},
        status=201)
    assert cfg["sandbox_type"] == "docker", cfg
    assert cfg["config"]["docker"]["runtime"] == "runsc", cfg
    sb = a.create_sandbox(config_id=cfg["id"], ttl_seconds=600)
    hc = json.loads(engine_get("/containers/sbx-%s/json" % sb["id"]))["HostConfig"]
    assert hc["Runtime"] == "runsc" and hc["Memory"] == 512 << 20, hc
    assert hc["PidsLimit"] == 128 and hc["NanoCpus"] == 10 ** 9, hc
    # gVisor's own kernel answers, not the host's.
    out = a.sh(sb["id"], "uname -r")
    assert out.strip() == "4.4.0" and out.strip() != os.uname().release, out
    a.delete_sandbox(sb["id"])


def test_remote_engines_are_refused_clearly():
    a = admin()
    r = a.request("POST", "/v1/sandbox-configs", {
        "name": "docker-remote", "config": {
            "backend": "docker",
            "docker": {"image": "sbx-base", "host": "tcp://10.0.0.5:2376",
                       "tls_cert_path": "/etc/sbx/docker-certs"}}})
    assert_error(r, 400, "docker_remote_unsupported")
    r = a.request("POST", "/v1/sandbox-configs", {
        "name": "docker-noimage", "config": {"backend": "docker", "docker": {}}})
    assert_error(r, 400, "invalid_sandbox_config")


def test_probe_reports_the_engine_and_its_runtime():
    a = admin()
    conf = {"backend": "docker", "docker": {"image": "sbx-base", "runtime": "runsc"}}
    r = a.ok("POST", "/v1/system/sandbox-check", {"config": conf})
    d = [x for x in r["checks"] if x["name"] == "docker"]
    assert len(d) == 1 and d[0]["ok"] is True, r
    version = json.loads(engine_get("/version"))["Version"]
    assert ("engine %s" % version) in d[0]["message"], d
    assert "runtime runsc present" in d[0]["message"], d
    conf["docker"]["runtime"] = "nosuch"
    r = a.ok("POST", "/v1/system/sandbox-check", {"config": conf})
    d = [x for x in r["checks"] if x["name"] == "docker"][0]
    assert d["ok"] is False and d["reason"] == "docker_runtime_missing", d
    assert r["ok"] is False, r


def test_idle_ttl_stops_an_idle_container_and_the_next_exec_starts_it_again():
    """idle_ttl_seconds: a sandbox with no stream open to its agent that long has its
    container stopped (kept as failed, state_reason idle, its files kept); a command that
    runs longer than the TTL is not idle; the next exec starts the container again."""
    a = admin()
    cfg = docker_config("docker-idle", idle_ttl_seconds=2)
    sid = a.create_sandbox(config_id=cfg, ttl_seconds=600)["id"]
    try:
        a.sh(sid, "echo kept > /workspace/mark")
        r = a.exec(sid, shell="sleep 3; echo slept")
        assert r["exit_code"] == 0 and r["stdout"] == "slept\n", r
        wait_for(lambda: a.get_sandbox(sid)["status"] == "failed", timeout=30,
                 what="the idle sandbox stopped")
        sb = a.get_sandbox(sid)
        assert sb["state_reason"] == "idle", sb
        wait_for(lambda: not any(x["Labels"].get("sbx.id") == sid for x in containers()),
                 timeout=30, what="its container gone")
        assert a.sh(sid, "cat /workspace/mark") == "kept\n"
        assert a.get_sandbox(sid)["status"] == "running"
        assert any(x["Labels"].get("sbx.id") == sid and x["State"] == "running"
                   for x in containers())
        audit = a.ok("GET", "/v1/audit?action=sandbox.failed&sandbox_id=" + sid)["data"]
        assert [e["outcome"] for e in audit] == ["idle"], audit
    finally:
        a.delete_sandbox(sid)


def test_http_timeout_bounds_each_engine_request():
    """http_timeout_sec: the probe's engine check and the holder's requests give up on an
    engine that does not answer after that long, not after the built-in 10 s / 30 s."""
    a = admin()
    cfg = docker_config("docker-timeout", http_timeout_sec=1)
    conf = {"backend": "docker", "docker": {"image": "sbx-base", "http_timeout_sec": 1}}
    with engine_paused():
        r = a.ok("POST", "/v1/system/sandbox-check", {"config": conf}, timeout=30)
        d = [x for x in r["checks"] if x["name"] == "docker"][0]
        assert d["ok"] is False and d["reason"] == "docker_unreachable", d
        assert "Timeout" in d["message"] and d["latency_ms"] < 5000, d
        t0 = time.monotonic()
        r = a.request("POST", "/v1/sandboxes", {"config_id": cfg, "ttl_seconds": 60},
                      timeout=120)
        took = time.monotonic() - t0
    assert r.status >= 400 and took < 20, (r, took)
    assert "Timeout" in json.dumps(r.body) or "timed out" in json.dumps(r.body), r


def test_inventory_is_checked_against_the_engines_containers():
    a = admin()
    cfg = docker_config("docker-inv")
    sid = a.create_sandbox(config_id=cfg, ttl_seconds=600)["id"]
    try:
        inv = a.ok("GET", "/v1/sandbox-configs/%s/sandboxes" % cfg)
        assert inv["verified"] is True and inv["engine"] == {"reachable": True,
                                                             "unclaimed": []}, inv
        row = [x for x in inv["data"] if x["id"] == sid][0]
        assert row["engine"] == {"container": "/sbx-" + sid, "state": "running"}, row
        info = json.loads(engine_get("/containers/sbx-%s/json" % sid))
        assert info["Config"]["Labels"] == {"sbx.id": sid, "sbx.config": cfg}, info["Config"]
        # A container of this configuration the engine runs with no sandbox behind it.
        st, made = engine_req("POST", "/containers/create?name=sbx-stray-" + sid, {
            "Image": "sbx-base", "Cmd": ["/bin/true"],
            "Labels": {"sbx.id": "stray-" + sid, "sbx.config": cfg}})
        assert st == 201, made
        try:
            inv = a.ok("GET", "/v1/sandbox-configs/%s/sandboxes" % cfg)
            assert inv["verified"] is False, inv
            assert inv["engine"]["unclaimed"] == [
                {"id": "stray-" + sid, "container": "/sbx-stray-" + sid, "state": "created"}], inv
        finally:
            engine_req("DELETE", "/containers/%s?force=1" % made["Id"])
    finally:
        a.delete_sandbox(sid)


def test_deep_probe_runs_a_container_on_the_engine():
    a = admin()
    imported()
    since = int(time.time()) - 1
    conf = {"backend": "docker", "docker": {"image": "sbx-base", "runtime": "runc"}}
    r = a.ok("POST", "/v1/system/sandbox-check", {"config": conf, "deep": True}, timeout=180)
    by = {c["name"]: c for c in r["checks"]}
    assert by["docker"]["ok"] is True and by["sandbox_create"]["ok"] is True, r
    assert by["script"]["ok"] is True and by["sandbox_destroy"]["ok"] is True, r
    until = int(time.time()) + 1
    flt = json.dumps({"type": ["container"], "event": ["create"]})
    import urllib.parse
    raw = engine_get("/events?since=%d&until=%d&filters=%s"
                     % (since, until, urllib.parse.quote(flt)))
    events = [json.loads(x) for x in raw.decode().splitlines() if x.strip().startswith("{")]
    made = [e for e in events if e["Actor"]["Attributes"].get("image") == "sbx-base"
            and e["Actor"]["Attributes"].get("sbx.id")]
    assert made, events


def core_checks(runtime):
    """The backend suites' core checks on a docker sandbox whose engine runtime is
    runtime, made from a configuration whose network lets one host out: exec and its exit
    code, files in and out, artifacts, and the egress suite's bypass checks (no interface
    but loopback, no route, no DNS, direct connections refused, the proxy the only way out
    and its policy held)."""
    a = admin()
    cfg = a.ok("POST", "/v1/sandbox-configs", {
        "name": "docker-core-" + runtime, "config": {
            "backend": "docker", "docker": {"image": "sbx-base", "runtime": runtime},
            "network": {"deny_egress_by_default": True,
                        "allow_out": ["allowed.example.com"]}}}, status=201)["id"]
    imported()
    sid = a.create_sandbox(config_id=cfg, ttl_seconds=600)["id"]
    try:
        hc = json.loads(engine_get("/containers/sbx-%s/json" % sid))["HostConfig"]
        assert hc["Runtime"] == runtime and hc["NetworkMode"] == "none", hc
        r = a.exec(sid, shell="echo out; echo err >&2; exit 7")
        assert (r["exit_code"], r["stdout"], r["stderr"]) == (7, "out\n", "err\n"), r
        assert a.request("PUT", "/v1/sandboxes/%s/files/in.txt" % sid, raw=b"in").status == 200
        a.sh(sid, "mkdir -p /workspace/out && tr a-z A-Z < /workspace/in.txt "
                  "> /workspace/out/up.txt")
        assert a.request("GET", "/v1/sandboxes/%s/files/out/up.txt" % sid).raw == b"IN"
        arts = a.ok("GET", "/v1/sandboxes/%s/artifacts" % sid)["data"]
        assert [x["path"] for x in arts] == ["out/up.txt"], arts
        up().install(a, sid)
        # /proc/net, which gVisor fills too (its /sys/class/net is empty).
        out = a.sh(sid, "tail -n +3 /proc/net/dev | cut -d: -f1; cat /proc/net/route | wc -l")
        assert out.split() == ["lo", "1"], out
        py = "python3 -c \"import socket; %s\""
        for what in ("socket.create_connection(('1.1.1.1', 443), 3)",
                     "socket.create_connection(('%s', 443), 3)" % up().addr,
                     "socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
                     ".sendto(b'x', ('8.8.8.8', 53))",
                     "socket.getaddrinfo('allowed.example.com', 443)"):
            r = a.exec(sid, shell=py % what)
            assert r["exit_code"] != 0, (what, r)
        r = eu.probe(a, sid, "fetch", "https://allowed.example.com/x")
        assert r == {"ok": True, "status": 200,
                     "body": "hello from allowed.example.com via https"}, r
        r = eu.probe(a, sid, "connect", "other.example.com:443")
        assert r["status_line"].startswith("HTTP/1.1 403"), r
    finally:
        a.delete_sandbox(sid)


def test_core_checks_under_runc():
    core_checks("runc")


def test_core_checks_under_runsc():
    core_checks("runsc")


def test_a_fork_runs_its_parents_image_and_runtime():
    """A docker sandbox has no memory snapshots: a fork is a cold copy over the copied
    workspace, in a container of the parent's configuration (runsc here), not the
    defaults."""
    a = admin()
    cfg = docker_config("docker-fork", runtime="runsc")
    sid = a.create_sandbox(config_id=cfg, ttl_seconds=600)["id"]
    kid = None
    try:
        a.sh(sid, "echo parent > /workspace/who")
        fork = a.ok("POST", "/v1/sandboxes/%s/fork" % sid, {}, timeout=180)["data"][0]
        kid = fork["id"]
        assert fork["restored"] is False and not fork.get("error"), fork
        assert a.sh(kid, "cat /workspace/who; uname -r").split() == ["parent", "4.4.0"]
        info = json.loads(engine_get("/containers/sbx-%s/json" % kid))
        assert info["HostConfig"]["Runtime"] == "runsc", info["HostConfig"]
        assert info["Config"]["Image"] == "sbx-base", info["Config"]
        assert a.sh(sid, "cat /workspace/who") == "parent\n"
    finally:
        if kid:
            a.delete_sandbox(kid)
        a.delete_sandbox(sid)
