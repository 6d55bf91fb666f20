"""Skills installed into sandbox configurations (docs/skills.md) through a real sbxd: a catalog
install into two configurations (one skill's script fails), install-events followed to the end
and replayed to a late subscriber, guidance and a reinstall with instructions, stop, PATCH of
enabled and envs, sandboxes of the configuration that see /workspace/skills/<name>, what the
install script left and the env values, multipart uploads, the agent-facing list, the
404/409/400 answers, spec 002's rules around a configuration's skills (desktop_enabled locked
once one is installed, the snapshot released on delete or skill_snapshot_release_failed) and
its permission table for the catalog and the installs.
"""

import http.server
import io
import json
import os
import subprocess
import tempfile
import threading
import uuid
import zipfile

import harness
from harness import assert_error, wait_for
import testserver



class FakeModel(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint playing the install agent for the skills named in the
    prompt: "agented" runs one command then says done; "giveup" gives up once guidance asks
    it to; "confused" never answers in JSON."""
    prompts = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][-1]["content"]
        FakeModel.prompts.append(prompt)
        if '"confused"' in prompt:
            reply = "I am not sure what to do."
        elif '"giveup"' in prompt:
            reply = ('{"failed": "the admin said stop"}' if "please give up" in prompt
                     else '{"command": "sleep 0.2"}')
        elif "exit code 0" in prompt:
            reply = 'Sure. {"done": "installed"}'
        else:
            reply = '{"command": "echo agent-was-here > /workspace/.agent-done; echo ran it"}'
        out = json.dumps({"choices": [{"message": {"role": "assistant",
                                                   "content": reply}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args):
        pass


INDEX = {}  # path -> bytes: the operator's skill index, served by the test


class _Index(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = INDEX.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args):
        pass


_model = testserver.QuietHTTPServer(("127.0.0.1", 0), FakeModel)
threading.Thread(target=_model.serve_forever, daemon=True).start()
_index = testserver.QuietHTTPServer(("127.0.0.1", 0), _Index)
threading.Thread(target=_index.serve_forever, daemon=True).start()
D = harness.Shared(extra_env={"SBX_LLM_URL": "http://127.0.0.1:%d/v1" % _model.server_address[1],
                              "SBX_LLM_MODEL": "fake-model",
                              "SBX_SKILL_INDEX_URL": "http://127.0.0.1:%d" %
                              _index.server_address[1]})

SKILL_MD = ("---\nname: %s\ndescription: %s\nversion: %s\n%s"
            "envs:\n  - name: GREETING_TOKEN\n    description: a token\n    required: true\n"
            "  - REGION\n---\n# %s\nUse it.\n")

GREET_INSTALL = ("echo installing $SKILL_NAME $SKILL_VERSION from $PWD with $CFG_VAR\n"
                 "echo done > /workspace/.greet-installed\n"
                 "echo to-stderr >&2\n")
BROKEN_INSTALL = "echo about to fail\nexit 1\n"
# Waits for a guidance message that says "proceed", then shows the instructions it got.
STEER_INSTALL = ("i=0\nwhile ! grep -q proceed \"$SKILL_GUIDANCE_FILE\"; do\n"
                 "  i=$((i+1)); [ $i -gt 600 ] && exit 3; sleep 0.1\ndone\n"
                 "echo instructions: $(cat \"$SKILL_INSTRUCTIONS_FILE\")\n"
                 "echo $SKILL_VERSION > /workspace/.steer-version\n")


def teardown_module():
    D.close()
    _model.shutdown()
    _index.shutdown()


def bundle(name, version="1.0.0", script=None, description=None, body=""):
    buf = io.BytesIO()
    install = "install: install.sh\n" if script is not None else ""
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(name + "/SKILL.md", SKILL_MD % (name, description or "The %s skill." % name,
                                                   version, install, name) + body)
        if script is not None:
            z.writestr(name + "/install.sh", script)
        z.writestr(name + "/scripts/run.py", "print('ok')\n")
    return buf.getvalue()


def multipart(data, field="file", filename="skill.zip"):
    boundary = "sbx" + uuid.uuid4().hex
    body = (("--%s\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhello\r\n"
             "--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
             "Content-Type: application/zip\r\n\r\n") % (boundary, boundary, field, filename)
            ).encode() + data + ("\r\n--%s--\r\n" % boundary).encode()
    return body, {"Content-Type": "multipart/form-data; boundary=" + boundary}


def admin():
    return D.client()


def member():
    k = D.once("member", lambda d: d.client().create_key("mia", "member"))
    return D.get().client(k["key"])


def add(data, **kw):
    return admin().ok("POST", "/v1/skills/catalog", raw=data, status=201,
                      headers={"Content-Type": "application/zip"}, **kw)


def config(name):
    def make(d):
        return d.client().ok("POST", "/v1/sandbox-configs",
                             {"name": name, "config": {"env_vars": {"CFG_VAR": "from-cfg"}}},
                             status=201)["id"]
    return D.once("cfg:" + name, make)


def path(cid, sid="", tail=""):
    return "/v1/sandbox-configs/%s/skills%s%s" % (cid, "/" + sid if sid else "", tail)


def events(cid, sid, transcript=False):
    s = admin().stream("GET", path(cid, sid, "/transcript" if transcript else "/install-events"),
                       timeout=600)
    head = next(s)
    assert head.status == 200, head
    return [ev for _, ev in s]


def settle(cid, sid):
    """Follow install-events to the end; returns (events, the install after)."""
    evs = events(cid, sid)
    assert evs and evs[-1]["done"] is True, evs
    return evs, admin().ok("GET", path(cid, sid))


def catalog_install(cat, ids):
    return admin().ok("POST", "/v1/skills/catalog/%s/install" % cat,
                      {"sandbox_config_ids": ids}, status=202)


def skills():
    """The shared fixture: greet in A and B, broken failed in B."""
    def make(d):
        greet = add(bundle("greet", script=GREET_INSTALL))
        a, b = config("alpha"), config("beta")
        got = catalog_install(greet["id"], [a, b, "cfg_nope"])
        ok = {i["sandbox_config_id"]: i["skill_id"] for i in got["installs"]}
        assert set(ok) == {a, b} and got["catalog_id"] == greet["id"], got
        assert [e["sandbox_config_id"] for e in got["errors"]] == ["cfg_nope"], got
        assert got["errors"][0]["error"]["code"] == "sandbox_config_not_found", got
        return {"greet": greet, "a": a, "b": b, "greet_a": ok[a], "greet_b": ok[b]}
    return D.once("skills", make)


def test_install_into_two_configurations_follows_events_to_ready():
    s = skills()
    evs, a = settle(s["a"], s["greet_a"])
    assert evs[0]["stage"] == "queued" and evs[0]["percent"] == 0, evs[0]
    pct = [e["percent"] for e in evs]
    assert pct == sorted(pct) and pct[-1] == 100, pct
    stages = [e["stage"] for e in evs]
    for st in ("sandbox", "unpack", "install", "snapshot", "ready"):
        assert st in stages, stages
    assert evs[-1]["status"] == "ready", evs[-1]
    # The script's output carries its stream, so a reader can join its chunks into lines;
    # sbxd's notes (the queued one first) carry none.
    assert "stream" not in evs[0], evs[0]
    logs = "".join(e.get("log", "") for e in evs if e.get("stream") == "stdout")
    assert "installing greet 1.0.0 from /workspace/skills/greet with from-cfg" in logs, logs
    assert a["status"] == "ready" and a["error"] is None and a["enabled"] is True, a
    assert a["served"] == {"version": "1.0.0"} and a["installed_snapshot_id"], a
    assert a["install_session_id"].startswith("sb_") and a["install_message_id"], a
    assert a["catalog_id"] == s["greet"]["id"] and a["bundle_sha256"] == s["greet"]["bundle_sha256"]
    assert a["envs"] == [{"name": "GREETING_TOKEN", "description": "a token", "required": True,
                          "is_set": False},
                         {"name": "REGION", "description": "", "required": False,
                          "is_set": False}], a["envs"]
    _, b = settle(s["b"], s["greet_b"])
    assert b["status"] == "ready", b
    # A late subscriber gets the whole round again, from its start.
    again = events(s["a"], s["greet_a"])
    assert again == evs, (again, evs)
    # The transcript has every step and the script's output, stderr apart.
    tr = events(s["a"], s["greet_a"], transcript=True)
    kinds = [t["kind"] for t in tr]
    assert kinds[0] == "step" and kinds[-1] == "result" and "exit" in kinds, kinds
    assert any(t["kind"] == "output" and t["stream"] == "stderr" and "to-stderr" in t["text"]
               for t in tr), tr
    assert any(t["kind"] == "output" and t["stream"] == "stdout" and "installing" in t["text"]
               and "to-stderr" not in t["text"] for t in tr), tr
    assert [t["seq"] for t in tr] == list(range(len(tr))), tr
    lst = admin().ok("GET", path(s["a"]))
    assert lst["object"] == "list" and [x["id"] for x in lst["data"]] == [s["greet_a"]], lst


def test_a_failing_install_script_fails_with_its_output_and_serves_nothing():
    s = skills()
    broken = add(bundle("broken", script=BROKEN_INSTALL))
    got = admin().ok("POST", "/v1/skills/catalog/%s/install" % broken["id"],
                     {"sandbox_config_ids": [s["b"]]}, status=202)
    sid = got["installs"][0]["skill_id"]
    evs, rec = settle(s["b"], sid)
    assert evs[-1]["status"] == "failed" and evs[-1]["percent"] == 100, evs[-1]
    assert rec["status"] == "failed" and "exited with 1" in rec["error"], rec
    assert rec["served"] is None and rec["installed_snapshot_id"] is None, rec
    tr = events(s["b"], sid, transcript=True)
    assert any("about to fail" in t["text"] for t in tr if t["kind"] == "output"), tr
    # Stopping a failed install again answers its state; a ready one is refused.
    st = admin().ok("POST", path(s["b"], sid, "/stop"))
    assert st["status"] == "failed", st
    assert_error(admin().request("POST", path(s["b"], s["greet_b"], "/stop")), 409,
                 "skill_not_installing")
    D.cache["broken"] = (broken["id"], sid)


def test_catalog_shows_installations_and_refuses_deleting_one_in_use():
    s = skills()
    settle(s["a"], s["greet_a"])
    settle(s["b"], s["greet_b"])
    item = admin().ok("GET", "/v1/skills/catalog/" + s["greet"]["id"])
    inst = sorted(item["installations"], key=lambda i: i["sandbox_config_id"])
    assert [i["sandbox_config_id"] for i in inst] == sorted([s["a"], s["b"]]), inst
    for i in inst:
        assert i["status"] == "ready" and i["enabled"] is True and i["version"] == "1.0.0", i
        assert i["served"] == {"version": "1.0.0"}, i
        assert i["bundle_sha256"] == s["greet"]["bundle_sha256"], i
    listed = [x for x in admin().ok("GET", "/v1/skills/catalog")["data"]
              if x["id"] == s["greet"]["id"]][0]
    assert len(listed["installations"]) == 2, listed
    assert_error(admin().request("DELETE", "/v1/skills/catalog/" + s["greet"]["id"]), 409,
                 "skill_in_use")


def test_sandboxes_of_the_configuration_see_the_skill_and_its_env_values():
    s = skills()
    settle(s["a"], s["greet_a"])
    got = admin().ok("PATCH", path(s["a"], s["greet_a"]),
                     {"envs": {"GREETING_TOKEN": "tok-123", "UNDECLARED": "x"}})
    assert got["ignored_envs"] == ["UNDECLARED"], got
    assert {e["name"]: e["is_set"] for e in got["envs"]} == {"GREETING_TOKEN": True,
                                                            "REGION": False}, got
    assert "tok-123" not in json.dumps(got)
    # A user's view of the variables says where the value comes from, per configuration.
    mine = member().ok("GET", "/v1/me/env-vars")
    assert "tok-123" not in json.dumps(mine)
    def sources(cid):
        cfg = [g for g in mine["data"] if g["sandbox_config_id"] == cid][0]
        sk = [x for x in cfg["skills"] if x["skill_id"] == s["greet"]["id"]][0]
        return {v["name"]: v["source"] for v in sk["vars"]}
    assert sources(s["a"]) == {"GREETING_TOKEN": "workspace", "REGION": "unset"}, mine
    assert sources(s["b"]) == {"GREETING_TOKEN": "unset", "REGION": "unset"}, mine
    c = admin()
    sb = c.create_sandbox(config_id=s["a"])
    try:
        out = c.sh(sb["id"], "cat /skills/greet/SKILL.md | head -2; "
                             "cat /workspace/.greet-installed; ls /workspace/skills; "
                             "echo $GREETING_TOKEN $CFG_VAR; ls -a /workspace")
        assert "name: greet" in out and "done\n" in out, out
        assert "tok-123 from-cfg" in out, out
        assert ".sbx-install" not in out, out
        assert "broken" not in out, out
    finally:
        c.delete_sandbox(sb["id"])
    # The value never shows; "" clears it and keeps the declaration.
    assert "tok-123" not in json.dumps(c.ok("GET", path(s["a"], s["greet_a"])))
    got = c.ok("PATCH", path(s["a"], s["greet_a"]), {"envs": {"GREETING_TOKEN": ""}})
    assert {e["name"]: e["is_set"] for e in got["envs"]} == {"GREETING_TOKEN": False,
                                                            "REGION": False}, got
    # Disabled: new sandboxes get neither the files nor the value; the agent list is empty.
    c.ok("PATCH", path(s["a"], s["greet_a"]), {"enabled": False, "envs": {"REGION": "eu"}})
    assert c.ok("GET", "/v1/skills?sandbox_config_id=" + s["a"]) == {
        "object": "list", "data": [], "skills_available": True}
    sb = c.create_sandbox(config_id=s["a"])
    try:
        out = c.sh(sb["id"], "ls /workspace/skills 2>&1; echo region=$REGION")
        assert "greet" not in out and "region=\n" in out, out
    finally:
        c.delete_sandbox(sb["id"])
    c.ok("PATCH", path(s["a"], s["greet_a"]), {"enabled": True})
    listed = member().ok("GET", "/v1/skills?sandbox_config_id=" + s["a"])
    assert listed["skills_available"] is True, listed
    assert listed["data"] == [{"name": "greet", "description": "The greet skill."}], listed


MARK_INSTALL = ("echo ready > installed.marker\n"
                "mkdir -p cache && echo warm > cache/model.bin\n"
                "echo elsewhere > /workspace/.mark-elsewhere\n")


def test_what_an_install_script_leaves_beside_skill_md_stays_in_later_sandboxes():
    """Issue 38: installed.marker, written by the script in its own folder, was lost in
    new sandboxes of the configuration (the folder was rewritten from the bare bundle)."""
    c = admin()
    cid = config("marker")
    mark = add(bundle("mark", script=MARK_INSTALL))
    sid = catalog_install(mark["id"], [cid])["installs"][0]["skill_id"]
    _, inst = settle(cid, sid)
    assert inst["status"] == "ready", inst
    look = ("cat /skills/mark/installed.marker /skills/mark/cache/model.bin "
            "/workspace/.mark-elsewhere; ls /skills/mark")
    want = "ready\nwarm\nelsewhere\n"
    sb = c.create_sandbox(config_id=cid, ttl_seconds=600)
    try:
        out = c.sh(sb["id"], look)
        assert out.startswith(want) and "SKILL.md" in out and "install.sh" in out, out
        # A fork and a pause/resume keep it.
        kids = c.ok("POST", "/v1/sandboxes/%s/fork" % sb["id"], {"count": 1},
                    timeout=180)["data"]
        try:
            assert c.sh(kids[0]["id"], look).startswith(want)
        finally:
            c.delete_sandbox(kids[0]["id"])
        c.ok("POST", "/v1/sandboxes/%s/pause" % sb["id"], timeout=120)
        c.ok("POST", "/v1/sandboxes/%s/resume" % sb["id"], timeout=120)
        assert c.sh(sb["id"], look).startswith(want)
    finally:
        c.delete_sandbox(sb["id"])
    # Another skill's round in the same configuration starts from the snapshot and keeps it.
    other = add(bundle("other", script="echo other > here.txt\n"))
    oid = catalog_install(other["id"], [cid])["installs"][0]["skill_id"]
    _, inst = settle(cid, oid)
    assert inst["status"] == "ready", inst
    sb = c.create_sandbox(config_id=cid, ttl_seconds=600)
    try:
        out = c.sh(sb["id"], look + "; cat /skills/other/here.txt")
        assert out.startswith(want) and out.endswith("other\n"), out
    finally:
        c.delete_sandbox(sb["id"])


def test_guidance_and_a_reinstall_with_instructions():
    s = skills()
    c = admin()
    steer = add(bundle("steer", script=STEER_INSTALL))
    a = s["a"]
    sid = catalog_install(steer["id"], [a])["installs"][0]["skill_id"]
    rec = c.ok("GET", path(a, sid))
    assert rec["status"] == "installing" and rec["served"] is None, rec
    msg = rec["install_message_id"]
    assert c.ok("GET", path(a, sid, "/guidance"))["accepting"] is True
    # The round runs in a sandbox of the configuration, which is sbx's, not the admin's.
    sbid = wait_for(lambda: c.ok("GET", path(a, sid))["install_session_id"], 60, what="sandbox")
    inv = c.ok("GET", "/v1/sandbox-configs/%s/sandboxes" % a)
    mine = [x for x in inv["data"] if x["id"] == sbid]
    assert mine and mine[0]["user"] == "sbx:skills", inv
    assert sbid not in [x["id"] for x in c.list_sandboxes()]
    assert_error(c.request("POST", path(a, sid, "/guidance"),
                           {"expected_message_id": "msg_old", "steer_id": "s1",
                            "content": "proceed"}), 409, "install_moved_on")
    assert_error(c.request("POST", path(a, sid, "/guidance"),
                           {"expected_message_id": msg, "steer_id": "s1", "content": ""}), 400,
                 "invalid_request")
    assert_error(c.request("POST", path(a, sid, "/guidance"),
                           {"expected_message_id": msg, "steer_id": "s1",
                            "content": "x" * 10001}), 400, "invalid_request")
    for _ in range(2):  # the same steer_id twice: added once
        c.ok("POST", path(a, sid, "/guidance"),
             {"expected_message_id": msg, "steer_id": "s1", "content": "please proceed"},
             status=202)
    g = c.ok("GET", path(a, sid, "/guidance"))
    assert [m["content"] for m in g["messages"]] == ["please proceed"], g
    evs, rec = settle(a, sid)
    assert rec["status"] == "ready" and rec["served"] == {"version": "1.0.0"}, (rec, evs)
    assert c.ok("GET", path(a, sid, "/guidance"))["accepting"] is False
    # A reinstall from the same bundle, with instructions the script reads.
    assert_error(c.request("POST", path(a, sid, "/reinstall"), {"instructions": "x" * 10001}),
                 400, "invalid_request")
    c.ok("POST", path(a, sid, "/reinstall"), {"instructions": "use the mirror"}, status=202)
    rec2 = c.ok("GET", path(a, sid))
    assert rec2["status"] == "installing" and rec2["install_message_id"] != msg, rec2
    assert rec2["served"] == {"version": "1.0.0"}, rec2
    assert_error(c.request("POST", path(a, sid, "/reinstall")), 409, "skill_install_busy")
    assert_error(c.request("POST", path(a, sid, "/guidance"),
                           {"expected_message_id": msg, "steer_id": "s2", "content": "proceed"}),
                 409, "install_moved_on")
    c.ok("POST", path(a, sid, "/guidance"),
         {"expected_message_id": rec2["install_message_id"], "steer_id": "s2",
          "content": "proceed"}, status=202)
    _, rec3 = settle(a, sid)
    assert rec3["status"] == "ready", rec3
    tr = events(a, sid, transcript=True)
    assert any(t["kind"] == "guidance" and t["text"] == "proceed" for t in tr), tr
    assert any("instructions: use the mirror" in t["text"] for t in tr if t["kind"] == "output")
    D.cache["steer"] = sid


def test_stop_ends_a_round_and_the_last_ready_version_is_still_served():
    s = skills()
    c = admin()
    a = s["a"]
    sid = D.cache.get("steer")
    if not sid:
        test_guidance_and_a_reinstall_with_instructions()
        sid = D.cache["steer"]
    c.ok("POST", path(a, sid, "/reinstall"), status=202)
    # Another install into the same configuration waits its turn: no transcript yet.
    other = add(bundle("later"))
    later = catalog_install(other["id"], [a])["installs"][0]["skill_id"]
    r = c.request("GET", path(a, later, "/transcript"))
    assert r.status == 204 and r.raw == b"", r
    # A subscriber that leaves early cancels nothing.
    s1 = c.stream("GET", path(a, sid, "/install-events"))
    assert next(s1).status == 200
    next(s1)
    s1.close()
    wait_for(lambda: c.ok("GET", path(a, sid, "/guidance"))["accepting"], 60, what="accepting")
    st = c.ok("POST", path(a, sid, "/stop"))
    assert st["status"] == "failed" and st["error"] == "stopped by admin", st
    assert st["served"] == {"version": "1.0.0"}, st
    assert c.ok("POST", path(a, sid, "/stop"))["status"] == "failed"
    evs = events(a, sid)
    assert evs[-1]["done"] is True and evs[-1]["status"] == "failed", evs[-1]
    _, lrec = settle(a, later)
    assert lrec["status"] == "ready", lrec
    # One snapshot holds the configuration's installs: every install names it.
    snaps = {x["installed_snapshot_id"] for x in c.ok("GET", path(a))["data"]
             if x["served"]}
    assert snaps == {lrec["installed_snapshot_id"]}, snaps
    on_disk = os.listdir(os.path.join(D.get().data_dir, "skill-installs", "snapshots"))
    assert lrec["installed_snapshot_id"] in on_disk, on_disk
    item = c.ok("GET", "/v1/skills/catalog/" + [x for x in c.ok("GET", "/v1/skills/catalog")["data"]
                                               if x["name"] == "steer"][0]["id"])
    assert item["installations"][0]["status"] == "failed", item
    assert item["installations"][0]["served"] == {"version": "1.0.0"}, item
    sb = c.create_sandbox(config_id=a)
    try:
        out = c.sh(sb["id"], "ls /workspace/skills; cat /workspace/.steer-version")
        assert "steer" in out and "later" in out and "greet" in out and "1.0.0" in out, out
    finally:
        c.delete_sandbox(sb["id"])


def test_files_delete_and_the_catalog_entry_that_stays():
    s = skills()
    c = admin()
    broken_id, sid = D.cache.get("broken") or (None, None)
    if not sid:
        test_a_failing_install_script_fails_with_its_output_and_serves_nothing()
        broken_id, sid = D.cache["broken"]
    files = c.ok("GET", path(s["b"], sid, "/files"))["data"]
    assert sorted(f["path"] for f in files) == ["SKILL.md", "install.sh", "scripts/run.py"], files
    got = c.ok("GET", path(s["b"], sid, "/files/content?path=install.sh"))
    assert got["encoding"] == "utf-8" and got["content"] == BROKEN_INSTALL, got
    assert_error(c.request("GET", path(s["b"], sid, "/files/content?path=../x")), 400,
                 "invalid_path")
    assert_error(c.request("GET", path(s["b"], sid, "/files/content")), 400, "invalid_path")
    c.ok("DELETE", path(s["b"], sid))
    assert_error(c.request("GET", path(s["b"], sid)), 404, "skill_install_not_found")
    assert_error(c.request("DELETE", path(s["b"], sid)), 404, "skill_install_not_found")
    assert c.ok("GET", "/v1/skills/catalog/" + broken_id)["installations"] == []
    c.ok("DELETE", "/v1/skills/catalog/" + broken_id)


def test_per_configuration_install_from_a_multipart_upload_and_the_catalog_multipart():
    c = admin()
    g = config("gamma")
    body, hdrs = multipart(bundle("multi", script="echo hi from multi\n"))
    got = c.ok("POST", path(g), raw=body, headers=hdrs, status=202)
    assert got["skill_id"].startswith("sks_") and got["sandbox_config_id"] == g, got
    _, rec = settle(g, got["skill_id"])
    assert rec["status"] == "ready" and rec["name"] == "multi", rec
    # The same bundle into the same configuration again: a new round of that install.
    again = c.ok("POST", path(g), raw=body, headers=hdrs, status=202)
    assert again["skill_id"] == got["skill_id"] and again["catalog_id"] == got["catalog_id"]
    settle(g, got["skill_id"])
    # The catalog takes multipart too (curl -F file=@skill.zip).
    body, hdrs = multipart(bundle("multi2"))
    item = c.ok("POST", "/v1/skills/catalog", raw=body, headers=hdrs, status=201)
    assert item["name"] == "multi2", item
    # Deleting the configuration forgets its installs; the catalog entry stays, unreferenced.
    c.ok("DELETE", "/v1/sandbox-configs/" + g)
    D.forget("cfg:gamma")
    assert c.ok("GET", "/v1/skills/catalog/" + got["catalog_id"])["installations"] == []
    assert_error(c.request("GET", path(g, got["skill_id"])), 404, "sandbox_config_not_found")
    c.ok("DELETE", "/v1/skills/catalog/" + got["catalog_id"])
    body, hdrs = multipart(bundle("multi3"), field="other")
    assert_error(c.request("POST", "/v1/skills/catalog", raw=body, headers=hdrs), 400,
                 "invalid_request")
    assert_error(c.request("POST", "/v1/skills/catalog", raw=b"--x\r\nbroken",
                           headers={"Content-Type": "multipart/form-data; boundary=x"}), 400,
                 ("invalid_request", "invalid_bundle"))


def test_per_configuration_install_from_a_source_reuses_the_catalog_entry():
    c = admin()
    INDEX["/acme/indexed.zip"] = bundle("indexed", script="echo from the index\n")
    ids = []
    for name in ("eta", "theta"):
        cid = config(name)
        got = c.ok("POST", path(cid), {"source": "@acme/indexed"}, status=202)
        _, rec = settle(cid, got["skill_id"])
        assert rec["status"] == "ready" and rec["name"] == "indexed", rec
        ids.append(got["catalog_id"])
    assert ids[0] == ids[1], ids  # the same bundle: one catalog entry
    item = c.ok("GET", "/v1/skills/catalog/" + ids[0])
    assert item["source"] == "@acme/indexed" and len(item["installations"]) == 2, item
    assert_error(c.request("POST", path(config("eta")), {"source": "@acme/missing"}), 404,
                 "skill_not_found")
    assert_error(c.request("POST", path(config("eta")), {"source": "nope"}), 400,
                 "invalid_source")


def test_workspace_scripts_disabled_fails_a_round_that_has_a_script():
    c = admin()
    cid = config("epsilon")
    c.ok("PUT", "/v1/sandbox-configs/workspace-policy", {"scripts_disabled": True})
    try:
        cat = add(bundle("noscripts", script="echo should not run\n"))
        sid = catalog_install(cat["id"], [cid])["installs"][0]["skill_id"]
        _, rec = settle(cid, sid)
        assert rec["status"] == "failed" and "scripts_disabled" in rec["error"], rec
        tr = events(cid, sid, transcript=True)
        assert not any(t["kind"] == "output" for t in tr), tr
        plain = add(bundle("plain"))  # no script: installs all the same
        psid = catalog_install(plain["id"], [cid])["installs"][0]["skill_id"]
        assert settle(cid, psid)[1]["status"] == "ready"
    finally:
        c.ok("PUT", "/v1/sandbox-configs/workspace-policy", {"scripts_disabled": False})


AGENT_BODY = ("\n## Install\n\nWrite /workspace/.agent-done.\n\n## Use\n\nRead the "
              "docs.\n")


def test_the_install_agent_follows_the_install_section_when_there_is_no_script():
    c = admin()
    cid = config("zeta")
    cat = add(bundle("agented", body=AGENT_BODY))
    sid = catalog_install(cat["id"], [cid])["installs"][0]["skill_id"]
    _, rec = settle(cid, sid)
    assert rec["status"] == "ready", rec
    tr = events(cid, sid, transcript=True)
    replies = [t["text"] for t in tr if t["kind"] == "agent"]
    assert len(replies) == 2 and '"command"' in replies[0] and '"done"' in replies[1], tr
    assert any(t["kind"] == "output" and "ran it" in t["text"] for t in tr), tr
    mine = [p for p in FakeModel.prompts if '"agented"' in p]
    assert "## Install" in mine[0] and "Write /workspace/.agent-done." in mine[0], mine[0]
    assert "## Use" not in mine[0], mine[0]  # only the install section
    assert "$ echo agent-was-here" in mine[1] and "exit code 0" in mine[1], mine[1]
    sb = c.create_sandbox(config_id=cid)
    try:
        assert c.sh(sb["id"], "cat /workspace/.agent-done") == "agent-was-here\n"
    finally:
        c.delete_sandbox(sb["id"])
    # A model that never answers in JSON fails the round after a few tries.
    bad = add(bundle("confused", body=AGENT_BODY))
    bsid = catalog_install(bad["id"], [cid])["installs"][0]["skill_id"]
    _, brec = settle(cid, bsid)
    assert brec["status"] == "failed" and "JSON" in brec["error"], brec
    # Guidance reaches the agent's next prompt.
    gv = add(bundle("giveup", body=AGENT_BODY))
    gsid = catalog_install(gv["id"], [cid])["installs"][0]["skill_id"]
    grec = c.ok("GET", path(cid, gsid))
    c.ok("POST", path(cid, gsid, "/guidance"),
         {"expected_message_id": grec["install_message_id"], "steer_id": "g1",
          "content": "please give up"}, status=202)
    _, grec = settle(cid, gsid)
    assert grec["status"] == "failed" and "the admin said stop" in grec["error"], grec


def test_errors():
    s = skills()
    c, m = admin(), member()
    a = s["a"]
    cat = s["greet"]["id"]
    assert_error(c.request("POST", "/v1/skills/catalog/skl_nope/install",
                           {"sandbox_config_ids": [a]}), 404, "skill_not_found")
    for bad in ({}, {"sandbox_config_ids": []}, {"sandbox_config_ids": "x"},
                {"sandbox_config_ids": ["c"] * 51}):
        assert_error(c.request("POST", "/v1/skills/catalog/%s/install" % cat, bad), 400,
                     "invalid_request")
    got = c.ok("POST", "/v1/skills/catalog/%s/install" % cat, {"sandbox_config_ids": [5]},
               status=202)
    assert got["installs"] == [] and got["errors"][0]["error"]["code"] == "invalid_request", got
    assert_error(m.request("POST", "/v1/skills/catalog/%s/install" % cat,
                           {"sandbox_config_ids": [a]}), 403, "admin_required")
    assert_error(m.request("GET", path(a)), 403, "admin_required")
    assert_error(c.request("GET", path("cfg_nope")), 404, "sandbox_config_not_found")
    assert_error(c.request("GET", path(a, "sks_nope")), 404, "skill_install_not_found")
    assert_error(c.request("GET", path(s["b"], s["greet_a"])), 404, "skill_install_not_found")
    assert_error(c.request("POST", path("cfg_nope"), raw=bundle("zz"),
                           headers={"Content-Type": "application/zip"}), 404,
                 "sandbox_config_not_found")
    assert_error(c.request("POST", path(a), raw=b"hello", headers={"Content-Type": "text/plain"}),
                 415, "unsupported_media_type")
    assert_error(c.request("POST", path(a), raw=b"not a zip",
                           headers={"Content-Type": "application/zip"}), 400, "invalid_bundle")
    for bad in ({"enabled": "yes"}, {"envs": []}, {"envs": {"REGION": 5}}, {"other": 1}):
        assert_error(c.request("PATCH", path(a, s["greet_a"]), bad), 400,
                     ("invalid_request", "invalid_env"))
    assert_error(c.request("PATCH", path(a, s["greet_a"]), raw=b"{"), 400, "invalid_json")
    assert_error(c.request("POST", path(a, s["greet_a"], "/guidance"), {"content": "x"}), 400,
                 "invalid_request")
    assert_error(c.request("GET", path(a, "sks_nope", "/install-events")), 404,
                 "skill_install_not_found")
    assert c.ok("GET", "/v1/skills?sandbox_config_id=") == {"object": "list", "data": [],
                                                           "skills_available": False}
    assert c.ok("GET", "/v1/skills")["skills_available"] is False
    assert_error(c.request("GET", "/v1/skills?sandbox_config_id=cfg_nope"), 404,
                 "sandbox_config_not_found")
    assert_error(c.request("GET", "/v1/skills", key=None), 401, "missing_api_key")


def test_skill_rollout_next_turn_reaches_running_sandboxes_new_session_does_not():
    c = admin()
    nxt = config("rollout-next")  # next_turn, the default
    new = D.once("cfg:rollout-new", lambda d: d.client().ok(
        "POST", "/v1/sandbox-configs",
        {"name": "rollout-new", "config": {"skill_rollout": "new_session"}}, status=201)["id"])
    v1 = add(bundle("roll", "1.0.0"))
    for cid in (nxt, new):
        settle(cid, catalog_install(v1["id"], [cid])["installs"][0]["skill_id"])
    running = {cid: c.create_sandbox(config_id=cid)["id"] for cid in (nxt, new)}
    try:
        for sid in running.values():
            assert "version: 1.0.0" in c.sh(sid, "cat /workspace/skills/roll/SKILL.md")
        # A sandbox that turns /workspace/skills into a link to a host path gets a real
        # folder back, and nothing is written where the link pointed.
        probe = tempfile.mkdtemp(prefix="sbx-skill-probe-")
        c.sh(running[nxt], "rm -rf /workspace/skills && ln -s %s /workspace/skills" % probe)
        v2 = add(bundle("roll", "2.0.0"))
        got = catalog_install(v2["id"], [nxt, new])
        for i in got["installs"]:
            _, rec = settle(i["sandbox_config_id"], i["skill_id"])
            assert rec["status"] == "ready" and rec["served"] == {"version": "2.0.0"}, rec
        # The old catalog entry is no longer named by any install: it may go.
        c.ok("DELETE", "/v1/skills/catalog/" + v1["id"])
        assert "version: 2.0.0" in c.sh(running[nxt], "cat /workspace/skills/roll/SKILL.md")
        assert os.listdir(probe) == [], os.listdir(probe)
        assert c.sh(running[nxt], "test -L /workspace/skills || echo dir") == "dir\n"
        os.rmdir(probe)
        assert "version: 1.0.0" in c.sh(running[new], "cat /workspace/skills/roll/SKILL.md")
        fresh = c.create_sandbox(config_id=new)["id"]
        try:
            assert "version: 2.0.0" in c.sh(fresh, "cat /workspace/skills/roll/SKILL.md")
        finally:
            c.delete_sandbox(fresh)
    finally:
        for sid in running.values():
            c.delete_sandbox(sid)


def test_a_round_cut_by_a_restart_ends_failed():
    s = skills()
    c = admin()
    steer = [x for x in c.ok("GET", "/v1/skills/catalog")["data"] if x["name"] == "steer"]
    cat = steer[0]["id"] if steer else add(bundle("steer", script=STEER_INSTALL))["id"]
    cid = config("delta")
    sid = catalog_install(cat, [cid])["installs"][0]["skill_id"]
    wait_for(lambda: c.ok("GET", path(cid, sid))["install_session_id"], 60, what="a sandbox")
    D.get().restart()
    c = admin()
    rec = c.ok("GET", path(cid, sid))
    assert rec["status"] == "failed" and "interrupted" in rec["error"], rec
    evs = events(cid, sid)
    assert len(evs) == 1 and evs[0]["done"] is True and evs[0]["status"] == "failed", evs
    assert_error(c.request("POST", path(cid, sid, "/guidance"),
                           {"expected_message_id": rec["install_message_id"], "steer_id": "z",
                            "content": "proceed"}), 409, "install_moved_on")
    assert c.ok("POST", path(cid, sid, "/stop"))["status"] == "failed"
    assert_error(c.request("GET", path(cid, sid, "/transcript")), 404, "transcript_not_found")
    # The ready installs' transcripts were kept across the restart.
    tr = events(s["a"], s["greet_a"], transcript=True)
    assert tr[-1]["kind"] == "result" and tr[-1]["text"].startswith("ready"), tr[-1]
    assert s["a"]  # the other configurations' installs are untouched
    assert c.ok("GET", path(s["a"], s["greet_a"]))["status"] == "ready"


def own_config(name, doc):
    """A configuration of this test's own, with a skill installed and ready."""
    c = admin()
    cid = c.ok("POST", "/v1/sandbox-configs", {"name": name, "config": doc}, status=201)["id"]
    got = c.ok("POST", path(cid), raw=bundle("solo-" + name, script="echo solo > marker\n"),
               headers={"Content-Type": "application/zip"}, status=202)
    _, rec = settle(cid, got["skill_id"])
    assert rec["status"] == "ready", rec
    return cid, rec


def test_desktop_enabled_cannot_be_switched_once_a_skill_is_installed():
    # Spec 002: "desktop_enabled | bool | ... после установки навыка переключить нельзя".
    c = admin()
    free = c.ok("POST", "/v1/sandbox-configs",
                {"name": "desk-free", "config": {"desktop_enabled": False}}, status=201)["id"]
    assert c.ok("PUT", "/v1/sandbox-configs/" + free,
                {"name": "desk-free", "config": {"desktop_enabled": True}})["config"][
                    "desktop_enabled"] is True
    cid, rec = own_config("desk", {"desktop_enabled": False})
    assert_error(c.request("PUT", "/v1/sandbox-configs/" + cid,
                           {"name": "desk", "config": {"desktop_enabled": True}}),
                 409, "desktop_switch_locked")
    assert c.ok("GET", "/v1/sandbox-configs/" + cid)["config"]["desktop_enabled"] is False
    # Other changes still go through, the switch kept as it is.
    got = c.ok("PUT", "/v1/sandbox-configs/" + cid,
               {"name": "desk", "description": "renamed", "config": {"desktop_enabled": False}})
    assert got["description"] == "renamed", got
    # Once no skill is installed, it can be switched again.
    c.ok("DELETE", path(cid, rec["id"]))
    got = c.ok("PUT", "/v1/sandbox-configs/" + cid,
               {"name": "desk", "config": {"desktop_enabled": True}})
    assert got["config"]["desktop_enabled"] is True, got
    for x in (cid, free):
        c.ok("DELETE", "/v1/sandbox-configs/" + x)


def test_deleting_a_configuration_releases_its_skill_snapshot_or_says_it_cannot():
    c = admin()
    cid, rec = own_config("release", {})
    snaps = os.path.join(D.get().data_dir, "skill-installs", "snapshots")
    snap = os.path.join(snaps, rec["installed_snapshot_id"])
    assert os.path.isdir(snap), os.listdir(snaps)
    # The filesystem refuses to let go of it (immutable): 409 and nothing is lost.
    subprocess.run(["chattr", "+i", snap], check=True)
    try:
        assert_error(c.request("DELETE", "/v1/sandbox-configs/" + cid), 409,
                     "skill_snapshot_release_failed")
        assert c.ok("GET", "/v1/sandbox-configs/" + cid)["id"] == cid
        assert [x["id"] for x in c.ok("GET", path(cid))["data"]] == [rec["id"]]
        assert os.path.isdir(snap)
        sb = c.create_sandbox(config_id=cid)  # its sandboxes still start from it
        try:
            assert c.sh(sb["id"], "cat /workspace/skills/solo-release/marker") == "solo\n"
        finally:
            c.delete_sandbox(sb["id"])
    finally:
        subprocess.run(["chattr", "-i", snap], check=True)
    # Released: the delete goes through and the snapshot is gone from disk.
    c.ok("DELETE", "/v1/sandbox-configs/" + cid)
    assert not os.path.exists(snap)
    assert not [n for n in os.listdir(snaps) if rec["installed_snapshot_id"] in n], \
        os.listdir(snaps)


def test_catalog_and_install_routes_follow_the_permission_table():
    # Spec 002: the catalog list is Viewer+; adding, deleting, installing and viewing a
    # package's files need Admin+, and the write group a full-access key; the skills of a
    # configuration are Admin+ for reading too.
    s = skills()
    a, sid, cat = s["a"], s["greet_a"], s["greet"]["id"]

    def key(user, role, scope="full_access"):
        k = D.once("key:%s:%s" % (user, scope), lambda d: d.client().ok(
            "POST", "/v1/keys", {"user": user, "role": role, "tool_level": "sandbox",
                                 "scope": scope}, status=201))
        return D.get().client(k["key"])
    who = {"viewer": key("pv", "viewer"), "member": key("pm", "member"),
           "r_admin": key("pra", "admin", "restricted"), "admin": admin()}
    ADMIN = (403, "admin_required")
    FULL = (403, "full_access_required")
    read_any = {"viewer": None, "member": None, "r_admin": None, "admin": None}
    read_admin = {"viewer": ADMIN, "member": ADMIN, "r_admin": None, "admin": None}
    write = {"viewer": ADMIN, "member": ADMIN, "r_admin": FULL, "admin": None}
    zipped = {"Content-Type": "application/zip"}
    routes = [
        ("GET", "/v1/skills/catalog", None, None, read_any),
        ("GET", "/v1/skills/catalog/" + cat, None, None, read_any),
        ("GET", "/v1/skills/catalog/%s/files" % cat, None, None, read_admin),
        ("GET", "/v1/skills/catalog/%s/files/content?path=SKILL.md" % cat, None, None, read_admin),
        ("GET", path(a), None, None, read_admin),
        ("GET", path(a, sid), None, None, read_admin),
        ("GET", path(a, sid, "/files"), None, None, read_admin),
        ("GET", path(a, sid, "/guidance"), None, None, read_admin),
        # Writes: refused ones only (the admin's own are the rest of this file).
        ("POST", "/v1/skills/catalog", bundle("perm"), zipped, write),
        ("DELETE", "/v1/skills/catalog/" + cat, None, None, write),
        ("POST", "/v1/skills/catalog/%s/install" % cat, {"sandbox_config_ids": [a]}, None, write),
        ("POST", path(a), bundle("perm"), zipped, write),
        ("PATCH", path(a, sid), {"enabled": True}, None, write),
        ("DELETE", path(a, sid), None, None, write),
        ("POST", path(a, sid, "/reinstall"), {}, None, write),
        ("POST", path(a, sid, "/stop"), None, None, write),
        ("POST", path(a, sid, "/guidance"), {"content": "x"}, None, write),
    ]
    before = admin().ok("GET", path(a, sid))
    for method, p, body, headers, want in routes:
        for name, cl in who.items():
            if name == "admin" and method != "GET":
                continue
            raw = body if isinstance(body, bytes) else None
            r = cl.request(method, p, None if raw else body, raw=raw, headers=headers)
            if want[name] is None:
                assert 200 <= r.status < 300, (method, p, name, r)
            else:
                assert_error(r, *want[name])
    after = admin().ok("GET", path(a, sid))
    assert after["updated_at"] == before["updated_at"] and after["status"] == before["status"]
    assert not [x for x in admin().ok("GET", "/v1/skills/catalog")["data"] if x["name"] == "perm"]
