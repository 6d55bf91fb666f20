"""Artifacts through a real sbxd: collection of /workspace/out with content-detected MIME,
SHA-256, the ClamAV verdict (EICAR from the shipped signature set), signed links that
work without a key and refuse any tampering, expiry (a 2 s link TTL on a second daemon),
and the spec's quick start: one POST /v1/sandboxes/run producing a PDF with Romanian
diacritics, checked with pdftotext.
"""

import fcntl
import glob
import hashlib
import json
import os
import stat
import struct
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import harness
from harness import assert_error

D = harness.Shared()
EICAR = r"X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*"
FIELDS = {"path", "size", "mime", "sha256", "scan", "scan_engine"}

QUICKSTART = (
    "import os\nfrom reportlab.lib.pagesizes import A4\nfrom reportlab.pdfbase import pdfmetrics\n"
    "from reportlab.pdfbase.ttfonts import TTFont\nfrom reportlab.pdfgen import canvas\n\n"
    "pdfmetrics.registerFont(TTFont('DejaVu', '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf'))\n"
    "os.makedirs('/workspace/out', exist_ok=True)\n"
    "c = canvas.Canvas('/workspace/out/act.pdf', pagesize=A4)\nc.setFont('DejaVu', 14)\n"
    "c.drawString(72, 770, 'Act adițional nr. 1 la contractul de prestări servicii')\n"
    "c.drawString(72, 745, 'Părțile convin: ședința se mută în București, str. Ștefan cel Mare.')\n"
    "c.save()\nprint('ok')\n")


def teardown_module():
    D.close()


def client():
    return D.get().client(D.once("key", lambda d: d.client().create_key("artie")["key"]))


def sandbox():
    c = client()
    return c, D.once("sb", lambda d: c.create_sandbox(ttl_seconds=3600))["id"]


def fetch(url):
    """GET without any key: (status, headers, body)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def artifacts(c, sid):
    r = c.request("GET", "/v1/sandboxes/%s/artifacts" % sid)
    assert r.status == 200, r
    assert r.body["object"] == "list", r.body
    return {a["path"]: a for a in r.body["data"]}


def make_outputs(c, sid):
    c.sh(sid, "rm -rf /workspace/out && mkdir -p /workspace/out/sub && cd /workspace/out && "
              "printf 'hello\\n' > notes.txt && "
              "cp /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf 'sub/font ș.pdf' && "
              "printf '%%s' '%s' > eicar.com && "
              "ln -s /etc/passwd passwd && ln -s ../secret.txt secret && "
              "printf secret > /workspace/secret.txt" % EICAR.replace("'", "'\\''"))


def test_list_fields_mime_sha_scan():
    c, sid = sandbox()
    make_outputs(c, sid)
    arts = artifacts(c, sid)
    assert sorted(arts) == ["out/eicar.com", "out/notes.txt", "out/sub/font ș.pdf"], \
        "symlinks must never be collected: %r" % sorted(arts)
    notes = arts["out/notes.txt"]
    assert FIELDS <= set(notes) and {"url", "expires_at"} <= set(notes), notes
    assert notes["size"] == 6 and notes["sha256"] == hashlib.sha256(b"hello\n").hexdigest()
    assert notes["mime"] == "text/plain" and notes["scan"] == "clean", notes
    # MIME comes from the bytes, not the name: a font called .pdf is a font.
    font = arts["out/sub/font ș.pdf"]
    assert font["mime"] == "font/sfnt", font
    eng = notes["scan_engine"]
    assert eng["engine"] == "clamav" and eng["signatures"] >= 1, eng
    assert any(db.endswith("sbx.ndb") for db in eng["databases"]), eng
    assert abs(notes["expires_at"] - (time.time() + 3600)) < 120, notes


def test_eicar_is_infected_without_url():
    c, sid = sandbox()
    make_outputs(c, sid)
    e = artifacts(c, sid)["out/eicar.com"]
    assert e["scan"] == "infected", e
    assert "EICAR" in e["virus"], e
    assert "url" not in e and "expires_at" not in e, e


def test_small_and_large_files_are_typed_and_scanned_alike():
    """Files up to 256 KiB are typed and scanned from the bytes read once, larger ones from
    the stored copy: the two ways must agree (an ELF image is typed from the copy either
    way, since libmagic tells a PIE executable from a library only through a descriptor)."""
    c, sid = sandbox()
    c.sh(sid, "rm -rf /workspace/out && mkdir -p /workspace/out && cd /workspace/out && "
              "cp /bin/true small-pie && cp /bin/bash large-pie && "
              "cp /lib/x86_64-linux-gnu/libdl.so.2 small.so && "
              "printf '#!/bin/sh\\necho hi\\n' > run.sh && "
              "printf '%%s' '%s' > small-eicar && "
              "{ cat small-eicar; head -c 300000 /dev/zero; } > large-eicar && "
              "{ head -c 300000 /dev/zero | tr '\\0' a; echo; } > large.txt" %
         EICAR.replace("'", "'\\''"))
    arts = artifacts(c, sid)
    sizes = {p: a["size"] for p, a in arts.items()}
    assert sizes["out/small-pie"] < 256 * 1024 < sizes["out/large-pie"], sizes
    assert sizes["out/small-eicar"] < 256 * 1024 < sizes["out/large-eicar"], sizes
    # libmagic through a descriptor, as file(1) types a file, is the reference.
    out = os.path.join(D.get().sandbox_dir(sid), "workspace", "out")
    names = sorted(os.listdir(out))
    typed = subprocess.run(["file", "-b", "--mime-type"] + names, cwd=out, check=True,
                           capture_output=True, text=True).stdout.split()
    assert {p[4:]: a["mime"] for p, a in arts.items()} == dict(zip(names, typed))
    assert typed[names.index("small-pie")] == "application/x-pie-executable", typed
    assert {p[4:]: a["scan"] for p, a in arts.items()} == {
        "small-pie": "clean", "large-pie": "clean", "small.so": "clean", "run.sh": "clean",
        "small-eicar": "infected", "large-eicar": "infected", "large.txt": "clean"}, arts


def test_the_store_and_the_sandboxes_are_hierarchy_tops_on_ext4():
    """The artifact store and the sandboxes' dir carry FS_TOPDIR_FL, so that ext4 gives each
    sandbox's blobs and workspace inodes in a block group of their own (docs/files.md)."""
    d = D.get()
    out = subprocess.run(["stat", "-f", "-c", "%T", d.data_dir], capture_output=True,
                         text=True, check=True).stdout.strip()
    if out not in ("ext2/ext3", "ext4"):
        # Only ext2/3/4 have the flag; elsewhere sbxd goes on without it.
        raise harness.Skip("the data dir is on %s, not ext2/3/4" % out)
    for sub in ("artifacts", "sandboxes"):
        fd = os.open(os.path.join(d.data_dir, sub), os.O_RDONLY | os.O_DIRECTORY)
        try:
            flags = struct.unpack("l", fcntl.ioctl(fd, 0x80086601, b"\0" * 8))[0]  # GETFLAGS
        finally:
            os.close(fd)
        assert flags & 0x00020000, "%s: flags %#x without FS_TOPDIR_FL" % (sub, flags)


def test_scans_keep_their_scratch_on_a_tmpfs_unless_tmpdir_says():
    """libclamav makes and removes a directory for every scan, a text file's too: sbx keeps
    them in one of its own on /dev/shm (docs/files.md), gone when sbxd stops."""
    shm = subprocess.run(["stat", "-f", "-c", "%T", "/dev/shm"], capture_output=True,
                         text=True).stdout.strip()
    if shm != "tmpfs":
        # Without a tmpfs there, sbxd keeps libclamav's default; what this test checks
        # cannot happen.
        raise harness.Skip("/dev/shm is %r, not a tmpfs" % shm)
    # What an sbxd killed mid-scan left behind: its pid is gone.
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = "/dev/shm/sbx-scan-%d-AbC123" % gone.pid
    os.makedirs(stale + "/20261205_000000-scantemp.x", mode=0o700)
    with harness.Daemon(extra_env={"TMPDIR": None}) as d:
        c = d.client()
        sid = c.create_sandbox()["id"]
        make_outputs(c, sid)
        arts = artifacts(c, sid)
        assert arts["out/eicar.com"]["scan"] == "infected", arts
        assert arts["out/notes.txt"]["scan"] == "clean", arts
        mine = glob.glob("/dev/shm/sbx-scan-%d-*" % d.proc.pid)
        assert len(mine) == 1, mine
        st = os.stat(mine[0])
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)
        assert os.listdir(mine[0]) == [], "each scan removes its own directory"
        assert not os.path.exists(stale), "a dead sbxd's scratch is swept"
        d.stop()
        assert not os.path.exists(mine[0]), "sbxd removes its scratch when it stops"
    # TMPDIR is the operator's: the scans' directories come and go there.
    tmp = tempfile.mkdtemp(prefix="sbx-scratch-")
    try:
        with harness.Daemon(extra_env={"TMPDIR": tmp}) as d:
            c = d.client()
            sid = c.create_sandbox()["id"]
            make_outputs(c, sid)
            before = os.stat(tmp).st_mtime_ns
            time.sleep(0.05)
            assert artifacts(c, sid)["out/eicar.com"]["scan"] == "infected"
            assert os.stat(tmp).st_mtime_ns > before and os.listdir(tmp) == []
            assert glob.glob("/dev/shm/sbx-scan-%d-*" % d.proc.pid) == []
    finally:
        os.rmdir(tmp)


def test_signed_link_downloads_hashed_bytes_without_key():
    c, sid = sandbox()
    make_outputs(c, sid)
    arts = artifacts(c, sid)
    for name in ("out/notes.txt", "out/sub/font ș.pdf"):
        a = arts[name]
        status, headers, body = fetch(a["url"])
        assert status == 200, (status, body[:200])
        assert hashlib.sha256(body).hexdigest() == a["sha256"] and len(body) == a["size"]
        assert headers["x-sbx-sha256"] == a["sha256"], headers
        assert "attachment" in headers["content-disposition"], headers
    # The link serves the bytes that were hashed, even after the file changed or went.
    url = arts["out/notes.txt"]["url"]
    c.sh(sid, "printf 'changed' > /workspace/out/notes.txt")
    assert fetch(url)[2] == b"hello\n"
    c.sh(sid, "rm /workspace/out/notes.txt")
    assert fetch(url)[2] == b"hello\n"


def test_unchanged_listings_reuse_and_changes_are_seen():
    """Listings of an unchanged out/ answer from the cache; every kind of change is seen:
    same size and mtime put back, the same bytes made infected, a new inode under the name."""
    c, sid = sandbox()
    c.sh(sid, "rm -rf /workspace/out && mkdir -p /workspace/out && "
              "printf 'aaaa\\n' > /workspace/out/a.txt && printf 'bbbb\\n' > /workspace/out/b.txt")
    first = artifacts(c, sid)
    for _ in range(3):
        again = artifacts(c, sid)
        assert {p: (a["sha256"], a["size"], a["mime"], a["scan"]) for p, a in again.items()} == \
            {p: (a["sha256"], a["size"], a["mime"], a["scan"]) for p, a in first.items()}
        assert fetch(again["out/a.txt"]["url"])[2] == b"aaaa\n"
    # Same length, mtime set back: only ctime (which the sandbox cannot set) moves.
    c.sh(sid, "cd /workspace/out && m=$(stat -c %Y a.txt) && printf 'cccc\\n' > a.txt && "
              "touch -d @$m a.txt")
    a = artifacts(c, sid)["out/a.txt"]
    assert a["sha256"] == hashlib.sha256(b"cccc\n").hexdigest(), a
    assert fetch(a["url"])[2] == b"cccc\n"
    # The same file becomes EICAR: scanned again.
    c.sh(sid, "printf '%%s' '%s' > /workspace/out/b.txt" % EICAR.replace("'", "'\\''"))
    b = artifacts(c, sid)["out/b.txt"]
    assert b["scan"] == "infected" and "url" not in b, b
    # Back to the first bytes, as a new file under the same name.
    c.sh(sid, "cd /workspace/out && printf 'bbbb\\n' > b.new && mv b.new b.txt")
    b = artifacts(c, sid)["out/b.txt"]
    assert b["scan"] == "clean" and b["sha256"] == first["out/b.txt"]["sha256"], b
    assert fetch(b["url"])[2] == b"bbbb\n"


def test_tampered_links_are_403():
    c, sid = sandbox()
    make_outputs(c, sid)
    arts = artifacts(c, sid)
    a = arts["out/sub/font ș.pdf"]
    u = urllib.parse.urlsplit(a["url"])
    q = dict(urllib.parse.parse_qsl(u.query))

    def with_(path=None, **over):
        qq = dict(q)
        qq.update(over)
        return urllib.parse.urlunsplit((u.scheme, u.netloc, path or u.path,
                                        urllib.parse.urlencode(qq), ""))

    flipped = q["sig"][:10] + ("0" if q["sig"][10] != "0" else "1") + q["sig"][11:]
    other = arts["out/notes.txt"]
    cases = [
        with_(sig=flipped),
        with_(sig=q["sig"][:-1]),
        with_(expires=str(int(q["expires"]) + 3600)),
        with_(sha256=other["sha256"]),
        with_(path=u.path.replace("font%20%C8%99.pdf", "other.pdf")),
        with_(path=u.path.replace(sid, "sb_" + "0" * 20)),
        with_(path=u.path.replace("/out/sub/", "/out/")),
    ]
    for url in cases:
        status, headers, body = fetch(url)
        assert status == 403, (url, status, body[:200])
        assert json.loads(body)["error"]["code"] == "invalid_signature", body
    missing = urllib.parse.urlunsplit((u.scheme, u.netloc, u.path, "sha256=" + q["sha256"], ""))
    assert fetch(missing)[0] == 403
    # The untouched link still works.
    assert fetch(a["url"])[0] == 200


def test_list_errors():
    c, sid = sandbox()
    assert_error(c.request("GET", "/v1/sandboxes/sb_%s/artifacts" % ("0" * 20)), 404,
                 "sandbox_not_found")
    assert_error(c.request("GET", "/v1/sandboxes/%s/artifacts" % sid, key=None), 401,
                 "missing_api_key")
    other = D.get().client(D.get().client().create_key("nosy")["key"])
    assert_error(other.request("GET", "/v1/sandboxes/%s/artifacts" % sid), 404,
                 "sandbox_not_found")


def test_no_out_dir_is_empty_list():
    c = client()
    sb = c.create_sandbox(ttl_seconds=600)
    try:
        assert artifacts(c, sb["id"]) == {}
    finally:
        c.delete_sandbox(sb["id"])


def test_quickstart_run_pdf_with_romanian_diacritics():
    c = client()
    r = c.request("POST", "/v1/sandboxes/run",
                  {"language": "python", "timeout_seconds": 120, "code": QUICKSTART},
                  headers={"Idempotency-Key": "act-2026-10-16-001"}, timeout=180)
    assert r.status == 200, r
    assert r.body["exit_code"] == 0 and r.body["stdout"] == "ok\n", r.body
    arts = r.body["artifacts"]
    assert len(arts) == 1, arts
    a = arts[0]
    assert a["path"] == "out/act.pdf" and a["mime"] == "application/pdf", a
    assert a["scan"] == "clean" and a["url"], a
    # The sandbox is gone, the link still works (without a key) for its hour.
    assert r.body["sandbox_id"] not in [s["id"] for s in c.list_sandboxes()]
    status, _, pdf = fetch(a["url"])
    assert status == 200 and hashlib.sha256(pdf).hexdigest() == a["sha256"]
    with tempfile.NamedTemporaryFile(suffix=".pdf") as f:
        f.write(pdf)
        f.flush()
        text = subprocess.run(["pdftotext", f.name, "-"], capture_output=True,
                              check=True).stdout.decode("utf-8")
    assert "Act adițional nr. 1 la contractul de prestări servicii" in text, text
    assert "Părțile convin: ședința se mută în București, str. Ștefan cel Mare." in text, text


def test_expired_link_is_403():
    with harness.Daemon(extra_env={"SBX_ARTIFACT_URL_TTL": "2"}) as d:
        c = d.client()
        sb = c.create_sandbox(ttl_seconds=600)
        c.sh(sb["id"], "mkdir -p /workspace/out && echo x > /workspace/out/x.txt")
        a = c.ok("GET", "/v1/sandboxes/%s/artifacts" % sb["id"])["data"][0]
        assert a["expires_at"] - time.time() <= 3, a
        assert fetch(a["url"])[0] == 200
        while time.time() <= a["expires_at"] + 1:  # the time the link says it ends
            time.sleep(0.1)
        status, _, body = fetch(a["url"])
        assert status == 403 and json.loads(body)["error"]["code"] == "link_expired", body
