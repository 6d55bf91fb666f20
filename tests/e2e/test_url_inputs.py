"""url inputs: fetched by sbxd under the sandbox's egress policy, before the command runs.

The upstream is the egress tests' HTTPS server on a random 127.x address with a test CA
(egress_upstream.py); sbxd resolves through its test hosts file and trusts the test CA for
url inputs (SBX_FETCH_CA_FILE). No traffic leaves the machine."""

import hashlib
import os

import egress_upstream as eu
import harness
from harness import assert_error

UP = {}
D = harness.Shared()


def up():
    if "u" not in UP:
        u = eu.Upstreams()
        ca = os.path.join(u.tmp, "ca.pem")
        D.kw["extra_env"] = dict(u.env(), SBX_FETCH_CA_FILE=ca)
        UP["u"] = u
    return UP["u"]


def teardown_module():
    D.close()
    if "u" in UP:
        UP.pop("u").close()


ALLOW = {"mode": "allowlist", "domains": ["allowed.example.com"]}


def client():
    up()
    return D.client("ursula")


def test_url_input_is_fetched_under_an_allowlist():
    c = client()
    sid = c.create_sandbox(egress=ALLOW)["id"]
    r = c.exec(sid, shell="cat in/page.txt; echo; wc -c < in/zero.bin",
               inputs=[{"path": "in/page.txt", "url": "https://allowed.example.com/page"},
                       {"path": "in/zero.bin", "url": "https://allowed.example.com/bytes/100000"},
                       {"path": "in/inline.txt", "content": "x"}])
    assert r["exit_code"] == 0, r
    lines = r["stdout"].splitlines()
    assert lines[0] == "hello from allowed.example.com via https", r
    assert lines[1].strip() == "100000", r
    c.delete_sandbox(sid)


def test_url_inputs_follow_the_policy():
    c = client()
    none_sid = c.create_sandbox()["id"]
    r = c.request("POST", "/v1/sandboxes/%s/exec" % none_sid,
                  {"shell": "ls in", "inputs": [{"path": "in/a", "url": "https://allowed.example.com/"}]})
    assert_error(r, 403, "egress_denied")
    sid = c.create_sandbox(egress=ALLOW)["id"]
    for url in ("https://second.example.com/", "https://127.0.0.1/", "https://meta.example.com/",
                "https://allowed.example.com:8443/"):
        r = c.request("POST", "/v1/sandboxes/%s/exec" % sid,
                      {"shell": "true", "inputs": [{"path": "in/a", "url": url}]})
        assert_error(r, 403, "egress_denied")
    assert_error(c.request("POST", "/v1/sandboxes/%s/exec" % sid,
                           {"shell": "true", "inputs": [{"path": "a", "url": "http://allowed.example.com/"}]}),
                 400, "invalid_input")
    # Nothing was written by the refused requests.
    assert c.exec(sid, shell="ls in 2>&1; true")["stdout"].startswith("ls: cannot access")
    c.delete_sandbox(sid)
    c.delete_sandbox(none_sid)


def test_url_input_on_run():
    c = client()
    r = c.request("POST", "/v1/sandboxes/run", timeout=120, body={
        "egress": ALLOW, "shell": "sha256sum in/b | cut -c1-64",
        "inputs": [{"path": "in/b", "url": "https://allowed.example.com/bytes/4096"}]})
    assert r.status == 200, r
    assert r.body["stdout"].strip() == hashlib.sha256(b"\0" * 4096).hexdigest()
