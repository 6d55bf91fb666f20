"""Isolation, checked from inside a sandbox through exec, against things planted on the host.

Each probe is a small Python program run in the sandbox that prints JSON; the test asserts
what an attacker inside would see. One sandbox serves all probes (plus a second one for the
sandbox-to-sandbox check).
"""

import json
import os
import secrets
import socket
import subprocess
import sys

import harness

D = harness.Shared()
MARK = "sbxmark" + secrets.token_hex(8)
SECRET = "sbxsecret" + secrets.token_hex(16)


def teardown_module():
    for p in D.cache.get("planted", []):
        try:
            os.unlink(p)
        except OSError:
            pass
    proc = D.cache.get("marker_proc")
    if proc is not None:
        proc.kill()
        proc.wait()
    D.close()


def client():
    k = D.once("key", lambda d: d.client().create_key("sec", "member", "sandbox"))
    return D.get().client(k["key"])


def sandbox():
    c = client()
    sb = D.once("sb", lambda d: c.create_sandbox(ttl_seconds=3600))
    return c, sb["id"]


def probe(code, **kw):
    """Run python code in the sandbox; it must print one JSON value as its last line."""
    c, sid = sandbox()
    r = c.exec(sid, language="python", code=code, **kw)
    assert r["exit_code"] == 0, "probe failed: %r" % r
    return json.loads(r["stdout"].strip().splitlines()[-1])


def plant():
    """Marker files on the host: in the data dir, in a sandbox dir's parent, in /root."""
    def make(d):
        paths = [os.path.join(d.data_dir, MARK + ".txt"),
                 os.path.join(d.data_dir, "sandboxes", MARK + ".txt"),
                 os.path.join("/root", MARK + ".txt"),
                 os.path.join("/tmp", MARK + ".txt")]
        for p in paths:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(SECRET)
        return paths
    return D.once("planted", make)


def host_ips():
    ips = set()
    try:
        out = subprocess.run(["ip", "-o", "addr", "show"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, timeout=10).stdout.decode()
        for line in out.splitlines():
            parts = line.split()
            if "inet" in parts:
                ips.add(parts[parts.index("inet") + 1].split("/")[0])
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            ips.add(info[4][0])
    except OSError:
        pass
    return sorted(ip for ip in ips if not ip.startswith("127."))


def test_writes_outside_workspace_and_tmp_fail():
    res = probe(r'''
import json, os
out = {}
for p in ["/x", "/etc/x", "/etc/passwd", "/usr/x", "/usr/bin/python3", "/opt/sbx/sbx-agent",
          "/opt/sbx/x", "/bin/x", "/root/x", "/var/x", "/home/x", "/proc/sys/kernel/hostname"]:
    try:
        with open(p, "ab") as f:
            f.write(b"pwned")
        out[p] = "written"
    except OSError as e:
        out[p] = e.__class__.__name__
for p in ["/workspace/ok", "/tmp/ok"]:
    with open(p, "w") as f:
        f.write("ok")
    out[p] = "written"
try:
    os.mkdir("/newdir")
    out["mkdir /newdir"] = "written"
except OSError as e:
    out["mkdir /newdir"] = e.__class__.__name__
try:
    os.chmod("/usr/bin/python3", 0o777)
    out["chmod"] = "written"
except OSError as e:
    out["chmod"] = e.__class__.__name__
print(json.dumps(out))
''')
    written = sorted(p for p, v in res.items() if v == "written"
                     and p not in ("/workspace/ok", "/tmp/ok"))
    assert not written, "the sandbox could write to %s" % written
    assert res["/workspace/ok"] == "written" and res["/tmp/ok"] == "written", res
    # And the agent binary is intact.
    c, sid = sandbox()
    r = c.exec(sid, shell="head -c 4 /opt/sbx/sbx-agent | od -An -c | tr -d ' '")
    assert r["stdout"].strip() == "177ELF", r


def test_only_loopback_interface():
    res = probe(r'''
import json, os, socket
names = sorted(n for _, n in socket.if_nameindex())
try:
    sysnet = sorted(os.listdir("/sys/class/net"))
except OSError as e:
    sysnet = None
print(json.dumps({"if": names, "sys": sysnet}))
''')
    assert res["if"] == ["lo"], "interfaces in the sandbox: %r" % res
    assert res["sys"] in (None, [], ["lo"]), "/sys/class/net in the sandbox: %r" % res
    c, sid = sandbox()
    r = c.exec(sid, shell="ip -o link 2>/dev/null | awk -F': ' '{print $2}' || true")
    assert r["stdout"].split() in ([], ["lo"]), r


def test_host_processes_invisible():
    marker = D.once("marker_proc", lambda d: subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", MARK],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    assert marker.poll() is None
    res = probe(r'''
import json, os
procs = []
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            procs.append(open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ")
                         .decode("utf-8", "replace").strip())
        except OSError:
            pass
print(json.dumps(procs))
''')
    joined = "\n".join(res)
    assert any("python3" in p for p in res), "the probe does not see itself: %r" % res
    assert MARK not in joined, "a host process is visible in the sandbox"
    for host_thing in ("sbxd", "sbx-shim", "runsc", "systemd", "sshd"):
        assert host_thing not in joined, "%s visible in the sandbox:\n%s" % (host_thing, joined)
    assert len(res) < 20, "too many processes visible in the sandbox:\n%s" % joined
    c, sid = sandbox()
    r = c.exec(sid, shell="ps -eo args 2>&1")
    assert MARK not in r["stdout"] and "sbxd" not in r["stdout"], r


def test_host_files_unreadable():
    d = D.get()
    paths = plant()
    c, sid = sandbox()
    code = r'''
import json, os
paths = %s
secret = %r
out = {}
for p in paths:
    try:
        out[p] = secret in open(p).read()
    except OSError as e:
        out[p] = e.__class__.__name__
# Relative escapes from the workspace, and a search of the whole tree.
for p in ["/workspace/../%s.txt", "/workspace/../../root/%s.txt"]:
    try:
        out[p] = secret in open(p).read()
    except OSError as e:
        out[p] = e.__class__.__name__
found = []
for root, dirs, files in os.walk("/"):
    if root in ("/proc", "/sys", "/dev"):
        dirs[:] = []
        continue
    for f in files:
        if %r in f:
            found.append(os.path.join(root, f))
out["found"] = found
print(json.dumps(out))
''' % (json.dumps(paths + [d.data_dir + "/admin.key", "/root/.bash_history"]), SECRET,
       MARK, MARK, MARK)
    r = c.exec(sid, language="python", code=code, timeout_seconds=120)
    assert r["exit_code"] == 0, r
    res = json.loads(r["stdout"].strip().splitlines()[-1])
    leaked = [p for p, v in res.items() if v is True]
    assert not leaked, "host files readable from the sandbox: %r" % leaked
    assert res["found"] == [], "planted host files found in the sandbox: %r" % res["found"]
    # The daemon's data dir (store, keys) is not reachable under any path either.
    assert not any(v is True for v in res.values())


def test_daemon_port_unreachable():
    d = D.get()
    targets = [("127.0.0.1", d.port)] + [(ip, d.port) for ip in host_ips()]
    # Sanity: from the host, the daemon is reachable on 127.0.0.1.
    socket.create_connection(("127.0.0.1", d.port), timeout=5).close()
    res = probe(r'''
import json, socket
out = {}
for host, port in %s:
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        out["%%s:%%d" %% (host, port)] = "connected: %%r" %% s.recv(200)
    except OSError as e:
        out["%%s:%%d" %% (host, port)] = e.__class__.__name__
    finally:
        s.close()
print(json.dumps(out))
''' % json.dumps(targets), timeout_seconds=120)
    reached = {k: v for k, v in res.items() if v.startswith("connected")}
    assert not reached, "the sandbox reached the host: %r" % reached
    assert len(res) == len(targets), res


def test_no_daemon_secrets_in_env():
    d = D.get()
    c, sid = sandbox()
    member_key = D.cache["key"]["key"]
    r = c.exec(sid, shell="cat /proc/1/environ | tr '\\0' '\\n'; echo ---; env; echo ---;"
                          " cat /proc/self/environ | tr '\\0' '\\n'")
    assert r["exit_code"] == 0, r
    text = r["stdout"]
    names = [line.split("=", 1)[0] for line in text.splitlines() if "=" in line]
    assert not [n for n in names if n.startswith("SBX_")], \
        "SBX_ variables in the sandbox: %r" % [n for n in names if n.startswith("SBX_")]
    assert d.admin_key not in text, "the admin key is in the sandbox's environment"
    assert member_key not in text, "the caller's key is in the sandbox's environment"
    assert "ASAN_OPTIONS" not in text and "SBX_TEMPLATE_CACHE" not in text, text
    # Not in the agent's command line either.
    r = c.exec(sid, shell="tr '\\0' ' ' < /proc/1/cmdline")
    assert d.admin_key not in r["stdout"] and member_key not in r["stdout"], r


def test_mountinfo_shows_no_host_paths():
    d = D.get()
    c, sid = sandbox()
    r = c.exec(sid, shell="cat /proc/self/mountinfo; echo ---; cat /proc/mounts")
    assert r["exit_code"] == 0, r
    text = r["stdout"]
    for host_path in (d.data_dir, d.tmp, os.environ.get("SBX_TEMPLATE_CACHE",
                                                        "/var/cache/sbx/templates"),
                      harness.REPO):
        assert host_path not in text, "host path %s visible in mountinfo:\n%s" % (host_path, text)
    assert "/sandboxes/" not in text, text


def test_sandboxes_cannot_see_each_other():
    c, sid = sandbox()
    other = c.create_sandbox(ttl_seconds=600)
    try:
        c.sh(other["id"], "echo %s > /workspace/%s.txt; sleep 60 >/dev/null 2>&1 &" % (SECRET, MARK))
        r = c.exec(sid, shell="ls /workspace; cat /workspace/%s.txt 2>&1; ps -eo args" % MARK)
        assert SECRET not in r["stdout"] and MARK + ".txt" not in r["stdout"].split(), r
        assert "sleep 60" not in r["stdout"], "another sandbox's process is visible: %r" % r
    finally:
        c.delete_sandbox(other["id"])
