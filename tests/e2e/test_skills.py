"""The skill catalog (docs/skills.md) through a real sbxd: the shipped document skills, bundle
uploads and their files, a skill index source, deletion and permissions, malicious bundles
refused with nothing written outside, and each document skill making a real file that its
own parser reads back with Romanian diacritics intact.
"""

import base64
import http.server
import io
import json
import os
import subprocess
import tempfile
import threading
import zipfile

import harness
from harness import assert_error
import testserver

INDEX = {}  # path -> bytes, served by the test's own skill index


class _Index(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = INDEX.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args):
        pass


_index = testserver.QuietHTTPServer(("127.0.0.1", 0), _Index)
threading.Thread(target=_index.serve_forever, daemon=True).start()
D = harness.Shared(extra_env={
    "SBX_SKILL_INDEX_URL": "http://127.0.0.1:%d" % _index.server_address[1]})
SKILL_MD = ("---\nname: %s\ndescription: Says hello în română.\nversion: %s\n"
            "envs:\n  - name: GREETING_TOKEN\n    description: a token\n    required: true\n"
            "---\n# hello\nRun scripts/hello.py.\n")
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8"
                       "/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==")


def teardown_module():
    D.close()
    _index.shutdown()


def bundle(files, top="hello/"):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(top + name, data)
    return buf.getvalue()


def hello(name="hello", version="1.0.0"):
    return bundle({"SKILL.md": SKILL_MD % (name, version),
                   "scripts/hello.py": "print('bună ziua')\n", "logo.png": PNG,
                   "data.bin": bytes(range(256)) * 4})


def upload(body, ctype="application/zip", key="default"):
    return D.get().client().request("POST", "/v1/skills/catalog", raw=body, key=key,
                                    headers={"Content-Type": ctype})


def catalog():
    return D.get().client().ok("GET", "/v1/skills/catalog")["data"]


def test_the_document_skills_ship_in_the_catalog():
    items = {i["name"]: i for i in catalog()}
    for name in ("docx", "xlsx", "pdf", "pptx"):
        i = items[name]
        assert i["builtin"] is True and i["source"] == "builtin", i
        assert i["id"] == "skl_" + name and len(i["bundle_sha256"]) == 64, i
        assert i["description"] and i["installations"] == [], i
    files = D.get().client().ok("GET", "/v1/skills/catalog/skl_pptx/files")["data"]
    paths = [f["path"] for f in files]
    assert "SKILL.md" in paths and "scripts/pptx_lib.py" in paths, paths


def test_upload_a_bundle_and_read_its_files():
    c = D.get().client()
    r = upload(hello("hello-upload"))
    assert r.status == 201, r.body
    item = r.body
    assert item["name"] == "hello-upload" and item["version"] == "1.0.0", item
    assert item["source"] == "upload" and item["builtin"] is False, item
    assert item["envs"] == [{"name": "GREETING_TOKEN", "description": "a token",
                             "required": True}], item
    assert len(item["bundle_sha256"]) == 64
    sid = item["id"]
    assert c.ok("GET", "/v1/skills/catalog/" + sid)["id"] == sid
    assert sid in [i["id"] for i in catalog()]
    files = {f["path"]: f for f in c.ok("GET", "/v1/skills/catalog/%s/files" % sid)["data"]}
    assert set(files) == {"SKILL.md", "scripts/hello.py", "logo.png", "data.bin"}, files
    md = c.ok("GET", "/v1/skills/catalog/%s/files/content?path=SKILL.md" % sid)
    assert md["encoding"] == "utf-8" and "în română" in md["content"], md
    img = c.ok("GET", "/v1/skills/catalog/%s/files/content?path=logo.png" % sid)
    assert img["encoding"] == "base64" and img["mime"] == "image/png", img
    assert base64.b64decode(img["content"]) == PNG
    binf = c.ok("GET", "/v1/skills/catalog/%s/files/content?path=data.bin" % sid)
    assert binf["binary"] is True and binf["size"] == 1024 and "content" not in binf, binf
    for bad in ("../../etc/passwd", "/etc/passwd", "scripts/../../x"):
        r = c.request("GET", "/v1/skills/catalog/%s/files/content?path=%s" % (sid, bad))
        assert_error(r, 400, "invalid_path")
    r = c.request("GET", "/v1/skills/catalog/%s/files/content?path=nope.txt" % sid)
    assert_error(r, 404, "file_not_found")
    r = c.request("GET", "/v1/skills/catalog/%s/files/content" % sid)
    assert_error(r, 400, "invalid_path")
    # The same name and version again.
    assert_error(upload(hello("hello-upload")), 409, "skill_exists")
    # What the skill declares is what a user may set a personal value for.
    member = D.client("bob")
    r = member.request("PUT", "/v1/me/env-vars/skill",
                       {"skill_id": sid, "name": "GREETING_TOKEN", "value": "s3cret"})
    assert r.status == 200, r.body
    r = member.request("PUT", "/v1/me/env-vars/skill",
                       {"skill_id": sid, "name": "UNDECLARED", "value": "x"})
    assert_error(r, 400, "env_var_not_declared")
    r = member.request("DELETE", "/v1/me/env-vars/skill", {"skill_id": sid,
                                                          "name": "GREETING_TOKEN"})
    assert r.status == 200, r.body
    r = member.request("DELETE", "/v1/me/env-vars/skill", {"skill_id": sid,
                                                          "name": "GREETING_TOKEN"})
    assert_error(r, 404, "env_var_not_found")


def test_a_source_from_the_skill_index():
    INDEX["/acme/greeter.zip"] = hello("greeter", "2.1.0")
    c = D.get().client()
    r = c.request("POST", "/v1/skills/catalog", {"source": "@acme/greeter"})
    assert r.status == 201, r.body
    assert r.body["source"] == "@acme/greeter" and r.body["version"] == "2.1.0", r.body
    assert_error(c.request("POST", "/v1/skills/catalog", {"source": "@acme/missing"}), 404,
                 "skill_not_found")
    for bad in ("acme/greeter", "@acme", "@../x", "@a/b/c", "@A/b", 3):
        assert_error(c.request("POST", "/v1/skills/catalog", {"source": bad}), 400,
                     "invalid_source" if isinstance(bad, str) else "invalid_request")
    assert_error(c.request("POST", "/v1/skills/catalog", {"source": "@a/b", "x": 1}), 400,
                 "invalid_request")


def test_delete_and_who_may_change_the_catalog():
    c = D.get().client()
    sid = upload(hello("to-delete")).body["id"]
    member = D.client("mallory")
    assert_error(member.request("POST", "/v1/skills/catalog", raw=hello("nope"),
                                headers={"Content-Type": "application/zip"}), 403,
                 "admin_required")
    assert_error(member.request("DELETE", "/v1/skills/catalog/" + sid), 403, "admin_required")
    assert member.ok("GET", "/v1/skills/catalog/" + sid)["id"] == sid  # reading is allowed
    r = c.ok("DELETE", "/v1/skills/catalog/" + sid)
    assert r["deleted"] is True
    assert_error(c.request("GET", "/v1/skills/catalog/" + sid), 404, "skill_not_found")
    assert_error(c.request("DELETE", "/v1/skills/catalog/" + sid), 404, "skill_not_found")
    assert_error(c.request("DELETE", "/v1/skills/catalog/skl_docx"), 409, "skill_builtin")
    assert not os.path.exists(os.path.join(D.get().data_dir, "skills", sid))
    entries = [e for e in D.get().client().ok("GET", "/v1/audit")["data"]
               if e["action"] == "skill.delete" and e.get("sandbox_id") == sid]
    assert entries, "the deletion is audited"


def zip_with(entries):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for info, data in entries:
            z.writestr(info, data)
    return buf.getvalue()


def test_malicious_bundles_are_refused_and_nothing_lands_outside():
    data = D.get().data_dir
    md = SKILL_MD % ("evil", "1.0.0")
    slip = zip_with([("SKILL.md", md), ("../../zipslip-evil.txt", "pwned")])
    r = upload(slip)
    assert_error(r, 400, "invalid_bundle")
    assert "zipslip-evil" in r.body["error"]["message"], r.body
    absolute = zip_with([("SKILL.md", md), ("/tmp/abs-evil.txt", "pwned")])
    assert_error(upload(absolute), 400, "invalid_bundle")
    # Entries the tree so far makes impossible (found by fuzz_bundle). A file, then a file
    # beneath it (was 404 file_not_found).
    r = upload(zip_with([("SKILL.md", md), ("a", "x"), ("a/b", "y")]))
    assert_error(r, 400, "invalid_bundle")
    # A file beneath d, then a file d (was 400 invalid_path).
    assert_error(upload(zip_with([("SKILL.md", md), ("d/x", "y"), ("d", "x")])), 400,
                 "invalid_bundle")
    link = zipfile.ZipInfo("evil-link")
    link.external_attr = (0o120777 << 16)
    symlink = zip_with([("SKILL.md", md), (link, "/etc/passwd")])
    r = upload(symlink)
    assert_error(r, 400, "invalid_bundle")
    assert "link" in r.body["error"]["message"], r.body
    many = zip_with([("SKILL.md", md)] + [("f/%05d" % i, "") for i in range(10000)])
    assert_error(upload(many), 413, "bundle_too_large")
    # A 1 GiB file of zeros deflates to about a megabyte: a classic bomb.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("SKILL.md", md)
        with z.open("zeros.bin", "w", force_zip64=True) as f:
            chunk = bytes(8 << 20)
            for _ in range(128):
                f.write(chunk)
    bomb = buf.getvalue()
    assert len(bomb) < 20 << 20
    r = upload(bomb)
    assert_error(r, 413, "bundle_too_large")
    assert_error(upload(b"this is not an archive at all"), 400, "invalid_bundle")
    assert_error(upload(zip_with([("README.md", "no skill here")])), 400, "invalid_skill")
    assert_error(upload(zip_with([("SKILL.md", "no front matter")])), 400, "invalid_skill")
    assert_error(upload(zip_with([("SKILL.md", "---\nname: Bad Name\ndescription: x\n---\n")])),
                 400, "invalid_skill")
    assert_error(upload(zip_with([("SKILL.md", "---\nname: x\ndescription: [unclosed\n---\n")])),
                 400, "invalid_skill")
    r = upload(zip_with([("SKILL.md", "---\nname: x\ndescription: d\nenvs: [PATH]\n---\n")]))
    assert_error(r, 400, "invalid_skill")
    assert "reserved" in r.body["error"]["message"] or "PATH" in r.body["error"]["message"]
    assert_error(upload(hello(), ctype="text/plain"), 415, "unsupported_media_type")
    big = D.get().client().request("POST", "/v1/skills/catalog", raw=b"x" * (21 << 20),
                                   headers={"Content-Type": "application/zip"})
    assert_error(big, 413, "bundle_too_large")
    # Nothing was written anywhere but beneath the data dir, and nothing half-unpacked stayed.
    for root in (data, os.path.dirname(data), "/tmp"):
        assert not os.path.exists(os.path.join(root, "zipslip-evil.txt"))
    assert not os.path.exists("/tmp/abs-evil.txt")
    assert not [n for n in os.listdir(os.path.join(data, "skills")) if n.startswith(".tmp-")]
    names = [i["name"] for i in catalog()]
    assert "evil" not in names and "x" not in names, names


def skill_files(c, skill):
    """The shipped skill's scripts, as the catalog serves them."""
    out = {}
    for f in c.ok("GET", "/v1/skills/catalog/skl_%s/files" % skill)["data"]:
        if f["path"].startswith("scripts/"):
            out[f["path"]] = c.ok("GET", "/v1/skills/catalog/skl_%s/files/content?path=%s"
                                  % (skill, f["path"]))["content"]
    return out


RO = "Știință și țară: Șoseaua Iași–Târgu Mureș, în Țara Bârsei"


def test_each_document_skill_makes_a_real_file_its_parser_reads_back():
    admin = D.get().client()
    c = D.client("writer")
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    for skill in ("docx", "xlsx", "pdf", "pptx"):
        for path, text in skill_files(admin, skill).items():
            r = c.request("PUT", "/v1/sandboxes/%s/files/skills/%s/%s" % (sid, skill, path),
                          raw=text.encode())
            assert r.status == 200, r.body
    s = "/workspace/skills"
    run = c.sh(sid, "set -e; cd /workspace; mkdir -p out; "
               "python3 %s/docx/scripts/make_docx.py out/a.docx --title 'Raport' "
               "--paragraph '%s' --table 'Județ,Sumă;Brașov,12'; "
               "python3 %s/docx/scripts/read_docx.py out/a.docx" % (s, RO, s))
    assert RO in run and "Județ\tSumă" in run, run
    run = c.sh(sid, "set -e; cd /workspace; python3 %s/xlsx/scripts/make_xlsx.py out/b.xlsx "
               "--sheet 'Vânzări' --row 'Județ,Suma' --row 'Iași,120' --row 'Brașov,80' "
               "--total; python3 %s/xlsx/scripts/read_xlsx.py out/b.xlsx" % (s, s))
    assert "# Vânzări" in run and "Iași\t120" in run, run
    assert "=SUM(B2:B3)" in run, run
    run = c.sh(sid, "set -e; cd /workspace; python3 %s/pdf/scripts/make_pdf.py out/c.pdf "
               "--title 'Proces-verbal' --paragraph '%s'" % (s, RO))
    pdf = c.request("GET", "/v1/sandboxes/%s/files/out/c.pdf" % sid).raw
    with tempfile.NamedTemporaryFile(suffix=".pdf") as f:
        f.write(pdf)
        f.flush()
        text = subprocess.run(["pdftotext", f.name, "-"], capture_output=True,
                              check=True).stdout.decode()
    assert "Proces-verbal" in text and "Țara Bârsei" in text and "Știință" in text, text
    run = c.sh(sid, "set -e; cd /workspace; python3 %s/pptx/scripts/make_pptx.py out/d.pptx "
               "--title 'Bugetul pe 2027' --subtitle 'Județul Mureș' "
               "--slide 'Priorități|Școli în Sighișoara;Drumuri în Țara Bârsei'; "
               "python3 %s/pptx/scripts/read_pptx.py out/d.pptx" % (s, s))
    assert "Județul Mureș" in run and "Drumuri în Țara Bârsei" in run, run
    # The deck is a well-formed package: every part its rels name is there.
    deck = c.request("GET", "/v1/sandboxes/%s/files/out/d.pptx" % sid).raw
    with zipfile.ZipFile(io.BytesIO(deck)) as z:
        names = set(z.namelist())
        assert {"[Content_Types].xml", "ppt/presentation.xml", "ppt/slides/slide2.xml",
                "ppt/theme/theme1.xml"} <= names, names
        for n in names:
            if n.endswith(".xml") or n.endswith(".rels"):
                __import__("xml.etree.ElementTree").etree.ElementTree.fromstring(z.read(n))
    arts = c.ok("GET", "/v1/sandboxes/%s/artifacts" % sid)["data"]
    got = {a["path"]: a for a in arts}
    assert {"out/a.docx", "out/b.xlsx", "out/c.pdf", "out/d.pptx"} <= set(got), got
    assert got["out/c.pdf"]["mime"] == "application/pdf", got["out/c.pdf"]
