"""The v1 backend and workspace snapshots, through a real sbxd (docs/snapshots.md).

v1 keeps no machine: every exec runs in a fresh sandbox over the persistent workspace, so
files persist and nothing else does (no process, no /tmp, no kernel state). Its
/snapshot saves the workspace for new sandboxes. A second daemon with SBX_V2_CAPACITY=1
shows the fallback: without backend a create gets v1 and says why; with backend "v2" it
fails with 503 sandbox_capacity.
"""

import os

import harness
from harness import assert_error, wait_for

D = harness.Shared()
FULL = harness.Shared(extra_env={"SBX_V2_CAPACITY": "1"})


def teardown_module():
    D.close()
    FULL.close()


def user(name, shared=D):
    k = shared.once("key:" + name, lambda d: d.client().create_key(name))
    return shared.get().client(k["key"])


def v1_sandbox():
    c = user("v1")
    sb = D.once("sb", lambda d: c.create_sandbox(backend="v1", ttl_seconds=1800))
    return c, sb["id"]


def test_v1_create_answers_at_once_without_a_machine():
    c, sid = v1_sandbox()
    sb = c.get_sandbox(sid)
    assert sb["backend"] == "v1" and sb["status"] == "running", sb
    assert "backend_fallback" not in sb, sb
    d = D.get()
    assert not os.path.exists(os.path.join(d.sandbox_dir(sid), "state", "shim.pid"))


def test_each_exec_gets_a_fresh_machine_over_the_same_workspace():
    c, sid = v1_sandbox()
    c.sh(sid, "echo one > /workspace/a.txt; echo tmp > /tmp/t; nohup sleep 1000 >/dev/null 2>&1 &")
    # /tmp is the machine's memory and the sleeper its process: neither outlives the exec.
    out = c.sh(sid, "cat /workspace/a.txt; cat /tmp/t 2>/dev/null || echo no-tmp; "
                    "pgrep -x sleep >/dev/null && echo sleeping || echo no-sleep")
    assert out.split() == ["one", "no-tmp", "no-sleep"], out
    # run_code too: a fresh kernel each time.
    r = c.request("POST", "/v1/sandboxes/%s/run_code" % sid, {"code": "x = 1\nx"}, timeout=120)
    assert r.status == 200 and r.body["result"] == "1", r
    r = c.request("POST", "/v1/sandboxes/%s/run_code" % sid, {"code": "x"}, timeout=120)
    assert r.status == 200 and r.body["error"]["name"] == "NameError", r
    # Files written through the API are there for the next exec.
    r = c.request("PUT", "/v1/sandboxes/%s/files/up.txt" % sid, raw=b"uploaded")
    assert r.status in (200, 201), r
    assert c.sh(sid, "cat /workspace/up.txt") == "uploaded"


def test_v1_has_no_memory_snapshots():
    c, sid = v1_sandbox()
    for what in ("pause", "fork"):
        assert_error(c.request("POST", "/v1/sandboxes/%s/%s" % (sid, what), {}), 409,
                     "not_supported_on_v1")
    assert_error(c.request("POST", "/v1/sandboxes/%s/resume" % sid, {}), 409,
                 "sandbox_not_paused")


def test_snapshot_and_create_from_it():
    c, sid = v1_sandbox()
    c.sh(sid, "mkdir -p /workspace/p && echo snap > /workspace/p/s.txt")
    r = c.request("POST", "/v1/sandboxes/%s/snapshot" % sid)
    assert r.status == 201, r
    snap = r.body
    assert snap["object"] == "snapshot" and snap["sandbox_id"] == sid, snap
    assert snap["id"].startswith("snap_") and snap["size_bytes"] > 0, snap
    assert c.get_sandbox(sid)["snapshot_bytes"] >= snap["size_bytes"]
    # Later changes do not reach the snapshot.
    c.sh(sid, "echo later > /workspace/p/s.txt")

    for backend in ("v1", "v2"):
        n = c.create_sandbox(backend=backend, snapshot_id=snap["id"], ttl_seconds=600)
        assert n["backend"] == backend
        assert c.sh(n["id"], "cat /workspace/p/s.txt") == "snap\n"
        c.sh(n["id"], "echo mine > /workspace/p/s.txt")
        c.delete_sandbox(n["id"])
    assert c.sh(sid, "cat /workspace/p/s.txt") == "later\n"

    acts = [e for e in D.get().client().request("GET", "/v1/audit?sandbox_id=" + sid)
            .body["data"] if e["action"] == "sandbox.snapshot"]
    assert acts and acts[-1]["outcome"] == "ok", acts


def test_snapshot_errors_change_nothing():
    c, sid = v1_sandbox()
    other = user("v1-other")
    v2 = c.create_sandbox(ttl_seconds=600)
    assert v2["backend"] == "v2"
    assert_error(c.request("POST", "/v1/sandboxes/%s/snapshot" % v2["id"]), 409,
                 "not_supported_on_v2")
    assert c.get_sandbox(v2["id"])["snapshot_bytes"] == 0
    assert_error(c.request("POST", "/v1/sandboxes/sb_00000000000000000000/snapshot"), 404,
                 "sandbox_not_found")
    assert_error(other.request("POST", "/v1/sandboxes/%s/snapshot" % sid), 404,
                 "sandbox_not_found")
    before = sorted(s["id"] for s in c.list_sandboxes())
    for bad in ("snap_nope", "snap_%s_00000000" % sid[3:], "x" * 300):
        assert_error(c.request("POST", "/v1/sandboxes", {"snapshot_id": bad}, timeout=60),
                     404, "snapshot_not_found")
    assert_error(c.request("POST", "/v1/sandboxes", {"snapshot_id": 5}), 400, "invalid_request")
    # Another user's snapshot is not found either.
    snap = c.request("POST", "/v1/sandboxes/%s/snapshot" % sid).body["id"]
    assert_error(other.request("POST", "/v1/sandboxes", {"snapshot_id": snap}), 404,
                 "snapshot_not_found")
    for bad in ("v3", 2, ""):
        assert_error(c.request("POST", "/v1/sandboxes", {"backend": bad}), 400,
                     "invalid_backend")
    assert sorted(s["id"] for s in c.list_sandboxes()) == before
    c.delete_sandbox(v2["id"])


def test_snapshots_go_with_their_sandbox():
    d = D.get()
    c = user("v1-del")
    sid = c.create_sandbox(backend="v1", ttl_seconds=600)["id"]
    snap = c.request("POST", "/v1/sandboxes/%s/snapshot" % sid).body["id"]
    c.delete_sandbox(sid)
    wait_for(lambda: not os.path.exists(d.sandbox_dir(sid)), 30, what="sandbox dir removed")
    assert_error(c.request("POST", "/v1/sandboxes", {"snapshot_id": snap}), 404,
                 "snapshot_not_found")


def test_v1_survives_a_restart():
    d = D.get()
    c, sid = v1_sandbox()
    c.sh(sid, "echo kept > /workspace/r.txt")
    d.restart()
    c, sid = v1_sandbox()
    assert c.get_sandbox(sid)["backend"] == "v1"
    assert c.sh(sid, "cat /workspace/r.txt") == "kept\n"


def test_fallback_to_v1_when_v2_is_full():
    c = user("full", FULL)
    first = c.create_sandbox(ttl_seconds=600)
    assert first["backend"] == "v2" and "backend_fallback" not in first, first
    second = c.create_sandbox(ttl_seconds=600)
    assert second["backend"] == "v1", second
    assert "capacity" in second["backend_fallback"], second
    assert c.sh(second["id"], "echo works") == "works\n"
    before = sorted(s["id"] for s in c.list_sandboxes())
    assert_error(c.request("POST", "/v1/sandboxes", {"backend": "v2"}, timeout=60), 503,
                 "sandbox_capacity")
    assert sorted(s["id"] for s in c.list_sandboxes()) == before
    # The note survives a restart.
    FULL.get().restart()
    c = user("full", FULL)
    assert "capacity" in c.get_sandbox(second["id"])["backend_fallback"]
    for s in before:
        c.delete_sandbox(s)
