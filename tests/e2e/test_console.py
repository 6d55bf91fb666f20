"""The web console at /console (docs/console.md) in Debian's headless Chromium against a
real sbxd (tests/browser/console.test.mjs): sign-in, a sandbox created, a command streamed,
the terminal, files up and down, a plot, the audit log, keys, a viewer. Each node test
case counts as one test; the screenshots are kept with the run's logs (console-shots/)."""

import os
import shutil
import tempfile

import harness

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BROWSER_DIR = os.path.join(REPO, "tests", "browser")


def suite_console(ext):
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is not installed (scripts/deps.sh installs it)"
    logdir = os.environ.get("SBX_TEST_LOG_DIR") or tempfile.mkdtemp()
    d = harness.Daemon()
    alice = None
    try:
        d.start()
        admin = d.client()
        member = admin.create_key("alice")["key"]
        alice = d.client(member)
        viewer = admin.create_key("alice", role="viewer")["key"]
        ext.tap(["node", "--test", "--test-concurrency=1", "--test-reporter=tap",
                 "console.test.mjs"],
                cwd=BROWSER_DIR,
                env={"SBX_API": "http://127.0.0.1:%d" % d.port, "SBX_ADMIN_KEY": d.admin_key,
                     "SBX_MEMBER_KEY": member, "SBX_VIEWER_KEY": viewer,
                     "SBX_SHOTS": os.path.join(logdir, "console-shots"),
                     "SBX_CHROMIUM": chromium},
                timeout=600)
    finally:
        # The browser's sandboxes are not the harness's to know: delete them here.
        for sb in (alice.list_sandboxes() if alice else []):
            alice.delete_sandbox(sb["id"])
        d.cleanup()
