"""Receipts (recomputed from the files, they match) and the hash-chained audit log."""

import hashlib
import os

import harness
from harness import assert_error

D = harness.Shared()


def teardown_module():
    D.close()


client = D.client


def test_receipt_recomputed_from_the_files_matches():
    d = D.get()
    c = client()
    sb = c.create_sandbox()
    sid = sb["id"]
    c.sh(sid, "mkdir -p out && echo old > out/kept.txt")
    code = ("import os\nos.makedirs('out/sub', exist_ok=True)\n"
            "open('out/new.bin','wb').write(bytes(range(256))*10)\n"
            "open('out/sub/r.txt','w').write('Părțile convin')\n")
    r = c.exec(sid, language="python", code=code)
    rc = r["receipt"]
    assert rc["exec_id"] == r["id"] and rc["sandbox_id"] == sid
    assert rc["template"] == sb["template"] and rc["image_digest"] == sb["template_digest"]
    assert rc["command_sha256"] == hashlib.sha256(code.encode()).hexdigest()
    assert rc["language"] == "python"
    ws = os.path.join(d.sandbox_dir(sid), "workspace")
    listed = {o["path"]: o for o in rc["outputs"]}
    assert set(listed) == {"out/new.bin", "out/sub/r.txt"}, listed  # kept.txt did not change
    for path, o in listed.items():
        with open(os.path.join(ws, path), "rb") as f:
            data = f.read()
        assert o["sha256"] == hashlib.sha256(data).hexdigest() and o["size"] == len(data)
    assert rc["workspace_generation_after"] > rc["workspace_generation_before"]
    # A command that changes nothing leaves the generation where it was.
    r2 = c.exec(sid, shell="true")
    assert r2["receipt"]["workspace_generation_before"] == rc["workspace_generation_after"]
    assert r2["receipt"]["workspace_generation_after"] == rc["workspace_generation_after"]
    assert r2["receipt"]["outputs"] == []
    # Rewriting a file under out/ lists it again with its new hash.
    r3 = c.exec(sid, shell="echo changed > out/kept.txt")
    assert [o["path"] for o in r3["receipt"]["outputs"]] == ["out/kept.txt"]
    assert r3["receipt"]["outputs"][0]["sha256"] == hashlib.sha256(b"changed\n").hexdigest()
    c.delete_sandbox(sid)


def entries(c, **q):
    qs = "&".join("%s=%s" % kv for kv in q.items())
    return c.ok("GET", "/v1/audit" + ("?" + qs if qs else ""))


def test_actions_are_audited_with_who_what_when_and_outcome():
    c = client("dora")
    sid = c.create_sandbox()["id"]
    r = c.request("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "exit 3"})
    rid = r.headers["x-request-id"]
    c.delete_sandbox(sid)
    got = entries(c, sandbox_id=sid)["data"]
    actions = [(e["action"], e["outcome"]) for e in got]
    assert actions == [("sandbox.create", "ok"), ("exec", "exit_code=3"),
                       ("sandbox.destroy", "deleted")], actions
    ex = got[1]
    assert ex["user"] == "dora" and ex["key_id"].startswith("key_")
    assert ex["request_id"] == rid and ex["details"]["exec_id"] == r.body["id"]
    assert all(isinstance(e["ts_ms"], int) for e in got)


def test_members_see_only_their_own_and_admins_filter():
    a, b = client("erin"), client("finn")
    sa = a.create_sandbox()["id"]
    sb_ = b.create_sandbox()["id"]
    mine = entries(a)["data"]
    assert mine and {e["user"] for e in mine} == {"erin"}
    assert_error(a.request("GET", "/v1/audit?user=finn"), 403, "admin_required")
    admin = client()
    only_finn = entries(admin, user="finn", action="sandbox.create")["data"]
    assert [e["sandbox_id"] for e in only_finn] == [sb_]
    a.delete_sandbox(sa)
    b.delete_sandbox(sb_)


def test_pagination_and_bad_queries():
    admin = client()
    page1 = entries(admin, limit=2)
    assert len(page1["data"]) == 2 and page1["has_more"] is True
    page2 = entries(admin, limit=2, after=page1["next_after"])
    assert page2["data"][0]["seq"] == page1["data"][-1]["seq"] + 1
    for q in ("limit=0", "limit=501", "limit=x", "after=-1", "since=abc"):
        assert_error(admin.request("GET", "/v1/audit?" + q), 400, "invalid_audit_query")
    m = client("gina")
    assert_error(m.request("GET", "/v1/audit/verify"), 403, "admin_required")


def db(d):
    return harness.store_db(d)


def test_verify_finds_edited_reordered_and_deleted_entries():
    d = D.get()
    admin = client()
    client("hank").create_sandbox()
    v = admin.ok("GET", "/v1/audit/verify")
    assert v["ok"] is True and v["checked"] >= 3
    con = db(d)
    (row,) = con.execute("SELECT seq, outcome FROM audit ORDER BY seq LIMIT 1 OFFSET 1")
    seq, outcome = row
    # Edited: one field changed in place.
    con.execute("UPDATE audit SET outcome='forged' WHERE seq=?", (seq,))
    con.commit()
    v = admin.ok("GET", "/v1/audit/verify")
    assert v["ok"] is False and v["first_bad_seq"] == seq, v
    con.execute("UPDATE audit SET outcome=? WHERE seq=?", (outcome, seq))
    con.commit()
    assert admin.ok("GET", "/v1/audit/verify")["ok"] is True
    # Reordered: two entries swap places.
    rows = con.execute("SELECT seq, ts_ms, \"user\", key_id, action, sandbox_id, outcome, "
                       "request_id, details, prev_hash, hash FROM audit WHERE seq IN (1,2) "
                       "ORDER BY seq").fetchall()
    con.execute("DELETE FROM audit WHERE seq IN (1,2)")
    con.execute("INSERT INTO audit VALUES (1,?,?,?,?,?,?,?,?,?,?)", rows[1][1:])
    con.execute("INSERT INTO audit VALUES (2,?,?,?,?,?,?,?,?,?,?)", rows[0][1:])
    con.commit()
    v = admin.ok("GET", "/v1/audit/verify")
    assert v["ok"] is False and v["first_bad_seq"] == 1, v
    con.execute("DELETE FROM audit WHERE seq IN (1,2)")
    con.executemany("INSERT INTO audit VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
    con.commit()
    assert admin.ok("GET", "/v1/audit/verify")["ok"] is True
    # Deleted: a middle entry, then the last one.
    (last,) = con.execute("SELECT max(seq) FROM audit").fetchone()
    con.execute("DELETE FROM audit WHERE seq=2")
    con.commit()
    v = admin.ok("GET", "/v1/audit/verify")
    assert v["ok"] is False and v["first_bad_seq"] == 2, v
    con.executemany("INSERT INTO audit VALUES (?,?,?,?,?,?,?,?,?,?,?)", [rows[1]])
    con.execute("DELETE FROM audit WHERE seq=?", (last,))
    con.commit()
    v = admin.ok("GET", "/v1/audit/verify")
    assert v["ok"] is False and "removed" in v["reason"], v
    con.close()


def test_file_transfers_and_artifacts_are_audited():
    c = client("ivan")
    sid = c.create_sandbox()["id"]
    assert c.request("PUT", "/v1/sandboxes/%s/files/out/a.txt" % sid, raw=b"hello").status == 200
    assert c.request("GET", "/v1/sandboxes/%s/files/out/a.txt" % sid).raw == b"hello"
    arts = c.ok("GET", "/v1/sandboxes/%s/artifacts" % sid)["data"]
    assert len(arts) == 1 and arts[0].get("url")
    got = entries(c, sandbox_id=sid)["data"]
    actions = [e["action"] for e in got]
    for want in ("file.upload", "file.download", "artifact.list"):
        assert want in actions, actions
    listed = [e for e in got if e["action"] == "artifact.list"][0]
    assert listed["details"]["count"] == 1 and listed["user"] == "ivan"
    c.delete_sandbox(sid)
