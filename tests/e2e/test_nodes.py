"""Many nodes, one API (docs/scale-out.md): three real sbxd on one PostgreSQL store that
scripts/pg.sh starts on 127.0.0.1, each with its own data dir and sandboxes.

Creates spread by free capacity, any node reaches a sandbox on another (exec, SSE, files,
a terminal WebSocket), limits hold across nodes under parallel creates, the audit chain
verifies with entries from every node, a node killed with -9 has its sandboxes reported
node_unreachable and takes them back when it returns, and a forged node credential or a
node with another key is refused.
"""

import concurrent.futures
import os
import shutil
import tempfile
import time

import harness
import wsclient
from harness import assert_error

S = {}
HEARTBEAT_MS = 300
DEAD_MS = 3000  # ten beats: a node busy under ASan on two cores is not taken for gone
NODES = ("node-a", "node-b", "node-c")


def pg():
    if "url" not in S:
        S["pgdir"], S["url"] = harness.pg_start("sbx-pg-nodes-")
    return S["url"]


def shared():
    """The directory every node mounts for pauses another node may resume."""
    if "shared" not in S:
        S["shared"] = tempfile.mkdtemp(prefix="sbx-shared-snapshots-")
    return S["shared"]


def node_env(node, capacity=20):
    return {"SBX_STORE": pg(), "SBX_NODE_ID": node, "SBX_NODE_CAPACITY": str(capacity),
            "SBX_NODE_HEARTBEAT_MS": str(HEARTBEAT_MS), "SBX_NODE_DEAD_MS": str(DEAD_MS),
            "SBX_SHARED_SNAPSHOTS": shared()}


SHARED_KEYS = ("cluster.key", "secrets.key", "audit-anchor.key", "artifact-link.key",
               "preview-link.key")


def share_keys(src, dst):
    """What every node of a store must share (docs/scale-out.md): these files of the first
    node's data dir, copied before the others start."""
    os.makedirs(dst, mode=0o700, exist_ok=True)
    for name in SHARED_KEYS:
        shutil.copy2(os.path.join(src, name), dst)


def nodes():
    """The three daemons, started once for the module: {node id: Daemon}."""
    if "d" not in S:
        first = harness.Daemon(extra_env=node_env(NODES[0]))
        S["d"] = {NODES[0]: first}
        first.start()
        for n in NODES[1:]:
            d = harness.Daemon(admin_key=first.admin_key, extra_env=node_env(n))
            share_keys(first.data_dir, d.data_dir)
            S["d"][n] = d
            d.start()
        S["admin"] = first.client()
        S["key"] = S["admin"].create_key("nodes-alice")["key"]
    return S["d"]


def client(node, key=None):
    d = nodes()[node]
    return d.client(key or S["key"])


def admin(node):
    return nodes()[node].client()


def teardown_module():
    for d in S.get("d", {}).values():
        d.cleanup()
    if "shared" in S:
        shutil.rmtree(S["shared"], ignore_errors=True)
    if "pgdir" in S:
        harness.pg_stop(S["pgdir"])
    S.clear()


def node_list(node="node-a"):
    return {n["id"]: n for n in admin(node).ok("GET", "/v1/nodes")["data"]}


def spread():
    """Three sandboxes made through node-a, one per node (created once)."""
    if "sb" not in S:
        a = client("node-a")
        S["sb"] = [a.create_sandbox(ttl_seconds=900) for _ in range(3)]
    return S["sb"]


def on(node):
    return next(sb["id"] for sb in spread() if sb["node"] == node)


def test_every_node_registers_and_heartbeats():
    seen = node_list("node-b")
    assert set(seen) == set(NODES), seen
    for n in NODES:
        assert seen[n]["state"] == "live" and seen[n]["capacity"] == 20, seen[n]
        assert seen[n]["url"] == "http://127.0.0.1:%d" % nodes()[n].port, seen[n]
        assert "base" in seen[n]["templates"] and seen[n]["heartbeat_age_ms"] < DEAD_MS
    assert [n for n in seen if seen[n]["self"]] == ["node-b"]
    assert_error(client("node-a").request("GET", "/v1/nodes"), 403, "admin_required")


def test_creates_spread_by_free_capacity():
    # Equal capacity: the first stays where it was asked, then the node with the most room.
    assert [sb["node"] for sb in spread()] == ["node-a", "node-b", "node-c"], spread()
    running = {n: v["running"] for n, v in node_list().items()}
    assert all(running[n] >= 1 for n in NODES), running
    # The list on any node shows the caller's sandboxes of every node, in creation order.
    listed = client("node-c").list_sandboxes()
    assert {sb["id"] for sb in spread()} <= {sb["id"] for sb in listed}, listed
    assert [sb["created_at"] for sb in listed] == sorted(sb["created_at"] for sb in listed)
    assert {sb["id"]: sb["node"] for sb in listed} == {sb["id"]: sb["node"] for sb in spread()}


def test_any_node_reaches_a_sandbox_on_another():
    sid = on("node-c")
    a = client("node-a")
    r = a.ok("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "echo from-$HOSTNAME; echo $((6*7))"})
    assert r["exit_code"] == 0 and r["stdout"].endswith("42\n"), r
    got = a.get_sandbox(sid)
    assert got["node"] == "node-c" and got["status"] == "running", got
    # SSE through another node, event by event.
    events = list(client("node-b").stream("POST", "/v1/sandboxes/%s/exec" % sid,
                                          {"shell": "for i in 1 2 3; do echo line$i; sleep 0.2; done"}))
    assert events[0].status == 200, events[0]
    out = "".join(e.get("data", "") for _, e in events[1:] if e.get("type") == "stdout")
    assert out == "line1\nline2\nline3\n", events
    times = [t for t, e in events[1:] if e.get("type") == "stdout"]
    assert times[-1] - times[0] > 0.25, "streamed as it came, not at the end: %r" % times
    # Files: a 3 MB upload streamed through node-b, read back through node-a.
    blob = os.urandom(3 * 1024 * 1024)
    up = client("node-b").request("PUT", "/v1/sandboxes/%s/files/in/blob.bin" % sid, raw=blob,
                                  headers={"Content-Type": "application/octet-stream"})
    assert up.status in (200, 201), up
    down = a.request("GET", "/v1/sandboxes/%s/files/in/blob.bin" % sid)
    assert down.status == 200 and down.raw == blob, (down.status, len(down.raw))
    # One request id for the client and both nodes: node-c audited the download under it.
    audit = admin("node-b").ok("GET", "/v1/audit?action=file.download&sandbox_id=" + sid)["data"]
    assert down.headers["x-request-id"] in [e["request_id"] for e in audit], (down.headers, audit)
    r = a.ok("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "sha256sum in/blob.bin | cut -c1-16"})
    import hashlib
    assert r["stdout"].strip() == hashlib.sha256(blob).hexdigest()[:16], r
    # A terminal: the ticket asked through node-a, the WebSocket opened on node-b.
    tk = a.ok("POST", "/v1/sandboxes/%s/terminal-ticket" % sid)["ticket"]
    ws = wsclient.connect(nodes()["node-b"].port, "/v1/sandboxes/%s/terminal?ticket=%s" % (sid, tk))
    try:
        assert ws.recv_json()["type"] == "ready"
        ws.send_binary(b"echo term-$((20+22))\n")
        out, _ = ws.read_until(b"term-42", timeout=20)
        assert b"term-42" in out, out
    finally:
        ws.close()
    # Errors from the sandbox's node come back as they are.
    assert_error(a.request("GET", "/v1/sandboxes/%s/files/no/such" % sid), 404, "file_not_found")
    assert_error(a.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": 5}), 400,
                 "invalid_request")


def test_e2b_data_plane_reaches_a_sandbox_on_another_node():
    sid = on("node-b")
    c = nodes()["node-a"].client(None)
    r = c.request("GET", "/e2b/sandbox/health", key=None, headers={"E2b-Sandbox-Id": sid})
    assert r.status == 204, r
    r = c.request("GET", "/e2b/sandbox/health", key=None,
                  headers={"E2b-Sandbox-Id": "sb_00000000000000000000"})
    assert r.status == 502, r


def test_another_users_sandbox_on_another_node_is_not_found():
    bob = S["admin"].create_key("nodes-bob")["key"]
    sid = on("node-b")
    assert_error(client("node-a", bob).request("GET", "/v1/sandboxes/" + sid), 404,
                 "sandbox_not_found")
    assert_error(client("node-a", bob).request("POST", "/v1/sandboxes/%s/exec" % sid,
                                               {"shell": "id"}), 404, "sandbox_not_found")


def test_a_volume_lives_on_its_node_and_its_sandboxes_run_there():
    """docs/volumes.md, "Many nodes": made through node-b, a volume is node-b's; its files
    and the sandboxes that mount it are served there whichever node is asked."""
    key = S["admin"].create_key("nodes-vol")["key"]
    b, a, c = client("node-b", key), client("node-a", key), client("node-c", key)
    vol = b.ok("POST", "/v1/volumes", {"name": "pinned", "size_mb": 16}, status=201)
    assert vol["node"] == "node-b", vol
    r = a.request("PUT", "/v1/volumes/%s/files/hello.txt" % vol["id"], raw=b"on b")
    assert r.status == 200, r
    sb = a.create_sandbox(ttl_seconds=600, volumes=[{"volume": "pinned", "path": "/data"}])
    assert sb["node"] == "node-b", sb
    assert a.sh(sb["id"], "cat /data/hello.txt; echo more > /data/more.txt") == "on b"
    assert c.request("GET", "/v1/volumes/%s/files/more.txt" % vol["id"]).raw == b"more\n"
    assert_error(c.request("DELETE", "/v1/volumes/" + vol["id"]), 409, "volume_in_use")
    a.delete_sandbox(sb["id"])
    assert c.ok("DELETE", "/v1/volumes/" + vol["id"])["deleted"] is True


def test_a_forged_node_credential_is_refused():
    sid = on("node-c")
    c = nodes()["node-c"].client(None)
    forged = {"x-sbx-node": "node-a", "x-sbx-node-identity": "key_x nodes-alice admin sandbox full_access",
              "x-sbx-node-auth": "v1 %d 0 %s" % (int(time.time() * 1000), "0" * 64)}
    assert_error(c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "id"}, headers=forged),
                 401, "invalid_node_credential")
    assert_error(c.request("GET", "/v1/keys", headers={"x-sbx-node": "node-a"}), 401,
                 "invalid_node_credential")


def test_parallel_creates_hold_the_limit_across_nodes():
    # SBX_MAX_PER_KEY is 3: twelve creates at once, four through each node, make three.
    key = S["admin"].create_key("nodes-carol")["key"]

    def create(i):
        return client(NODES[i % 3], key).request("POST", "/v1/sandboxes", {"ttl_seconds": 300},
                                                 timeout=120)

    with concurrent.futures.ThreadPoolExecutor(12) as ex:
        got = list(ex.map(create, range(12)))
    made = [r.body for r in got if r.status == 201]
    refused = [r for r in got if r.status != 201]
    assert len(made) == 3, [(r.status, r.body) for r in got]
    for r in refused:
        assert_error(r, 429, "sandbox_concurrency_limit")
    live = [sb for sb in client("node-b", key).list_sandboxes()]
    assert sorted(sb["id"] for sb in live) == sorted(sb["id"] for sb in made), live
    for sb in made:
        client("node-a", key).delete_sandbox(sb["id"])


def test_the_audit_chain_verifies_with_entries_from_every_node():
    spread()
    v = admin("node-b").ok("GET", "/v1/audit/verify")
    assert v["ok"] is True, v
    entries = admin("node-c").ok("GET", "/v1/audit?action=sandbox.create&limit=200")["data"]
    created = {e["sandbox_id"] for e in entries if e.get("outcome") == "ok"}
    assert {sb["id"] for sb in spread()} <= created, (spread(), entries)


def test_a_killed_node_is_unreachable_and_takes_its_sandboxes_back():
    sid = on("node-c")
    c = nodes()["node-c"]
    c.kill9()
    a = client("node-a")
    harness.wait_for(lambda: node_list()["node-c"]["state"] == "unreachable", DEAD_MS / 1000 + 5,
                     what="node-c reported unreachable")
    got = a.get_sandbox(sid)
    assert got["status"] == "node_unreachable" and got["node"] == "node-c", got
    assert_error(a.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true"}), 503,
                 "node_unreachable")
    listed = {sb["id"]: sb for sb in a.list_sandboxes()}
    assert listed[sid]["status"] == "node_unreachable", listed
    # New creates go to the nodes that answer.
    dave = client("node-a", S["admin"].create_key("nodes-dave")["key"])
    extra = [dave.create_sandbox(ttl_seconds=300) for _ in range(2)]
    assert {sb["node"] for sb in extra} <= {"node-a", "node-b"}, extra
    for sb in extra:
        dave.delete_sandbox(sb["id"])
    # The node comes back with its data dir and takes its sandboxes back, running.
    c.start()
    harness.wait_for(lambda: node_list()["node-c"]["state"] == "live", 10, what="node-c back")
    r = a.ok("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "cat in/blob.bin | wc -c"})
    assert r["stdout"].strip() == str(3 * 1024 * 1024), r
    assert a.get_sandbox(sid)["status"] == "running"


def run_code(c, sid, code):
    return c.ok("POST", "/v1/sandboxes/%s/run_code" % sid, {"code": code}, timeout=120)


def test_a_paused_sandbox_resumes_on_another_node_when_its_own_is_gone():
    erin = S["admin"].create_key("nodes-erin")["key"]
    a = client("node-a", erin)
    sb = a.create_sandbox(ttl_seconds=900)
    sid, home = sb["id"], sb["node"]
    run_code(a, sid, "secret = 'kept-in-memory'")
    a.ok("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "echo on-disk > note.txt"})
    a.ok("POST", "/v1/sandboxes/%s/pause" % sid)
    assert os.path.exists(os.path.join(shared(), sid, "memory")), "the pause is on shared storage"
    # Its node goes away; a resume through another node takes it over, memory and all.
    nodes()[home].kill9()
    other = next(n for n in NODES if n != home)
    c = client(other, erin)
    harness.wait_for(lambda: node_list(other)[home]["state"] == "unreachable",
                     DEAD_MS / 1000 + 5, what="%s reported unreachable" % home)
    r = c.ok("POST", "/v1/sandboxes/%s/resume" % sid, timeout=120)
    assert r["restored"] is True and r["node"] == other, r
    assert run_code(c, sid, "secret")["result"] == repr("kept-in-memory")
    assert c.ok("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "cat note.txt"})["stdout"] == "on-disk\n"
    assert not os.path.exists(os.path.join(shared(), sid)), "the spent copy is removed"
    # Its old node comes back and leaves it where it is now.
    nodes()[home].start()
    harness.wait_for(lambda: node_list(other)[home]["state"] == "live", 10, what="%s back" % home)
    back = client(home, erin)
    got = back.get_sandbox(sid)
    assert got["node"] == other and got["status"] == "running", got
    assert back.ok("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "cat note.txt"})["stdout"] == "on-disk\n"
    # A paused sandbox without a copy on shared storage waits for its node.
    sb2 = back.create_sandbox(ttl_seconds=900)
    back.ok("POST", "/v1/sandboxes/%s/pause" % sb2["id"])
    shutil.rmtree(os.path.join(shared(), sb2["id"]))
    nodes()[sb2["node"]].kill9()
    third = next(n for n in NODES if n != sb2["node"])
    harness.wait_for(lambda: node_list(third)[sb2["node"]]["state"] == "unreachable",
                     DEAD_MS / 1000 + 5, what="unreachable")
    assert_error(client(third, erin).request("POST", "/v1/sandboxes/%s/resume" % sb2["id"]), 503,
                 "node_unreachable")
    nodes()[sb2["node"]].start()
    harness.wait_for(lambda: node_list(third)[sb2["node"]]["state"] == "live", 10, what="back")
    r = client(third, erin).ok("POST", "/v1/sandboxes/%s/resume" % sb2["id"], timeout=120)
    assert r["node"] == sb2["node"] and r["restored"] is True, r
    for x in (sid, sb2["id"]):
        client(third, erin).delete_sandbox(x)


def test_a_node_with_another_key_is_refused():
    nodes()
    d = harness.Daemon(admin_key=S["admin"].key, extra_env=node_env("node-x"))
    try:
        try:
            d.start(timeout=30)
        except AssertionError:
            log = d.log_text()
        else:
            raise AssertionError("a node with another cluster.key started")
        assert "has another cluster.key" in log, log[-2000:]
    finally:
        d.cleanup()
    assert "node-x" not in node_list(), "a refused node is not registered"
