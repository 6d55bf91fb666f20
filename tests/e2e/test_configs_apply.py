"""What a sandbox configuration applies besides env, limits and network (docs/configs.md):
its terminals' idle limit, its commands' default timeout, its execution backend, and the
desktop switch, through a real sbxd and real sandboxes.

One daemon running gVisor and namespaces (SBX_BACKEND, each proved by a start), where one
second of a configuration's terminal_idle_disconnect_sec lasts 20 ms
(SBX_TEST_TERMINAL_IDLE_UNIT_MS), so 60 s is 1.2 s; the daemon's own idle limit stays 900 s.
"""

import harness
import wsclient
from harness import assert_error

D = harness.Shared(extra_env={"SBX_BACKEND": "gvisor,namespaces",
                              "SBX_TEST_TERMINAL_IDLE_UNIT_MS": "20"})


def teardown_module():
    D.close()


def admin():
    return D.client()


def config(name, doc):
    return D.once("cfg:" + name, lambda d: d.client().ok(
        "POST", "/v1/sandbox-configs", {"name": name, "config": doc}, status=201))


def user(name):
    """A member of its own per name (a key runs at most 3 sandboxes)."""
    return D.client("u-" + name)


def sandbox(name, **fields):
    return D.once("sb:" + name, lambda d: user(name).create_sandbox(ttl_seconds=1200, **fields))


def short_idle():
    """gVisor, terminals idle after 60 s (1.2 s here), desktop off (the default)."""
    return sandbox("short", config_id=config("short", {"terminal_idle_disconnect_sec": 60})["id"])


def on_namespaces():
    cid = config("ns", {"backend": "namespaces", "desktop_enabled": True})["id"]
    return sandbox("ns", config_id=cid)


def plain():
    return sandbox("plain")


def open_term(sid, c):
    tk = c.ok("POST", "/v1/sandboxes/%s/terminal-ticket" % sid)["ticket"]
    ws = wsclient.connect(D.get().port, "/v1/sandboxes/%s/terminal?ticket=%s" % (sid, tk))
    ready = ws.recv_json()
    assert ready["type"] == "ready", ready
    return ws


def shell(ws, cmd, until, timeout=20):
    ws.send_binary(cmd.encode() + b"\n")
    out, _ = ws.read_until(until, timeout)
    return out.decode("utf-8", "replace")


def assert_idle_closes(ws):
    msg = ws.recv_json(30)
    assert msg == {"type": "error", "code": "IDLE_DISCONNECTED"}, msg
    try:
        ws.recv(10)
        raise AssertionError("no close after IDLE_DISCONNECTED")
    except wsclient.Closed as e:
        assert e.code == 1000, e


# --- terminal_idle_disconnect_sec ------------------------------------------------------

def test_a_configurations_terminal_idle_limit_disconnects_its_terminals_only():
    short, other = short_idle()["id"], plain()["id"]
    ws_other = open_term(other, user("plain"))
    ws_short = open_term(short, user("short"))
    shell(ws_short, "echo warm", "warm")
    # The configuration's 60 s (1.2 s here) ends the short one; the plain sandbox's
    # terminal, opened before it, has the daemon's 900 s and still answers afterwards.
    assert_idle_closes(ws_short)
    assert "after-1short" in shell(ws_other, "echo after-$((1))short", "after-1short")
    ws_other.close()


def test_the_idle_limit_survives_a_restart():
    sid = short_idle()["id"]
    D.get().restart()
    assert_idle_closes(open_term(sid, user("short")))


def test_the_idle_limit_goes_to_a_fork():
    c = user("fork")
    cid = config("ns-idle", {"backend": "namespaces", "terminal_idle_disconnect_sec": 60})["id"]
    sid = c.create_sandbox(config_id=cid)["id"]
    fork = c.ok("POST", "/v1/sandboxes/%s/fork" % sid, {}, timeout=120)
    copy = fork["data"][0]["id"]
    assert c.get_sandbox(copy)["config_id"] == cid
    assert_idle_closes(open_term(copy, c))
    c.delete_sandbox(copy)
    c.delete_sandbox(sid)


# --- default_timeout_sec ---------------------------------------------------------------

def exec_timeouts(sid):
    log = admin().ok("GET", "/v1/audit?sandbox_id=%s&action=exec" % sid)["data"]
    return [e["details"]["timeout_seconds"] for e in sorted(log, key=lambda e: e["seq"])]


def test_default_timeout_sec_is_each_commands_timeout_not_the_sandboxs_life():
    # Spec 002's field as written: "default_timeout_sec | int | таймаут выполнения; 0 —
    # используется встроенное значение по умолчанию".
    c = user("timeout")
    r = c.request("POST", "/v1/sandbox-configs", {"name": "x", "config": {}})
    assert_error(r, 403, "admin_required")
    cid = admin().ok("POST", "/v1/sandbox-configs",
                     {"name": "Короткие команды", "config": {"default_timeout_sec": 2}},
                     status=201)["id"]
    sb = c.create_sandbox(config_id=cid)
    sid = sb["id"]
    # The sandbox lives as long as any (the daemon's default TTL), and may ask for more.
    assert sb["ttl_seconds"] == 3600, sb
    longer = c.create_sandbox(config_id=cid, ttl_seconds=7200)
    assert longer["ttl_seconds"] == 7200, longer
    c.delete_sandbox(longer["id"])
    # A command that does not say is stopped after 2 s; one that does gets its own.
    r = c.exec(sid, shell="sleep 30; echo late")
    assert r["timed_out"] is True and "late" not in r["stdout"], r
    assert 1500 <= r["duration_ms"] < 15000, r
    r = c.exec(sid, shell="sleep 3; echo in-time", timeout_seconds=20)
    assert r["timed_out"] is False and r["stdout"] == "in-time\n", r
    # sandbox_bash (spec 004's default 60) takes the configuration's default too.
    r = c.request("POST", "/v1/sandboxes/%s/tools/sandbox_bash" % sid, {"command": "true"})
    assert r.status == 200, r
    assert exec_timeouts(sid) == [2, 20, 2]
    # A fork keeps it; 0 is the built-in 900 s; past plain exec's 900 s is refused.
    fork = c.ok("POST", "/v1/sandboxes/%s/fork" % sid, {}, timeout=120)["data"][0]["id"]
    assert c.exec(fork, shell="sleep 30")["timed_out"] is True
    plain_cid = config("timeout0", {"default_timeout_sec": 0})["id"]
    other = c.create_sandbox(config_id=plain_cid)["id"]
    c.sh(other, "true")
    assert exec_timeouts(other) == [900]
    r = admin().request("PUT", "/v1/sandbox-configs/" + cid,
                        {"name": "Короткие команды", "config": {"default_timeout_sec": 901}})
    assert_error(r, 400, "invalid_sandbox_config")
    assert admin().ok("GET", "/v1/sandbox-configs/" + cid)["config"]["default_timeout_sec"] == 2
    for s in (fork, other, sid):
        c.delete_sandbox(s)


# --- backend ---------------------------------------------------------------------------

def test_the_configurations_backend_is_the_sandboxs_runtime():
    c = user("ns")
    sb = on_namespaces()
    assert sb["runtime"] == "namespaces" and sb["memory_snapshots"] is False, sb
    assert c.sh(sb["id"], "echo ok") == "ok\n"
    assert short_idle()["runtime"] == "gvisor"
    cid = config("ns", {})["id"]
    # The request may name the same runtime, never another.
    assert_error(c.request("POST", "/v1/sandboxes", {"config_id": cid, "runtime": "gvisor"}),
                 400, "sandbox_config_widened")
    gv = config("short", {})["id"]
    assert_error(c.request("POST", "/v1/sandboxes", {"config_id": gv, "runtime": "namespaces"}),
                 400, "sandbox_config_widened")
    same = c.create_sandbox(config_id=cid, runtime="namespaces")
    assert same["runtime"] == "namespaces", same
    c.delete_sandbox(same["id"])


def test_a_backend_the_operator_did_not_enable_is_refused():
    c = admin()
    for backend in ("local", "docker", 5):
        r = c.request("POST", "/v1/sandbox-configs",
                      {"name": "bad-%s" % backend, "config": {"backend": backend}})
        assert_error(r, 400, "invalid_sandbox_config")
    # A change to it too; and a change of backend while sandboxes live is 409.
    cid = config("ns", {})["id"]
    on_namespaces()
    doc = c.ok("GET", "/v1/sandbox-configs/" + cid)["config"]
    assert doc["backend"] == "namespaces", doc
    assert_error(c.request("PUT", "/v1/sandbox-configs/" + cid,
                           {"name": "ns", "config": dict(doc, backend="local")}),
                 400, "invalid_sandbox_config")
    assert_error(c.request("PUT", "/v1/sandbox-configs/" + cid,
                           {"name": "ns", "config": dict(doc, backend="gvisor")}),
                 409, "sandboxes_still_live")
    # A document read back saves again unchanged (its 0 limits are the daemon's).
    assert c.ok("PUT", "/v1/sandbox-configs/" + cid, {"name": "ns", "config": doc})["config"] == doc
    # The probe says which backend, and whether it runs here.
    r = c.ok("POST", "/v1/system/sandbox-check", {"config": {"backend": "namespaces"}})
    assert r["ok"] is True and r["provider"] == "namespaces", r
    assert r["capabilities"]["memory_snapshots"] is False, r
    r = c.ok("POST", "/v1/system/sandbox-check", {"config": {"backend": "local"}})
    rt = [x for x in r["checks"] if x["name"] == "runtime"][0]
    assert r["ok"] is False and r["provider"] == "local", r
    assert rt["ok"] is False and rt["reason"] == "backend_not_enabled", rt
    assert r["capabilities"]["egress_policy"] is False, r  # local has the host's network
    r = c.ok("POST", "/v1/system/sandbox-check", {"config": {
        "backend": "local", "network": {"deny_egress_by_default": True}}})
    assert r["ok"] is False and r["checks"][0]["name"] == "config", r


# --- desktop_enabled -------------------------------------------------------------------

def test_desktop_only_where_the_configuration_enables_it():
    c = admin()
    # The desktop template needs desktop_enabled.
    assert_error(c.request("POST", "/v1/sandbox-configs",
                           {"name": "desk-off", "config": {"template": "desktop"}}),
                 400, "invalid_sandbox_config")
    on = c.ok("POST", "/v1/sandbox-configs", {"name": "desk-on", "config": {
        "template": "desktop", "desktop_enabled": True}}, status=201)
    assert on["config"]["desktop_enabled"] is True
    assert_error(c.request("PUT", "/v1/sandbox-configs/" + on["id"], {"name": "desk-on", "config": {
        "template": "desktop", "desktop_enabled": False}}), 400, "invalid_sandbox_config")
    r = c.ok("POST", "/v1/system/sandbox-check", {"config_id": on["id"]})
    assert r["capabilities"]["desktop"] is True, r
    # A configuration without it cannot be made into a desktop by the request.
    assert_error(user("short").request("POST", "/v1/sandboxes", {
        "config_id": config("short", {})["id"], "template": "desktop"}),
                 400, "sandbox_config_widened")
    # Its sandboxes get no preview link to the desktop's port; other ports as ever.
    off, u = short_idle()["id"], user("short")
    assert_error(u.request("POST", "/v1/sandboxes/%s/preview" % off, {"port": 6080}), 403,
                 "desktop_disabled")
    assert u.ok("POST", "/v1/sandboxes/%s/preview" % off, {"port": 3000})["port"] == 3000
    # With desktop_enabled, and without a configuration, 6080 is a port like another.
    for name, sb in (("ns", on_namespaces()), ("plain", plain())):
        r = user(name).ok("POST", "/v1/sandboxes/%s/preview" % sb["id"], {"port": 6080})
        assert r["port"] == 6080, r
    c.ok("DELETE", "/v1/sandbox-configs/" + on["id"])
