#!/usr/bin/env python3
"""The single test entry point (`make test` runs it after building DIR with ASan+UBSan).

    python3 tests/run.py --build build-asan [-k substring]... [--pg]
                         [--pg-again substring]... [--sqlite-again substring]...
                         [--beside "substring ..."]... [--alone substring]... [--within substring]...

(-k may repeat: a test runs when its name contains any of them. --pg: every daemon's store is
a database on a PostgreSQL the run starts with scripts/pg.sh, docs/scale-out.md. --pg-again /
--sqlite-again: then the tests matching these run once more on that store, in a run of their
own, counted in the same summary line. --beside: the tests matching these substrings (one
argument, separated by spaces) run in a run of their own at the same time as the rest, on the
same store; each --beside is one more such run, and the last one is followed by the
--sqlite-again pass; most tests wait on sandboxes, timers and sockets, and one run alone used
half a core of two.
--alone: these run last, after the runs beside have ended, for the tests that keep both cores
busy (fork bombs, template builds, LibreOffice, fuzzing) or that time a heartbeat.
--within: only tests that also match one of these run (how the run beside gets both -k and
its share).)

1. every unit test binary DIR/tests/test_* (each ends with a line `N passed, N failed,
   N skipped`): one test each, its checks counted on its PASS line;
2. every Python module tests/e2e/test_*.py and tests/security/test_*.py: each top-level
   function test_* in file order, then each suite_*(ext) (a suite run by another test
   runner, node --test or pytest, whose every case counts as one test: see External),
   then the module's teardown_module() if it has one;
3. crashes: after each test (and suite, and teardown), a sanitizer report that appeared
   meanwhile (every sanitized process writes them to SBX_TEST_LOG_DIR/sanitizer.<exe>.<pid>,
   abort() and assert() included), a new one in a daemon's log, or a daemon that died or
   exited badly (harness.CRASHES) fails that test, named with the process and its stack.
   Reports found only at the end (a detached shim's, after its test) are one failure named
   `sanitizers`; none is not a pass.

4. routes: every daemon of the run (the runs beside and after included) appends each
   routed request's "METHOD PATTERN" to one file (SBX_TEST_ROUTE_LOG); a whole run (no -k)
   ends with one more test, `routes`, failing on a route of `sbxd --routes` that no test
   requested.

A test that raises harness.Skip(why) (a pytest skip, a TAP `# SKIP`, a unit's SKIP line)
is a skip, listed with its reason. The run fails on a skip that EXPECTED_SKIPS below does
not name.

Ends with exactly one line `N passed, N failed, N skipped`; exits 1 on any failure or
unexpected skip.
"""

import argparse
import glob
import importlib.util
import inspect
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAN_PATTERNS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")
LSAN_CUT = re.compile(r"^==[^=\n]+==\d+==Unable to get registers from thread \d+\.\s*$", re.M)
UNIT_TIMEOUT = 120       # seconds per unit test binary
TEST_TIMEOUT = 240       # seconds per Python test function
SUITE_TIMEOUT = 900      # seconds per suite_* function (a whole node --test or pytest run)
RESULT_RE = re.compile(r"^\s*(\d+) passed, (\d+) failed(?:, (\d+) skipped)?\s*$")
SKIP_LINE = re.compile(r"^skipped( \(not expected\))?: (\S+): (.*)$")

# The skips this machine expects, each a substring of the test's name and the reason it
# cannot run here. Empty: everything the suite needs is installed (`make deps`). A skip
# not named here fails the run (docs/architecture.md, Tests).
EXPECTED_SKIPS = {}


class TestTimeout(AssertionError):
    pass


class Runner:
    def __init__(self, build, keyword):
        self.build = build
        self.keyword = keyword
        self.passed = 0
        self.failed = 0
        self.failures = []
        self.skips = []           # (name, reason, expected)
        self.log_offsets = {}     # sanitizer and daemon logs -> bytes already scanned
        self.recap = []           # (name, message): repeated at the end, where a CI tail shows it
        self.san_reports = []     # (source, excerpt)
        self.module_secs = []     # (seconds, module): the slowest are named at the end
        self.exclude = []         # substrings of tests left to another phase or run
        self.within = None        # substrings of which a test must also match one (a phase's)
        self.harness = None       # tests/e2e/harness.py, once imported

    def ok(self, name, secs):
        self.passed += 1
        print("PASS %s (%.1fs)" % (name, secs), flush=True)

    def fail(self, name, msg, detail=""):
        self.failed += 1
        self.failures.append(name)
        self.recap.append((name, msg))
        print("FAIL %s: %s" % (name, msg), flush=True)
        if detail:
            _print_detail(detail)

    def skip(self, name, reason, expected=None):
        if expected is None:
            expected = any(k in name for k in EXPECTED_SKIPS)
        self.skips.append((name, reason, expected))
        print("SKIP %s: %s%s" % (name, reason, "" if expected else " (not expected)"),
              flush=True)

    def selected(self, name):
        return ((self.keyword is None or any(k in name for k in self.keyword)) and
                (self.within is None or any(w in name for w in self.within)) and
                not any(x in name for x in self.exclude))

    # --- sanitizers ----------------------------------------------------------------------

    @staticmethod
    def sanitizer_excerpt(text):
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if any(p in line for p in SAN_PATTERNS):
                return "\n".join(lines[max(0, i - 2):i + 30])
        return None

    def scan_sanitizers(self, source, text):
        excerpt = self.sanitizer_excerpt(text)
        if excerpt is not None:
            self.san_reports.append((source, excerpt))

    def new_crashes(self, harness):
        """(source, excerpt) of every crash since the last call: sanitizer files that
        appeared, new sanitizer lines in daemon logs, daemons dead or badly exited."""
        found = []
        logdir = os.environ.get("SBX_TEST_LOG_DIR")
        for p in sorted(glob.glob(os.path.join(logdir, "sanitizer*")) if logdir else []):
            _settle(p)
            text = self._unread(p, p)
            # LeakSanitizer's tracer saying it could not stop a thread, and nothing else: the
            # leak check at exit was cut short because the process was killed while it ran
            # (a shim SIGKILLed by a clean-up as it exited). No check ran, nothing crashed.
            if not LSAN_CUT.sub("", text).strip():
                if text.strip():
                    print("note: %s: the leak check at exit was cut short (%s)"
                          % (os.path.basename(p), text.strip().splitlines()[0]), flush=True)
                continue
            found.append((os.path.basename(p), self.sanitizer_excerpt(text) or text[-3000:]))
        if harness is None:
            return found
        harness.reap_dead()
        for p in list(harness.DAEMON_LOGS):
            ex = self.sanitizer_excerpt(self._unread(p, _log_key(p)))
            if ex is not None:
                found.append((p, ex))
        while harness.CRASHES:
            what, why, tail = harness.CRASHES.pop(0)
            found.append((what, "%s; log tail:\n%s" % (why, tail)))
        return found

    def _unread(self, path, key):
        """What path holds past what was read of it before (key: the same log under the
        name it has after the harness copied it)."""
        try:
            with open(path, "rb") as fh:
                fh.seek(self.log_offsets.get(key, 0))
                text = fh.read()
                self.log_offsets[key] = fh.tell()
        except OSError:
            return ""
        return text.decode("utf-8", "replace")

    def check_crashes(self, name, passed, harness):
        """Fails name for a crash during it; returns whether it still passes."""
        found = self.new_crashes(harness)
        if not found:
            return passed
        detail = "\n\n".join("--- %s\n%s" % (src, ex) for src, ex in found)
        msg = "crash during the test: " + ", ".join(src for src, _ in found)
        if passed:
            self.fail(name, msg, detail)
        else:  # already one failure: say why too, without counting it twice
            self.recap.append((name, msg))
            print("FAIL %s (as well): %s" % (name, msg), flush=True)
            _print_detail(detail)
        return False

    # --- unit tests ----------------------------------------------------------------------

    def run_units(self):
        bins = sorted(p for p in glob.glob(os.path.join(self.build, "tests", "test_*"))
                      if os.access(p, os.X_OK) and not p.endswith(".d") and os.path.isfile(p))
        for b in bins:
            name = "unit." + os.path.basename(b)
            if not self.selected(name):
                continue
            t0 = time.time()
            try:
                p = subprocess.run([b], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, timeout=UNIT_TIMEOUT, cwd=REPO)
                out = p.stdout.decode("utf-8", "replace")
                rc = p.returncode
            except subprocess.TimeoutExpired as e:
                out = (e.stdout or b"").decode("utf-8", "replace")
                self.fail(name, "timed out after %ds" % UNIT_TIMEOUT, out[-4000:])
                continue
            # Its reports go to SBX_TEST_LOG_DIR (check_crashes below) unless the
            # environment sends them to stderr.
            self.scan_sanitizers(name, out)
            secs = time.time() - t0
            result = None
            skips = []
            for line in out.splitlines():
                m = RESULT_RE.match(line)
                if m:
                    result = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
                elif line.startswith("SKIP "):
                    skips.append(line[5:].strip())
            if result is None:
                self.fail(name, "exit %d without a `N passed, N failed` line" % rc, out[-4000:])
                continue
            np, nf, ns = result
            # One result per binary; its checks are counted on its line.
            if rc != 0 and nf == 0:
                # All its checks passed but it exited badly (a leak report, a crash at exit).
                self.fail(name, "%d checks passed but exit status %d" % (np, rc), out[-4000:])
            elif nf:
                self.fail(name, "%d of %d checks failed" % (nf, np + nf), out[-4000:])
            elif np == 0:
                self.fail(name, "no check ran", out[-4000:])
            elif self.check_crashes(name, True, None):
                self.passed += 1
                print("PASS %s: %d checks passed (%.1fs)" % (name, np, secs), flush=True)
            if ns != len(skips):
                skips += ["(a skip without its SKIP line)"] * (ns - len(skips))
            for why in skips:
                self.skip(name, why)

    # --- python modules ------------------------------------------------------------------

    def run_modules(self):
        paths = sorted(glob.glob(os.path.join(REPO, "tests", "e2e", "test_*.py")))
        paths += sorted(glob.glob(os.path.join(REPO, "tests", "security", "test_*.py")))
        for path in paths:
            t0 = time.time()
            self.run_module(path)
            self.module_secs.append((time.time() - t0, os.path.basename(path)[:-3]))

    def run_module(self, path):
        modname = os.path.splitext(os.path.basename(path))[0]
        # Decide from the file's text which tests are selected, so a filtered-out module
        # is not even imported.
        src = open(path).read()
        names = re.findall(r"^def ((?:test|suite)_\w+)\s*\(", src, re.M)
        wanted = [n for n in names if self.selected("%s.%s" % (modname, n))]
        if not wanted:
            return
        try:
            spec = importlib.util.spec_from_file_location(modname, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[modname] = mod
            spec.loader.exec_module(mod)
        except Exception as e:
            self.fail(modname, "import failed: %s" % e, traceback.format_exc())
            return
        funcs = [(n, f) for n, f in vars(mod).items()
                 if n.startswith(("test_", "suite_")) and inspect.isfunction(f)
                 and f.__module__ == modname and n in wanted]
        funcs.sort(key=lambda nf: (nf[0].startswith("suite_"), nf[1].__code__.co_firstlineno))
        try:
            for n, f in funcs:
                if n.startswith("suite_"):
                    self.run_suite("%s.%s" % (modname, n), f)
                else:
                    self.run_test("%s.%s" % (modname, n), f)
        finally:
            td = getattr(mod, "teardown_module", None)
            if td is not None:
                try:
                    with _deadline(120):
                        td()
                except Exception as e:
                    self.fail(modname + ".teardown_module", str(e) or type(e).__name__,
                              traceback.format_exc())
                else:
                    self.check_crashes(modname + ".teardown_module", True, self.harness)

    def _call(self, name, secs, f, *args):
        """f(*args) under a deadline; an exception is one failure named name (False), a
        harness.Skip one skip (None)."""
        try:
            with _deadline(secs):
                f(*args)
        except Exception as e:
            if type(e).__name__ == "Skip":  # harness.Skip, however the module imported it
                self.skip(name, str(e) or "no reason given")
                return None
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            if not isinstance(e, AssertionError):
                msg = "%s: %s" % (type(e).__name__, msg)
            self.fail(name, msg, traceback.format_exc())
            return False
        return True

    def run_test(self, name, f):
        t0 = time.time()
        r = self._call(name, TEST_TIMEOUT, f)
        if self.check_crashes(name, r is not False, self.harness) and r:
            self.ok(name, time.time() - t0)

    def run_suite(self, name, f):
        """A suite function gets an External and drives another test runner with it; every
        case that runner reports is one PASS, FAIL or SKIP here. A suite that raises before
        its runner reported anything is one failure under its own name."""
        ext = External(self, name)
        t0 = time.time()
        r = self._call(name, SUITE_TIMEOUT, f, ext)
        if r and ext.cases == 0:
            self.fail(name, "the suite reported no test case (%.1fs)" % (time.time() - t0))
        self.check_crashes(name, True, self.harness)

    # --- daemon logs -----------------------------------------------------------------------

    def check_daemon_logs(self, harness):
        """What no test was failed for yet: reports written after their test ended (a
        detached shim's), daemons that died between modules."""
        for src, ex in self.new_crashes(harness):
            self.san_reports.append((src, ex))



class External:
    """What a suite_* function uses to run another test runner against the daemon it
    started. Each case becomes one result named <suite>.<case>.

        ext.tap(argv, cwd=..., env=...)      node --test --test-reporter=tap ...
        ext.junit(argv, xml, cwd=..., env=...)  pytest ... --junitxml=xml
    """

    TAP_LINE = re.compile(r"^(\s*)(not )?ok \d+ - (.*?)(\s+#\s*(SKIP|TODO)\b(.*))?$")

    def __init__(self, runner, name):
        self.runner = runner
        self.name = name
        self.cases = 0
        self.skipped = 0

    def _skip(self, case, reason):
        self.cases += 1
        self.skipped += 1
        self.runner.skip("%s.%s" % (self.name, re.sub(r"\s+", "_", case.strip())),
                         reason.strip() or "no reason given")

    def _run(self, argv, cwd, env, timeout):
        e = dict(os.environ)
        e.update(env or {})
        try:
            p = subprocess.run(argv, cwd=cwd or REPO, env=e, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=timeout)
            return p.returncode, p.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as te:
            out = (te.stdout or b"").decode("utf-8", "replace")
            return None, out

    def _case(self, case, ok, detail="", secs=0.0):
        self.cases += 1
        full = "%s.%s" % (self.name, re.sub(r"\s+", "_", case.strip()))
        if ok:
            self.runner.ok(full, secs)
        else:
            self.runner.fail(full, "failed", detail)

    TAP_DURATION = re.compile(r"^\s*duration_ms:\s*([\d.]+)\s*$")

    def _tap_secs(self, lines, i):
        """The duration_ms of the YAML block that follows a result line (node --test writes
        one for each case), in seconds; 0 without one."""
        for line in lines[i + 1:i + 8]:
            m = self.TAP_DURATION.match(line)
            if m:
                return float(m.group(1)) / 1000
            if self.TAP_LINE.match(line):
                break
        return 0.0

    def tap(self, argv, cwd=None, env=None, timeout=SUITE_TIMEOUT - 60):
        """Leaf cases of node's TAP output (a describe() block reports its children)."""
        rc, out = self._run(argv, cwd, env, timeout)
        lines = out.splitlines()
        entries = []  # (indent, ok, name, index)
        for i, line in enumerate(lines):
            m = self.TAP_LINE.match(line)
            if m:
                # A TODO case is not a result; a SKIP one is a skip, with its reason.
                if m.group(5) == "TODO":
                    continue
                skip = m.group(6) if m.group(5) == "SKIP" else None
                entries.append((len(m.group(1)), m.group(2) is None, m.group(3), i, skip))
        before = self.cases
        for j, (ind, ok, case, i, skip) in enumerate(entries):
            # A parent's line comes after its children's, which are indented deeper.
            k = j - 1
            parent = k >= 0 and entries[k][0] > ind
            if parent:
                continue
            if skip is not None:
                self._skip(case, skip)
                continue
            start = entries[j - 1][3] + 1 if j else 0
            self._case(case, ok, "\n".join(lines[start:i + 30]) if not ok else "",
                       self._tap_secs(lines, i))
        if rc is None:
            self.runner.fail(self.name, "timed out", out[-4000:])
        elif rc != 0 and not any(not e[1] for e in entries):
            self.runner.fail(self.name, "exit status %d with no failed case" % rc, out[-4000:])
        if self.cases == before and out:
            self.runner.fail(self.name, "no TAP results", out[-4000:])

    def junit(self, argv, xml, cwd=None, env=None, timeout=SUITE_TIMEOUT - 60):
        """Cases of a JUnit XML report (pytest --junitxml=xml)."""
        import xml.etree.ElementTree as ET
        rc, out = self._run(argv, cwd, env, timeout)
        try:
            root = ET.parse(xml).getroot()
        except (OSError, ET.ParseError) as e:
            self.runner.fail(self.name, "no JUnit report (%s), exit %s" % (e, rc), out[-4000:])
            return
        bad = False
        for tc in root.iter("testcase"):
            case = "%s.%s" % (tc.get("classname", "").split(".")[-1], tc.get("name", ""))
            sk = tc.find("skipped")
            if sk is not None:
                self._skip(case, sk.get("message", "") or (sk.text or ""))
                continue
            err = tc.find("failure")
            if err is None:
                err = tc.find("error")
            bad = bad or err is not None
            self._case(case, err is None,
                       "" if err is None else (err.get("message", "") + "\n" + (err.text or "")),
                       float(tc.get("time") or 0))
        if rc is None:
            self.runner.fail(self.name, "timed out", out[-4000:])
        elif rc not in (0, 1) or (rc == 1 and not bad):
            self.runner.fail(self.name, "exit status %d" % rc, out[-4000:])

def _log_key(path):
    """A daemon log's name both where it is written (<tmp>/sbxd.log) and where the harness
    keeps it (SBX_TEST_LOG_DIR/sbxd-<tmp>.log)."""
    b = os.path.basename(path)
    if b == "sbxd.log":
        return os.path.basename(os.path.dirname(path))
    if b.startswith("sbxd-") and b.endswith(".log"):
        return b[5:-4]
    return path


def _settle(path, secs=3.0):
    """A sanitizer file whose process (the last dot-part of its name is the pid) is still
    running may be half written: wait until it stops growing, or the process ends."""
    pid = path.rsplit(".", 1)[-1]
    if not pid.isdigit():
        return
    end = time.time() + secs
    size = -1
    while time.time() < end and os.path.exists("/proc/" + pid):
        try:
            now = os.path.getsize(path)
        except OSError:
            return
        if now == size:
            return
        size = now
        time.sleep(0.2)


def _print_detail(text):
    # Indented, so that no line of a test's output looks like the final summary line.
    for line in text.rstrip().splitlines():
        print("    | " + line)
    sys.stdout.flush()


class _deadline:
    """SIGALRM-based limit for one test (tests run in the main thread)."""

    def __init__(self, secs):
        self.secs = secs

    def _fire(self, *_):
        raise TestTimeout("test exceeded %ds" % self.secs)

    def __enter__(self):
        self.old = signal.signal(signal.SIGALRM, self._fire)
        signal.alarm(self.secs)

    def __exit__(self, *exc):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.old)
        return False


class Child:
    """Another run of this script (its modules start afresh), on its own store settings; its
    output lines go to show (as they come), its summary is kept to fold into ours."""

    def __init__(self, label, tag):
        self.label = label
        self.tag = tag
        self.passed = self.failed = 0
        self.failures = []
        self.skips = []
        self.counted = False
        self.rc = 0

    def run(self, build, keywords, env, show, pg=False, within=()):
        cmd = [sys.executable, os.path.abspath(__file__), "--build", build] + (["--pg"] if pg else [])
        for k in keywords:
            cmd += ["-k", k]
        for w in within:
            cmd += ["--within", w]
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, env=env)
        for line in child.stdout:
            m = RESULT_RE.match(line)
            sk = SKIP_LINE.match(line)
            if m:
                self.passed += int(m.group(1))
                self.failed += int(m.group(2))
                self.counted = True
            elif sk:
                self.skips.append(("%s:%s" % (self.tag, sk.group(2)), sk.group(3),
                                   sk.group(1) is None))
            elif line.startswith("failed: "):
                self.failures += ["%s:%s" % (self.tag, n.strip())
                                  for n in line[len("failed: "):].split(",")]
            else:
                show(line)
        self.rc = child.wait()

    def fold(self, r):
        r.passed += self.passed
        r.failed += self.failed
        r.failures += self.failures
        r.skips += self.skips
        if self.rc != 0 and not self.counted:
            r.fail("%s-run" % self.tag,
                   "the %s run exited %d without a summary" % (self.label, self.rc))


def _env(pg):
    env = dict(os.environ)
    if not pg:
        env.pop("SBX_TEST_PG", None)
    return env


def again(build, keywords, r, pg):
    """A second pass on the other store, after ours: its lines shown as they come."""
    label = "PostgreSQL" if pg else "SQLite"
    print("--- once more on %s: %s" % (label, " ".join(keywords)), flush=True)
    c = Child(label, "pg" if pg else "sqlite")
    # On PostgreSQL, a server of its own: ours has stopped by now.
    c.run(build, keywords, _env(False), lambda line: print(line, end="", flush=True), pg=pg)
    c.fold(r)


class Beside(threading.Thread):
    """One --beside group's tests on our store (then the --sqlite-again pass, if given), in a
    thread of their own while ours run; the lines are kept and shown when it ends, so no
    run's output is cut into another's."""

    def __init__(self, build, beside, sqlite_again, on_pg, keyword):
        super().__init__(daemon=True)
        self.build = build
        self.beside = beside
        self.keyword = keyword
        self.sqlite_again = sqlite_again
        self.on_pg = on_pg
        self.lines = []
        self.children = []
        self.t0 = time.time()
        self.secs = 0.0

    def run(self):
        c = Child("beside", "beside")
        self.children.append(c)
        self.lines.append("--- beside, on the same store: %s\n" % " ".join(self.beside))
        if self.keyword:  # -k given: those, among the suites beside
            c.run(self.build, self.keyword, _env(self.on_pg), self.lines.append,
                  within=self.beside)
        else:
            c.run(self.build, self.beside, _env(self.on_pg), self.lines.append)
        if self.sqlite_again:
            c = Child("SQLite", "sqlite")
            self.children.append(c)
            self.lines.append("--- once more on SQLite: %s\n" % " ".join(self.sqlite_again))
            c.run(self.build, self.sqlite_again, _env(False), self.lines.append)
        self.secs = time.time() - self.t0

    def finish(self, r):
        self.join()
        for line in self.lines:
            print(line, end="", flush=True)
        print("--- beside: took %.0fs" % self.secs, flush=True)
        for c in self.children:
            c.fold(r)


def check_routes(r, build, log):
    """The test `routes`: each route of the router's list requested by some test."""
    import harness
    try:
        with open(log) as f:
            requested = {line.strip() for line in f}
    except FileNotFoundError:
        requested = set()
    listed = ["%s %s" % mp for mp in harness.router_routes(build)]
    missing = [x for x in listed if x not in requested]
    if missing:
        r.fail("routes", "%d of %d routes no test requested: %s"
               % (len(missing), len(listed), ", ".join(missing)))
    else:
        r.ok("routes", 0.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--build", default="build-asan", help="build dir (default build-asan)")
    ap.add_argument("-k", dest="keyword", default=None, action="append",
                    help="run only tests whose name contains this substring (repeatable)")
    ap.add_argument("--pg", action="store_true",
                    help="run the daemons on a PostgreSQL store started for the run")
    ap.add_argument("--pg-again", dest="pg_again", default=None, action="append",
                    help="then run the tests matching this substring (repeatable) once more on "
                         "PostgreSQL; one summary line counts both runs")
    ap.add_argument("--sqlite-again", dest="sqlite_again", default=None, action="append",
                    help="the same, once more on SQLite (after a --pg run)")
    ap.add_argument("--beside", default=None, action="append",
                    help="run the tests matching these space-separated substrings in a run of "
                         "their own at the same time, on the same store (repeatable: one run "
                         "each); --sqlite-again then runs after the last one")
    ap.add_argument("--alone", default=None, action="append",
                    help="run the tests matching this (repeatable) last, once the runs beside "
                         "have ended")
    ap.add_argument("--within", default=None, action="append",
                    help="run only tests that also match this (repeatable)")
    ap.add_argument("--keep-logs", action="store_true", help="keep the daemon logs dir")
    args = ap.parse_args()

    build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
    os.environ["SBX_BUILD"] = build
    logdir = tempfile.mkdtemp(prefix="sbx-test-logs-")
    os.environ["SBX_TEST_LOG_DIR"] = logdir
    sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
    import harness  # noqa: E402  (after sys.path is set)
    # Every sanitized process of the run (sbxd, its detached sbx-shims, the unit tests)
    # writes its reports to <logdir>/sanitizer.<exe>.<pid>, whatever its stderr is
    # redirected to; a run beside or after (another run of this script) to its own logdir,
    # so each run fails its own tests. The daemon's stderr log is scanned as well.
    harness.sanitizer_env(os.environ)
    san_log = os.path.join(logdir, "sanitizer")
    for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        opts = [o for o in os.environ[var].split(":")
                if o and not o.startswith(("log_path=", "log_exe_name="))]
        os.environ[var] = ":".join(opts + ["log_exe_name=1", "log_path=" + san_log])
    os.environ.setdefault("SBX_TEMPLATE_CACHE", "/var/cache/sbx/templates")
    # One file for the whole run: the runs beside and after inherit it.
    own_route_log = "SBX_TEST_ROUTE_LOG" not in os.environ
    if own_route_log:
        os.environ["SBX_TEST_ROUTE_LOG"] = os.path.join(logdir, "routes.log")

    r = Runner(build, args.keyword)
    r.harness = harness
    r.within = args.within
    t0 = time.time()
    pg_dir = None
    try:
        if args.pg:
            pg_dir = tempfile.mkdtemp(prefix="sbx-test-pg-")
            subprocess.run([os.path.join(REPO, "scripts", "pg.sh"), "start", pg_dir],
                           check=True, stdout=subprocess.DEVNULL, timeout=120)
            os.environ["SBX_TEST_PG"] = pg_dir
            print("store: PostgreSQL (%s)" % pg_dir, flush=True)
        groups = [g.split() for g in args.beside or []]
        besides = [Beside(build, g, args.sqlite_again if i == len(groups) - 1 else None,
                          args.pg, args.keyword) for i, g in enumerate(groups)]
        for b in besides:
            b.start()
            r.exclude += b.beside
        r.exclude += args.alone or []
        r.run_units()
        r.run_modules()
        if besides:
            print("--- this run's own suites took %.0fs; the runs beside:" % (time.time() - t0),
                  flush=True)
        for b in besides:
            b.finish(r)
        if args.alone:
            r.exclude = []
            r.within = args.alone
            r.run_modules()
    except KeyboardInterrupt:
        r.fail("interrupted", "KeyboardInterrupt")
    finally:
        if pg_dir:
            os.environ.pop("SBX_TEST_PG", None)  # a second pass on SQLite must not inherit it
            subprocess.run([os.path.join(REPO, "scripts", "pg.sh"), "stop", pg_dir],
                           stdout=subprocess.DEVNULL, timeout=120)
            shutil.rmtree(pg_dir, ignore_errors=True)
    r.check_daemon_logs(harness)
    if r.san_reports:
        shown = r.san_reports[:4]
        detail = "\n\n".join("--- %s\n%s" % (src, ex) for src, ex in shown)
        if len(r.san_reports) > len(shown):
            detail += "\n\n(and reports in %s)" % ", ".join(
                src for src, _ in r.san_reports[len(shown):])
        r.fail("sanitizers", "%d report(s) or crash(es) no test was failed for"
               % len(r.san_reports), detail)
    else:
        # Not a test of its own: a clean end adds nothing to the count.
        print("sanitizers: no report or crash left over after the tests", flush=True)

    if args.pg_again:
        again(build, args.pg_again, r, True)
    if args.sqlite_again and not args.beside:
        again(build, args.sqlite_again, r, False)
    if own_route_log and args.keyword is None and args.within is None:
        check_routes(r, build, os.environ["SBX_TEST_ROUTE_LOG"])
    elif own_route_log:
        print("routes: not checked (a run of some tests only)", flush=True)
    if r.failed or args.keep_logs:
        print("daemon logs kept in %s" % logdir)
    else:
        shutil.rmtree(logdir, ignore_errors=True)
    if r.recap:
        print("--- why, in short (the FAIL lines above have the whole story):")
        for name, msg in r.recap:
            print("  %s: %s" % (name, msg.replace("\n", " ")[:600]))
    if r.failures:
        print("failed: " + ", ".join(r.failures))
    unexpected = [s for s in r.skips if not s[2]]
    for name, why, expected in r.skips:
        # One line each, in a shape a parent run reads back (Child.run).
        print("skipped%s: %s: %s" % ("" if expected else " (not expected)", name,
                                     why.replace("\n", " ")[:300]))
    slow = sorted((t, m) for t, m in r.module_secs if t >= 1)[::-1][:8]
    if slow:
        print("slowest modules: " + ", ".join("%s %.0fs" % (m, t) for t, m in slow))
    print("took %.0fs" % (time.time() - t0))
    if unexpected:
        print("%d skip(s) not in EXPECTED_SKIPS (tests/run.py): the run fails" % len(unexpected))
    print("%d passed, %d failed, %d skipped" % (r.passed, r.failed, len(r.skips)))
    sys.exit(1 if r.failed or unexpected else 0)


if __name__ == "__main__":
    main()
