"""The E2B-compatible surface (docs/e2b.md): the unmodified official `e2b` and
`@e2b/code-interpreter` npm packages (pinned in tests/e2b/package.json, installed by
scripts/npm-deps.sh) run against a real sbxd with only E2B_API_URL, E2B_SANDBOX_URL and
E2B_API_KEY set. The cases are in tests/e2b/sdk.test.mjs; each one counts as a test.
"""

import os
import shutil

from harness import REPO, Daemon

E2B_DIR = os.path.join(REPO, "tests", "e2b")
# Low enough that the limit test reaches it, high enough for the other cases.
PER_KEY = 3


def suite_e2b(ext):
    node = shutil.which("node")
    assert node, "node is needed for the E2B SDK tests (scripts/deps.sh installs it)"
    assert os.path.isdir(os.path.join(E2B_DIR, "node_modules", "e2b")), \
        "tests/e2b/node_modules is missing: run scripts/npm-deps.sh"
    with Daemon(extra_env={"SBX_MAX_PER_KEY": str(PER_KEY)}) as d:
        admin = d.client()
        k = admin.create_key("e2b-user")
        basic = admin.create_key("e2b-basic", tool_level="basic")
        base = "http://127.0.0.1:%d" % d.port
        ext.tap([node, "--test", "--test-reporter=tap", "--test-concurrency=1", "sdk.test.mjs"],
                cwd=E2B_DIR,
                env={
                    "E2B_API_URL": base + "/e2b/api",
                    "E2B_SANDBOX_URL": base + "/e2b/sandbox",
                    "E2B_API_KEY": k["key"],
                    # Our own API, to check that both surfaces are one system.
                    "SBX_URL": base,
                    "SBX_KEY": k["key"],
                    "SBX_ADMIN_KEY": d.admin_key,
                    "SBX_BASIC_KEY": basic["key"],
                    "SBX_PER_KEY": str(PER_KEY),
                })
