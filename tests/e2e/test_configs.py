"""Sandbox configurations, roles and key scopes, personal variables, the probe and the
per-configuration network policy (docs/configs.md), through a real sbxd and real sandboxes.

One daemon for the module, with the egress test upstreams (egress_upstream.py: names resolve
through a test hosts file to a random 127.x address; nothing leaves the machine) and a
skill variable declaration file (SBX_SKILL_ENV). Sandboxes are few and shared.
"""

import glob
import hashlib
import json
import os
import shutil
import stat
import tempfile
import threading
import time

import egress_upstream as eu
import harness
from harness import assert_error

UP = {}
TMP = tempfile.mkdtemp(prefix="sbx-configs-")
SKILLS = os.path.join(TMP, "skills.json")
with open(SKILLS, "w") as f:
    json.dump({"skill-1": [{"name": "API_TOKEN", "description": "the API's token",
                            "required": True}, {"name": "REGION"}]}, f)

D = harness.Shared()

SECRET = "cfg-secret-7f3a9c"
INJECT_SECRET = "inject-secret-42b1"
PERSONAL = "personal-secret-c0ffee"


def up():
    if "u" not in UP:
        UP["u"] = eu.Upstreams()
        env = dict(UP["u"].env())
        env["SBX_SKILL_ENV"] = SKILLS
        # The configurations here ask for pids 256: above the default host limit of 128.
        env["SBX_PIDS_MAX"] = "512"
        # The proxy verifies injected hosts' upstreams as a client would: the test CA too.
        env["SBX_FETCH_CA_FILE"] = os.path.join(UP["u"].tmp, "ca.pem")
        D.kw["extra_env"] = env
    return UP["u"]


def teardown_module():
    D.close()
    if "u" in UP:
        UP.pop("u").close()
    shutil.rmtree(TMP, ignore_errors=True)


def admin():
    up()
    return D.client()


def key(user, role, scope="full_access", tool_level="sandbox"):
    up()
    def make(d):
        return d.client().ok("POST", "/v1/keys", {"user": user, "role": role,
                                                  "tool_level": tool_level, "scope": scope},
                             status=201)
    k = D.once("key:%s:%s:%s" % (user, role, scope), make)
    return D.get().client(k["key"])


def create_config(c, name, config, description=None, status=201):
    body = {"name": name, "config": config}
    if description is not None:
        body["description"] = description
    return c.ok("POST", "/v1/sandbox-configs", body, status=status)


# --- configurations: routes, validation, masking -------------------------------------

def test_create_read_list_replace_delete_with_secrets_masked():
    c = admin()
    cfg = create_config(c, "crud", {"env_vars": {"TOKEN": SECRET, "MODE": "x"},
                                    "limits": {"memory_mb": 512}, "skill_rollout": "new_session",
                                    "volume_mount": {"enabled": True, "mount_path": "/data"}},
                        description="first")
    cid = cfg["id"]
    assert cid.startswith("cfg_") and cfg["object"] == "sandbox_config", cfg
    assert cfg["sandbox_type"] == "gvisor" and cfg["description"] == "first", cfg
    conf = cfg["config"]
    assert conf["env_vars"] == {"TOKEN": "********", "MODE": "********"}, conf
    assert conf["limits"] == {"memory_mb": 512, "pids": 0, "cpu_millicores": 0}, conf
    assert conf["template"] == "base" and conf["backend"] == "gvisor", conf
    assert conf["terminal_idle_disconnect_sec"] == 0 and conf["default_timeout_sec"] == 0
    assert conf["skill_rollout"] == "new_session" and conf["skill_image"] is None, conf
    assert conf["volume_mount"]["supported"] is True, conf
    assert SECRET not in json.dumps(cfg)
    got = c.ok("GET", "/v1/sandbox-configs/" + cid)
    assert got == cfg, (got, cfg)
    lst = c.ok("GET", "/v1/sandbox-configs")
    assert lst["object"] == "list" and lst["workspace_scripts_disabled"] is False, lst
    assert [x["id"] for x in lst["data"]].count(cid) == 1
    # A masked placeholder keeps the stored value; skill_image is the server's.
    put = c.ok("PUT", "/v1/sandbox-configs/" + cid,
               {"name": "crud-renamed", "config": {"env_vars": {"TOKEN": "********",
                                                                "NEW": "n"},
                                                   "skill_image": {"id": "forged"}}})
    assert put["name"] == "crud-renamed" and put["description"] == "", put
    assert put["config"]["env_vars"] == {"TOKEN": "********", "NEW": "********"}, put
    assert put["config"]["skill_image"] is None, put
    assert put["updated_at"] >= cfg["updated_at"]
    # A placeholder for a name that has no stored value is refused.
    r = c.request("PUT", "/v1/sandbox-configs/" + cid,
                  {"name": "crud-renamed", "config": {"env_vars": {"OTHER": "********"}}})
    assert_error(r, 400, "invalid_sandbox_config")
    d = c.ok("DELETE", "/v1/sandbox-configs/" + cid)
    assert d == {"id": cid, "object": "sandbox_config", "deleted": True}, d
    for m in ("GET", "DELETE"):
        assert_error(c.request(m, "/v1/sandbox-configs/" + cid), 404, "sandbox_config_not_found")
    assert_error(c.request("PUT", "/v1/sandbox-configs/" + cid, {"name": "x", "config": {}}),
                 404, "sandbox_config_not_found")
    assert_error(c.request("GET", "/v1/sandbox-configs/%s/sandboxes" % cid), 404,
                 "sandbox_config_not_found")


BAD_CONFIGS = [
    {"nope": 1},
    {"backend": "docker"},
    {"backend": "namespaces"},  # not enabled on this daemon (test_configs_apply: enabled)
    {"template": "desktop"},  # needs desktop_enabled
    {"template": "../etc"},
    {"limits": {"memory_mb": 10 ** 9}},
    {"limits": {"disk": 1}},
    {"limits": "big"},
    {"default_timeout_sec": -1},
    {"default_timeout_sec": 901},  # a command's default: at most exec's 900 s
    {"terminal_idle_disconnect_sec": 30},
    {"terminal_idle_disconnect_sec": 86401},
    {"desktop_enabled": "yes"},
    {"allow_private_endpoints": 1},
    {"env_vars": {"SBX_X": "1"}},
    {"env_vars": {"1BAD": "1"}},
    {"env_vars": {"A": 1}},
    {"env_vars": {"A": "********"}},
    {"skill_rollout": "now"},
    {"network": []},
    {"network": {"allow_out": ["10.0.0.0/33"]}},
    {"network": {"deny_out": ["example.com"]}},
    {"network": {"unknown": True}},
    {"network": {"rules": [{"host": "a.example.com"}]}},
    {"network": {"rules": [{"name": "r", "scheme": "ftp", "host": "a.example.com"}]}},
    {"network": {"rules": [{"name": "r"}]}},
    {"network": {"rules": [{"name": "r", "host": "1.2.3.4"}]}},
    {"network": {"rules": [{"name": "r", "host": "a.example.com", "path": "/x"}]}},
    {"network": {"rules": [{"name": "r", "scheme": "http", "host": "a.example.com",
                            "inject": [{"header": "X-Key", "secret": "s"}]}]}},
    {"network": {"rules": [{"name": "r", "host": "a.example.com",
                            "inject": [{"header": "Host", "secret": "s"}]}]}},
    {"network": {"rules": [{"name": "r", "host": "a.example.com",
                            "inject": [{"header": "X-Key", "secret": "s", "format": "none"}]}]}},
    {"network": {"rules": [{"name": "r", "host": "a.example.com"},
                           {"name": "r", "host": "b.example.com"}]}},
    {"volume_mount": "yes"},
]


def test_bad_configurations_are_400_and_store_nothing():
    c = admin()
    before = len(c.ok("GET", "/v1/sandbox-configs")["data"])
    for i, bad in enumerate(BAD_CONFIGS):
        r = c.request("POST", "/v1/sandbox-configs", {"name": "bad-%d" % i, "config": bad})
        assert_error(r, 400, "invalid_sandbox_config")
    for body in ({"config": {}}, {"name": "", "config": {}}, {"name": "x" * 129, "config": {}},
                 {"name": "x", "config": {}, "description": 5}, {"name": "x"},
                 {"name": "x", "config": []}):
        assert_error(c.request("POST", "/v1/sandbox-configs", body), 400,
                     "invalid_sandbox_config")
    assert_error(c.request("POST", "/v1/sandbox-configs", raw=b"{"), 400, "invalid_json")
    assert len(c.ok("GET", "/v1/sandbox-configs")["data"]) == before
    create_config(c, "dup", {})
    assert_error(c.request("POST", "/v1/sandbox-configs", {"name": "dup", "config": {}}), 409,
                 "sandbox_config_exists")


def db_bytes(d):
    if harness.on_postgres(d):
        # Every row of every table, as PostgreSQL prints it.
        pg = harness.store_db(d)
        tables = [r[0] for r in pg.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname='public'")]
        return "".join(pg.execute("SELECT coalesce(string_agg(t::text, ' '), '') AS x FROM %s t"
                                  % t).fetchone()[0] for t in tables).encode()
    data = b""
    for p in glob.glob(os.path.join(d.data_dir, "sbx.db*")):
        with open(p, "rb") as f:
            data += f.read()
    return data


def test_the_store_holds_no_secret_in_clear_and_the_key_lives_apart():
    c = admin()
    cfg = create_config(c, "secrets", {
        "env_vars": {"TOKEN": SECRET},
        "network": {"rules": [{"name": "api", "host": "api.example.com",
                               "inject": [{"header": "Authorization", "secret": INJECT_SECRET,
                                           "format": "Bearer {secret}"}]}]}})
    rule = cfg["config"]["network"]["rules"][0]
    assert rule["inject"] == [{"header": "Authorization", "secret": "********",
                               "format": "Bearer {secret}"}], rule
    m = key("mallory", "member")
    m.ok("PUT", "/v1/me/env-vars/sandbox", {"sandbox_config_id": cfg["id"], "name": "MINE",
                                            "value": PERSONAL})
    d = D.get()
    data = db_bytes(d)
    assert data, "no store file"
    for s in (SECRET, INJECT_SECRET, PERSONAL):
        assert s.encode() not in data, "%s is in the store in clear" % s
    assert b"sbxenc:v1:" in data
    kpath = os.path.join(d.data_dir, "secrets.key")
    st = os.stat(kpath)
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 32, st
    # The audit log names the change, not the values.
    log = c.ok("GET", "/v1/audit?action=sandbox_config.create")
    assert SECRET not in json.dumps(log)


# --- sandboxes from a configuration --------------------------------------------------

NET_CONFIG = {
    "template": "base",
    "limits": {"memory_mb": 768, "pids": 256, "cpu_millicores": 800},
    "default_timeout_sec": 900,
    "env_vars": {"TOKEN": SECRET, "API_TOKEN": "cfg", "REGION": "cfg", "PLAIN": "cfg"},
    "network": {"deny_egress_by_default": True,
                "allow_out": ["allowed.example.com", "second.example.com", "*.wild.example.com"],
                "rules": [{"name": "no-second", "scheme": "http", "host": "second.example.com",
                           "methods": ["GET"], "path": "/blocked", "deny": True},
                          {"name": "watch", "host": "allowed.example.com", "audit": True}]},
}


def net_config():
    up()
    return D.once("cfg:net", lambda d: create_config(admin(), "net", NET_CONFIG))


def alice():
    return key("alice", "member")


def net_sandbox():
    up()

    def make(d):
        cid = net_config()["id"]
        a = alice()
        # Narrower than the configuration: a shorter TTL and less memory.
        sb = a.create_sandbox(config_id=cid, ttl_seconds=600, limits={"memory_mb": 512})
        up().install(a, sb["id"])
        return sb
    return D.once("sb:net", make)


def test_a_sandbox_from_a_configuration_gets_its_template_limits_ttl_and_env():
    a = alice()
    sb = net_sandbox()
    cid = net_config()["id"]
    assert sb["config_id"] == cid and sb["template"] == "base", sb
    assert sb["limits"] == {"memory_mb": 512, "pids": 256, "cpu_millicores": 800}, sb
    assert sb["ttl_seconds"] == 600, sb
    assert sb["env"]["TOKEN"] == "********" and SECRET not in json.dumps(sb), sb
    # Command output is stored with the exec record: compare a digest, not the value.
    out = a.sh(sb["id"], "printf %s \"$TOKEN\" | sha256sum | cut -c1-64; echo $PLAIN")
    assert out == "%s\ncfg\n" % hashlib.sha256(SECRET.encode()).hexdigest(), out
    assert a.get_sandbox(sb["id"])["config_id"] == cid
    assert SECRET.encode() not in db_bytes(D.get())


def test_a_request_may_narrow_a_configuration_but_not_widen_it():
    a = alice()
    cid = net_config()["id"]
    # (default_timeout_sec is a command's timeout, not a bound on ttl_seconds: spec 002.)
    for fields in ({"template": "office"}, {"limits": {"memory_mb": 769}},
                   {"limits": {"pids": 257}}, {"limits": {"cpu_millicores": 801}},
                   {"env": {"TOKEN": "mine"}}):
        r = a.request("POST", "/v1/sandboxes", dict(fields, config_id=cid))
        assert_error(r, 400, "sandbox_config_widened")
    assert_error(a.request("POST", "/v1/sandboxes", {"config_id": "cfg_nope"}), 404,
                 "sandbox_config_not_found")
    assert_error(a.request("POST", "/v1/sandboxes", {"config_id": 5}), 400, "invalid_request")
    assert_error(a.request("POST", "/v1/sandboxes", {"limits": {"memory_mb": 10 ** 7}}), 400,
                 "invalid_request")
    assert_error(a.request("POST", "/v1/sandboxes", {"limits": {"pids": 0}}), 400,
                 "invalid_request")


def test_the_configurations_network_policy_is_applied_by_the_egress_proxy():
    a = alice()
    sid = net_sandbox()["id"]
    # allow_out stands in for an allowlist of the sandbox's own.
    r = eu.probe(a, sid, "fetch", "https://allowed.example.com/")
    assert r["ok"] and "hello from allowed.example.com" in r["body"], r
    assert eu.probe(a, sid, "fetch", "https://a.wild.example.com/")["ok"]
    # deny_egress_by_default: a name allow_out does not list.
    r = eu.probe(a, sid, "connect", "other.example.com:443")
    assert r["status_line"].startswith("HTTP/1.1 403") and r["reason"] == "config_default_deny", r
    # One wildcard label only.
    r = eu.probe(a, sid, "connect", "wild.example.com:443")
    assert r["reason"] == "config_default_deny", r
    # L7: the deny rule takes GET /blocked on http://second..., not another path.
    r = eu.probe(a, sid, "plain", "http://second.example.com/blocked/x")
    assert r["status_line"].startswith("HTTP/1.1 403") and r["reason"] == "rule_denied", r
    r = eu.probe(a, sid, "plain", "http://second.example.com/open")
    assert r["status_line"].startswith("HTTP/1.1 200"), r
    # The address rules still hold: a name resolving to loopback or metadata.
    log = a.ok("GET", "/v1/sandboxes/%s/egress" % sid)["data"]
    audited = [e for e in log if e["host"] == "allowed.example.com" and e["verdict"] == "allowed"]
    assert audited and all("audit rule watch" in e["reason"] for e in audited), audited
    denied = [e for e in log if e["host"] == "second.example.com" and e["verdict"] == "denied"]
    assert denied and "rule_denied" in denied[0]["reason"], denied
    # A sandbox without a configuration still has egress none.
    assert a.get_sandbox(sid)["egress"] == {"mode": "none"}


def test_private_endpoints_only_when_the_configuration_allows_them():
    c = admin()
    a = key("pat", "member")
    base = {"network": {"allow_out": ["private.example.com", "meta.example.com",
                                      "allowed.example.com"]}}
    off = create_config(c, "priv-off", base)
    on = create_config(c, "priv-on", dict(base, allow_private_endpoints=True))
    for cfg, want in ((off, "blocked_address"), (on, None)):
        sb = a.create_sandbox(config_id=cfg["id"])
        up().install(a, sb["id"])
        r = eu.probe(a, sb["id"], "connect", "private.example.com:443")
        if want:
            assert r["reason"] == want, r
        else:
            # 10.1.2.3 may be dialled now (nothing answers there: a 502/504, not a 403).
            assert not r["status_line"].startswith("HTTP/1.1 403"), r
        r = eu.probe(a, sb["id"], "connect", "meta.example.com:443")
        assert r["reason"] == "blocked_address", r
        a.delete_sandbox(sb["id"])


FETCH = r'''
import hashlib, json, ssl, sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"X-Api-Key": "forged"})
out = {}
try:
    # The default context: SSL_CERT_FILE (set from the configuration) names the CA bundle.
    body = urllib.request.urlopen(req, timeout=20, context=ssl.create_default_context()).read()
    got = json.loads(body)
    key = got.get("x-api-key")
    out = {"ok": True, "sha": hashlib.sha256(key.encode()).hexdigest() if key else None,
           "connection": got.get("connection")}
except Exception as e:
    out = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
print(json.dumps(out))
'''


def test_an_inject_rule_puts_the_header_in_and_the_sandbox_never_sees_the_secret():
    c = admin()
    a = key("ivy", "member")
    cfg = create_config(c, "inject", {"network": {
        "allow_out": ["allowed.example.com", "second.example.com"],
        "rules": [{"name": "api", "host": "allowed.example.com", "path": "/headers",
                   "inject": [{"header": "X-Api-Key", "secret": INJECT_SECRET,
                               "format": "Key {secret}"}]}]}})
    sb = a.create_sandbox(config_id=cfg["id"])
    sid = sb["id"]
    r = a.request("PUT", "/v1/sandboxes/%s/files/fetch.py" % sid, raw=FETCH.encode())
    assert r.status in (200, 201), r

    def fetch(url):
        res = a.exec(sid, shell="python3 /workspace/fetch.py " + url, timeout_seconds=60)
        assert res["exit_code"] == 0, res
        return json.loads(res["stdout"])
    want = hashlib.sha256(("Key " + INJECT_SECRET).encode()).hexdigest()
    got = fetch("https://allowed.example.com/headers")
    assert got["ok"] and got["sha"] == want, got
    assert got["connection"] == "close", got
    # Another path on the same host: TLS is still ended here, but no header is put in (the
    # client's own passes).
    got = fetch("https://allowed.example.com/other")
    assert got["ok"] is False or got.get("sha") != want, got
    # A host without a rule is a plain tunnel, verified end to end by the client itself:
    # the sandbox trusts the daemon's CA and the system roots, not the test CA.
    got = fetch("https://second.example.com/headers")
    assert got["ok"] is False and "CERTIFICATE_VERIFY_FAILED" in got["error"], got
    # A long answer through the interception arrives whole (the agent's window holds).
    big = a.sh(sid, "python3 -c \"import ssl,urllib.request; print(len(urllib.request.urlopen("
                    "'https://allowed.example.com/bytes/20000000', timeout=60, "
                    "context=ssl.create_default_context()).read()))\"", timeout_seconds=120)
    assert big == "20000000\n", big
    out = a.sh(sid, "env; cat /proc/self/environ /proc/1/environ | tr '\\0' '\\n'; "
                    "tr '\\0' ' ' < /proc/1/cmdline; true")
    assert INJECT_SECRET not in out
    assert "SSL_CERT_FILE=/workspace/.sbx-egress-ca.pem" in out, out[:2000]
    log = a.ok("GET", "/v1/sandboxes/%s/egress" % sid)["data"]
    injected = [e for e in log if e["host"] == "allowed.example.com" and "injected" in e["reason"]]
    assert len(injected) == 1 and "rule api injected 1 header" in injected[0]["reason"], log
    assert INJECT_SECRET not in json.dumps(log)
    assert sb["env"]["SSL_CERT_FILE"] == "********" and INJECT_SECRET not in json.dumps(sb)
    a.delete_sandbox(sid)


def test_the_proxy_verifies_the_upstream_of_an_injected_host():
    # A daemon that does not know the test CA: the upstream's certificate does not verify,
    # and the header never leaves.
    u = up()
    env = dict(u.env())
    d = harness.Daemon(extra_env=env)
    try:
        d.start()
        c = d.client()
        cfg = create_config(c, "inject", {"network": {"allow_out": ["allowed.example.com"],
                                                      "rules": [{"name": "api",
                                                                 "host": "allowed.example.com",
                                                                 "inject": [{"header": "X-Api-Key",
                                                                             "secret": "s"}]}]}})
        sb = c.create_sandbox(config_id=cfg["id"])
        c.request("PUT", "/v1/sandboxes/%s/files/fetch.py" % sb["id"], raw=FETCH.encode())
        seen = len(u.https.seen)
        res = c.exec(sb["id"], shell="python3 /workspace/fetch.py https://allowed.example.com/headers",
                     timeout_seconds=60)
        got = json.loads(res["stdout"])
        assert got["ok"] is False, got
        log = c.ok("GET", "/v1/sandboxes/%s/egress" % sb["id"])["data"]
        assert any("upstream_tls" in e["reason"] and "certificate" in e["reason"] for e in log), log
        assert not [p for h, p in u.https.seen[seen:] if p.startswith("/headers")], u.https.seen
    finally:
        d.cleanup()


# --- inventory and safe change ---------------------------------------------------------

def test_inventory_and_changes_refused_while_sandboxes_live():
    c = admin()
    a = alice()
    cid = net_config()["id"]
    sid = net_sandbox()["id"]
    inv = c.ok("GET", "/v1/sandbox-configs/%s/sandboxes" % cid)
    assert inv["verified"] is True and inv["config_id"] == cid, inv
    mine = [e for e in inv["data"] if e["id"] == sid]
    assert mine and mine[0]["user"] == "alice" and mine[0]["status"] == "running", inv
    assert mine[0]["busy"] is False and mine[0]["busy_with"] == [], mine
    # Busy while a command runs.
    t = threading.Thread(target=lambda: a.exec(sid, shell="sleep 2"))
    t.start()
    harness.wait_for(lambda: [e for e in c.ok("GET", "/v1/sandbox-configs/%s/sandboxes" % cid)
                              ["data"] if e["id"] == sid and e["busy"]], 20, 0.05,
                     "the sandbox to show busy")
    t.join()
    for q in ("", "?force=true"):
        assert_error(c.request("DELETE", "/v1/sandbox-configs/%s%s" % (cid, q)), 409,
                     "sandboxes_still_live")
    changed = dict(NET_CONFIG, template="office")
    assert_error(c.request("PUT", "/v1/sandbox-configs/" + cid, {"name": "net",
                                                                 "config": changed}),
                 409, "sandboxes_still_live")
    assert_error(c.request("DELETE", "/v1/sandbox-configs/%s?force=maybe" % cid), 400,
                 "invalid_request")
    # What the sandboxes run is unchanged by anything else.
    keep = dict(NET_CONFIG, env_vars=dict(NET_CONFIG["env_vars"], TOKEN="********"))
    assert c.ok("PUT", "/v1/sandbox-configs/" + cid, {"name": "net", "config": keep})
    out = a.sh(sid, "printf %s \"$TOKEN\" | sha256sum | cut -c1-64")
    assert out == hashlib.sha256(SECRET.encode()).hexdigest() + "\n", out


def test_race_a_delete_during_a_create_from_the_configuration_is_409():
    c = admin()
    a = key("rita", "member")
    cfg = create_config(c, "race", {"env_vars": {"A": "1"}})
    box = {}
    t = threading.Thread(target=lambda: box.update(sb=a.create_sandbox(config_id=cfg["id"])))
    t.start()
    seen = harness.wait_for(
        lambda: c.ok("GET", "/v1/sandbox-configs/%s/sandboxes" % cfg["id"])["data"], 60, 0.01,
        "the sandbox being created to be in the inventory")
    r = c.request("DELETE", "/v1/sandbox-configs/" + cfg["id"])
    t.join()
    assert_error(r, 409, "sandboxes_still_live")
    assert seen[0]["status"] in ("creating", "running"), seen
    sb = box["sb"]
    assert sb["config_id"] == cfg["id"] and a.sh(sb["id"], "echo $A") == "1\n"
    a.delete_sandbox(sb["id"])
    c.ok("DELETE", "/v1/sandbox-configs/" + cfg["id"])


def test_race_a_change_during_a_deep_probe_of_the_configuration_is_423():
    c = admin()
    cfg = create_config(c, "probed", {"env_vars": {"A": "1"}})
    box = {}
    t = threading.Thread(target=lambda: box.update(r=c.request(
        "POST", "/v1/system/sandbox-check", {"config_id": cfg["id"], "deep": True},
        timeout=120)))
    t.start()
    harness.wait_for(
        lambda: c.ok("GET", "/v1/sandbox-configs/%s/sandboxes" % cfg["id"])["data"], 60, 0.01,
        "the probe's sandbox")
    put = c.request("PUT", "/v1/sandbox-configs/" + cfg["id"], {"name": "probed", "config": {}})
    dele = c.request("DELETE", "/v1/sandbox-configs/" + cfg["id"])
    t.join()
    assert_error(put, 423, "sandbox_config_locked")
    assert_error(dele, 423, "sandbox_config_locked")
    r = box["r"]
    assert r.status == 200 and r.body["ok"] is True, r
    names = [x["name"] for x in r.body["checks"]]
    for n in ("sandbox_create", "script", "sandbox_destroy"):
        assert n in names, names
    assert all(x["ok"] is not False for x in r.body["checks"]), r.body
    # The lease ends with the probe; the probe's sandbox is gone.
    assert c.ok("GET", "/v1/sandbox-configs/%s/sandboxes" % cfg["id"])["data"] == []
    c.ok("PUT", "/v1/sandbox-configs/" + cfg["id"], {"name": "probed", "config": {}})
    c.ok("DELETE", "/v1/sandbox-configs/" + cfg["id"])


def test_workspace_policy():
    c = admin()
    r = c.ok("PUT", "/v1/sandbox-configs/workspace-policy", {"scripts_disabled": True})
    assert r == {"object": "workspace_policy", "workspace_scripts_disabled": True}, r
    assert c.ok("GET", "/v1/sandbox-configs")["workspace_scripts_disabled"] is True
    assert_error(c.request("PUT", "/v1/sandbox-configs/workspace-policy",
                           {"scripts_disabled": "yes"}), 400, "invalid_request")
    c.ok("PUT", "/v1/sandbox-configs/workspace-policy", {"scripts_disabled": False})
    assert c.ok("GET", "/v1/sandbox-configs")["workspace_scripts_disabled"] is False


# --- the probe -------------------------------------------------------------------------

def test_probe_shallow_checks_and_bad_parameters():
    c = admin()
    r = c.ok("POST", "/v1/system/sandbox-check",
             {"config": {"network": {"deny_egress_by_default": True}}})
    assert r["object"] == "sandbox_check" and r["ok"] is True and r["provider"] == "gvisor", r
    checks = {x["name"]: x for x in r["checks"]}
    assert checks["config"]["ok"] and checks["runtime"]["ok"] and checks["template"]["ok"]
    ext = checks["external_network"]
    assert ext["ok"] is None and ext["reason"] == "skipped_by_policy", ext
    for x in r["checks"]:
        assert set(x) == {"name", "ok", "message", "reason", "latency_ms"}, x
    assert r["capabilities"]["pause"] is True and r["capabilities"]["l7_inject"] is True
    # A probe that fails is 200 with ok false.
    r = c.ok("POST", "/v1/system/sandbox-check", {"config": {"template": "nosuchtemplate"}})
    assert r["ok"] is False, r
    assert [x for x in r["checks"] if x["name"] == "template"][0]["ok"] is False
    r = c.ok("POST", "/v1/system/sandbox-check", {"config": {"backend": "docker"}})
    assert r["ok"] is False and r["checks"][0]["reason"] == "invalid_sandbox_config", r
    # A stored configuration's masked values are restored from config_id.
    cid = net_config()["id"]
    r = c.ok("POST", "/v1/system/sandbox-check",
             {"config_id": cid, "config": {"env_vars": {"TOKEN": "********"}}})
    assert r["ok"] is True, r
    for body, status, code in (({}, 400, "invalid_request"),
                               ({"config_id": 5}, 400, "invalid_request"),
                               ({"config": {}, "deep": "yes"}, 400, "invalid_request"),
                               ({"config": {}, "deep": 1}, 400, "invalid_request"),
                               ({"config": "x"}, 400, "invalid_request"),
                               ({"config": [{}]}, 400, "invalid_request"),
                               ({"config": 7, "deep": True}, 400, "invalid_request"),
                               ([], 400, "invalid_json"),
                               ({"config_id": "cfg_nope", "config": {}}, 404,
                                "sandbox_config_not_found"),
                               ({"config_id": "cfg_nope"}, 404, "sandbox_config_not_found")):
        assert_error(c.request("POST", "/v1/system/sandbox-check", body), status, code)
    assert_error(c.request("POST", "/v1/system/sandbox-check", raw=b"nope"), 400, "invalid_json")


def test_deep_probe_of_a_configuration_not_stored():
    c = admin()
    r = c.ok("POST", "/v1/system/sandbox-check",
             {"config": {"env_vars": {"A": "b"}, "limits": {"memory_mb": 256}}, "deep": True},
             timeout=120)
    assert r["ok"] is True, r
    script = [x for x in r["checks"] if x["name"] == "script"][0]
    assert script["ok"] is True and isinstance(script["latency_ms"], int), script


# --- roles and key scopes --------------------------------------------------------------

def routes_for(cid):
    return [
        ("GET", "/v1/sandbox-configs", None, "read"),
        ("GET", "/v1/sandbox-configs/" + cid, None, "read"),
        ("POST", "/v1/sandbox-configs", {"name": "nope", "config": {}}, "write"),
        ("PUT", "/v1/sandbox-configs/" + cid, {"name": "roles", "config": {}}, "write"),
        ("DELETE", "/v1/sandbox-configs/" + cid, None, "write"),
        ("PUT", "/v1/sandbox-configs/workspace-policy", {"scripts_disabled": False}, "write"),
        ("GET", "/v1/sandbox-configs/%s/sandboxes" % cid, None, "inventory"),
        ("POST", "/v1/system/sandbox-check", {"config": {}}, "write"),
    ]


def test_every_configuration_route_checks_role_and_key_scope():
    c = admin()
    cid = create_config(c, "roles", {})["id"]
    viewer = key("vera", "viewer")
    member = key("max", "member")
    r_admin = key("ria", "admin", scope="restricted")
    r_viewer = key("rex", "viewer", scope="restricted")
    # Expected: None = allowed (any 2xx), else (status, code).
    want = {
        "read": {"viewer": None, "member": None, "r_admin": (403, "full_access_required"),
                 "r_viewer": (403, "full_access_required")},
        "write": {"viewer": (403, "admin_required"), "member": (403, "admin_required"),
                  "r_admin": (403, "full_access_required"), "r_viewer": (403, "admin_required")},
        "inventory": {"viewer": (403, "admin_required"), "member": (403, "admin_required"),
                      "r_admin": None, "r_viewer": (403, "admin_required")},
    }
    who = {"viewer": viewer, "member": member, "r_admin": r_admin, "r_viewer": r_viewer}
    for method, path, body, kind in routes_for(cid):
        for name, cl in who.items():
            r = cl.request(method, path, body)
            exp = want[kind][name]
            if exp is None:
                assert 200 <= r.status < 300, (method, path, name, r)
            else:
                assert_error(r, *exp)
        assert_error(c.request(method, path, body, key=None), 401, "missing_api_key")
    # Nothing was changed by a refused write.
    assert c.ok("GET", "/v1/sandbox-configs/" + cid)["name"] == "roles"
    # A viewer reads configurations but makes no sandboxes; a restricted member does.
    assert_error(viewer.request("POST", "/v1/sandboxes", {"config_id": cid}), 403,
                 "member_required")
    assert_error(viewer.request("GET", "/v1/sandboxes"), 403, "member_required")
    assert key("rmem", "member", scope="restricted").ok("GET", "/v1/sandboxes")["data"] == []
    # Personal variables are for every caller, whatever the role or scope.
    for cl in who.values():
        assert cl.ok("GET", "/v1/me/env-vars")["object"] == "list"


def test_keys_carry_a_scope():
    c = admin()
    k = c.ok("POST", "/v1/keys", {"user": "scoped", "role": "viewer", "tool_level": "none",
                                  "scope": "restricted"}, status=201)
    assert k["role"] == "viewer" and k["scope"] == "restricted", k
    k2 = c.create_key("unscoped")
    assert k2["scope"] == "full_access", k2
    listed = {x["id"]: x for x in c.ok("GET", "/v1/keys")["data"]}
    assert listed[k["id"]]["scope"] == "restricted"
    for bad in ({"scope": "all"}, {"scope": 1}, {"role": "owner"}):
        body = dict({"user": "x", "role": "member", "tool_level": "none"}, **bad)
        assert_error(c.request("POST", "/v1/keys", body), 400, "invalid_request")


# --- personal variables ------------------------------------------------------------------

def test_personal_variables_routes_and_refusals():
    c = admin()
    cfg = create_config(c, "personal", {"env_vars": {"SHARED": "w"}})
    cid = cfg["id"]
    b = key("bob", "member")
    put = b.ok("PUT", "/v1/me/env-vars/sandbox", {"sandbox_config_id": cid, "name": "MINE",
                                                  "value": PERSONAL})
    assert put["source"] == "user" and PERSONAL not in json.dumps(put), put
    for name in ("PATH", "HOME", "LD_PRELOAD", "SBX_TOKEN"):
        assert_error(b.request("PUT", "/v1/me/env-vars/sandbox",
                               {"sandbox_config_id": cid, "name": name, "value": "v"}),
                     400, "reserved_env_var")
    assert_error(b.request("PUT", "/v1/me/env-vars/sandbox",
                           {"sandbox_config_id": cid, "name": "1X", "value": "v"}), 400,
                 "invalid_env")
    assert_error(b.request("PUT", "/v1/me/env-vars/sandbox",
                           {"sandbox_config_id": "cfg_nope", "name": "X", "value": "v"}), 404,
                 "sandbox_config_not_found")
    assert_error(b.request("PUT", "/v1/me/env-vars/sandbox",
                           {"sandbox_config_id": cid, "name": "X"}), 400, "invalid_request")
    assert_error(b.request("PUT", "/v1/me/env-vars/skill",
                           {"skill_id": "skill-1", "name": "UNDECLARED", "value": "v"}), 400,
                 "env_var_not_declared")
    assert_error(b.request("PUT", "/v1/me/env-vars/skill",
                           {"skill_id": "skill-9", "name": "API_TOKEN", "value": "v"}), 404,
                 "skill_not_found")
    b.ok("PUT", "/v1/me/env-vars/skill", {"skill_id": "skill-1", "name": "REGION",
                                          "value": "eu"})
    got = b.ok("GET", "/v1/me/env-vars")
    assert PERSONAL not in json.dumps(got) and "eu" not in json.dumps(got["data"]), got
    mine = [g for g in got["data"] if g["sandbox_config_id"] == cid][0]
    assert mine["sandbox_config_name"] == "personal", mine
    srcs = {v["name"]: v["source"] for v in mine["vars"]}
    assert srcs == {"SHARED": "workspace", "MINE": "user"}, mine
    skill = [s for s in mine["skills"] if s["skill_id"] == "skill-1"][0]
    ssrc = {v["name"]: v["source"] for v in skill["vars"]}
    assert ssrc == {"API_TOKEN": "unset", "REGION": "user"}, skill
    assert [v for v in skill["vars"] if v["name"] == "API_TOKEN"][0]["required"] is True
    # Another user sees none of bob's.
    other = key("carol", "member").ok("GET", "/v1/me/env-vars")
    theirs = [g for g in other["data"] if g["sandbox_config_id"] == cid][0]
    assert {v["name"]: v["source"] for v in theirs["vars"]} == {"SHARED": "workspace"}, theirs
    # Delete, then delete again: 404.
    b.ok("DELETE", "/v1/me/env-vars/sandbox", {"sandbox_config_id": cid, "name": "MINE"})
    assert_error(b.request("DELETE", "/v1/me/env-vars/sandbox",
                           {"sandbox_config_id": cid, "name": "MINE"}), 404, "env_var_not_found")
    b.ok("DELETE", "/v1/me/env-vars/skill", {"skill_id": "skill-1", "name": "REGION"})
    assert_error(b.request("DELETE", "/v1/me/env-vars/skill",
                           {"skill_id": "skill-1", "name": "REGION"}), 404, "env_var_not_found")
    assert_error(b.request("GET", "/v1/me/env-vars", key=None), 401, "missing_api_key")
    assert_error(b.request("PUT", "/v1/me/env-vars/sandbox", raw=b"["), 400, "invalid_json")


def test_override_order_personal_skill_over_personal_sandbox_over_configuration():
    c = admin()
    cfg = create_config(c, "order", {"env_vars": {"API_TOKEN": "cfg", "REGION": "cfg",
                                                  "PLAIN": "cfg"}})
    e = key("erin", "member")
    e.ok("PUT", "/v1/me/env-vars/sandbox", {"sandbox_config_id": cfg["id"], "name": "API_TOKEN",
                                            "value": "user-sandbox"})
    e.ok("PUT", "/v1/me/env-vars/sandbox", {"sandbox_config_id": cfg["id"], "name": "REGION",
                                            "value": "user-sandbox"})
    e.ok("PUT", "/v1/me/env-vars/skill", {"skill_id": "skill-1", "name": "API_TOKEN",
                                          "value": "user-skill"})
    sb = e.create_sandbox(config_id=cfg["id"])
    out = e.sh(sb["id"], "echo $API_TOKEN $REGION $PLAIN")
    assert out == "user-skill user-sandbox cfg\n", out
    # Only erin's sandboxes get erin's values.
    f = key("fred", "member")
    sb2 = f.create_sandbox(config_id=cfg["id"])
    assert f.sh(sb2["id"], "echo $API_TOKEN $REGION") == "cfg cfg\n"
    f.delete_sandbox(sb2["id"])
    # A restart keeps the sandbox's variables (sealed beside its row) and its policy.
    D.get().restart()
    assert e.sh(sb["id"], "echo $API_TOKEN $REGION $PLAIN") == "user-skill user-sandbox cfg\n"
    a = alice()
    r = eu.probe(a, net_sandbox()["id"], "connect", "other.example.com:443")
    assert r["reason"] == "config_default_deny", r
    e.delete_sandbox(sb["id"])


def test_no_secret_reaches_the_daemon_log():
    # Last in the module: every secret above went through this daemon.
    text = D.get().log_text()
    assert text, "no daemon log"
    for s in (SECRET, INJECT_SECRET, PERSONAL, "user-skill", "bench-secret"):
        assert s not in text, "%s is in the daemon log" % s
