"""Templates (docs/templates.md): GET /v1/templates, warm pools, warm snapshots, what base
and office contain.

One daemon for the module with SBX_WARM_POOL=base:2 and SBX_WARM_SNAPSHOT=office. Users take
pooled sandboxes and must get their own env, egress and TTL, and nothing of each other's; the
pool refills; the base tools run; office sandboxes are restored from the warm snapshot and
convert documents with Romanian text to PDF.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time

import harness
from harness import REPO, assert_error, wait_for

POOL = 2
D = harness.Shared(extra_env={"SBX_WARM_POOL": "base:%d" % POOL, "SBX_WARM_SNAPSHOT": "office"})


def teardown_module():
    D.close()


def templates(c):
    return {t["name"]: t for t in c.ok("GET", "/v1/templates")["data"]}


def pool_ready(c, n=POOL):
    def check():
        t = templates(c).get("base")
        return t if t and t["pool"]["ready"] >= n else None
    return wait_for(check, 180, interval=0.5, what="base's warm pool to hold %d" % n)


def test_templates_list_and_pool_fills():
    c = D.client("tpl-lister")
    t = pool_ready(c)
    assert t["object"] == "template" and t["name"] == "base", t
    assert t["digest"].startswith("sha256:") and len(t["digest"]) == 71, t
    assert t["size_bytes"] > 100 * 1024 * 1024, t
    assert t["warm"] is True and t["pool_size"] == POOL, t
    assert t["pool"]["size"] == POOL and t["pool"]["ready"] == POOL, t
    assert t["contains"]["node"].startswith("v24."), t
    assert "git" in t["contains"]["packages"] and "curl" in t["contains"]["packages"], t
    assert any(p.startswith("pptxgenjs@") for p in t["contains"]["npm"]), t
    assert t["contains"]["installed_packages"] > 100, t
    one = c.ok("GET", "/v1/templates/base")
    assert one["digest"] == t["digest"] and one["pool_size"] == POOL, one
    # Pool sandboxes belong to nobody: no user, not even the admin, lists them.
    assert D.client().list_sandboxes() == []
    assert c.list_sandboxes() == []


def test_templates_errors():
    c = D.client("tpl-lister")
    for name in ("nope", "BASE", "..", "a" * 40):
        assert_error(c.request("GET", "/v1/templates/" + name), 404, "template_not_found")
    assert_error(c.request("GET", "/v1/templates", key=None), 401, "missing_api_key")


def test_pooled_create_gets_the_callers_settings():
    c = D.client("tpl-alice")
    pool_ready(c)
    egress = {"mode": "allowlist", "domains": ["example.com"]}
    sb = c.create_sandbox(template="base", env={"WHO": "alice"}, ttl_seconds=600,
                          egress=egress)
    assert sb.get("from_pool") is True, sb
    assert sb["status"] == "running" and sb["env"] == {"WHO": "alice"}, sb
    assert sb["ttl_seconds"] == 600 and sb["expires_at"] - sb["created_at"] == 600, sb
    assert sb["egress"]["mode"] == "allowlist" and sb["egress"]["domains"] == ["example.com"], sb
    assert abs(sb["created_at"] - time.time()) < 30, sb
    assert c.sh(sb["id"], "echo $WHO") == "alice\n"
    pol = c.ok("GET", "/v1/sandboxes/%s/egress" % sb["id"])
    assert pol["policy"]["domains"] == ["example.com"], pol
    assert [s["id"] for s in c.list_sandboxes()] == [sb["id"]]
    assert c.get_sandbox(sb["id"])["from_pool"] is True
    D.cache["alice_sb"] = sb["id"]


def test_two_users_never_share_a_pooled_sandbox():
    alice = D.client("tpl-alice")
    bob = D.client("tpl-bob")
    a = D.cache.get("alice_sb") or alice.create_sandbox(template="base", env={"WHO": "alice"})["id"]
    alice.sh(a, "echo secret > /workspace/alice.txt; echo tmp > /tmp/alice.tmp; "
                "mkdir -p /tmp/x && echo $WHO > /tmp/x/who")
    pool_ready(bob, 1)
    b = bob.create_sandbox(template="base", env={"WHO": "bob"})
    assert b["id"] != a and b.get("from_pool") is True, b
    out = bob.sh(b["id"], "echo $WHO; ls -A /workspace; ls /tmp/alice.tmp /tmp/x "
                          "2>/dev/null | wc -l; env | grep -c alice || true; "
                          "stat -c '%U %a' /workspace/out")
    # A fresh workspace: out/ alone, the sandbox user's.
    assert out.split() == ["bob", "out", "0", "0", "user", "755"], out
    # And neither can reach the other's sandbox through the API.
    assert_error(bob.request("GET", "/v1/sandboxes/" + a), 404, "sandbox_not_found")
    assert_error(alice.request("POST", "/v1/sandboxes/%s/exec" % b["id"], {"shell": "true"}),
                 404, "sandbox_not_found")
    assert alice.sh(a, "cat /workspace/alice.txt; echo $WHO") == "secret\nalice\n"
    alice.delete_sandbox(a)
    bob.delete_sandbox(b["id"])


def test_pool_refills_after_takes():
    c = D.client("tpl-lister")
    t = pool_ready(c)
    assert t["pool"]["taken"] >= 2, t
    # A create the pool cannot serve (another backend) is a cold one.
    sb = c.create_sandbox(template="base", backend="v1")
    assert "from_pool" not in sb, sb
    c.delete_sandbox(sb["id"])


def test_bad_warm_settings_stop_the_daemon():
    bad = [("SBX_WARM_POOL", v) for v in ("base", "base:x", "base:99", "BASE:1", "base:1,base:2")]
    bad += [("SBX_WARM_SNAPSHOT", v) for v in ("Office", "office:1", "../x")]
    whys = harness.refused_starts([{var: value} for var, value in bad])
    for (var, value), why in zip(bad, whys):
        assert var in why, (value, why)


def make_run_settings():
    """What `make run` does, read from `make -n run`: the templates it builds and the warm
    settings it starts sbxd with."""
    p = subprocess.run(["make", "-s", "-n", "run"], cwd=REPO, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60,
                       env={k: v for k, v in os.environ.items()
                            if not k.startswith("SBX_WARM") and not k.startswith("MAKE")})
    text = p.stdout.decode().replace("\\\n", " ")
    assert p.returncode == 0, text
    built = re.findall(r"build-template\.sh (\w+)", text)
    line = next(l for l in text.splitlines() if "sbxd --listen" in l)
    return built, dict(re.findall(r"(SBX_WARM_\w+)=(\S*)", line))


def test_make_run_builds_office_and_its_creates_are_restored():
    """Spec 000's template table: office is "started already warm", and a template with a warm
    snapshot answers restored: true. `make run` builds office beside base and starts sbxd
    with office warm; a daemon with exactly those settings answers restored: true to office
    creates, from its pool of one and past it."""
    built, warm = make_run_settings()
    assert built == ["base", "office"], built
    assert warm == {"SBX_WARM_SNAPSHOT": "office", "SBX_WARM_POOL": "office:1"}, warm
    d = harness.Daemon(extra_env=warm)
    try:
        d.start()
        c = d.client(d.client().create_key("tpl-run")["key"])

        def office_ready():
            t = templates(c)["office"]
            assert t["warm_snapshot"] != "failed", t
            return t if t["warm_snapshot"] == "ready" and t["pool"]["ready"] == 1 else None
        t = wait_for(office_ready, 300, interval=0.5, what="office warm and pooled")
        assert t["warm"] is True and t["pool_size"] == 1, t
        a = c.create_sandbox(template="office")
        assert a.get("from_pool") is True and a["restored"] is True, a
        b = c.create_sandbox(template="office")
        assert "from_pool" not in b and b["restored"] is True, b
        assert c.sh(b["id"], "command -v soffice >/dev/null && echo ok") == "ok\n"
        for sb in (a, b):
            c.delete_sandbox(sb["id"])
    finally:
        d.cleanup()


def test_a_template_not_built_says_how_to_build_it():
    """A create naming a template that is not built: 400 invalid_template, as before, with the
    way to build it: the shipped recipes by the operator's script, other names as custom
    templates. A daemon whose template cache holds base only."""
    real = os.path.realpath(os.path.join(
        os.environ.get("SBX_TEMPLATE_CACHE", "/var/cache/sbx/templates"), "base"))
    cache = tempfile.mkdtemp(prefix="tpl-notbuilt-", dir=os.path.dirname(os.path.dirname(real)))
    os.symlink(real, os.path.join(cache, "base"))
    d = harness.Daemon(extra_env={"SBX_TEMPLATE_CACHE": cache})
    try:
        d.start()
        c = d.client(d.client().create_key("tpl-none")["key"])
        for name in ("office", "desktop"):
            r = c.request("POST", "/v1/sandboxes", {"template": name})
            assert_error(r, 400, "invalid_template")
            msg = r.body["error"]["message"]
            assert "scripts/build-template.sh %s" % name in msg and "make run" in msg, msg
        r = c.request("POST", "/v1/sandboxes/run", {"template": "office", "shell": "true"})
        assert_error(r, 400, "invalid_template")
        assert "scripts/build-template.sh office" in r.body["error"]["message"], r.body
        r = c.request("POST", "/v1/sandboxes", {"template": "mine"})
        assert_error(r, 400, "invalid_template")
        assert "POST /v1/templates" in r.body["error"]["message"], r.body
        assert c.list_sandboxes() == []
    finally:
        d.cleanup()
        shutil.rmtree(cache, ignore_errors=True)


BASE_TOOLS = """
set -e
for t in curl wget git jq unzip zip file less sqlite3 rg vi nano ps make gcc node npm npx \
         python3 pdftotext xz; do
  command -v $t >/dev/null || { echo "missing $t"; exit 1; }
done
curl --version | head -1; wget --version | head -1; git --version; jq --version
unzip -v | head -1; zip -v | sed -n 2p; file --version | head -1; less --version | head -1
sqlite3 --version; rg --version | head -1; nano --version | head -1; ps --version; make --version | head -1
cd /tmp && printf '#include <stdio.h>\\nint main(void){puts("gcc-ok");return 0;}\\n' > h.c
gcc -O2 -o h h.c && ./h
echo 'select 6*7;' | sqlite3
echo '{"a":[1,2]}' | jq -c .a
mkdir -p z && echo zz > z/f && zip -qr z.zip z && rm -r z && unzip -q z.zip && cat z/f
file /bin/bash | grep -q ELF && echo file-ok
echo "node $(node --version) npm $(npm --version)"
node -e "const P = require('pptxgenjs'); const p = new P(); p.addSlide().addText('x', {x: 1, y: 1});
         p.write({outputType: 'nodebuffer'}).then(b => console.log('pptxgenjs-ok', b.length > 1000))"
fc-list :lang=ro family | grep -qi 'dejavu' && echo ro-fonts-ok
fc-list | grep -qi 'noto sans cjk' && echo cjk-ok
fc-list | grep -qi 'liberation' && echo liberation-ok
"""


def test_base_tools_run():
    c = D.client("tpl-tools")
    sb = c.create_sandbox(template="base")
    r = c.exec(sb["id"], shell=BASE_TOOLS, timeout_seconds=120)
    assert r["exit_code"] == 0, r
    out = r["stdout"]
    for want in ("gcc-ok", "42", "[1,2]", "zz", "file-ok", "pptxgenjs-ok true", "ro-fonts-ok",
                 "cjk-ok", "liberation-ok", "git version", "jq-1.6"):
        assert want in out, (want, out)
    node = [l for l in out.splitlines() if l.startswith("node ")][0]
    assert node.startswith("node v24.") and " npm 11." in node, node
    c.delete_sandbox(sb["id"])


MAKE_DOCS = r"""
set -e
cd /workspace
python3 - <<'PY'
import docx, openpyxl
d = docx.Document(); d.add_paragraph("Raport docx: ș ț ă î â"); d.save("raport.docx")
wb = openpyxl.Workbook(); wb.active["A1"] = "Foaie xlsx: ș ț"; wb.save("foaie.xlsx")
open("pagina.html", "w").write("<html><body><h1>Pagină html: ș ț</h1></body></html>")
open("tabel.csv", "w").write("nume,oras\nȘtefan csv: ș ț,Țăndărei\n")
PY
node -e "const P = require('pptxgenjs'); const p = new P();
         p.addSlide().addText('Prezentare pptx: ș ț', {x: 1, y: 1, w: 8, h: 1});
         p.writeFile({fileName: '/workspace/prezentare.pptx'}).then(() => console.log('pptx'))"
# odt: made by LibreOffice itself from the docx
soffice --headless --convert-to odt --outdir /workspace/odt raport.docx >/dev/null 2>&1
mv odt/raport.odt document.odt
ls
"""


def office_snapshot_ready(c):
    return wait_for(lambda: templates(c)["office"]["warm_snapshot"] == "ready" or
                    templates(c)["office"]["warm_snapshot"] == "failed", 300, interval=0.5,
                    what="office's warm snapshot") and templates(c)["office"]


def test_office_warm_snapshot_restores_fresh_sandboxes():
    c = D.client("tpl-office")
    t = office_snapshot_ready(c)
    assert t["warm_snapshot"] == "ready" and t["warm"] is True, t
    assert t["from"] == "base" and t["pool_size"] == 0, t
    a = c.create_sandbox(template="office", env={"WHO": "a"})
    assert a["restored"] is True and isinstance(a["ready_ms"], int), a
    assert a["template_digest"] == t["digest"], a
    c.sh(a["id"], "echo mine > /tmp/a.txt; echo ws > /workspace/a.txt")
    b = c.create_sandbox(template="office", env={"WHO": "b"})
    assert b["restored"] is True, b
    # Restored from one image, yet each its own: env, /tmp (memory), workspace, ids.
    out = c.sh(b["id"], "echo $WHO; ls /tmp/a.txt /workspace/a.txt 2>/dev/null | wc -l; "
                        "stat -c '%U' /workspace/out")
    assert out.split() == ["b", "0", "user"], out
    assert c.sh(a["id"], "echo $WHO; cat /tmp/a.txt") == "a\nmine\n"
    # The snapshot's holder is nobody's sandbox.
    assert {s["id"] for s in c.list_sandboxes()} == {a["id"], b["id"]}
    c.delete_sandbox(a["id"])
    c.delete_sandbox(b["id"])


def test_office_converts_documents_to_pdf():
    c = D.client("tpl-office")
    office_snapshot_ready(c)
    sb = c.create_sandbox(template="office", ttl_seconds=900)
    sid = sb["id"]
    r = c.exec(sid, shell=MAKE_DOCS, timeout_seconds=300)
    assert r["exit_code"] == 0, r
    files = {"raport.docx": "Raport docx", "foaie.xlsx": "Foaie xlsx",
             "prezentare.pptx": "Prezentare pptx", "document.odt": "Raport docx",
             "pagina.html": "html", "tabel.csv": "csv"}
    # Each soffice is a cold start of LibreOffice (tens of seconds in a sandbox), so the
    # documents go in as few runs as convert right: html cannot share one (in a batch with
    # any other input it yields an empty PDF, or breaks the others or the csv's encoding),
    # the csv can.
    for batch in (["raport.docx", "foaie.xlsx", "prezentare.pptx", "document.odt",
                   "tabel.csv"], ["pagina.html"]):
        r = c.exec(sid, shell="cd /workspace && soffice --headless --convert-to pdf "
                              "--outdir /workspace/out " + " ".join(batch),
                   timeout_seconds=300)
        assert r["exit_code"] == 0, r
    for f, marker in files.items():
        pdf = "/workspace/out/" + f.rsplit(".", 1)[0] + ".pdf"
        text = c.sh(sid, "pdftotext %s -" % pdf)
        assert marker in text and "ș" in text and "ț" in text, (f, text)
    c.delete_sandbox(sid)


def test_desktop_serves_novnc_through_a_preview_link():
    import urllib.error
    import urllib.parse
    import urllib.request

    import wsclient
    c = D.client("tpl-desktop")
    sid = c.create_sandbox(template="desktop", ttl_seconds=600)["id"]

    def services():
        ps = c.sh(sid, "ps -eo args").splitlines()
        have = {"Xvfb": any(l.startswith("Xvfb :1") for l in ps),
                "openbox": any(l.startswith("openbox") for l in ps),
                "st": any(l.startswith("stterm") or l.startswith("st ") for l in ps),
                "x11vnc": any(l.startswith("x11vnc") for l in ps),
                "websockify": any("/usr/bin/websockify" in l for l in ps)}
        return all(have.values()) or None
    wait_for(services, 60, interval=0.5, what="the desktop's services")
    pv = c.ok("POST", "/v1/sandboxes/%s/preview" % sid, {"port": 6080})
    u = urllib.parse.urlparse(pv["url"])
    token = urllib.parse.parse_qs(u.query)["sbx_preview"][0]

    def page():
        try:
            return urllib.request.urlopen(pv["url"], timeout=10).read().decode()
        except urllib.error.HTTPError as e:
            if e.code == 502:  # websockify is still starting
                return None
            raise
    index = wait_for(page, 60, interval=0.5, what="noVNC on port 6080")
    assert "sbx_preview" in index and "vnc.html" in index, index
    # noVNC's own page and scripts, with the token in the cookie as index.html keeps it.
    req = urllib.request.Request("http://127.0.0.1:%d%svnc.html" % (u.port, u.path),
                                 headers={"Cookie": "sbx_preview=" + token})
    assert "noVNC" in urllib.request.urlopen(req, timeout=10).read().decode()
    # The WebSocket noVNC opens reaches the VNC server: RFB version, then security types.
    ws = wsclient.connect(u.port, u.path + "websockify",
                          headers={"Cookie": "sbx_preview=" + token,
                                   "Sec-WebSocket-Protocol": "binary"})
    try:
        op, banner = ws.recv(timeout=20)
        assert banner == b"RFB 003.008\n", banner
        ws.send_binary(b"RFB 003.008\n")
        op, sec = ws.recv(timeout=20)
        assert sec[:1] >= b"\x01" and b"\x01" in sec[1:], sec  # "None" offered: local only
    finally:
        ws.close()
    _browser_sees_the_desktop(pv["url"])
    c.delete_sandbox(sid)


# The desktop's background (templates/desktop/rootfs/usr/lib/sbx/start).
DESKTOP_BG = (0x2E, 0x7D, 0x5B)
CANVAS_STATS = """(function () {
  var s = document.getElementById('noVNC_status');
  var c = document.querySelector('canvas');
  var out = {status: s ? s.textContent : '', w: 0, bg: 0, other: 0};
  if (!c || !c.width) return JSON.stringify(out);
  var d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  out.w = c.width;
  for (var i = 0; i < d.length; i += 4)
    if (d[i] == %d && d[i + 1] == %d && d[i + 2] == %d) out.bg++; else out.other++;
  return JSON.stringify(out);
})()""" % DESKTOP_BG


def _browser_sees_the_desktop(url):
    """Debian's chromium, headless, opens the preview link; through the DevTools protocol we
    wait for noVNC to connect, read its canvas (the desktop's background and a terminal window
    on it) and take a screenshot."""
    import base64
    import os
    import shutil
    import subprocess
    import tempfile
    import urllib.parse
    import urllib.request

    import wsclient
    browser = shutil.which("chromium")
    assert browser, "chromium is not installed (scripts/deps.sh installs it)"
    prof = tempfile.mkdtemp(prefix="sbx-chromium-")
    # Port 0: chromium picks its own and writes it to DevToolsActivePort, so no other
    # process can take it between our pick and its listen.
    proc = subprocess.Popen([browser, "--headless", "--no-sandbox", "--disable-gpu",
                             "--window-size=1280,800", "--remote-debugging-port=0",
                             "--user-data-dir=" + prof, "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def active_port():
            try:
                with open(os.path.join(prof, "DevToolsActivePort")) as f:
                    return int(f.readline().strip() or 0) or None
            except (OSError, ValueError):
                return None
        port = wait_for(active_port, 30, what="chromium's DevToolsActivePort")

        def tabs():
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/json" % port, timeout=2) as r:
                    return [t for t in json.load(r) if t.get("type") == "page"] or None
            except OSError:
                return None
        page = wait_for(tabs, 30, what="chromium's DevTools")[0]
        ws = wsclient.connect(port, urllib.parse.urlparse(page["webSocketDebuggerUrl"]).path)
        seq = [0]

        def call(method, **params):
            seq[0] += 1
            ws.send_text(json.dumps({"id": seq[0], "method": method, "params": params}))
            while True:
                m = json.loads(ws.recv(timeout=60)[1])
                if m.get("id") == seq[0]:
                    assert "error" not in m, m
                    return m["result"]

        call("Page.enable")
        call("Page.navigate", url=url)

        def desktop():
            r = call("Runtime.evaluate", expression=CANVAS_STATS)["result"].get("value")
            st = json.loads(r) if r else {}
            # Mostly background, and something else on it (the terminal).
            ok = "Connected" in st.get("status", "") and st.get("w") == 1280 and \
                st["bg"] > 0.3 * (st["bg"] + st["other"]) and st["other"] > 10000
            return st if ok else None
        wait_for(desktop, 120, interval=1, what="noVNC to show the desktop")
        png = base64.b64decode(call("Page.captureScreenshot", format="png")["data"])
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000, len(png)
        ws.close()
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(prof, ignore_errors=True)


def test_pool_and_warm_snapshot_after_a_restart():
    c = D.client("tpl-restart")
    pool_ready(c)
    office_snapshot_ready(c)
    D.get().restart()
    c = D.client("tpl-restart")
    # The pooled sandboxes come back (re-attached and adopted); the warm snapshot's paused
    # holder from before is given up and a new one is taken.
    t = pool_ready(c)
    assert t["pool"]["size"] == POOL, t
    assert office_snapshot_ready(c)["warm_snapshot"] == "ready"
    sb = c.create_sandbox(template="base", env={"K": "v"})
    assert sb.get("from_pool") is True and c.sh(sb["id"], "echo $K") == "v\n", sb
    o = c.create_sandbox(template="office")
    assert o["restored"] is True, o
    assert sorted(s["id"] for s in c.list_sandboxes()) == sorted([sb["id"], o["id"]])
    c.delete_sandbox(sb["id"])
    c.delete_sandbox(o["id"])
