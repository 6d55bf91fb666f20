"""docs/openapi.yaml: it describes exactly the routes sbxd serves, it is the merge of the
fragments docs/openapi/*.yaml, sbxd serves it at GET /openapi.json, and a real OpenAPI
validator (@redocly/cli, pinned in tests/openapi/) accepts it.

The YAML side needs Debian's python3-yaml, so it goes through /usr/bin/python3
scripts/openapi.py (the tests themselves run under whatever python3 is)."""

import json
import os
import re
import subprocess
import tempfile

from harness import REPO, Daemon, build_dir

PY = "/usr/bin/python3"
SCRIPT = os.path.join(REPO, "scripts", "openapi.py")
DOC = os.path.join(REPO, "docs", "openapi.yaml")
REDOCLY = os.path.join(REPO, "tests", "openapi", "node_modules", ".bin", "redocly")


def _run(argv, **kw):
    p = subprocess.run(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=kw.pop("timeout", 120), **kw)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def _shape(pattern):
    """A route's shape: every parameter segment ({}, {*}, {id}) becomes {}."""
    return re.sub(r"\{[^}]*\}", "{}", pattern)


def test_every_route_is_described_and_nothing_else():
    rc, routes = _run([os.path.join(build_dir(), "sbxd"), "--routes"])
    assert rc == 0, routes
    rc, ops = _run([PY, SCRIPT, "--operations"])
    assert rc == 0, ops
    served = {(m, _shape(p)): p for m, p in (l.split(" ", 1) for l in routes.splitlines())}
    described = {(m, _shape(p)): p for m, p in (l.split(" ", 1) for l in ops.splitlines())}
    assert len(served) > 40, routes
    missing = sorted("%s %s" % (m, served[(m, s)]) for m, s in set(served) - set(described))
    extra = sorted("%s %s" % (m, described[(m, s)]) for m, s in set(described) - set(served))
    msg = []
    if missing:
        msg.append("served by sbxd but not in docs/openapi.yaml (describe them in your "
                   "feature's fragment docs/openapi/<feature>.yaml, then run "
                   "/usr/bin/python3 scripts/openapi.py): " + ", ".join(missing))
    if extra:
        msg.append("in docs/openapi.yaml but not served by sbxd (remove them from their "
                   "fragment in docs/openapi/): " + ", ".join(extra))
    assert not msg, "; ".join(msg)


def test_document_is_the_merge_of_the_fragments():
    rc, out = _run([PY, SCRIPT, "--check"])
    assert rc == 0, out


def test_merge_refuses_the_same_operation_twice():
    with tempfile.TemporaryDirectory() as d:
        a, b = os.path.join(d, "a.yaml"), os.path.join(d, "b.yaml")
        op = "paths:\n  /x:\n    get:\n      responses: {'200': {description: ok}}\n"
        for p in (a, b):
            with open(p, "w") as f:
                f.write(op)
        code = ("import sys; sys.path.insert(0, %r); import openapi\n"
                "try:\n    openapi.merge([%r, %r])\nexcept openapi.MergeError as e:\n"
                "    print(e); sys.exit(3)\n" % (os.path.dirname(SCRIPT), a, b))
        rc, out = _run([PY, "-c", code])
        assert rc == 3, out
        assert "GET /x is in both" in out and "a.yaml" in out and "b.yaml" in out, out


def test_served_document_is_the_committed_one():
    rc, want = _run([PY, SCRIPT, "--json", DOC])
    assert rc == 0, want
    d = Daemon()
    try:
        d.start()
        r = d.client(None).request("GET", "/openapi.json", key=None)
        assert r.status == 200, r
        assert r.headers.get("content-type", "").startswith("application/json"), r.headers
        assert r.body == json.loads(want)
        assert r.body["openapi"] == "3.1.0"
    finally:
        d.cleanup()


def test_redocly_lint_accepts_the_document():
    assert os.path.exists(REDOCLY), "no %s: run scripts/npm-deps.sh" % REDOCLY
    rc, out = _run([REDOCLY, "lint", "--config", "tests/openapi/redocly.yaml", DOC],
                   timeout=200)
    assert rc == 0, out[-4000:]
    assert "valid" in out, out[-4000:]
