"""Volumes (docs/volumes.md) through a real sbxd on gVisor: named storage that outlives
sandboxes and is shared between them, its files without a sandbox, its quota inside and
out, the refusals (in use, another user's, bad input) and a kill -9 of sbxd with volumes
mounted.

One daemon is shared; each test makes its own volumes (names unique per test).
"""

import os
import time

import harness
from harness import assert_error, wait_for

D = harness.Shared(extra_env={"SBX_VOLUME_MAX_MB": "256", "SBX_VOLUME_MB": "64"})


def teardown_module():
    D.close()


def user(name="vol"):
    return D.client(name)


def volume(c, name, **kw):
    r = c.request("POST", "/v1/volumes", dict(name=name, **kw))
    assert r.status == 201, r
    return r.body


def mounted(c, vol, path="/data", **kw):
    return c.create_sandbox(ttl_seconds=1800, volumes=[dict(volume=vol, path=path, **kw)])["id"]


def test_create_list_get_delete():
    c = user()
    v = volume(c, "crud")
    assert v["object"] == "volume" and v["id"].startswith("vol_"), v
    assert v["name"] == "crud" and v["size_mb"] == 64 and v["mounted_in"] == [], v
    assert isinstance(v["used_bytes"], int) and 0 <= v["used_bytes"] < 8 << 20, v
    big = volume(c, "crud-big", size_mb=256)
    assert big["size_mb"] == 256, big
    ids = [x["id"] for x in c.ok("GET", "/v1/volumes")["data"]]
    assert v["id"] in ids and big["id"] in ids, ids
    # By id or by name.
    assert c.ok("GET", "/v1/volumes/" + v["id"])["id"] == v["id"]
    assert c.ok("GET", "/v1/volumes/crud")["id"] == v["id"]
    assert_error(c.request("POST", "/v1/volumes", {"name": "crud"}), 409, "volume_exists")
    r = c.ok("DELETE", "/v1/volumes/" + v["id"])
    assert r == {"id": v["id"], "object": "volume", "deleted": True}, r
    assert_error(c.request("GET", "/v1/volumes/" + v["id"]), 404, "volume_not_found")
    assert v["id"] not in [x["id"] for x in c.ok("GET", "/v1/volumes")["data"]]
    # The name is free again.
    again = volume(c, "crud")
    assert again["id"] != v["id"]
    c.ok("DELETE", "/v1/volumes/crud")
    c.ok("DELETE", "/v1/volumes/" + big["id"])


def test_bad_inputs_are_400_with_codes():
    c = user()
    before = c.ok("GET", "/v1/volumes")["data"]
    for body in ({}, {"name": ""}, {"name": "a/b"}, {"name": "../x"}, {"name": "x" * 64},
                 {"name": 5}, {"name": "ok", "size_mb": 0}, {"name": "ok", "size_mb": "5"},
                 {"name": "ok", "size_mb": 257}, {"name": "ok", "size_mb": 8}):
        assert_error(c.request("POST", "/v1/volumes", body), 400, "invalid_volume")
    assert_error(c.request("POST", "/v1/volumes", raw=b"{nope"), 400, "invalid_json")
    assert c.ok("GET", "/v1/volumes")["data"] == before
    v = volume(c, "badmounts")
    live = [s["id"] for s in c.list_sandboxes()]
    for path in ("data", "/", "/workspace", "/home/user", "/proc/x", "/etc", "/usr/lib/x",
                 "/tmp/x", "/opt/sbx", "/data/", "/a/../b", "/a//b", "/a/./b", "/x\n",
                 "/workspace/out", "/workspace/out/x", "/" + "a" * 300):
        assert_error(c.request("POST", "/v1/sandboxes",
                               {"volumes": [{"volume": v["id"], "path": path}]}),
                     400, "invalid_mount_path")
    for vols in ({"volume": v["id"]}, [{"path": "/data"}], [{"volume": v["id"], "path": 3}],
                 [{"volume": v["id"], "path": "/d", "read_only": "yes"}], ["x"],
                 [{"volume": v["id"], "path": "/d%d" % i} for i in range(9)]):
        assert_error(c.request("POST", "/v1/sandboxes", {"volumes": vols}), 400,
                     "invalid_volume")
    # Two mounts at nested places.
    assert_error(c.request("POST", "/v1/sandboxes", {"volumes": [
        {"volume": v["id"], "path": "/data"}, {"volume": v["id"], "path": "/data/x"}]}),
        400, "invalid_mount_path")
    assert_error(c.request("POST", "/v1/sandboxes",
                           {"volumes": [{"volume": "vol_nope", "path": "/data"}]}),
                 404, "volume_not_found")
    assert [s["id"] for s in c.list_sandboxes()] == live
    # Bad file paths on the volume routes.
    for p in ("../x", "a/../../b"):
        assert_error(c.request("PUT", "/v1/volumes/%s/files/%s" % (v["id"], p), raw=b"x"),
                     400, "invalid_path")
    c.ok("DELETE", "/v1/volumes/" + v["id"])


def test_write_in_one_sandbox_delete_it_read_in_another():
    c = user()
    v = volume(c, "carry")
    a = mounted(c, v["id"])
    got = c.get_sandbox(a)
    assert got["volumes"] == [{"volume_id": v["id"], "name": "carry", "path": "/data",
                               "read_only": False}], got
    c.sh(a, "mkdir -p /data/repo && echo 'kept across sandboxes' > /data/repo/notes.txt")
    mi = c.ok("GET", "/v1/volumes/" + v["id"])["mounted_in"]
    assert mi == [{"sandbox_id": a, "path": "/data", "read_only": False}], mi
    c.delete_sandbox(a)
    wait_for(lambda: c.ok("GET", "/v1/volumes/" + v["id"])["mounted_in"] == [], 10, 0.2,
             "the volume unmounted")
    b = mounted(c, "carry", path="/mnt/carry")
    assert c.sh(b, "cat /mnt/carry/repo/notes.txt") == "kept across sandboxes\n"
    # The sandbox's user owns what it wrote and may change it.
    c.sh(b, "echo more >> /mnt/carry/repo/notes.txt && id -u > /mnt/carry/uid")
    assert c.request("GET", "/v1/volumes/%s/files/uid" % v["id"]).raw.strip() != b"0"
    assert c.ok("GET", "/v1/volumes/" + v["id"])["used_bytes"] > 0
    c.delete_sandbox(b)
    wait_for(lambda: c.request("DELETE", "/v1/volumes/" + v["id"]).status == 200, 20, 0.3,
             "the volume deleted")


def test_two_sandboxes_write_one_volume_and_see_each_other():
    """gVisor with --file-access-mounts=shared (runsc's default, which sbx keeps) and no
    overlay on the mount (--overlay2=none): each sandbox's gofer revalidates against the
    host, so a write from one is seen by the other at its next access."""
    c = user()
    v = volume(c, "shared")
    a, b = mounted(c, v["id"]), mounted(c, v["id"], path="/srv/shared")
    mi = sorted(m["sandbox_id"] for m in c.ok("GET", "/v1/volumes/" + v["id"])["mounted_in"])
    assert mi == sorted([a, b]), mi
    # At once: both append to one file and each write its own, 50 times.
    pa = c.request("POST", "/v1/sandboxes/%s/exec" % a, {
        "shell": "for i in $(seq 50); do echo a$i >> /data/log; echo $i > /data/a.txt; done",
        "background": True})
    assert pa.status in (200, 201, 202), pa
    out = c.sh(b, "for i in $(seq 50); do echo b$i >> /srv/shared/log; "
                  "echo $i > /srv/shared/b.txt; done; echo done")
    assert out == "done\n"
    wait_for(lambda: c.sh(b, "cat /srv/shared/a.txt 2>/dev/null") == "50\n", 30, 0.3,
             "a's last write seen in b")
    assert c.sh(a, "cat /data/b.txt") == "50\n"
    lines = c.sh(a, "cat /data/log").split()
    assert sorted(lines) == sorted(["a%d" % i for i in range(1, 51)] +
                                   ["b%d" % i for i in range(1, 51)]), lines
    # A change seen at once in the other, both ways.
    for src, dst, sp, dp in ((a, b, "/data", "/srv/shared"), (b, a, "/srv/shared", "/data")):
        token = "t-%s-%f" % (src, time.time())
        c.sh(src, "echo %s > %s/now.txt" % (token, sp))
        assert c.sh(dst, "cat %s/now.txt" % dp) == token + "\n"
    # A read-only mount reads the same and cannot write.
    ro = mounted(c, v["id"], path="/ro", read_only=True)
    assert c.sh(ro, "cat /ro/a.txt") == "50\n"
    r = c.exec(ro, shell="echo x > /ro/nope")
    assert r["exit_code"] != 0, r
    for sid in (a, b, ro):
        c.delete_sandbox(sid)


def test_files_through_the_routes_are_seen_inside():
    c = user()
    v = volume(c, "routes")
    vid = v["id"]
    f = "/v1/volumes/%s/files/" % vid
    body = bytes(range(256)) * 400
    r = c.request("PUT", f + "in/data.bin", raw=body)
    assert r.status == 200 and r.body == {"object": "file", "path": "in/data.bin",
                                          "size": len(body)}, r
    r = c.request("POST", "/v1/volumes/%s/directories" % vid, {"path": "made/deep"})
    assert r.status == 201 and r.body["created"] is True, r
    st = c.ok("GET", "/v1/volumes/%s/stat?path=in/data.bin" % vid)
    assert st["type"] == "file" and st["size"] == len(body), st
    assert c.ok("GET", "/v1/volumes/%s/stat?path=made" % vid)["type"] == "directory"
    assert_error(c.request("GET", "/v1/volumes/%s/stat?path=nope" % vid), 404, "file_not_found")
    sid = mounted(c, vid)
    out = c.sh(sid, "sha256sum /data/in/data.bin; test -d /data/made/deep && echo dir")
    import hashlib
    assert out.split()[0] == hashlib.sha256(body).hexdigest() and "dir" in out, out
    c.sh(sid, "printf inside > /data/made/deep/x.txt")
    assert c.request("GET", f + "made/deep/x.txt").raw == b"inside"
    paths = [e["path"] for e in c.ok("GET", "/v1/volumes/%s/files?recursive=true" % vid)["data"]]
    assert paths == ["in", "in/data.bin", "made", "made/deep", "made/deep/x.txt"], paths
    c.ok("DELETE", f + "in/data.bin")
    assert c.sh(sid, "ls /data/in") == ""
    # A link planted inside resolves beneath the volume, never to the host.
    c.sh(sid, "ln -s /etc/passwd /data/link; ln -s ../../../../../../etc /data/up")
    assert_error(c.request("GET", f + "link"), 400, "invalid_path")
    assert_error(c.request("GET", f + "up/passwd"), 400, "invalid_path")
    c.delete_sandbox(sid)


def test_quota_holds_on_the_routes_and_inside():
    c = user()
    v = volume(c, "small", size_mb=16)
    vid = v["id"]
    r = c.request("PUT", "/v1/volumes/%s/files/big" % vid, raw=b"\0" * (20 << 20))
    assert_error(r, 507, "volume_full")
    sid = mounted(c, vid)
    r = c.exec(sid, shell="dd if=/dev/zero of=/data/fill bs=1M count=40 2>&1; echo rc=$?")
    assert "No space left" in r["stdout"] and "rc=0" not in r["stdout"], r
    # Full now: the routes say so too, and freeing files frees space.
    r = c.request("PUT", "/v1/volumes/%s/files/more" % vid, raw=b"x" * (2 << 20))
    assert_error(r, 507, "volume_full")
    c.sh(sid, "rm /data/fill")
    r = c.request("PUT", "/v1/volumes/%s/files/more" % vid, raw=b"x" * (2 << 20))
    assert r.status == 200, r
    # The workspace's quota is its own: the sandbox's workspace was never touched.
    assert c.sh(sid, "ls -A /workspace /workspace/out") == "/workspace:\nout\n\n/workspace/out:\n"
    c.delete_sandbox(sid)


def test_delete_while_mounted_is_409():
    c = user()
    v = volume(c, "busy")
    sid = mounted(c, v["id"])
    c.sh(sid, "echo x > /data/x")
    assert_error(c.request("DELETE", "/v1/volumes/" + v["id"]), 409, "volume_in_use")
    assert c.sh(sid, "cat /data/x") == "x\n"   # nothing changed
    # A paused sandbox still holds it; resumed, it still has it.
    assert c.request("POST", "/v1/sandboxes/%s/pause" % sid, timeout=120).status == 200
    assert_error(c.request("DELETE", "/v1/volumes/" + v["id"]), 409, "volume_in_use")
    r = c.request("POST", "/v1/sandboxes/%s/resume" % sid, timeout=120)
    assert r.status == 200, r
    assert c.sh(sid, "cat /data/x; echo y > /data/y") == "x\n"
    assert c.request("GET", "/v1/volumes/%s/files/y" % v["id"]).raw == b"y\n"
    c.delete_sandbox(sid)
    assert c.ok("DELETE", "/v1/volumes/" + v["id"])["deleted"] is True


def test_another_users_volume_is_404():
    c, other = user(), user("intruder")
    v = volume(c, "mine")
    vid = v["id"]
    for method, path, body in (("GET", "/v1/volumes/" + vid, None),
                               ("GET", "/v1/volumes/mine", None),
                               ("DELETE", "/v1/volumes/" + vid, None),
                               ("GET", "/v1/volumes/%s/files" % vid, None),
                               ("GET", "/v1/volumes/%s/files/x" % vid, None),
                               ("DELETE", "/v1/volumes/%s/files/x" % vid, None),
                               ("GET", "/v1/volumes/%s/stat?path=" % vid, None),
                               ("POST", "/v1/volumes/%s/directories" % vid, {"path": "d"})):
        assert_error(other.request(method, path, body), 404, "volume_not_found")
    assert_error(other.request("PUT", "/v1/volumes/%s/files/x" % vid, raw=b"x"), 404,
                 "volume_not_found")
    assert_error(other.request("POST", "/v1/sandboxes",
                               {"volumes": [{"volume": vid, "path": "/data"}]}),
                 404, "volume_not_found")
    assert vid not in [x["id"] for x in other.ok("GET", "/v1/volumes")["data"]]
    # The other user may have a volume of the same name: names are per user.
    theirs = volume(other, "mine")
    assert theirs["id"] != vid
    assert c.ok("GET", "/v1/volumes/mine")["id"] == vid
    other.ok("DELETE", "/v1/volumes/mine")
    c.ok("DELETE", "/v1/volumes/" + vid)


def test_fork_keeps_the_same_volume():
    c = user()
    v = volume(c, "forked")
    parent = mounted(c, v["id"])
    c.sh(parent, "echo before > /data/f.txt")
    r = c.request("POST", "/v1/sandboxes/%s/fork" % parent, {"count": 1}, timeout=120)
    assert r.status == 200, r
    kid = r.body["data"][0]["id"]
    assert c.get_sandbox(kid)["volumes"][0]["volume_id"] == v["id"]
    assert c.sh(kid, "cat /data/f.txt") == "before\n"
    # The same volume, not a copy: the copy's write is the parent's to read.
    c.sh(kid, "echo from-kid > /data/kid.txt")
    assert c.sh(parent, "cat /data/kid.txt") == "from-kid\n"
    mi = sorted(m["sandbox_id"] for m in c.ok("GET", "/v1/volumes/" + v["id"])["mounted_in"])
    assert mi == sorted([parent, kid]), mi
    c.delete_sandbox(kid)
    c.delete_sandbox(parent)


def test_kill9_with_volumes_mounted_loses_nothing():
    d = D.get()
    c = user()
    v = volume(c, "durable")
    sid = mounted(c, v["id"])
    c.sh(sid, "echo 'before the kill' > /data/k.txt; sync")
    c.request("PUT", "/v1/volumes/%s/files/api.txt" % v["id"], raw=b"via api")
    d.kill9()
    d.start()
    got = c.get_sandbox(sid)
    assert got["status"] == "running" and got["volumes"][0]["volume_id"] == v["id"], got
    # The same sandbox, its mount re-adopted: both sides see everything.
    assert c.sh(sid, "cat /data/k.txt /data/api.txt") == "before the kill\nvia api"
    c.sh(sid, "echo after > /data/after.txt")
    assert c.request("GET", "/v1/volumes/%s/files/after.txt" % v["id"]).raw == b"after\n"
    mi = c.ok("GET", "/v1/volumes/" + v["id"])["mounted_in"]
    assert [m["sandbox_id"] for m in mi] == [sid], mi
    assert_error(c.request("DELETE", "/v1/volumes/" + v["id"]), 409, "volume_in_use")
    # A new sandbox mounts it too after the restart.
    other = mounted(c, v["id"], path="/again")
    assert c.sh(other, "cat /again/after.txt") == "after\n"
    c.delete_sandbox(other)
    c.delete_sandbox(sid)


def test_audit_entries():
    c = user("auditor")
    v = volume(c, "audited")
    c.request("PUT", "/v1/volumes/%s/files/a" % v["id"], raw=b"a")
    c.ok("DELETE", "/v1/volumes/%s/files/a" % v["id"])
    c.ok("DELETE", "/v1/volumes/" + v["id"])
    a = D.get().client().ok("GET", "/v1/audit?limit=200")
    rows = a["data"] if isinstance(a, dict) else a
    acts = [(e.get("action"), e.get("sandbox_id") or e.get("target")) for e in rows]
    for act in ("volume.create", "volume.file.upload", "volume.file.delete", "volume.delete"):
        assert any(x == act for x, _ in acts), (act, acts[:20])


def test_configuration_volume_mount_is_honoured():
    """Document 002's volume_mount: the creator's own volume of that name, at mount_path."""
    a = D.get().client()
    cfg = a.ok("POST", "/v1/sandbox-configs", {"name": "with-volume", "config": {
        "volume_mount": {"enabled": True, "mount_path": "/cfgvol", "volume_name": "cfgvol"}}},
        status=201)
    assert cfg["config"]["volume_mount"]["supported"] is True, cfg
    c = user()
    v = volume(c, "cfgvol")
    c.request("PUT", "/v1/volumes/%s/files/hello.txt" % v["id"], raw=b"from the config")
    sid = c.create_sandbox(config_id=cfg["id"], ttl_seconds=600)["id"]
    assert c.get_sandbox(sid)["volumes"][0]["path"] == "/cfgvol"
    assert c.sh(sid, "cat /cfgvol/hello.txt") == "from the config"
    c.delete_sandbox(sid)
    # Another user without such a volume cannot create from it: their own is looked up.
    assert_error(user("novol").request("POST", "/v1/sandboxes", {"config_id": cfg["id"]}),
                 404, "volume_not_found")
    a.ok("DELETE", "/v1/sandbox-configs/" + cfg["id"])


def test_metrics_count_volumes_and_bytes():
    c = user()
    v = volume(c, "metered", size_mb=32)
    c.request("PUT", "/v1/volumes/%s/files/x" % v["id"], raw=b"y" * (1 << 20))
    text = D.get().client().request("GET", "/metrics").raw.decode()
    got = {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
           if line.startswith("sbx_volume")}
    assert got["sbx_volumes"] >= 1 and got["sbx_volume_size_bytes"] >= 32 << 20, got
    assert got["sbx_volume_used_bytes"] >= 1 << 20, got
    c.ok("DELETE", "/v1/volumes/" + v["id"])


def test_sandbox_create_tool_takes_volumes():
    c = user()
    v = volume(c, "tooled")
    c.request("PUT", "/v1/volumes/%s/files/t.txt" % v["id"], raw=b"tool")
    tools = {t["name"]: t for t in c.ok("GET", "/v1/tools")["data"]}
    assert "volumes" in tools["sandbox_create"]["inputSchema"]["properties"], tools
    r = c.request("POST", "/v1/tools/sandbox_create",
                  {"volumes": [{"volume": "tooled", "path": "/v"}], "ttl_seconds": 600},
                  timeout=120)
    assert r.status == 200, r
    sid = r.body["result"]["id"]
    assert c.sh(sid, "cat /v/t.txt") == "tool"
    c.delete_sandbox(sid)
    assert_error(c.request("POST", "/v1/tools/sandbox_create",
                           {"volumes": [{"volume": "tooled", "path": "/etc"}]}),
                 400, "invalid_mount_path")
    c.ok("DELETE", "/v1/volumes/" + v["id"])


def test_namespaces_and_local_mount_volumes_too():
    """The same volume under the other backends: a plain bind mount of the host's
    directory, so a write in one sandbox is the other's at once."""
    with harness.Daemon(extra_env={"SBX_BACKEND": "gvisor,namespaces,local",
                                   "SBX_ALLOW_LOCAL": "yes-no-isolation"}) as d:
        a = d.client()
        c = d.client(a.create_key("nsvol")["key"])
        v = volume(c, "both", size_mb=16)
        sids = {}
        for rt in ("namespaces", "local", "gvisor"):
            sids[rt] = c.create_sandbox(ttl_seconds=600, runtime=rt, volumes=[
                {"volume": v["id"], "path": "/mnt/both"}])["id"]
        for rt, sid in sids.items():
            c.sh(sid, "umask 022; echo %s > /mnt/both/%s.txt" % (rt, rt))
        for rt, sid in sids.items():
            out = c.sh(sid, "cat /mnt/both/namespaces.txt /mnt/both/local.txt "
                            "/mnt/both/gvisor.txt")
            assert out == "namespaces\nlocal\ngvisor\n", (rt, out)
        owners = {e["path"]: e for e in c.ok("GET", "/v1/volumes/%s/files" % v["id"])["data"]}
        assert set(owners) >= {"namespaces.txt", "local.txt", "gvisor.txt"}, owners
        # What they wrote is readable through the routes.
        assert c.request("GET", "/v1/volumes/%s/files/namespaces.txt" % v["id"]).raw == \
            b"namespaces\n"
        # The quota holds under namespaces as well.
        r = c.exec(sids["namespaces"],
                   shell="dd if=/dev/zero of=/mnt/both/fill bs=1M count=100 2>&1; echo rc=$?")
        assert "No space left" in r["stdout"], r
        for sid in sids.values():
            c.delete_sandbox(sid)


def test_v1_sandbox_mounts_its_volume_at_every_exec():
    c = user()
    v = volume(c, "every-exec")
    sid = c.create_sandbox(backend="v1", ttl_seconds=600,
                           volumes=[{"volume": v["id"], "path": "/data"}])["id"]
    c.sh(sid, "echo one > /data/1.txt")
    # A fresh machine for the next op, with the volume mounted again.
    assert c.sh(sid, "cat /data/1.txt; echo two > /data/2.txt") == "one\n"
    assert c.request("GET", "/v1/volumes/%s/files/2.txt" % v["id"]).raw == b"two\n"
    assert_error(c.request("DELETE", "/v1/volumes/" + v["id"]), 409, "volume_in_use")
    c.delete_sandbox(sid)
    c.ok("DELETE", "/v1/volumes/" + v["id"])
