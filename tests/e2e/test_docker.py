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


def data_root(tmp):
    """A dockerd's data root in tmp, on a tmpfs of its own: the imported base image is
    1.2 GB in tens of thousands of files, which on the disk took a third longer to write
    and seconds (over a minute under load) to remove; in memory it goes with one umount."""
    data = os.path.join(tmp, "data")
    os.mkdir(data)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4g,mode=0711", "sbx-dockerd", data],
                   check=True)
    return data


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
        [dockerd, "--data-root", data_root(tmp), "--exec-root",
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


def stop_dockerd(proc, tmp):
    # Containers sbxd left (a failed test's) go with the engine's data root.
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    # The data root's tmpfs (the image) and any mount the engine left go at once; what
    # stays on the disk is small (exec root, log, certificates).
    harness.detach_mounts_beneath(tmp)
    shutil.rmtree(tmp)


def teardown_module():
    D.close()
    if REMOTE.get("proc"):
        stop_dockerd(REMOTE["proc"], REMOTE["tmp"])
    if "u" in ENGINE:
        ENGINE.pop("u").close()
    if ENGINE.get("proc"):
        stop_dockerd(ENGINE["proc"], ENGINE["tmp"])


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


def test_docker_fields_are_checked():
    """host: empty or tcp://HOST:PORT, which needs tls_cert_path, a directory sbxd reads
    ca.pem, cert.pem and key.pem from."""
    a = admin()
    certs = remote()["certs"]
    bad = [{"host": "tcp://10.0.0.5:2376"},
           {"host": "tcp://10.0.0.5:2376", "tls_cert_path": "/nonexistent/certs"},
           {"host": "ssh://10.0.0.5", "tls_cert_path": certs},
           {"host": "tcp://10.0.0.5", "tls_cert_path": certs},
           {}]
    for fields in bad:
        r = a.request("POST", "/v1/sandbox-configs", {
            "name": "docker-bad", "config": {"backend": "docker", "docker": dict(
                {"image": "sbx-base"} if fields else {}, **fields)}})
        assert_error(r, 400, "invalid_sandbox_config")
    r = a.request("POST", "/v1/sandbox-configs", {
        "name": "docker-bad", "config": {"backend": "docker", "docker": {
            "image": "sbx-base", "host": "tcp://10.0.0.5:2376",
            "tls_cert_path": "/nonexistent/certs"}}})
    assert "ca.pem" in r.body["error"]["message"], r.body


# ---- a remote engine: a second private dockerd on 127.0.0.1, TCP with TLS ----

REMOTE = {}


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
            "/CN=" + name, "-keyout", name + "-key.pem", "-out", name + ".pem", cwd=d)


def make_cert(d, ca, name, ext):
    """A key and a certificate for name signed by ca (in d), with the extensions ext."""
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write(ext)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=" + name, "-keyout",
            name + "-key.pem", "-out", name + ".csr", cwd=d)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + "-key.pem",
            "-CAcreateserial", "-days", "2", "-extfile", name + ".ext", "-out",
            name + "-cert.pem", cwd=d)


def cert_dir(pki, out, ca, client):
    """Docker's layout for a client in out: ca.pem (the engine's CA), cert.pem, key.pem."""
    os.mkdir(out)
    shutil.copy(os.path.join(pki, ca + ".pem"), os.path.join(out, "ca.pem"))
    shutil.copy(os.path.join(pki, client + "-cert.pem"), os.path.join(out, "cert.pem"))
    shutil.copy(os.path.join(pki, client + "-key.pem"), os.path.join(out, "key.pem"))
    return out


def remote():
    """The second private dockerd, listening only on tcp://127.0.0.1:PORT with
    --tlsverify and certificates made here by openssl (a CA, the engine's certificate
    for 127.0.0.1, a client's; and a client signed by another CA: the wrong one). The base
    image is copied over from the first engine."""
    if "host" in REMOTE:
        return REMOTE
    engine()
    tmp = tempfile.mkdtemp(prefix="sbx-dockerd-tls-", dir="/tmp")
    pki = os.path.join(tmp, "pki")
    os.mkdir(pki)
    make_ca(pki, "ca")
    make_ca(pki, "other-ca")
    make_cert(pki, "ca", "server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    make_cert(pki, "ca", "client", "extendedKeyUsage=clientAuth\n")
    make_cert(pki, "other-ca", "stranger", "extendedKeyUsage=clientAuth\n")
    certs = cert_dir(pki, os.path.join(tmp, "certs"), "ca", "client")
    wrong = cert_dir(pki, os.path.join(tmp, "wrong"), "ca", "stranger")
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    log = open(os.path.join(tmp, "dockerd.log"), "ab")
    proc = subprocess.Popen(
        [shutil.which("dockerd"), "--data-root", data_root(tmp), "--exec-root",
         os.path.join(tmp, "exec"), "--pidfile", os.path.join(tmp, "dockerd.pid"),
         "--tlsverify", "--tlscacert", os.path.join(pki, "ca.pem"), "--tlscert",
         os.path.join(pki, "server-cert.pem"), "--tlskey", os.path.join(pki, "server-key.pem"),
         "-H", "tcp://127.0.0.1:%d" % port, "--bridge=none", "--iptables=false",
         "--ip6tables=false"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    REMOTE.update(tmp=tmp, proc=proc, port=port, certs=certs, wrong=wrong,
                  host="tcp://127.0.0.1:%d" % port)
    wait_for(lambda: remote_req("GET", "/_ping", raw=True) == (200, b"OK"), timeout=60,
             what="the TLS dockerd answering")
    return REMOTE


def remote_conn(timeout=60):
    import http.client
    import ssl
    ctx = ssl.create_default_context(cafile=os.path.join(REMOTE["certs"], "ca.pem"))
    ctx.load_cert_chain(os.path.join(REMOTE["certs"], "cert.pem"),
                        os.path.join(REMOTE["certs"], "key.pem"))
    return http.client.HTTPSConnection("127.0.0.1", REMOTE["port"], context=ctx,
                                       timeout=timeout)


def remote_req(method, path, body=None, raw=False):
    """One request to the TLS engine with the right client certificate."""
    c = remote_conn()
    try:
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data,
                  headers={"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        out = r.read()
        return r.status, out if raw else (json.loads(out) if out.strip() else None)
    except OSError:
        return None, None
    finally:
        c.close()


def remote_image():
    """sbx-base on the TLS engine, imported as an operator does it for a remote engine:
    `sbx template export --docker base --config ID` with a docker configuration naming that
    engine (POST /v1/templates/base/docker-image {"config_id"}): the template's tree streams
    from this host straight into the remote engine over TLS."""
    def load(d):
        a = admin()
        cfg = a.ok("POST", "/v1/sandbox-configs", {
            "name": "docker-remote-import", "config": {"backend": "docker", "docker": {
                "image": "sbx-base", "host": REMOTE["host"],
                "tls_cert_path": REMOTE["certs"]}}}, status=201)["id"]
        p = cli(a.key, "--json", "template", "export", "--docker", "base", "--config", cfg)
        assert p.returncode == 0, p
        img = json.loads(p.stdout)
        assert img["engine"] == REMOTE["host"] and img["config_id"] == cfg, img
        st, info = remote_req("GET", "/images/sbx-base/json")
        assert st == 200 and info["Id"] == img["id"], (st, info, img)
        audit = a.ok("GET", "/v1/audit?action=template.docker_export")["data"]
        assert audit[0]["outcome"] == "ok", audit
        # A configuration that is not docker's, and one that does not exist.
        assert_error(a.request("POST", "/v1/templates/base/docker-image",
                               {"config_id": "cfg_nosuch"}), 404, "sandbox_config_not_found")
        assert_error(a.request("POST", "/v1/templates/base/docker-image",
                               {"config_id": cfg, "host": "tcp://10.0.0.5:2376"}), 400,
                     "invalid_request")
        return True
    remote()
    return D.once("remote-image", load)


def remote_config(name, certs=None, **docker):
    remote_image()
    return admin().ok("POST", "/v1/sandbox-configs", {
        "name": name, "config": {"backend": "docker", "docker": dict(
            {"image": "sbx-base", "host": REMOTE["host"],
             "tls_cert_path": certs or REMOTE["certs"]}, **docker)}}, status=201)["id"]


def remote_containers(sid):
    st, out = remote_req("GET", "/containers/json?all=1")
    assert st == 200, out
    return [x for x in out if x["Labels"].get("sbx.id") == sid]


def remote_volume(sid):
    st, out = remote_req("GET", "/volumes/sbx-" + sid)
    return out if st == 200 else None


def test_remote_engine_runs_the_sandbox_in_a_volume_with_the_agent_copied_in():
    """A configuration of document 002's docker shape naming a remote engine (host +
    tls_cert_path): the container runs there with the agent copied in as its init, the
    workspace a Docker volume there (the user's, seeded with out/), exec works, the
    sandbox survives a kill -9 of sbxd, and delete removes the container and the volume."""
    a = admin()
    cfg = remote_config("docker-remote")
    got = a.ok("GET", "/v1/sandbox-configs/" + cfg)["config"]["docker"]
    assert got["host"] == REMOTE["host"] and got["tls_cert_path"] == REMOTE["certs"], got
    r = a.ok("POST", "/v1/system/sandbox-check", {"config_id": cfg})
    d = [x for x in r["checks"] if x["name"] == "docker"][0]
    assert d["ok"] is True and ("at %s" % REMOTE["host"]) in d["message"], d
    sid = a.create_sandbox(config_id=cfg, ttl_seconds=600)["id"]
    try:
        assert not any(x["Labels"].get("sbx.id") == sid for x in containers())
        mine = remote_containers(sid)
        assert len(mine) == 1 and mine[0]["State"] == "running", mine
        out = a.sh(sid, "cat /proc/1/cmdline | tr '\\0' ' '; echo; id -un; "
                        "stat -c '%U %a' /workspace /workspace/out; test -w /workspace && echo w")
        assert out.splitlines() == ["/opt/sbx/sbx-agent ", "user", "user 755", "user 755",
                                    "w"], out
        vol = remote_volume(sid)
        assert vol and vol["Labels"] == {"sbx.id": sid}, vol
        info = remote_req("GET", "/containers/sbx-%s/json" % sid)[1]
        assert sorted((m["Type"], m["Name"], m["Destination"]) for m in info["Mounts"]) == [
            ("volume", "sbx-" + sid, "/home/user"), ("volume", "sbx-" + sid, "/workspace")], info
        assert not info["HostConfig"]["Binds"], info["HostConfig"]
        # Files through exec (the files API goes through the agent for such a workspace).
        a.sh(sid, "printf 'ș ț' > /workspace/out/r.txt; echo x > /home/user/h")
        assert a.sh(sid, "cat /workspace/out/r.txt /workspace/h") == "ș ț" + "x\n"
        # The file routes and artifacts go through the agent for such a workspace.
        assert a.request("GET", "/v1/sandboxes/%s/files/out/r.txt" % sid).raw == "ș ț".encode()
        r = a.request("PUT", "/v1/sandboxes/%s/files/in/up.txt" % sid, raw=b"up")
        assert r.status == 200, r
        assert a.sh(sid, "cat /workspace/in/up.txt") == "up"
        arts = a.ok("GET", "/v1/sandboxes/%s/artifacts" % sid)["data"]
        assert [x["path"] for x in arts] == ["out/r.txt"], arts
        r = a.exec(sid, shell="exit 5")
        assert r["exit_code"] == 5, r
        # A fork or pause would copy a workspace this host does not have.
        assert_error(a.request("POST", "/v1/sandboxes/%s/pause" % sid), 409,
                     "not_supported_on_provider")
        inv = a.ok("GET", "/v1/sandbox-configs/%s/sandboxes" % cfg)
        assert inv["verified"] is True and inv["engine"]["reachable"] is True, inv
        # kill -9 of sbxd: the shim keeps the attach; the new sbxd adopts it.
        a.sh(sid, "sleep 600 >/dev/null 2>&1 &")
        D.get().restart(hard=True)
        a = D.get().client(a.key)
        out = a.sh(sid, "cat /workspace/out/r.txt; echo; pgrep -c sleep")
        assert out.split() == ["ș", "ț", "1"], out
        assert a.get_sandbox(sid)["status"] == "running"
    finally:
        a.delete_sandbox(sid)
    wait_for(lambda: not remote_containers(sid) and remote_volume(sid) is None, timeout=60,
             what="the container and the volume removed from the remote engine")


def test_remote_engine_with_a_wrong_certificate_says_so():
    """A client certificate the engine's CA did not sign: the probe's docker check fails
    with docker_tls_error, and a create from it fails with the TLS error."""
    a = admin()
    cfg = remote_config("docker-wrong-cert", certs=REMOTE["wrong"])
    r = a.ok("POST", "/v1/system/sandbox-check", {"config_id": cfg})
    d = [x for x in r["checks"] if x["name"] == "docker"][0]
    assert d["ok"] is False and d["reason"] == "docker_tls_error", d
    assert REMOTE["wrong"] in d["message"] and r["ok"] is False, d
    r = a.request("POST", "/v1/sandboxes", {"config_id": cfg, "ttl_seconds": 60}, timeout=120)
    assert r.status >= 400, r
    assert "TLS" in json.dumps(r.body) or "SSL" in json.dumps(r.body), r.body
    inv = a.ok("GET", "/v1/sandbox-configs/%s/sandboxes" % cfg)
    assert inv["engine"]["reachable"] is False and inv["engine"]["error"], inv


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
            # The admin's way out: only the unclaimed one goes, the live sandbox's stays.
            assert_error(client().request("DELETE", "/v1/sandbox-configs/%s/unclaimed" % cfg),
                         403, "admin_required")
            r = a.ok("DELETE", "/v1/sandbox-configs/%s/unclaimed" % cfg)
            assert r == {"object": "unclaimed_removal", "config_id": cfg, "failed": [],
                         "removed": [{"id": "stray-" + sid, "container": "/sbx-stray-" + sid}]}, r
            assert [x["Labels"]["sbx.id"] for x in containers()
                    if x["Labels"].get("sbx.config") == cfg] == [sid]
            inv = a.ok("GET", "/v1/sandbox-configs/%s/sandboxes" % cfg)
            assert inv["verified"] is True and inv["engine"]["unclaimed"] == [], inv
            audit = a.ok("GET", "/v1/audit?action=sandbox_config.unclaimed_remove")["data"]
            assert audit and audit[0]["outcome"] == "ok", audit
            assert_error(a.request("DELETE", "/v1/sandbox-configs/cfg_nosuch/unclaimed"), 404,
                         "sandbox_config_not_found")
        finally:
            engine_req("DELETE", "/containers/%s?force=1" % made["Id"])
    finally:
        a.delete_sandbox(sid)


def test_inventory_of_an_engine_that_hangs_is_unverified_and_holds_no_loop():
    """The engine's list is read on a worker thread: while the engine hangs (SIGSTOP) the
    daemon answers other requests at once, and the inventory, when the configuration's
    http_timeout_sec has passed, says the engine is unreachable and its rows unverified;
    a delete then needs force."""
    import threading
    a = admin()
    cfg = docker_config("docker-hang", http_timeout_sec=3)
    sid = a.create_sandbox(config_id=cfg, ttl_seconds=600)["id"]
    try:
        got = {}
        with engine_paused():
            t = threading.Thread(target=lambda: got.update(inv=a.ok(
                "GET", "/v1/sandbox-configs/%s/sandboxes" % cfg, timeout=60)))
            t0 = time.monotonic()
            t.start()
            time.sleep(0.3)  # not for correctness: lets the inventory reach the engine first
            r = a.request("GET", "/healthz")
            quick = time.monotonic() - t0
            pending = "inv" not in got
            t.join(60)
            r2 = a.request("DELETE", "/v1/sandbox-configs/" + cfg, timeout=60)
        assert r.status == 200 and quick < 2.5 and pending and "inv" in got, (r, quick, got)
        inv = got["inv"]
        assert inv["verified"] is False and inv["engine"]["reachable"] is False, inv
        assert "Timeout" in inv["engine"]["error"], inv
        row = [x for x in inv["data"] if x["id"] == sid][0]
        assert row["verified"] is False and row["engine"] is None, row
        assert_error(r2, 409, "sandbox_inventory_unverifiable")
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


# ---- the CLI and the Python SDK against docker sandboxes ----

SDK_SCRIPT = r"""
import json, sys
from sbx import Sbx
sid, cfg = sys.argv[1], sys.argv[2]
s = Sbx()
if True:
    if sid == "-":
        sid = s.sandboxes.create(config_id=cfg, ttl_seconds=600)["id"]
    out = {"id": sid, "runtime": s.sandboxes.get(sid)["runtime"]}
    r = s.sandboxes.exec(sid, shell="cat /workspace/in/cli.txt; uname -r; exit 4")
    out["exec"] = [r["exit_code"], r["stdout"]]
    s.sandboxes.files.put(sid, "sdk/in.txt", "from the sdk ș")
    r = s.sandboxes.exec(sid, shell="mkdir -p /workspace/out; "
                         "tr a-z A-Z < /workspace/sdk/in.txt > /workspace/out/sdk.txt")
    out["get"] = s.sandboxes.files.get(sid, "out/sdk.txt").decode()
    out["artifacts"] = sorted(a["path"] for a in s.sandboxes.artifacts(sid)["data"])
    print(json.dumps(out))
s.close()
"""


def sdk(key, sid, cfg):
    """The Python SDK (sdk/python, from the checkout, under Debian's python3 with httpx)
    against the shared daemon: creates a sandbox from cfg when sid is "-", then uses it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SBX_")}
    env.update(SBX_URL="http://127.0.0.1:%d" % D.get().port, SBX_API_KEY=key,
               PYTHONPATH=os.path.join(harness.REPO, "sdk", "python"),
               PYTHONDONTWRITEBYTECODE="1")
    p = subprocess.run(["/usr/bin/python3", "-c", SDK_SCRIPT, sid, cfg], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p
    return json.loads(p.stdout)


def clients_check(runtime, cli_creates):
    """A configuration of document 002's docker shape (runtime runtime) used through the
    sbx CLI (create --config, exec with its exit code, cp in and out, artifacts, rm) and
    the Python SDK (create, exec, files put/get, artifacts, delete) on one sandbox, made by
    one client and used and removed by the other."""
    a = admin()
    cfg = docker_config("docker-clients-" + runtime, runtime=runtime, memory_limit_mb=768,
                        pids_limit=100, cpu_limit=1)
    tmp = tempfile.mkdtemp(prefix="sbx-docker-cli-", dir=ENGINE["tmp"])
    if cli_creates:
        p = cli(a.key, "create", "--config", cfg, "--ttl", "10m")
        assert p.returncode == 0, p
        sid = p.stdout.strip()
    else:
        sid = sdk(a.key, "-", cfg)["id"]
    try:
        info = json.loads(engine_get("/containers/sbx-%s/json" % sid))
        assert info["HostConfig"]["Runtime"] == runtime, info["HostConfig"]
        assert info["Config"]["Labels"]["sbx.config"] == cfg, info["Config"]
        src = os.path.join(tmp, "cli.txt")
        with open(src, "w") as f:
            f.write("from the cli ă\n")
        p = cli(a.key, "cp", src, "%s:in/cli.txt" % sid)
        assert p.returncode == 0, p
        p = cli(a.key, "exec", sid, "--", "sh", "-c", "cat /workspace/in/cli.txt; exit 6")
        assert p.returncode == 6 and p.stdout == "from the cli ă\n", p
        got = sdk(a.key, sid, cfg)
        kernel = "4.4.0" if runtime == "runsc" else os.uname().release
        assert got == {"id": sid, "runtime": "docker",
                       "exec": [4, "from the cli ă\n%s\n" % kernel],
                       "get": "FROM THE SDK ș", "artifacts": ["out/sdk.txt"]}, got
        dst = os.path.join(tmp, "back.txt")
        p = cli(a.key, "cp", "%s:out/sdk.txt" % sid, dst)
        assert p.returncode == 0, p
        with open(dst, encoding="utf-8") as f:
            assert f.read() == "FROM THE SDK ș"
        p = cli(a.key, "--json", "artifacts", sid)
        assert p.returncode == 0 and [x["path"] for x in json.loads(p.stdout)["data"]] == [
            "out/sdk.txt"], p
    finally:
        p = cli(a.key, "rm", sid)
        assert p.returncode == 0, p
    wait_for(lambda: not any(x["Labels"].get("sbx.id") == sid for x in containers()),
             timeout=30, what="the container removed")


def test_cli_and_sdk_under_runc():
    clients_check("runc", cli_creates=True)


def test_cli_and_sdk_under_runsc():
    clients_check("runsc", cli_creates=False)
