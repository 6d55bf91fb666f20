"""Egress through the audited proxy (docs/egress.md), through a real sbxd and real sandboxes.

The upstreams (egress_upstream.py) run on a random 127.x.y.z: an HTTPS server with a test
CA that also serves a fake package index, and a plain HTTP server. sbxd resolves through a
test hosts file and exempts exactly those two address:port pairs, so no traffic leaves the
machine. Sandboxes are shared within the module: one per policy.
"""

import json
import os
import tempfile

import egress_upstream as eu
import harness
from harness import assert_error

UP = {}
D = harness.Shared()


def up():
    if "u" not in UP:
        UP["u"] = eu.Upstreams()
        D.kw["extra_env"] = UP["u"].env()
    return UP["u"]


def teardown_module():
    D.close()
    OP.close()
    if "u" in UP:
        UP.pop("u").close()


def client():
    up()
    return D.once("alice", lambda d: d.client(d.client().create_key("alice")["key"]))


def sandbox(name, egress):
    """A sandbox with this policy, made once per module, with the CA and probe inside."""
    def make(d):
        c = client()
        sb = c.create_sandbox(egress=egress) if egress is not None else c.create_sandbox()
        up().install(c, sb["id"])
        return sb
    return D.once("sb:" + name, make)


def log(c, sid, **q):
    qs = "&".join("%s=%s" % kv for kv in q.items())
    return c.ok("GET", "/v1/sandboxes/%s/egress%s" % (sid, "?" + qs if qs else ""))


def entries_for(c, sid, host):
    return [e for e in log(c, sid)["data"] if e["host"] == host]


ALLOW = {"mode": "allowlist", "domains": ["allowed.example.com", "second.example.com",
                                          "private.example.com", "loop.example.com",
                                          "meta.example.com", "cgnat.example.com"]}


def test_default_policy_is_none_and_nothing_gets_out():
    c = client()
    sb = sandbox("none", None)
    assert sb["egress"] == {"mode": "none"}, sb
    r = eu.probe(c, sb["id"], "fetch", "https://allowed.example.com/")
    assert r["ok"] is False and "403" in r["error"], r
    r = eu.probe(c, sb["id"], "connect", "allowed.example.com:443")
    assert r["status_line"].startswith("HTTP/1.1 403") and r["reason"] == "egress_none", r
    e = entries_for(c, sb["id"], "allowed.example.com")
    assert e and all(x["verdict"] == "denied" and x["reason"].startswith("egress_none")
                     for x in e), e
    assert not any(h == "allowed.example.com" for h, _ in up().https.seen), up().https.seen


def test_allowlist_allows_listed_https_and_http_and_logs_them():
    c = client()
    sb = sandbox("allow", ALLOW)
    assert sb["egress"] == ALLOW, sb
    env = c.sh(sb["id"], "env | grep -i _proxy | sort")
    for k in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        assert "%s=http://127.0.0.1:3128" % k in env, env
    r = eu.probe(c, sb["id"], "fetch", "https://allowed.example.com/x")
    assert r == {"ok": True, "status": 200,
                 "body": "hello from allowed.example.com via https"}, r
    r = eu.probe(c, sb["id"], "fetch", "http://second.example.com/plain?q=1")
    assert r["ok"] and r["body"] == "hello from second.example.com via http", r
    assert ("second.example.com", "/plain?q=1") in up().http.seen, up().http.seen
    e = entries_for(c, sb["id"], "allowed.example.com")[0]
    assert e["verdict"] == "allowed" and e["reason"] == "ok", e
    assert e["method"] == "CONNECT" and e["port"] == 443 and e["address"] == up().addr, e
    assert e["bytes_sent"] > 100 and e["bytes_received"] > 100, e
    assert e["ended_at_ms"] >= e["started_at_ms"] > 0, e
    p = entries_for(c, sb["id"], "second.example.com")[0]
    assert p["method"] == "GET" and p["port"] == 80 and p["verdict"] == "allowed", p


def test_unlisted_host_gets_403_with_a_reason():
    c = client()
    sb = sandbox("allow", ALLOW)
    r = eu.probe(c, sb["id"], "connect", "other.example.com:443")
    assert r == {"status_line": "HTTP/1.1 403 Forbidden", "reason": "host_not_allowed"}, r
    r = eu.probe(c, sb["id"], "plain", "http://other.example.com/")
    assert r["reason"] == "host_not_allowed", r
    r = eu.probe(c, sb["id"], "connect", "allowed.example.com:8443")
    assert r["reason"] == "port_not_allowed", r
    r = eu.probe(c, sb["id"], "plain", "http://allowed.example.com:8080/")
    assert r["reason"] == "port_not_allowed", r
    e = entries_for(c, sb["id"], "other.example.com")
    assert len(e) == 2 and all(x["verdict"] == "denied" for x in e), e
    assert "other.example.com is not in this sandbox's egress allowlist" in e[0]["reason"], e


def test_sni_must_match_the_connect_host():
    c = client()
    sb = sandbox("allow", ALLOW)
    r = eu.probe(c, sb["id"], "sni", "allowed.example.com:443", "second.example.com")
    assert r["status_line"].startswith("HTTP/1.1 200"), r
    assert r["ok"] is False and "ACCESS_DENIED" in r["error"], r
    r = eu.probe(c, sb["id"], "sni", "allowed.example.com:443", "allowed.example.com")
    assert r["ok"] is True and r["body"].startswith("HTTP/1.1 200"), r
    reasons = [x["reason"] for x in entries_for(c, sb["id"], "allowed.example.com")]
    assert any(x.startswith("sni_mismatch: TLS SNI second.example.com") for x in reasons), reasons


def test_every_spelling_of_loopback_and_metadata_is_refused():
    c = client()
    sb = sandbox("allow", ALLOW)
    for target in ("127.1:443", "2130706433:443", "0x7f000001:443", "0177.0.0.1:443",
                   "[::ffff:127.0.0.1]:443", "[::1]:443", "169.254.169.254:443",
                   "%s:443" % up().addr):
        r = eu.probe(c, sb["id"], "connect", target)
        assert r["status_line"] == "HTTP/1.1 403 Forbidden", (target, r)
        assert r["reason"] in ("blocked_address", "ip_literal"), (target, r)
    r = eu.probe(c, sb["id"], "plain", "http://169.254.169.254/latest/meta-data/")
    assert r["reason"] == "blocked_address", r
    byhost = {e["host"]: e for e in log(c, sb["id"], limit=1000)["data"]}
    for host, cls in (("127.1", "loopback"), ("2130706433", "loopback"),
                      ("0x7f000001", "loopback"), ("0177.0.0.1", "loopback"),
                      ("::ffff:127.0.0.1", "loopback"), ("169.254.169.254", "metadata")):
        assert byhost[host]["verdict"] == "denied", byhost[host]
        assert byhost[host]["reason"].endswith("(%s)" % cls), byhost[host]
    # The test upstream's own address is exempt only as the resolved address of a name.
    assert byhost[up().addr]["reason"].endswith("(loopback)"), byhost[up().addr]


def test_names_resolving_to_internal_addresses_are_refused():
    c = client()
    sb = sandbox("allow", ALLOW)
    for host, cls in (("private.example.com", "private"), ("loop.example.com", "loopback"),
                      ("meta.example.com", "metadata"), ("cgnat.example.com", "cgnat")):
        r = eu.probe(c, sb["id"], "connect", host + ":443")
        assert r == {"status_line": "HTTP/1.1 403 Forbidden", "reason": "blocked_address"}, \
            (host, r)
        e = entries_for(c, sb["id"], host)[0]
        assert e["verdict"] == "denied" and e["reason"].endswith("(%s)" % cls), e
        assert e["address"] and e["bytes_sent"] == 0, e


def test_pip_install_from_the_fake_index_under_the_pypi_preset():
    c = client()
    sb = sandbox("pypi", {"mode": "preset", "preset": "pypi"})
    assert sb["egress"] == {"mode": "preset", "preset": "pypi"}, sb
    pip = ("pip install --no-cache-dir --retries 0 --timeout 20 --break-system-packages "
           "--cert /workspace/ca.pem --index-url https://pypi.org/simple --target /tmp/site "
           "sbxdemo")
    r = c.exec(sb["id"], shell=pip, timeout_seconds=120)
    assert r["exit_code"] == 0, r
    out = c.sh(sb["id"], "PYTHONPATH=/tmp/site python3 -c 'import sbxdemo; print(sbxdemo.VALUE)'")
    assert out.strip() == "sbx-egress-ok", out
    hosts = {e["host"] for e in log(c, sb["id"])["data"] if e["verdict"] == "allowed"}
    assert hosts == {"pypi.org", "files.pythonhosted.org"}, hosts
    # Same command, policy none: fails, and says why.
    none = sandbox("none", None)
    r = c.exec(none["id"], shell=pip, timeout_seconds=120)
    assert r["exit_code"] != 0 and "No matching distribution" in r["stderr"], r
    e = entries_for(c, none["id"], "pypi.org")
    assert e and e[0]["reason"].startswith("egress_none"), e


def test_policy_replaced_on_a_running_sandbox():
    d = D.get()
    c = D.once("dave", lambda d: d.client(d.client().create_key("dave")["key"]))
    sb = c.create_sandbox(egress={"mode": "allowlist", "domains": ["allowed.example.com"]})
    up().install(c, sb["id"])
    assert eu.probe(c, sb["id"], "fetch", "https://allowed.example.com/")["ok"], sb
    got = c.ok("PUT", "/v1/sandboxes/%s/egress" % sb["id"],
               {"mode": "allowlist", "domains": ["SECOND.example.com."]})
    assert got["id"] == sb["id"] and got["egress"] == {
        "mode": "allowlist", "domains": ["second.example.com"]}, got
    assert c.get_sandbox(sb["id"])["egress"] == got["egress"]
    r = eu.probe(c, sb["id"], "connect", "allowed.example.com:443")
    assert r["reason"] == "host_not_allowed", r
    assert eu.probe(c, sb["id"], "fetch", "https://second.example.com/")["ok"]
    got = c.ok("PUT", "/v1/sandboxes/%s/egress" % sb["id"], {"mode": "none"})
    assert got["egress"] == {"mode": "none"}
    assert eu.probe(c, sb["id"], "connect", "second.example.com:443")["reason"] == "egress_none"
    g = log(c, sb["id"])
    assert g["policy"] == {"mode": "none"} and g["sandbox_id"] == sb["id"], g
    audit = c.ok("GET", "/v1/audit?action=sandbox.egress")["data"]
    assert d is not None
    mine = [a for a in audit if a["sandbox_id"] == sb["id"]]
    assert len(mine) == 2 and mine[-1]["details"]["policy"] == {"mode": "none"}, mine
    c.delete_sandbox(sb["id"])


def test_log_pages_newest_first():
    c = client()
    sb = sandbox("allow", ALLOW)
    full = log(c, sb["id"], limit=1000)["data"]
    assert len(full) >= 4
    ids = [e["id"] for e in full]
    assert ids == sorted(ids, reverse=True), ids
    p1 = log(c, sb["id"], limit=2)
    assert p1["has_more"] is True and [e["id"] for e in p1["data"]] == ids[:2], p1
    p2 = log(c, sb["id"], limit=2, before=ids[1])
    assert [e["id"] for e in p2["data"]] == ids[2:4], p2
    fields = {"object", "id", "method", "host", "address", "port", "bytes_sent",
              "bytes_received", "started_at_ms", "ended_at_ms", "verdict", "reason"}
    assert set(full[0]) == fields, full[0]


BAD_POLICIES = [
    ({"mode": "allowlist", "domains": ["h%d.example.com" % i for i in range(21)]},
     "egress_too_many_domains"),
    ({"mode": "allowlist", "domains": ["1.2.3.4"]}, "egress_ip_not_allowed"),
    ({"mode": "allowlist", "domains": ["127.1"]}, "egress_ip_not_allowed"),
    ({"mode": "allowlist", "domains": ["2130706433"]}, "egress_ip_not_allowed"),
    ({"mode": "allowlist", "domains": ["[::1]"]}, "egress_ip_not_allowed"),
    ({"mode": "allowlist", "domains": ["example.com.0x7f"]}, "egress_ip_not_allowed"),
    ({"mode": "allowlist", "domains": ["localhost"]}, "egress_internal_domain"),
    ({"mode": "allowlist", "domains": ["printer.local"]}, "egress_internal_domain"),
    ({"mode": "allowlist", "domains": ["metadata.google.internal."]}, "egress_internal_domain"),
    ({"mode": "allowlist", "domains": ["intranet"]}, "egress_internal_domain"),
    ({"mode": "allowlist", "domains": ["bad_name.example.com"]}, "egress_invalid_domain"),
    ({"mode": "allowlist", "domains": ["-x.example.com"]}, "egress_invalid_domain"),
    ({"mode": "allowlist", "domains": ["a..example.com"]}, "egress_invalid_domain"),
    ({"mode": "allowlist", "domains": ["*.example.com"]}, "egress_invalid_domain"),
    ({"mode": "allowlist", "domains": ["x" * 64 + ".com"]}, "egress_invalid_domain"),
    ({"mode": "allowlist", "domains": [3]}, "invalid_egress"),
    ({"mode": "allowlist"}, "invalid_egress"),
    ({"mode": "allowlist", "domains": "example.com"}, "invalid_egress"),
    ({"mode": "preset", "preset": "cargo"}, "egress_unknown_preset"),
    ({"mode": "preset"}, "invalid_egress"),
    ({"mode": "open"}, "invalid_egress"),
    ({"mode": "none", "domains": []}, "invalid_egress"),
    ({"mode": "allowlist", "domains": [], "proxy": "x"}, "invalid_egress"),
    ("none", "invalid_egress"),
]


def test_bad_policies_on_create_are_400_and_create_nothing():
    c = client()
    before = {s["id"] for s in c.list_sandboxes()}
    for egress, code in BAD_POLICIES:
        r = c.request("POST", "/v1/sandboxes", {"egress": egress})
        assert_error(r, 400, code)
        r = c.request("POST", "/v1/sandboxes/run", {"egress": egress, "shell": "true"})
        assert_error(r, 400, code)
    assert {s["id"] for s in c.list_sandboxes()} == before


def test_bad_policies_on_replace_are_400_and_change_nothing():
    c = client()
    sb = sandbox("allow", ALLOW)
    for egress, code in BAD_POLICIES:
        r = c.request("PUT", "/v1/sandboxes/%s/egress" % sb["id"], egress)
        assert_error(r, 400, code if isinstance(egress, dict) else "invalid_json")
    assert_error(c.request("PUT", "/v1/sandboxes/%s/egress" % sb["id"], raw=b"{"),
                 400, "invalid_json")
    assert c.get_sandbox(sb["id"])["egress"] == ALLOW
    assert log(c, sb["id"])["policy"] == ALLOW


def test_egress_routes_errors():
    c = client()
    sb = sandbox("allow", ALLOW)
    missing = "sb_" + "0" * 20
    assert_error(c.request("GET", "/v1/sandboxes/%s/egress" % missing), 404, "sandbox_not_found")
    assert_error(c.request("PUT", "/v1/sandboxes/%s/egress" % missing, {"mode": "none"}),
                 404, "sandbox_not_found")
    for q in ("limit=0", "limit=1001", "limit=x", "before=0", "before=-1"):
        assert_error(c.request("GET", "/v1/sandboxes/%s/egress?%s" % (sb["id"], q)),
                     400, "invalid_request")
    assert_error(c.request("GET", "/v1/sandboxes/%s/egress" % sb["id"], key=None),
                 401, "missing_api_key")
    # Another user's sandbox does not exist for bob.
    d = D.get()
    bob = d.client(d.client().create_key("bob")["key"])
    assert_error(bob.request("GET", "/v1/sandboxes/%s/egress" % sb["id"]), 404,
                 "sandbox_not_found")
    assert_error(bob.request("PUT", "/v1/sandboxes/%s/egress" % sb["id"], {"mode": "none"}),
                 404, "sandbox_not_found")
    assert c.get_sandbox(sb["id"])["egress"] == ALLOW
    assert_error(c.request("POST", "/v1/sandboxes/%s/egress" % sb["id"], {}), 405,
                 "method_not_allowed")


def test_policy_survives_a_daemon_restart():
    c = client()
    sb = sandbox("pypi", {"mode": "preset", "preset": "pypi"})
    D.get().restart()
    assert c.get_sandbox(sb["id"])["egress"] == {"mode": "preset", "preset": "pypi"}
    r = eu.probe(c, sb["id"], "connect", "allowed.example.com:443")
    assert r["reason"] == "host_not_allowed", r
    r = eu.probe(c, sb["id"], "fetch", "https://pypi.org/")
    assert r["ok"] and r["body"] == "hello from pypi.org via https", r


# --- the operator's network policy (spec 002), in its own daemon --------------------------

OP = harness.Shared()


def op_client():
    def make(d):
        return d.client(d.client().create_key("carol")["key"])
    if OP.d is None:
        u = up()
        path = os.path.join(u.tmp, "network.json")
        with open(path, "w") as f:
            json.dump({"deny_egress_by_default": True,
                       "allow_out": ["allowed.example.com", "*.wild.example.com",
                                     "203.0.113.0/24"],
                       "deny_out": ["198.51.100.7"]}, f)
        OP.kw["extra_env"] = dict(u.env(), SBX_NETWORK_POLICY=path)
    return OP.once("carol", make)


def test_operator_policy_narrows_and_a_sandbox_cannot_widen_it():
    c = op_client()
    sb = OP.once("sb", lambda d: c.create_sandbox(egress={"mode": "allowlist", "domains": [
        "allowed.example.com", "second.example.com", "a.wild.example.com",
        "wild.example.com"]}))
    up().install(c, sb["id"])
    assert eu.probe(c, sb["id"], "fetch", "https://allowed.example.com/")["ok"]
    assert eu.probe(c, sb["id"], "fetch", "https://a.wild.example.com/")["ok"]
    for host in ("second.example.com", "wild.example.com"):
        r = eu.probe(c, sb["id"], "connect", host + ":443")
        assert r["reason"] == "operator_default_deny", (host, r)
    # The operator's list does not widen the sandbox's.
    r = eu.probe(c, sb["id"], "connect", "other.example.com:443")
    assert r["reason"] == "host_not_allowed", r


def test_operator_policy_file_errors_stop_the_daemon():
    u = up()
    bads = ('{"deny_egress_by_default": "yes"}', '{"allow_out": ["10.0.0.0/33"]}',
            '{"deny_out": ["example.com"]}', '[1]', '{')
    paths = [os.path.join(u.tmp, "bad%d.json" % i) for i in range(len(bads))]
    for bad, path in zip(bads, paths):
        with open(path, "w") as f:
            f.write(bad)
    whys = harness.refused_starts([{"SBX_NETWORK_POLICY": p} for p in paths], timeout=10)
    for bad, why in zip(bads, whys):
        assert "network policy" in why, (bad, why[-500:])
