"""Pause, resume and fork with memory snapshots, through a real sbxd (docs/snapshots.md).

What "restored" means is checked from inside the sandbox, as a user would: a value held
only in the Python kernel's memory, a background process started before the pause (same
pid, still running), a file in /tmp (a tmpfs: memory) and the workspace. Each test uses
its own user, so the running and paused limits of one never leak into another.
"""

import os
import secrets
import threading
import time

import harness
from harness import assert_error, wait_for

D = harness.Shared()


def teardown_module():
    D.close()


def user(name, n=1):
    k = D.once("key:%s:%d" % (name, n), lambda d: d.client().create_key(name))
    return D.get().client(k["key"])


def post(c, sid, what, body=None, **kw):
    return c.request("POST", "/v1/sandboxes/%s/%s" % (sid, what), body, timeout=120, **kw)


def run_code(c, sid, code):
    r = post(c, sid, "run_code", {"code": code})
    assert r.status == 200, "run_code %r: %r" % (code, r)
    return r.body


def pause(c, sid):
    r = post(c, sid, "pause")
    assert r.status == 200, "pause: %r" % (r,)
    assert r.body["status"] == "paused" and r.body["id"] == sid, r.body
    return r.body


def resume(c, sid):
    r = post(c, sid, "resume")
    assert r.status == 200, "resume: %r" % (r,)
    b = r.body
    assert b["status"] == "running" and b["id"] == sid, b
    assert isinstance(b["restored"], bool) and isinstance(b["ready_ms"], int), b
    return b


def remember(c, sid):
    """Leave state in memory and on disk that a restore must bring back."""
    token = secrets.token_hex(8)
    assert run_code(c, sid, "secret = %r\nimport random\nsecret" % token)["result"] == repr(token)
    c.sh(sid, "echo %s > /workspace/w.txt; echo %s > /tmp/t.txt" % (token, token))
    r = c.request("POST", "/v1/sandboxes/%s/processes" % sid,
                  {"command": "sleep 100000"}, timeout=60)
    assert r.status in (200, 201), r
    return token, r.body["pid"]


def sleeper_alive(c, sid, pid):
    out = c.sh(sid, "ps -o pid=,args= -p %d || true" % pid)
    return "sleep 100000" in out


def live_ids(c):
    return sorted(s["id"] for s in c.list_sandboxes())


def test_pause_and_resume_bring_memory_back():
    c = user("pr")
    sid = c.create_sandbox(ttl_seconds=1800)["id"]
    token, pid = remember(c, sid)

    b = pause(c, sid)
    assert b["snapshot_bytes"] > 0 and isinstance(b["paused_at"], int), b
    assert isinstance(b["pause_ms"], int), b
    assert c.get_sandbox(sid)["status"] == "paused"
    assert sid in live_ids(c)
    # Nothing runs in a paused sandbox; files are still there on the host side.
    assert_error(c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true"}),
                 409, "sandbox_not_running")
    assert_error(post(c, sid, "run_code", {"code": "1"}), 409, "sandbox_not_running")
    assert_error(post(c, sid, "pause"), 409, "sandbox_not_running")
    assert_error(post(c, sid, "fork", {"count": 1}), 409, "sandbox_not_running")
    r = c.request("GET", "/v1/sandboxes/%s/files/w.txt" % sid)
    assert r.status == 200 and r.raw.strip() == token.encode(), r

    b = resume(c, sid)
    assert b["restored"] is True, b
    assert b["snapshot_bytes"] == 0, b  # the spent image is gone
    assert "paused_at" not in b, b
    assert run_code(c, sid, "secret")["result"] == repr(token)
    assert sleeper_alive(c, sid, pid), "the background process did not come back"
    assert c.sh(sid, "cat /workspace/w.txt /tmp/t.txt").split() == [token, token]
    assert_error(post(c, sid, "resume"), 409, "sandbox_not_paused")

    # Twice more: an image taken from a restored sandbox restores too.
    pause(c, sid)
    assert resume(c, sid)["restored"] is True
    assert run_code(c, sid, "secret")["result"] == repr(token)

    d = D.get()
    acts = [e["action"] for e in d.client().request("GET", "/v1/audit?sandbox_id=" + sid)
            .body["data"]]
    assert acts.count("sandbox.pause") == 2 and acts.count("sandbox.resume") == 2, acts
    # Each checkpoint stopped the container and its shim deleted it cleanly: runsc delete
    # waits for the gofer, which a shim that left it a zombie made fail after 5 s (and the
    # resume waited for that shim).
    with open(os.path.join(d.sandbox_dir(sid), "state", "shim.log")) as f:
        deletes = [l for l in f if "runsc delete:" in l]
    assert len(deletes) >= 2 and all("runsc delete: exit 0 " in l for l in deletes), deletes


def test_pause_refuses_while_busy_and_keeps_running():
    c = user("busy")
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    done = {}
    t = threading.Thread(target=lambda: done.update(
        r=c.request("POST", "/v1/sandboxes/%s/exec" % sid,
                    {"shell": "touch /workspace/started; sleep 2; echo ok"}, timeout=60)))
    t.start()
    wait_for(lambda: c.request("GET", "/v1/sandboxes/%s/files/started" % sid).status == 200, 20,
             what="the command to start")
    for what, body in (("pause", None), ("fork", {"count": 1})):
        assert_error(post(c, sid, what, body), 409, "sandbox_busy")
    t.join()
    assert done["r"].status == 200 and done["r"].body["stdout"] == "ok\n", done["r"]
    assert c.get_sandbox(sid)["status"] == "running"
    assert len(live_ids(c)) == 1
    c.delete_sandbox(sid)


def test_bad_requests_change_nothing():
    c = user("bad")
    other = user("bad-other")
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    before = live_ids(c)
    for body in ({"count": 0}, {"count": 6}, {"count": "2"}, {"count": 1.5}, {"count": True},
                 {"count": -1}):
        assert_error(post(c, sid, "fork", body), 400, "invalid_count")
    for body in ({"count": 1, "ttl_seconds": 0}, {"count": 1, "ttl_seconds": 86401},
                 {"count": 1, "ttl_seconds": "60"}):
        assert_error(post(c, sid, "fork", body), 400, "invalid_ttl")
    for what in ("fork", "pause", "resume"):
        assert_error(c.request("POST", "/v1/sandboxes/%s/%s" % (sid, what), raw=b"{nope"), 400,
                     "invalid_json")
    for what in ("pause", "resume", "fork"):
        assert_error(post(c, "sb_00000000000000000000", what), 404, "sandbox_not_found")
        assert_error(post(other, sid, what), 404, "sandbox_not_found")
        assert_error(post(c, sid, what, key=None), 401, "missing_api_key")
    assert_error(post(c, sid, "resume"), 409, "sandbox_not_paused")
    assert live_ids(c) == before
    assert c.get_sandbox(sid)["status"] == "running"
    c.delete_sandbox(sid)


def test_fork_copies_diverge_and_the_parent_runs_on():
    c = user("fk")
    parent = c.create_sandbox(ttl_seconds=1800)["id"]
    token, pid = remember(c, parent)
    # Both generators seeded before the fork.
    run_code(c, parent, "import random, numpy\nrandom.random(), numpy.random.random()")
    r = c.request("PUT", "/v1/sandboxes/%s/egress" % parent,
                  {"mode": "allowlist", "domains": ["example.com"]})
    assert r.status == 200, r
    egress = c.get_sandbox(parent)["egress"]
    assert egress["mode"] == "allowlist", egress

    t0 = time.time()
    r = post(c, parent, "fork", {"count": 2, "ttl_seconds": 900})
    took = time.time() - t0
    assert r.status == 200, r
    b = r.body
    assert b["object"] == "list" and b["parent_id"] == parent, b
    kids = [k["id"] for k in b["data"]]
    assert len(kids) == 2 and len(set(kids)) == 2 and parent not in kids, b
    for k in b["data"]:
        assert "error" not in k and k["restored"] is True, b
        assert isinstance(k["ready_ms"], int) and 0 < k["ready_ms"] <= took * 1000 + 50, b
        s = c.get_sandbox(k["id"])
        assert s["status"] == "running" and s["parent_id"] == parent, s
        assert s["ttl_seconds"] == 900, s
        assert s["egress"] == egress, s  # copies go out the way the parent does

    # The parent kept running: same kernel, same process, untouched by the copies.
    assert c.get_sandbox(parent)["status"] == "running"
    assert run_code(c, parent, "secret")["result"] == repr(token)
    assert sleeper_alive(c, parent, pid)

    seen_random, seen_numpy, seen_urandom = set(), set(), set()
    for i, k in enumerate(kids):
        assert run_code(c, k, "secret")["result"] == repr(token), "kernel state not copied"
        assert sleeper_alive(c, k, pid), "process not copied"
        out = c.sh(k, "cat /workspace/w.txt /tmp/t.txt; ls -la /workspace")
        assert out.split()[:2] == [token, token], out
        seen_random.add(run_code(c, k, "random.random()")["result"])
        seen_numpy.add(run_code(c, k, "numpy.random.random()")["result"])
        seen_urandom.add(c.sh(k, "head -c16 /dev/urandom | od -An -tx1 | tr -d ' \\n'"))
        # Diverge: each copy writes its own file and its own kernel value.
        run_code(c, k, "secret = 'kid%d'" % i)
        c.sh(k, "echo kid%d > /workspace/kid%d.txt" % (i, i))
    assert len(seen_random) == 2, "siblings share Python's random state: %r" % seen_random
    assert len(seen_numpy) == 2, "siblings share numpy's random state: %r" % seen_numpy
    assert len(seen_urandom) == 2, seen_urandom

    for i, k in enumerate(kids):
        assert run_code(c, k, "secret")["result"] == repr("kid%d" % i)
        names = sorted(f["path"] for f in c.request("GET", "/v1/sandboxes/%s/files" % k)
                       .body["data"])
        assert "kid%d.txt" % i in names and "kid%d.txt" % (1 - i) not in names, names
    assert run_code(c, parent, "secret")["result"] == repr(token)
    assert c.sh(parent, "ls /workspace").split() == ["out", "w.txt"]

    # A copy is a full sandbox: it pauses and resumes like any other.
    pause(c, kids[0])
    assert resume(c, kids[0])["restored"] is True
    assert run_code(c, kids[0], "secret")["result"] == repr("kid0")

    acts = [e for e in D.get().client().request("GET", "/v1/audit?sandbox_id=" + parent)
            .body["data"] if e["action"] == "sandbox.fork"]
    assert acts and acts[-1]["outcome"] == "ok", acts
    for k in kids + [parent]:
        c.delete_sandbox(k)


def test_a_fork_holds_its_parent_in_place_and_each_copy_is_consistent():
    """runsc resumes a sandbox in place after its checkpoint (scripts/deps.sh installs one
    that does): the parent is paused for the checkpoint and the workspace copies, then goes
    on as the same gVisor sandbox, never restored. A loop writes a counter to the workspace
    and to memory all along: each copy's workspace ends where its memory does, so its own
    loop writes no number twice and skips none."""
    c = user("held")
    parent = c.create_sandbox(ttl_seconds=1800)["id"]
    pidfile = os.path.join(D.get().sandbox_dir(parent), "state", "sandbox.pid")
    with open(pidfile) as f:
        host_pid = f.read().strip()
    r = c.request("POST", "/v1/sandboxes/%s/processes" % parent,
                  {"command": "i=0; while :; do i=$((i+1)); echo $i >> /workspace/log; done"},
                  timeout=60)
    assert r.status in (200, 201), r
    loop = r.body["pid"]
    wait_for(lambda: int(c.sh(parent, "wc -l < /workspace/log")) > 20, 30,
             what="the loop has written")
    r = post(c, parent, "fork", {"count": 2})
    assert r.status == 200, r
    kids = [k["id"] for k in r.body["data"]]
    assert all(k["restored"] is True for k in r.body["data"]), r.body

    with open(pidfile) as f:
        assert f.read().strip() == host_pid, "the parent was restarted, not held"
    n = int(c.sh(parent, "wc -l < /workspace/log"))
    wait_for(lambda: int(c.sh(parent, "wc -l < /workspace/log")) > n, 30,
             what="the parent's loop goes on")
    for kid in kids:
        # The copy's loop runs on from its memory: its log grows past where it was.
        m = int(c.sh(kid, "wc -l < /workspace/log"))
        wait_for(lambda: int(c.sh(kid, "wc -l < /workspace/log")) > m, 30,
                 what="the copy's loop goes on")
        c.sh(kid, "kill %d" % loop)
        out = c.sh(kid, "awk 'NR != $1 { print \"line \" NR \": \" $1; exit 1 }' "
                        "/workspace/log && wc -l < /workspace/log")
        assert int(out) > 20, out
        c.delete_sandbox(kid)
    c.sh(parent, "kill %d" % loop)
    c.delete_sandbox(parent)


def test_a_network_socket_blocks_a_snapshot_and_nothing_breaks():
    # gVisor cannot save a socket anything waits on: a user's server must stop first.
    c = user("sock")
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    r = c.request("POST", "/v1/sandboxes/%s/processes" % sid,
                  {"command": "python3 -m http.server 8000 --bind 127.0.0.1"}, timeout=60)
    assert r.status in (200, 201), r
    proc = r.body["id"]
    wait_for(lambda: ":1F40" in c.sh(sid, "cat /proc/net/tcp"), 20, what="the server listens")
    for what, body in (("pause", None), ("fork", {"count": 1})):
        r = post(c, sid, what, body)
        assert_error(r, 409, "snapshot_unsupported")
        assert "8000" in r.body["error"]["message"], r.body
    assert c.get_sandbox(sid)["status"] == "running"
    assert len(live_ids(c)) == 1
    assert c.sh(sid, "echo still") == "still\n"
    # Egress still works after the refused attempts: its listener was put back.
    assert ":0C38" in c.sh(sid, "cat /proc/net/tcp"), "the egress listener is gone"
    r = c.request("DELETE", "/v1/sandboxes/%s/processes/%s" % (sid, proc), timeout=60)
    assert r.status == 200, r
    wait_for(lambda: ":1F40" not in c.sh(sid, "cat /proc/net/tcp"), 20, what="server gone")
    pause(c, sid)
    assert resume(c, sid)["restored"] is True
    assert ":0C38" in c.sh(sid, "cat /proc/net/tcp"), "the egress listener did not come back"
    c.delete_sandbox(sid)


def test_fork_limits():
    # A user past 5 running: 2 running + a fork of 4.
    c = user("fl")
    a = c.create_sandbox(ttl_seconds=600)["id"]
    c.create_sandbox(ttl_seconds=600)
    before = live_ids(c)
    assert_error(post(c, a, "fork", {"count": 4}), 429, "sandbox_concurrency_limit")
    assert live_ids(c) == before

    # A key past 6 active (paused ones count there, not as running).
    k = user("fk6")
    sids = [k.create_sandbox(ttl_seconds=600)["id"] for _ in range(3)]
    for s in sids[:2]:
        pause(k, s)
    sids += [k.create_sandbox(ttl_seconds=600)["id"] for _ in range(2)]
    before = live_ids(k)
    assert len(before) == 5
    assert_error(post(k, sids[2], "fork", {"count": 2}), 429, "sandbox_concurrency_limit")
    assert live_ids(k) == before
    # Resuming re-enters the running limits: the key has 3 running.
    assert_error(post(k, sids[0], "resume"), 429, "sandbox_concurrency_limit")
    assert k.get_sandbox(sids[0])["status"] == "paused"
    for s in before:
        k.delete_sandbox(s)
    for s in live_ids(c):
        c.delete_sandbox(s)


def test_paused_limit():
    c = user("pl")
    paused = []
    for _ in range(10):
        sid = c.create_sandbox(ttl_seconds=600)["id"]
        pause(c, sid)
        paused.append(sid)
    extra = c.create_sandbox(ttl_seconds=600)["id"]
    assert_error(post(c, extra, "pause"), 429, "sandbox_paused_limit")
    assert c.get_sandbox(extra)["status"] == "running"
    assert sorted(s["id"] for s in c.list_sandboxes() if s["status"] == "paused") == sorted(paused)
    # Deleting an old one makes room.
    c.delete_sandbox(paused[0])
    pause(c, extra)
    for s in paused[1:] + [extra]:
        c.delete_sandbox(s)


def test_pause_survives_a_restart_and_delete_removes_the_snapshot():
    d = D.get()
    c = user("rs")
    sid = c.create_sandbox(ttl_seconds=1800)["id"]
    token, pid = remember(c, sid)
    pause(c, sid)
    d.restart()
    c = user("rs")
    assert c.get_sandbox(sid)["status"] == "paused"
    b = resume(c, sid)
    assert b["restored"] is True, b
    assert run_code(c, sid, "secret")["result"] == repr(token)
    assert sleeper_alive(c, sid, pid)

    pause(c, sid)
    d.restart(hard=True)
    c = user("rs")
    snap = os.path.join(d.sandbox_dir(sid), "snapshots")
    assert os.path.isdir(snap)
    c.delete_sandbox(sid)
    assert_error(c.request("GET", "/v1/sandboxes/" + sid), 404, "sandbox_not_found")
    wait_for(lambda: not os.path.exists(d.sandbox_dir(sid)), 30, what="sandbox dir removed")


def test_unusable_image_starts_cold():
    d = D.get()
    c = user("cold")
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    token, _ = remember(c, sid)
    pause(c, sid)
    img = os.path.join(d.sandbox_dir(sid), "snapshots", "memory", "checkpoint.img")
    with open(img, "r+b") as f:
        f.truncate(4096)
    b = resume(c, sid)
    assert b["restored"] is False, b
    assert c.sh(sid, "cat /workspace/w.txt").strip() == token  # files survive
    assert c.sh(sid, "cat /tmp/t.txt 2>/dev/null || echo gone").strip() == "gone"
    r = run_code(c, sid, "secret")
    assert r["error"] and r["error"]["name"] == "NameError", r
    c.delete_sandbox(sid)


def test_a_paused_sandbox_expires():
    d = D.get()
    c = user("exp")
    sid = c.create_sandbox(ttl_seconds=8)["id"]
    pause(c, sid)
    wait_for(lambda: c.request("GET", "/v1/sandboxes/" + sid).status == 404, 20,
             what="expiry of a paused sandbox")
    wait_for(lambda: not os.path.exists(d.sandbox_dir(sid)), 30, what="its snapshot removed")
