"""The client SDKs (sdk/typescript, sdk/python) through a real sbxd: one daemon per suite,
every node --test / pytest case counted as one test. The SDKs' own unit-level behaviour
(retries, timeouts, dropped streams) runs against local fake servers inside those runs."""

import os
import shutil
import subprocess
import tempfile

from harness import REPO, Daemon

TS = os.path.join(REPO, "sdk", "typescript")
PY = os.path.join(REPO, "sdk", "python")


def _daemon_env(d):
    return {"SBX_URL": "http://127.0.0.1:%d" % d.port, "SBX_API_KEY": d.admin_key}


def suite_typescript(ext):
    tsc = os.path.join(TS, "node_modules", ".bin", "tsc")
    assert os.path.exists(tsc), "no %s: run scripts/npm-deps.sh" % tsc
    # The build, then the typings as a user sees them (test/typecheck.ts, never run).
    for cfg in ("tsconfig.json", "tsconfig.test.json"):
        p = subprocess.run([tsc, "-p", cfg], cwd=TS, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        assert p.returncode == 0, "tsc -p %s failed:\n%s" % (cfg, p.stdout.decode("utf-8", "replace"))
    d = Daemon()
    try:
        d.start()
        ext.tap(["node", "--test", "--test-reporter=tap", "--test-concurrency=1",
                 "test/transport.test.mjs", "test/sdk.e2e.test.mjs"],
                cwd=TS, env=_daemon_env(d))
    finally:
        d.cleanup()


def suite_python(ext):
    d = Daemon()
    xml = os.path.join(tempfile.mkdtemp(prefix="sbx-pytest-"), "junit.xml")
    try:
        d.start()
        env = _daemon_env(d)
        # The package from the checkout, not an installed copy; no cache dirs in the tree.
        env.update({"PYTHONPATH": PY, "PYTHONDONTWRITEBYTECODE": "1"})
        ext.junit(["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "--junitxml", xml, "tests"], xml, cwd=PY, env=env)
    finally:
        d.cleanup()


def test_python_sync_client_is_generated_from_the_async_one():
    p = subprocess.run(["/usr/bin/python3", os.path.join(PY, "unasync.py"), "--check"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    assert p.returncode == 0, p.stdout.decode()


def test_python_package_installs_with_pip():
    """pip builds and installs sdk/python (offline: pip, setuptools and httpx from Debian), with
    its py.typed marker, into a throw-away venv."""
    tmp = tempfile.mkdtemp(prefix="sbx-pip-")
    try:
        src = os.path.join(tmp, "src")
        shutil.copytree(PY, src, ignore=shutil.ignore_patterns("__pycache__", "tests"))
        venv = os.path.join(tmp, "venv")
        # Debian's pip, run by the venv's python, installs into the venv: no copy of pip
        # made into it (ensurepip took 9 s of the test's 20-30).
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages",
                        "--without-pip", venv], check=True, timeout=120)
        p = subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q",
                            "--no-build-isolation", "--no-deps", "--no-index", src],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        assert p.returncode == 0, p.stdout.decode("utf-8", "replace")
        p = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                            "import os, sbx; print(os.path.dirname(sbx.__file__)); "
                            "print(sbx.Sbx.__name__, sbx.AsyncSbx.__name__)"],
                           cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        out = p.stdout.decode()
        assert p.returncode == 0, out
        pkg = out.splitlines()[0]
        assert pkg.startswith(venv), out
        assert os.path.exists(os.path.join(pkg, "py.typed"))
        assert out.splitlines()[1] == "Sbx AsyncSbx"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
