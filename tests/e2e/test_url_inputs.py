"""url inputs: fetched by sbxd itself, whatever the sandbox's egress policy, before the command
runs (docs/files.md). The sandbox gets bytes, never network.

The upstream is the egress tests' HTTPS server on a random 127.x address with a test CA
(egress_upstream.py); sbxd resolves through its test hosts file, trusts the test CA for url
inputs (SBX_FETCH_CA_FILE) and exempts exactly that address's port 443 from the loopback rule
(SBX_EGRESS_TEST_UPSTREAMS, the operator's test switch): every other loopback, private,
link-local and metadata address stays refused. No traffic leaves the machine. The module's
daemon has small limits (SBX_INPUT_URL_MAX_BYTES, SBX_INPUT_URL_TIMEOUT_SECONDS) so that both
are reached."""

import hashlib
import json
import os
import subprocess
import time

import egress_upstream as eu
import harness
from harness import REPO, assert_error

UP = {}
MAX_BYTES = 300000
TIMEOUT_S = 3
D = harness.Shared()


def up():
    if "u" not in UP:
        u = eu.Upstreams()
        ca = os.path.join(u.tmp, "ca.pem")
        D.kw["extra_env"] = dict(u.env(), SBX_FETCH_CA_FILE=ca,
                                 SBX_INPUT_URL_MAX_BYTES=str(MAX_BYTES),
                                 SBX_INPUT_URL_TIMEOUT_SECONDS=str(TIMEOUT_S))
        UP["u"] = u
    return UP["u"]


def teardown_module():
    D.close()
    if "u" in UP:
        UP.pop("u").close()


def client():
    up()
    return D.client("ursula")


def fetch_audit(sid):
    return [e for e in D.client().request("GET", "/v1/audit?sandbox_id=" + sid).body["data"]
            if e["action"] == "input.fetch"]


def test_url_input_is_fetched_by_sbxd_for_a_sandbox_without_egress():
    c = client()
    sb = c.create_sandbox()
    assert sb["egress"]["mode"] == "none", sb
    sid = sb["id"]
    r = c.exec(sid, shell="cat in/page.txt; echo; wc -c < in/zero.bin; cat in/inline.txt; echo; "
                          "curl -sS -m 10 https://allowed.example.com/page >/dev/null 2>&1; "
                          "echo curl=$?",
               inputs=[{"path": "in/page.txt", "url": "https://allowed.example.com/page"},
                       {"path": "in/zero.bin", "url": "https://allowed.example.com/bytes/100000"},
                       {"path": "in/inline.txt", "content": "x"}])
    assert r["exit_code"] == 0, r
    lines = r["stdout"].splitlines()
    assert lines[0] == "hello from allowed.example.com via https", r
    assert lines[1].strip() == "100000" and lines[2] == "x", r
    # The sandbox itself still has no way out.
    assert lines[3].startswith("curl=") and lines[3] != "curl=0", r
    # Each fetch is audited as the caller's, with where it went and what it brought.
    got = fetch_audit(sid)
    assert [(e["outcome"], e["details"]["path"], e["details"]["bytes"]) for e in got] == [
        ("ok", "in/page.txt", 40), ("ok", "in/zero.bin", 100000)], got
    for e in got:
        assert e["details"]["host"] == "allowed.example.com", e
        assert e["details"]["address"] == up().addr, e
        assert e["user"] == "ursula" and e["request_id"] == got[0]["request_id"], e
    c.delete_sandbox(sid)


def test_url_inputs_reach_public_addresses_only():
    c = client()
    sid = c.create_sandbox(egress={"mode": "allowlist", "domains": ["allowed.example.com"]})["id"]
    refused = ("https://127.0.0.1/", "https://[::1]/", "https://localhost/",
               "https://printer.local/", "https://loop.example.com/", "https://private.example.com/",
               "https://meta.example.com/", "https://cgnat.example.com/",
               "https://nowhere.example.com/", "https://allowed.example.com:8443/")
    for url in refused:
        r = c.request("POST", "/v1/sandboxes/%s/exec" % sid,
                      {"shell": "true", "inputs": [{"path": "in/a", "url": url}]})
        assert_error(r, 403, "egress_denied")
    for url in ("http://allowed.example.com/", "ftp://allowed.example.com/",
                "https://u:p@allowed.example.com/"):
        assert_error(c.request("POST", "/v1/sandboxes/%s/exec" % sid,
                               {"shell": "true", "inputs": [{"path": "a", "url": url}]}),
                     400, "invalid_input")
    # Nothing was written by the refused requests, and each refusal was audited.
    assert c.exec(sid, shell="ls in 2>&1; true")["stdout"].startswith("ls: cannot access")
    # The URLs refused at fetch time are audited (the bad schemes were refused while parsing).
    got = [(e["outcome"], e["details"]["url"]) for e in fetch_audit(sid)]
    assert got == [("egress_denied", u) for u in refused] + [
        ("invalid_input", "https://u:p@allowed.example.com/")], got
    c.delete_sandbox(sid)


def test_url_inputs_share_one_byte_budget_and_one_time_limit():
    c = client()
    sid = c.create_sandbox()["id"]
    half = MAX_BYTES // 2 + 1
    r = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true", "inputs": [
        {"path": "a", "url": "https://allowed.example.com/bytes/%d" % half},
        {"path": "b", "url": "https://allowed.example.com/bytes/%d" % half}]})
    assert_error(r, 413, "input_too_large")
    assert_error(c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true", "inputs": [
        {"path": "a", "url": "https://allowed.example.com/bytes/%d" % (MAX_BYTES + 1)}]}),
        413, "input_too_large")
    t0 = time.monotonic()
    r = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true", "inputs": [
        {"path": "s", "url": "https://allowed.example.com/slow/30"}]}, timeout=60)
    took = time.monotonic() - t0
    assert_error(r, 502, "input_fetch_failed")
    assert TIMEOUT_S - 0.5 < took < TIMEOUT_S + 10, took
    assert c.exec(sid, shell="ls -A")["stdout"] == "out\n", "a refused request wrote something"
    # Exactly at the budget is fine.
    r = c.exec(sid, shell="wc -c < a", inputs=[
        {"path": "a", "url": "https://allowed.example.com/bytes/%d" % MAX_BYTES}])
    assert r["stdout"].strip() == str(MAX_BYTES), r
    c.delete_sandbox(sid)


def test_url_input_on_run():
    c = client()
    r = c.request("POST", "/v1/sandboxes/run", timeout=120, body={
        "shell": "sha256sum in/b | cut -c1-64",
        "inputs": [{"path": "in/b", "url": "https://allowed.example.com/bytes/4096"}]})
    assert r.status == 200, r
    assert r.body["stdout"].strip() == hashlib.sha256(b"\0" * 4096).hexdigest()


SDK_EXAMPLE = r"""
import json, sbx
client = sbx.Sbx(timeout=180)
result = client.sandboxes.run(shell="weasyprint in/page.html out/page.pdf && pdftotext out/page.pdf -",
                              inputs=[{"path": "in/page.html", "url": "https://allowed.example.com/page.html"}])
print(json.dumps(result))
"""


def test_the_documents_sdk_example_in_a_sandbox_without_egress():
    """Spec 000's SDK example as written, through sdk/python (run by the system's python3,
    which has httpx, as test_sdk does): run(shell=..., inputs=[{path, url}]) under the default
    egress policy none; the fetched page becomes out/page.pdf."""
    c = client()
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "sdk", "python"),
               PYTHONDONTWRITEBYTECODE="1", SBX_URL="http://127.0.0.1:%d" % D.get().port,
               SBX_API_KEY=c.key)
    p = subprocess.run(["/usr/bin/python3", "-c", SDK_EXAMPLE], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=240)
    assert p.returncode == 0, p.stderr.decode("utf-8", "replace")
    result = json.loads(p.stdout)
    assert result["exit_code"] == 0, result
    assert "hello from allowed.example.com via https" in result["stdout"], result
    assert [a["path"] for a in result["artifacts"]] == ["out/page.pdf"], result
    assert result["artifacts"][0]["mime"] == "application/pdf", result
    got = fetch_audit(result["sandbox_id"])
    assert [(e["outcome"], e["details"]["url"]) for e in got] == [
        ("ok", "https://allowed.example.com/page.html")], got
