"""Headless Chromium against a real sbxd (tests/browser/first_contact.test.mjs): CORS and
the terminal from an allowed page, the refusal of another origin, a preview link followed
from link to link. Each node test case counts as one test."""

import http.server
import os
import shutil
import threading

import harness
import testserver

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BROWSER_DIR = os.path.join(REPO, "tests", "browser")


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"<!doctype html><title>app</title><p>a browser app</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def _page_server():
    s = testserver.QuietHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s, "http://127.0.0.1:%d" % s.server_address[1]


def suite_chromium(ext):
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is not installed (scripts/deps.sh installs it)"
    good, good_origin = _page_server()
    bad, bad_origin = _page_server()
    d = harness.Daemon(extra_env={"SBX_CORS_ORIGINS": good_origin,
                                  "SBX_TERMINAL_ORIGINS": good_origin})
    try:
        d.start()
        c = d.client().create_key("browser")
        cl = d.client(c["key"])
        sid = cl.create_sandbox(ttl_seconds=600)["id"]
        cl.sh(sid, "mkdir -p /workspace/site/docs && echo 'hello from a file' > "
                   "/workspace/site/docs/note.txt")
        cl.ok("POST", "/v1/sandboxes/%s/processes" % sid,
              {"command": "cd /workspace/site && exec python3 -m http.server 8000"}, status=201)
        link = cl.ok("POST", "/v1/sandboxes/%s/preview" % sid,
                     {"port": 8000, "wait_seconds": 20})["url"]
        ext.tap(["node", "--test", "--test-reporter=tap", "first_contact.test.mjs"],
                cwd=BROWSER_DIR,
                env={"SBX_API": "http://127.0.0.1:%d" % d.port, "SBX_KEY": c["key"],
                     "SBX_SANDBOX": sid, "SBX_GOOD_ORIGIN": good_origin,
                     "SBX_BAD_ORIGIN": bad_origin, "SBX_PREVIEW_LINK": link,
                     "SBX_CHROMIUM": chromium},
                timeout=300)
    finally:
        good.shutdown()
        bad.shutdown()
        d.cleanup()
