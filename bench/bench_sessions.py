"""Shell sessions: what keeping shell state costs per command, measured in the same run.

  warm session   POST /v1/sandboxes/{id}/exec `true` in the default session, which already
                 exists: the command runs in the session's resident bash, which reports its
                 cwd, exports and the rest of its state after it (docs/sessions.md)
  one-off exec   the same request in a sandbox created with enable_default_session: false
                 (a fresh bash with no state to restore or save)

Both sandboxes come from the same daemon and template and are measured interleaved, so the
ratio is the session machinery's own cost. A third row does the same with a session that
carries 100 exported variables, to show the cost grows with the state.
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import harness  # noqa: E402


def _timed(c, sid, **fields):
    t0 = time.perf_counter()
    r = c.exec(sid, **fields)
    dt = time.perf_counter() - t0
    assert r["exit_code"] == 0, r
    return dt


def run(build, n=50):
    """Returns (rows, notes) like bench_core.run."""
    with harness.Daemon(build=build) as d:
        c = d.client()
        warm = c.create_sandbox()["id"]
        plain = c.create_sandbox(enable_default_session=False)["id"]
        exports = " ".join("export BENCH_VAR_%d=value_%d;" % (i, i) for i in range(100))
        c.exec(warm, shell=exports, session_id="heavy")
        for sid in (warm, plain):  # first commands pay for page-ins
            for _ in range(3):
                _timed(c, sid, shell="true")
        w, p, h = [], [], []
        for _ in range(n):
            w.append(_timed(c, warm, shell="true"))
            p.append(_timed(c, plain, shell="true"))
            h.append(_timed(c, warm, shell="true", session_id="heavy"))
        for sid in (warm, plain):
            c.delete_sandbox(sid)
    rows = [
        ("exec `true` in a warm session", w, "one-off exec", p),
        ("... session with 100 exports", h, "one-off exec", p),
    ]
    notes = ["sessions: a session command runs in the session's resident bash while that stays"
             " clean; the one-off exec (a fresh bash) runs in a sandbox with"
             " enable_default_session: false"]
    return rows, notes
