"""GET /metrics (docs/operations.md): the page is parsed by a real Prometheus text parser
(Debian's python3-prometheus-client, so /usr/bin/python3) and its values match what the
test did against a daemon of its own. That daemon also logs JSON (SBX_LOG_FORMAT=json)."""

import json
import subprocess

import harness
from harness import assert_error, wait_for

PARSE = r"""
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = []
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        out.append([fam.name, fam.type, s.name, s.labels, s.value])
print(json.dumps(out))
"""

# A CONNECT the default policy ("none") refuses: one denied egress connection.
DENIED_CONNECT = r"""
import os, socket, urllib.parse
u = urllib.parse.urlparse(os.environ["HTTPS_PROXY"])
s = socket.create_connection((u.hostname, u.port), 10)
s.sendall(b"CONNECT blocked.example.com:443 HTTP/1.1\r\nHost: blocked.example.com:443\r\n\r\n")
print(s.recv(200).split(b"\r\n")[0].decode())
s.close()
"""

_state = {}


def new_daemon():
    return harness.Daemon(extra_env={"SBX_LOG_FORMAT": "json"}, listens=("SBX_METRICS_LISTEN",))


def daemon():
    if "d" not in _state:
        _state["d"] = new_daemon().start()
    return _state["d"]


def teardown_module():
    d = _state.pop("d", None)
    if d:
        d.cleanup()


def parse(text):
    p = subprocess.run(["/usr/bin/python3", "-c", PARSE], input=text.encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 0, "the Prometheus parser refused the page: %s\n%s" % (
        p.stderr.decode(), text[:2000])
    return json.loads(p.stdout)


def value(samples, name, **labels):
    got = [s[4] for s in samples if s[2] == name and all(s[3].get(k) == v
                                                          for k, v in labels.items())]
    return sum(got) if got else None


def scrape(c):
    r = c.request("GET", "/metrics")
    assert r.status == 200, r
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4"), r.headers
    return parse(r.raw.decode())


def test_metrics_match_what_was_done():
    # Exact counts: a daemon of its own, whatever ran before on the module's.
    with new_daemon() as d:
        _match_what_was_done(d)


def _match_what_was_done(d):
    admin = d.client()
    k = admin.create_key("metered", "member", "sandbox")
    c = d.client(k["key"])
    sb = c.create_sandbox(ttl_seconds=600)
    sid = sb["id"]
    for _ in range(2):
        c.exec(sid, shell="sleep 0.3")
    r = c.exec(sid, language="python", code=DENIED_CONNECT)
    assert r["stdout"].startswith("HTTP/1.1 403"), r
    assert_error(c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": ""}), 400,
                 "invalid_request")
    assert_error(c.request("GET", "/v1/sandboxes/sb_00000000000000000000"), 404,
                 "sandbox_not_found")
    # The proxy counts a connection when its log row is final, which may follow the exec.
    s = wait_for(lambda: (lambda s: s if value(s, "sbx_egress_connections_total",
                                               verdict="denied") else None)(scrape(admin)),
                 10, what="the denied connection counted")

    exec_route = "/v1/sandboxes/{id}/exec"
    assert value(s, "sbx_http_requests_total", route=exec_route, method="POST",
                 status="200") == 3, [x for x in s if x[2] == "sbx_http_requests_total"]
    assert value(s, "sbx_http_requests_total", route=exec_route, status="400") == 1
    assert value(s, "sbx_http_requests_total", route="/v1/sandboxes", method="POST",
                 status="201") == 1
    assert value(s, "sbx_http_requests_total", route="/v1/sandboxes/{id}", method="GET",
                 status="404") == 1
    assert value(s, "sbx_errors_total", code="invalid_request") == 1
    assert value(s, "sbx_errors_total", code="sandbox_not_found") == 1
    assert value(s, "sbx_sandboxes", state="running", backend="v2") == 1, \
        [x for x in s if x[2] == "sbx_sandboxes"]
    assert value(s, "sbx_execs_total", backend="v2") == 3
    assert value(s, "sbx_exec_seconds_total", backend="v2") >= 0.6
    assert value(s, "sbx_operation_duration_seconds_count", op="exec") == 3
    assert value(s, "sbx_operation_duration_seconds_count", op="create") == 1
    assert value(s, "sbx_operation_duration_seconds_bucket", op="exec", le="+Inf") == 3
    assert value(s, "sbx_egress_connections_total", verdict="denied") == 1, \
        [x for x in s if x[2].startswith("sbx_egress")]
    assert value(s, "sbx_egress_connections_total", verdict="allowed") is None
    assert value(s, "sbx_egress_bytes_total", verdict="denied", direction="up") is not None
    assert value(s, "sbx_operation_duration_seconds_sum", op="exec") >= 0.6
    assert value(s, "sbx_store_statement_duration_seconds_count") > 0
    assert value(s, "sbx_warm_pool_size") is None, "no pools without SBX_WARM_POOL"
    # No id ever becomes a label value.
    assert not any(sid in json.dumps(x[3]) for x in s), "a sandbox id leaked into a label"

    c.delete_sandbox(sid)
    s = scrape(admin)
    assert value(s, "sbx_sandboxes", state="running", backend="v2") is None
    # The scrape before this one is counted too.
    assert value(s, "sbx_http_requests_total", route="/metrics", status="200") >= 1


def test_metrics_need_an_admin_key_except_on_their_own_listener():
    d = daemon()
    k = d.client().create_key("peeker", "member", "sandbox")
    assert_error(d.client(k["key"]).request("GET", "/metrics"), 403, "admin_required")
    assert_error(d.client().request("GET", "/metrics", key=None), 401, "missing_api_key")
    side = harness.Client(d.listen_port("SBX_METRICS_LISTEN"))
    r = side.request("GET", "/metrics", key=None)
    assert r.status == 200, r
    s = parse(r.raw.decode())
    assert any(x[2] == "sbx_http_requests_total" for x in s), s[:5]
    # That listener serves nothing else.
    assert_error(side.request("GET", "/v1/sandboxes", key=None), 404, "not_found")


def test_json_logs_name_request_user_and_sandbox():
    d = daemon()
    k = d.client().create_key("logged", "member", "sandbox")
    c = d.client(k["key"])
    r = c.request("POST", "/v1/sandboxes", {"ttl_seconds": 600}, timeout=120)
    assert r.status == 201, r
    sid = r.body["id"]
    lines = [l for l in d.log_text().splitlines()
             if l.startswith("{") or l.startswith("20")]   # ours, not harness or sanitizer
    assert lines, d.log_tail()
    docs = []
    for l in lines:
        doc = json.loads(l)   # every line the daemon logs is one JSON object
        assert {"ts", "level", "msg"} <= set(doc), doc
        docs.append(doc)
    mine = [x for x in docs if x.get("sandbox") == sid and x.get("request_id")]
    assert mine, [x for x in docs if sid in x["msg"]]
    assert mine[0]["request_id"] == r.headers["x-request-id"] and mine[0]["user"] == "logged", mine
    c.delete_sandbox(sid)


def test_warm_pool_sizes():
    """sbx_warm_pool_ready and sbx_warm_pool_size per template, from a daemon with a pool."""
    with harness.Daemon(extra_env={"SBX_WARM_POOL": "base:1"}) as d:
        admin = d.client()
        s = wait_for(lambda: (lambda s: s if value(s, "sbx_warm_pool_ready", template="base")
                              else None)(scrape(admin)), 120, what="the pool filled")
        assert value(s, "sbx_warm_pool_ready", template="base") == 1
        assert value(s, "sbx_warm_pool_size", template="base") == 1
        fam = [x for x in s if x[2] in ("sbx_warm_pool_ready", "sbx_warm_pool_size")]
        assert all(x[1] == "gauge" and x[3] == {"template": "base"} for x in fam), fam
        # A create takes the ready one; the pool refills to its size.
        c = d.client(admin.create_key("pooled", "member", "sandbox")["key"])
        sid = c.create_sandbox(ttl_seconds=600)["id"]
        s = wait_for(lambda: (lambda s: s if value(s, "sbx_warm_pool_ready", template="base")
                              else None)(scrape(admin)), 120, what="the pool refilled")
        assert value(s, "sbx_warm_pool_size", template="base") == 1
        assert value(s, "sbx_sandboxes", state="running") == 2, \
            [x for x in s if x[2] == "sbx_sandboxes"]
        c.delete_sandbox(sid)
