"""The web console at /console (docs/console.md) in Debian's headless Chromium against a
real sbxd (tests/browser/console.test.mjs): sign-in, a sandbox created, a command streamed
and its receipt, the terminal, files up and down, a plot, a preview link, the egress log,
configurations with a skill installed live and the probe, a template build's live log,
volumes, the audit log, usage and the wallet, keys, nodes, a viewer. Each node test case
counts as one test; the screenshots are kept with the run's logs (console-shots/)."""

import io
import os
import shutil
import tempfile
import zipfile

import harness

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BROWSER_DIR = os.path.join(REPO, "tests", "browser")

# A skill whose install script prints as it goes, so the page has progress to follow (and one
# line in two writes, read as two chunks, which the page shows as the one line it is, and a
# wait for the guidance the page sends it); it is
# uploaded as a bundle from the page (no skill index or registry: tests/e2e/test_skill_installs.py).
SKILL_MD = ("---\nname: console-demo\ndescription: A skill installed from the console's test.\n"
            "version: 1.0.0\ninstall: install.sh\nenvs:\n  - name: DEMO_TOKEN\n"
            "    description: a token\n---\n# console-demo\nSay hello.\n")
INSTALL_SH = ("echo installing $SKILL_NAME $SKILL_VERSION\n"
              "for i in 1 2 3; do echo install-step-$i; sleep 0.3; done\n"
              "printf 'one-line-'; sleep 0.5; echo 'in-two-writes'\n"
              # Waits (up to a minute) for the guidance the page sends, and shows it.
              "i=0; while ! grep -q proceed \"$SKILL_GUIDANCE_FILE\" 2>/dev/null; do\n"
              "  i=$((i+1)); [ $i -gt 600 ] && break; sleep 0.1; done\n"
              "echo guided: $(grep -o 'proceed[a-z-]*' \"$SKILL_GUIDANCE_FILE\")\n"
              "echo done > installed.marker\n")


def skill_zip(path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("console-demo/SKILL.md", SKILL_MD)
        z.writestr("console-demo/install.sh", INSTALL_SH)
    with open(path, "wb") as f:
        f.write(buf.getvalue())


def minimal_pdf(path):
    """A valid one-page PDF (catalog, pages, page, a content stream, Helvetica, an exact
    cross-reference table) with a blue box and a line of dark text, for the file browser to draw."""
    content = (b"0.14 0.34 0.78 rg 30 30 240 70 re f\n"
               b"0.1 0.1 0.1 rg BT /F1 20 Tf 40 120 Td (Drawn by pdf.js) Tj ET\n")
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 170] /Contents 4 0 R "
            b"/Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d >>\nstream\n" % len(content) + content + b"endstream",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objs, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    with open(path, "wb") as f:
        f.write(out)


def suite_console(ext):
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is not installed (scripts/deps.sh installs it)"
    logdir = os.environ.get("SBX_TEST_LOG_DIR") or tempfile.mkdtemp()
    # A template cache of its own holding base (a link to the real build), so the templates
    # the page builds land nowhere another test looks (as in test_template_build.py).
    real = os.path.realpath(os.path.join(
        os.environ.get("SBX_TEMPLATE_CACHE", "/var/cache/sbx/templates"), "base"))
    cache = tempfile.mkdtemp(prefix="console-test-", dir=os.path.dirname(os.path.dirname(real)))
    os.symlink(real, os.path.join(cache, "base"))
    # Beside it, the trees of base's and desktop's current recipes (make test built them) but
    # no desktop link: the configuration page's templates query builds desktop, a real run of
    # the operator's script that finds its recipe's tree and links it (its fast path, seconds).
    desktop = os.path.realpath(os.path.join(os.path.dirname(real), "desktop"))
    for tree in (real, desktop):
        assert os.path.exists(os.path.join(tree, "manifest.json")), tree
        os.symlink(tree, os.path.join(cache, os.path.basename(tree)))
    tmp = tempfile.mkdtemp(prefix="console-test-")
    bundle = os.path.join(tmp, "console-demo.zip")
    skill_zip(bundle)
    pdf = os.path.join(tmp, "doc.pdf")
    minimal_pdf(pdf)
    # As README says a new user starts: no SBX_ADMIN_KEY, so sbxd makes the admin key and
    # writes it to <data-dir>/admin.key (the harness reads it from there, as the user does).
    d = harness.Daemon(admin_key=None, extra_env={"SBX_TEMPLATE_CACHE": cache})
    alice = None
    try:
        d.start()
        with open(d.log_path, encoding="utf-8", errors="replace") as f:
            log = f.read()
        assert "web console at http://127.0.0.1:%d/console" % d.port in log, log[-2000:]
        admin = d.client()
        member = admin.create_key("alice")["key"]
        alice = d.client(member)
        viewer = admin.create_key("alice", role="viewer")["key"]
        ext.tap(["node", "--test", "--test-concurrency=1", "--test-reporter=tap",
                 "console.test.mjs"],
                cwd=BROWSER_DIR,
                env={"SBX_API": "http://127.0.0.1:%d" % d.port, "SBX_ADMIN_KEY": d.admin_key,
                     "SBX_MEMBER_KEY": member, "SBX_VIEWER_KEY": viewer,
                     "SBX_SKILL_BUNDLE": bundle, "SBX_PDF": pdf,
                     "SBX_SHOTS": os.path.join(logdir, "console-shots"),
                     "SBX_CHROMIUM": chromium})
    finally:
        # The browser's sandboxes are not the harness's to know: delete them here.
        for c in ([alice, d.client()] if alice else []):
            for sb in c.list_sandboxes():
                c.delete_sandbox(sb["id"])
        d.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
