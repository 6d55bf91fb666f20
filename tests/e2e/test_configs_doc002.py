"""Document 002 as written: the network shapes cube_rules and e2b_host_rules beside
network.rules, the probe's external-network check, and POST
/v1/sandbox-configs/templates/query (docs/configs.md), through a real sbxd and real
sandboxes.

The egress upstreams are egress_upstream.py's: the test names resolve through a hosts file
to a random 127.x address, so nothing leaves the machine. The network bodies start from
document 002's example ({"deny_egress_by_default": true, "allow_out": ["pypi.org",
"files.pythonhosted.org"], "deny_out": []}) with the document's field names.
"""

import copy
import hashlib
import json
import os
import shutil
import subprocess
import tempfile


import egress_upstream as eu
import harness
from harness import assert_error

UP = {}
D = harness.Shared()

CUBE_SECRET = "cube-inject-secret-5d1e"
E2B_SECRET = "e2b-header-secret-93af"

# Document 002's network example, verbatim.
DOC_NETWORK = {"deny_egress_by_default": True,
               "allow_out": ["pypi.org", "files.pythonhosted.org"],
               "deny_out": []}

FETCH = r'''
import hashlib, json, ssl, sys, urllib.request
req = urllib.request.Request(sys.argv[1], headers={"X-Api-Key": "forged"})
out = {}
try:
    body = urllib.request.urlopen(req, timeout=20, context=ssl.create_default_context()).read()
    got = json.loads(body)
    key = got.get("x-api-key")
    out = {"ok": True, "sha": hashlib.sha256(key.encode()).hexdigest() if key else None}
except Exception as e:
    out = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
print(json.dumps(out))
'''


def up():
    if "u" not in UP:
        UP["u"] = eu.Upstreams()
        env = dict(UP["u"].env())
        # Injected hosts' upstreams are verified as a client would: the test CA too.
        env["SBX_FETCH_CA_FILE"] = os.path.join(UP["u"].tmp, "ca.pem")
        D.kw["extra_env"] = env
    return UP["u"]


def teardown_module():
    D.close()
    if "u" in UP:
        UP.pop("u").close()


def admin():
    up()
    return D.client()


def network(**more):
    n = copy.deepcopy(DOC_NETWORK)
    for k, v in more.items():
        if k == "allow_out":
            n["allow_out"] = n["allow_out"] + v
        else:
            n[k] = v
    return n


def create_config(c, name, config, status=201):
    return c.ok("POST", "/v1/sandbox-configs", {"name": name, "config": config}, status=status)


def fetch_header_sha(c, sid, url):
    res = c.exec(sid, shell="python3 /workspace/fetch.py " + url, timeout_seconds=60)
    assert res["exit_code"] == 0, res
    return json.loads(res["stdout"])


def sandbox_of(c, cid):
    sb = c.create_sandbox(config_id=cid)
    up().install(c, sb["id"])
    r = c.request("PUT", "/v1/sandboxes/%s/files/fetch.py" % sb["id"], raw=FETCH.encode())
    assert r.status in (200, 201), r
    return sb


def sha(s):
    return hashlib.sha256(s.encode()).hexdigest()


CUBE_RULES = [
    {"name": "no-blocked", "scheme": "http", "host": "second.example.com", "methods": ["GET"],
     "path": "/blocked", "deny": True, "audit": False},
    {"name": "pypi-audit", "scheme": "https", "sni": "pypi.org", "host": "pypi.org",
     "deny": False, "audit": True},
    {"name": "api", "scheme": "https", "host": "allowed.example.com", "methods": ["GET"],
     "path": "/headers", "deny": False, "audit": False,
     "inject": [{"header": "X-Api-Key", "secret": CUBE_SECRET, "format": "Key {secret}"}]},
]


def test_cube_rules_are_kept_in_order_masked_and_enforced_by_the_proxy():
    c = admin()
    cfg = create_config(c, "cube", {"network": network(
        allow_out=["allowed.example.com", "second.example.com"], cube_rules=CUBE_RULES)})
    net = cfg["config"]["network"]
    # The shape sent comes back, in order, its secret masked.
    assert [r["name"] for r in net["cube_rules"]] == ["no-blocked", "pypi-audit", "api"], net
    assert net["cube_rules"][2]["inject"] == [{"header": "X-Api-Key", "secret": "********",
                                               "format": "Key {secret}"}], net
    assert net["rules"] == [] and "e2b_host_rules" not in net, net
    assert CUBE_SECRET not in json.dumps(cfg)
    assert c.ok("GET", "/v1/sandbox-configs/" + cfg["id"]) == cfg
    # A PUT of the answer as read (the placeholder) keeps the stored secret.
    put = c.ok("PUT", "/v1/sandbox-configs/" + cfg["id"],
               {"name": "cube", "config": cfg["config"]})
    assert put["config"]["network"]["cube_rules"] == net["cube_rules"], put
    sb = sandbox_of(c, cfg["id"])
    sid = sb["id"]
    # The inject rule: the header goes in, the sandbox's own is dropped.
    got = fetch_header_sha(c, sid, "https://allowed.example.com/headers")
    assert got["ok"] and got["sha"] == sha("Key " + CUBE_SECRET), got
    # The deny rule on plain http, its method and path; another path passes.
    r = eu.probe(c, sid, "plain", "http://second.example.com/blocked/x")
    assert r["status_line"].startswith("HTTP/1.1 403") and r["reason"] == "rule_denied", r
    r = eu.probe(c, sid, "plain", "http://second.example.com/open")
    assert r["status_line"].startswith("HTTP/1.1 200"), r
    # The audit rule, and allow_out still deciding what may leave.
    r = eu.probe(c, sid, "fetch", "https://pypi.org/")
    assert r["ok"] and "hello from pypi.org" in r["body"], r
    r = eu.probe(c, sid, "connect", "other.example.com:443")
    assert r["reason"] == "config_default_deny", r
    log = c.ok("GET", "/v1/sandboxes/%s/egress" % sid)["data"]
    assert any(e["host"] == "pypi.org" and "audit rule pypi-audit" in e["reason"] for e in log)
    assert any("rule api injected 1 header" in e["reason"] for e in log), log
    assert CUBE_SECRET not in json.dumps(log)
    c.delete_sandbox(sid)


def test_cube_rules_order_decides():
    c = admin()
    # The same host twice: the first rule that matches decides (deny first, then allow).
    rules = [{"name": "deny-first", "scheme": "http", "host": "second.example.com",
              "deny": True},
             {"name": "allow-later", "scheme": "http", "host": "second.example.com",
              "audit": True}]
    first = create_config(c, "order-deny", {"network": network(
        allow_out=["second.example.com"], cube_rules=rules)})
    second = create_config(c, "order-allow", {"network": network(
        allow_out=["second.example.com"], cube_rules=list(reversed(rules)))})
    assert [r["name"] for r in second["config"]["network"]["cube_rules"]] == \
        ["allow-later", "deny-first"]
    for cfg, want in ((first, "rule_denied"), (second, None)):
        sb = sandbox_of(c, cfg["id"])
        r = eu.probe(c, sb["id"], "plain", "http://second.example.com/x")
        if want:
            assert r["reason"] == want, r
        else:
            assert r["status_line"].startswith("HTTP/1.1 200"), r
        c.delete_sandbox(sb["id"])


def test_e2b_host_rules_inject_their_headers_and_keep_them_on_put():
    c = admin()
    cfg = create_config(c, "e2b", {"network": network(
        allow_out=["allowed.example.com"],
        e2b_host_rules=[{"host": "allowed.example.com",
                         "headers": {"X-Api-Key": E2B_SECRET}}])})
    net = cfg["config"]["network"]
    assert net["e2b_host_rules"] == [{"host": "allowed.example.com",
                                      "headers": {"X-Api-Key": "********"}}], net
    assert "cube_rules" not in net and net["rules"] == [], net
    assert E2B_SECRET not in json.dumps(cfg)
    # The masked placeholder keeps the stored value; a new header is sealed beside it.
    put = c.ok("PUT", "/v1/sandbox-configs/" + cfg["id"], {"name": "e2b", "config": {
        "network": network(allow_out=["allowed.example.com"],
                           e2b_host_rules=[{"host": "allowed.example.com",
                                            "headers": {"X-Api-Key": "********",
                                                        "X-Other": "o"}}])}})
    assert put["config"]["network"]["e2b_host_rules"][0]["headers"] == \
        {"X-Api-Key": "********", "X-Other": "********"}, put
    sb = sandbox_of(c, cfg["id"])
    got = fetch_header_sha(c, sb["id"], "https://allowed.example.com/headers")
    assert got["ok"] and got["sha"] == sha(E2B_SECRET), got
    # Another host is a plain tunnel: the client verifies it itself (no test CA: it fails).
    got = fetch_header_sha(c, sb["id"], "https://pypi.org/headers")
    assert got["ok"] is False and "CERTIFICATE_VERIFY_FAILED" in got["error"], got
    log = c.ok("GET", "/v1/sandboxes/%s/egress" % sb["id"])["data"]
    assert any("rule e2b:allowed.example.com injected 2 header" in e["reason"] for e in log), log
    out = c.sh(sb["id"], "env; cat /proc/1/environ | tr '\\0' '\\n'; true")
    assert E2B_SECRET not in out
    c.delete_sandbox(sb["id"])
    # The change is audited, without the value.
    audit = c.ok("GET", "/v1/audit?action=sandbox_config.update")
    assert any(cfg["id"] in json.dumps(e)
               for e in audit["data"]), audit
    assert E2B_SECRET not in json.dumps(audit)


BAD_NETWORKS = [
    # The host of an e2b rule must also be in allow_out.
    network(e2b_host_rules=[{"host": "allowed.example.com", "headers": {"X-K": "s"}}]),
    network(allow_out=["allowed.example.com"],
            e2b_host_rules=[{"host": "allowed.example.com", "headers": {}}]),
    network(allow_out=["allowed.example.com"],
            e2b_host_rules=[{"host": "allowed.example.com", "headers": {"Host": "s"}}]),
    network(allow_out=["allowed.example.com"],
            e2b_host_rules=[{"host": "allowed.example.com", "headers": {"X-K": 5}}]),
    network(allow_out=["allowed.example.com"],
            e2b_host_rules=[{"host": "allowed.example.com", "headers": {"X-K": "a\r\nb"}}]),
    network(allow_out=["allowed.example.com"],
            e2b_host_rules=[{"host": "allowed.example.com", "headers": {"X-K": "s"},
                             "extra": 1}]),
    network(allow_out=["allowed.example.com"],
            e2b_host_rules=[{"host": "allowed.example.com", "headers": {"X-K": "s"}},
                            {"host": "allowed.example.com", "headers": {"X-L": "s"}}]),
    network(allow_out=["allowed.example.com"],
            e2b_host_rules=[{"host": "allowed.example.com", "headers": {"X-K": "********"}}]),
    network(e2b_host_rules=[{"headers": {"X-K": "s"}}]),
    network(e2b_host_rules={"host": "pypi.org"}),
    # rules and cube_rules are one list under two names: not both.
    network(rules=[{"name": "a", "host": "pypi.org"}],
            cube_rules=[{"name": "b", "host": "pypi.org"}]),
    network(cube_rules=[{"name": "r", "scheme": "ftp", "host": "pypi.org"}]),
    network(cube_rules=[{"name": "r", "host": "pypi.org", "inject": [{"header": "X-K"}]}]),
    network(cube_rules=[{"name": "r", "host": "pypi.org"}, {"name": "r", "host": "pypi.org"}]),
    network(cube_rules=[{"name": "e2b:pypi.org", "host": "pypi.org"}],
            e2b_host_rules=[{"host": "pypi.org", "headers": {"X-K": "s"}}]),
    network(cube_rules="all"),
]


def test_bad_cube_and_e2b_rules_are_400_and_store_nothing():
    c = admin()
    before = c.ok("GET", "/v1/sandbox-configs")["data"]
    for i, bad in enumerate(BAD_NETWORKS):
        r = c.request("POST", "/v1/sandbox-configs", {"name": "bad-net-%d" % i,
                                                      "config": {"network": bad}})
        assert_error(r, 400, "invalid_sandbox_config")
        assert "cube_rules" in r.body["error"]["message"] or \
            "e2b_host_rules" in r.body["error"]["message"] or \
            "rules" in r.body["error"]["message"], r.body
    assert c.ok("GET", "/v1/sandbox-configs")["data"] == before
    # A local configuration has no egress proxy: no rules of either shape.
    for n in (network(cube_rules=[{"name": "r", "host": "pypi.org"}]),
              network(e2b_host_rules=[{"host": "pypi.org", "headers": {"X-K": "s"}}])):
        n["deny_egress_by_default"] = False
        n["allow_out"] = ["pypi.org"]
        r = c.request("POST", "/v1/sandbox-configs", {"name": "local-net",
                                                      "config": {"backend": "local",
                                                                 "network": n}})
        assert_error(r, 400, "invalid_sandbox_config")
    # A failed PUT changes nothing.
    cfg = create_config(c, "bad-put", {"network": network(
        allow_out=["allowed.example.com"],
        e2b_host_rules=[{"host": "allowed.example.com", "headers": {"X-K": "s"}}])})
    r = c.request("PUT", "/v1/sandbox-configs/" + cfg["id"], {"name": "bad-put", "config": {
        "network": network(e2b_host_rules=[{"host": "allowed.example.com",
                                            "headers": {"X-K": "********"}}])}})
    assert_error(r, 400, "invalid_sandbox_config")
    assert c.ok("GET", "/v1/sandbox-configs/" + cfg["id"]) == cfg


# --- POST /v1/sandbox-configs/templates/query ------------------------------------------

QUERY = "/v1/sandbox-configs/templates/query"


def test_templates_query_lists_and_ensures_the_standard_and_desktop_templates():
    c = admin()
    # Document 002's request: {config, ensure_standard?, ensure_desktop?}.
    r = c.ok("POST", QUERY, {"config": {"network": DOC_NETWORK}, "ensure_standard": True,
                             "ensure_desktop": True})
    assert r["object"] == "template_query" and r["backend"] == "gvisor", r
    assert r["config_id"] is None and r["template"] == "base" and r["replaced"] is None, r
    names = [t["name"] for t in r["templates"]]
    # The templates are cached for the tests (SBX_TEMPLATE_CACHE): built, so ensured.
    assert "base" in names and "desktop" in names, names
    assert all(t["object"] == "template" for t in r["templates"]), r
    assert r["standard"] == {"name": "base", "built": True, "ensured": True}, r
    assert r["desktop"] == {"name": "desktop", "built": True, "ensured": True}, r
    r = c.ok("POST", QUERY, {"config": {}})
    assert r["standard"]["ensured"] is False and r["desktop"]["ensured"] is False, r
    audit = c.ok("GET", "/v1/audit?action=sandbox_config.templates_query")["data"]
    assert len(audit) >= 2, audit


def test_templates_query_replaces_the_configurations_template():
    c = admin()
    cfg = create_config(c, "tq-desktop", {"desktop_enabled": True,
                                          "env_vars": {"TOKEN": "tq-secret"}})
    cid = cfg["id"]
    r = c.ok("POST", QUERY, {"config_id": cid, "replace_desktop": True})
    assert r["replaced"] == "desktop" and r["template"] == "desktop", r
    assert r["sandbox_config"]["config"]["template"] == "desktop", r
    got = c.ok("GET", "/v1/sandbox-configs/" + cid)
    assert got["config"]["template"] == "desktop", got
    # Everything else is as it was: the secret kept (masked), the other fields too.
    assert got["config"]["env_vars"] == {"TOKEN": "********"}, got
    assert {k: v for k, v in got["config"].items() if k != "template"} == \
        {k: v for k, v in cfg["config"].items() if k != "template"}, (got, cfg)
    entry = [e for e in c.ok("GET", "/v1/audit?action=sandbox_config.templates_query")["data"]
             if cid in json.dumps(e)]
    assert entry and "desktop" in json.dumps(entry[0]), entry
    # The config sent with config_id is checked; the stored one is what changes.
    r = c.ok("POST", QUERY, {"config_id": cid, "config": {"desktop_enabled": True},
                             "replace_standard": True})
    assert r["replaced"] == "standard" and r["template"] == "base", r
    assert c.ok("GET", "/v1/sandbox-configs/" + cid)["config"]["template"] == "base"
    # A sandbox of it lives: the template is what it runs, 409 and nothing changes.
    sb = c.create_sandbox(config_id=cid)
    r = c.request("POST", QUERY, {"config_id": cid, "replace_desktop": True})
    assert_error(r, 409, "sandboxes_still_live")
    assert c.ok("GET", "/v1/sandbox-configs/" + cid)["config"]["template"] == "base"
    c.delete_sandbox(sb["id"])


def test_templates_query_refusals():
    c = admin()
    plain = create_config(c, "tq-plain", {})
    before = c.ok("GET", "/v1/sandbox-configs/" + plain["id"])
    for body, status, code in (
            ({"config": {}, "replace_standard": True}, 400, "invalid_request"),
            ({"config": {}, "replace_desktop": True}, 400, "invalid_request"),
            ({"config_id": plain["id"], "replace_standard": True, "replace_desktop": True},
             400, "invalid_request"),
            ({"config": {}, "ensure_standard": "yes"}, 400, "invalid_request"),
            ({"config": {}, "ensure_desktop": 1}, 400, "invalid_request"),
            ({"config": {}, "other": True}, 400, "invalid_request"),
            ({"config": "x"}, 400, "invalid_request"),
            ({"config_id": 5}, 400, "invalid_request"),
            ({}, 400, "invalid_request"),
            ({"config": {"backend": "docker"}}, 400, "invalid_sandbox_config"),
            ({"config_id": "cfg_nope"}, 404, "sandbox_config_not_found"),
            ({"config_id": "cfg_nope", "replace_standard": True}, 404,
             "sandbox_config_not_found"),
            # desktop needs desktop_enabled in the configuration.
            ({"config_id": plain["id"], "replace_desktop": True}, 400,
             "invalid_sandbox_config")):
        assert_error(c.request("POST", QUERY, body), status, code)
    assert_error(c.request("POST", QUERY, raw=b"{"), 400, "invalid_json")
    assert c.ok("GET", "/v1/sandbox-configs/" + plain["id"]) == before
    # Admin+ with a full-access key, as the configuration routes.
    member = c.ok("POST", "/v1/keys", {"user": "tq-member", "role": "member",
                                       "tool_level": "sandbox"}, status=201)
    assert_error(D.get().client(member["key"]).request("POST", QUERY, {"config": {}}), 403,
                 "admin_required")
    ra = c.ok("POST", "/v1/keys", {"user": "tq-admin", "role": "admin",
                                   "tool_level": "sandbox", "scope": "restricted"},
              status=201)
    assert_error(D.get().client(ra["key"]).request("POST", QUERY, {"config": {}}), 403,
                 "full_access_required")


def script_digest(name):
    """The recipe digest scripts/build-template.sh gives NAME now."""
    p = subprocess.run([os.path.join(harness.REPO, "scripts", "build-template.sh"), "--digest",
                        name], stdout=subprocess.PIPE, check=True, timeout=60)
    return p.stdout.decode().strip()


def cache_without_desktop():
    """A template cache in which desktop is not built: base as the operator's script leaves
    it (base-<digest> and the base link), and beside it desktop-<digest>, the tree of the
    current desktop recipe that `make test` built in the real cache, but no desktop link.
    scripts/build-template.sh desktop run in it is a real run of the operator's script that
    finds its recipe's build and links it (its fast path): seconds, where debootstrap and
    apt would take minutes under the test budget."""
    real = os.environ.get("SBX_TEMPLATE_CACHE", "/var/cache/sbx/templates")
    tmp = tempfile.mkdtemp(prefix="sbx-tq-")
    for name in ("base", "desktop"):
        built = "%s-%s" % (name, script_digest(name))
        assert os.path.exists(os.path.join(real, built, "manifest.json")), \
            "%s is not in %s (make test builds it)" % (built, real)
        os.symlink(os.path.join(real, built), os.path.join(tmp, built))
    os.symlink("base-" + script_digest("base"), os.path.join(tmp, "base"))
    return real, tmp


def query_audit(c, action):
    return c.ok("GET", "/v1/audit?action=" + action)["data"]


def test_templates_query_builds_a_missing_desktop_then_sets_it():
    real, tmp = cache_without_desktop()
    d = harness.Daemon(extra_env={"SBX_TEMPLATE_CACHE": tmp})
    try:
        d.start()
        c = d.client()
        cfg = create_config(c, "tq-build", {"desktop_enabled": True})
        plain = create_config(c, "tq-plain", {})
        # The standard template is built: 200, nothing to build.
        r = c.request("POST", QUERY, {"config_id": cfg["id"], "ensure_standard": True})
        assert r.status == 200, r
        assert [t["name"] for t in r.body["templates"]] == ["base"], r.body
        assert r.body["standard"] == {"name": "base", "built": True, "ensured": True}, r.body
        assert r.body["desktop"] == {"name": "desktop", "built": False, "ensured": False}, r.body
        # A replace that could never be done is refused before anything is built.
        assert_error(c.request("POST", QUERY, {"config_id": plain["id"], "replace_desktop": True}),
                     400, "invalid_sandbox_config")
        assert_error(c.request("GET", "/v1/templates/desktop/build"), 404,
                     "template_build_not_found")
        # Document 002's body: ensure the desktop template, and make it the configuration's.
        r = c.request("POST", QUERY, {"config_id": cfg["id"], "ensure_desktop": True,
                                      "replace_desktop": True})
        assert r.status == 202, r
        assert r.headers["location"] == "/v1/templates/desktop/build", r.headers
        q = r.body
        assert q["replaced"] is None and q["replacing"] == "desktop", q
        assert q["template"] == "base" and "sandbox_config" not in q, q
        b = q["desktop"]["build"]
        assert q["desktop"]["built"] is False and q["desktop"]["ensured"] is True, q
        assert b["object"] == "template_build" and b["name"] == "desktop", b
        assert b["steps"] == ["script", "check"] and b["public"] is True, b
        assert b["events_url"] == "/v1/templates/desktop/build-events", b
        # Its progress, as any template build's: step and log events, then done.
        events = [ev for ev in c.stream("GET", b["events_url"], timeout=300)][1:]
        kinds = [e[1]["type"] for e in events]
        assert kinds[0] == "step" and kinds[-1] == "done", kinds
        assert [e[1]["step"] for e in events if e[1]["type"] == "step"] == ["script", "check"]
        logs = [e[1]["line"] for e in events if e[1]["type"] == "log"]
        # The script's own last line: the template dir it made current.
        assert os.path.join(tmp, "desktop-" + script_digest("desktop")) in logs, logs
        done = events[-1][1]
        with open(os.path.join(real, "desktop", "manifest.json")) as f:
            want = json.load(f)
        assert done["status"] == "ready" and done["percent"] == 100, done
        assert done["build"]["id"] == b["id"], done
        assert done["build"]["digest"] == "sha256:" + want["content_digest"], done
        assert os.readlink(os.path.join(tmp, "desktop")) == "desktop-" + script_digest("desktop")
        got = c.ok("GET", "/v1/templates/desktop/build")
        assert got["status"] == "ready" and got["id"] == b["id"], got
        assert c.ok("GET", "/v1/templates/desktop")["name"] == "desktop"
        # The replace was done once the build was ready.
        assert c.ok("GET", "/v1/sandbox-configs/" + cfg["id"])["config"]["template"] == "desktop"
        entries = query_audit(c, "sandbox_config.templates_query")
        outcomes = [e["outcome"] for e in entries if cfg["id"] in json.dumps(e)]
        assert "building" in outcomes and "replaced" in outcomes, entries
        built = [e for e in query_audit(c, "template.build") if b["id"] in json.dumps(e)]
        assert len(built) == 1 and built[0]["outcome"] == "started", built
        # Now built: 200 and no build.
        r = c.request("POST", QUERY, {"config_id": cfg["id"], "ensure_desktop": True})
        assert r.status == 200 and r.body["desktop"] == {
            "name": "desktop", "built": True, "ensured": True}, r
        # A sandbox of the configuration runs the desktop it got.
        sb = c.create_sandbox(config_id=cfg["id"])
        assert sb["template"] == "desktop", sb
        assert c.sh(sb["id"], "command -v Xvfb x11vnc websockify") != "", sb
        c.delete_sandbox(sb["id"])
    finally:
        d.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


def test_templates_query_a_failed_build_replaces_nothing():
    """The operator's script fails (a stand-in for it that says why and exits 1): the build
    is failed, with its stderr, and the configuration keeps its template."""
    _, tmp = cache_without_desktop()
    script = os.path.join(tmp, "failing-build.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\necho \"build-template: cannot build $1 here\" >&2\nexit 1\n")
    os.chmod(script, 0o755)
    d = harness.Daemon(extra_env={"SBX_TEMPLATE_CACHE": tmp, "SBX_TEMPLATE_SCRIPT": script})
    try:
        d.start()
        c = d.client()
        cfg = create_config(c, "tq-fail", {"desktop_enabled": True})
        r = c.request("POST", QUERY, {"config_id": cfg["id"], "ensure_desktop": True,
                                      "replace_desktop": True})
        assert r.status == 202, r
        events = [ev[1] for ev in list(c.stream(
            "GET", r.body["desktop"]["build"]["events_url"], timeout=60))[1:]]
        end = events[-1]
        assert end["type"] == "error" and end["status"] == "failed", events
        assert end["error"]["code"] == "template_build_failed", end
        assert "cannot build desktop here" in end["error"]["stderr_tail"], end
        assert c.ok("GET", "/v1/templates/desktop/build")["status"] == "failed"
        assert_error(c.request("GET", "/v1/templates/desktop"), 404, "template_not_found")
        assert c.ok("GET", "/v1/sandbox-configs/" + cfg["id"])["config"]["template"] == "base"
        outcomes = [e["outcome"] for e in query_audit(c, "sandbox_config.templates_query")
                    if cfg["id"] in json.dumps(e)]
        assert "template_build_failed" in outcomes, outcomes
    finally:
        d.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


# --- the probe's external-network check ------------------------------------------------

CHECK = "/v1/system/sandbox-check"


def checks_of(r):
    return {x["name"]: x for x in r["checks"]}


def seen(host):
    return [p for h, p in up().https.seen if h == host]


def test_probe_reaches_an_allowed_host_through_the_proxy_and_from_a_sandbox():
    c = admin()
    before = len(seen("pypi.org"))
    # Document 002's network example: pypi.org is the first host allow_out lets out.
    r = c.ok("POST", CHECK, {"config": {"network": DOC_NETWORK}})
    ext = checks_of(r)["external_network"]
    assert ext["ok"] is True and ext["reason"] is None, r
    assert "https://pypi.org/" in ext["message"] and isinstance(ext["latency_ms"], int), ext
    assert r["ok"] is True, r
    assert len(seen("pypi.org")) == before + 1, up().https.seen
    # deep: the throw-away sandbox reaches it too, through its egress listener.
    r = c.ok("POST", CHECK, {"config": {"network": DOC_NETWORK}, "deep": True}, timeout=180)
    cs = checks_of(r)
    assert cs["external_network"]["ok"] is True, r
    sx = cs["sandbox_external_network"]
    assert sx["ok"] is True and "pypi.org" in sx["message"] and "200" in sx["message"], sx
    assert cs["sandbox_destroy"]["ok"] is True and r["ok"] is True, r
    assert len(seen("pypi.org")) == before + 3, up().https.seen


def test_probe_skips_only_what_the_policy_forbids_and_says_why():
    c = admin()
    # Denied by default and no host in allow_out.
    r = c.ok("POST", CHECK, {"config": {"network": {"deny_egress_by_default": True,
                                                    "allow_out": [], "deny_out": []}},
                             "deep": True}, timeout=180)
    cs = checks_of(r)
    assert cs["external_network"]["ok"] is None, r
    assert cs["external_network"]["reason"] == "skipped_by_policy", r
    assert "denied by default" in cs["external_network"]["message"], r
    assert cs["sandbox_external_network"]["ok"] is None, r
    assert r["ok"] is True, r
    # No network policy: its sandboxes have egress none.
    ext = checks_of(c.ok("POST", CHECK, {"config": {}}))["external_network"]
    assert ext["ok"] is None and "no network policy" in ext["message"], ext
    # A cube rule denies the first host: the next one allow_out names is reached.
    before = len(seen("files.pythonhosted.org"))
    deny_pypi = [{"name": "no-pypi", "scheme": "https", "host": "pypi.org", "deny": True}]
    ext = checks_of(c.ok("POST", CHECK, {"config": {"network": network(
        cube_rules=deny_pypi)}}))["external_network"]
    assert ext["ok"] is True and "files.pythonhosted.org" in ext["message"], ext
    assert len(seen("files.pythonhosted.org")) == before + 1
    # Every host denied by a rule: skipped, naming the rule.
    deny_all = deny_pypi + [{"name": "no-files", "scheme": "https",
                             "host": "files.pythonhosted.org", "deny": True}]
    ext = checks_of(c.ok("POST", CHECK, {"config": {"network": network(
        cube_rules=deny_all)}}))["external_network"]
    assert ext["ok"] is None and ext["reason"] == "skipped_by_policy", ext
    assert "no-files" in ext["message"], ext
    # Allowed by default, allow_out naming no host, no SBX_PROBE_HOST on this daemon.
    ext = checks_of(c.ok("POST", CHECK, {"config": {"network": {
        "deny_egress_by_default": False}}}))["external_network"]
    assert ext["ok"] is None and ext["reason"] == "no_probe_host", ext


def test_probe_reports_a_host_it_cannot_reach_as_failed():
    c = admin()
    # A name that resolves to an address no sandbox may dial (metadata): allowed by the
    # policy, refused on the way: ok false, not a skip.
    r = c.ok("POST", CHECK, {"config": {"network": {"deny_egress_by_default": True,
                                                    "allow_out": ["meta.example.com"]}}})
    ext = checks_of(r)["external_network"]
    assert ext["ok"] is False and ext["reason"] == "network_unreachable", ext
    assert r["ok"] is False, r
