"""The agent tools and MCP against the REST route they stand for, measured in the same run.

  mcp sandbox_exec   POST /mcp tools/call sandbox_exec {"shell": "true"} (JSON answer)
  rest tool          POST /v1/sandboxes/{id}/tools/sandbox_exec {"shell": "true"}
  rest exec          POST /v1/sandboxes/{id}/exec {"shell": "true"}       (the baseline)
  mcp sandbox_bash   POST /mcp tools/call sandbox_bash {"command": "true"} (walks the
                     workspace before and after, for the files it changed)
  mcp edit_file      POST /mcp tools/call edit_file on a 1000-line file (exact match)

Same daemon, same sandbox, interleaved, a new connection per request. What it shows is the
cost of the tool layer and of JSON-RPC around the same exec_start.

    python3 bench/bench_mcp.py --build build [-n 100]
"""

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import harness  # noqa: E402

RUNS = 100
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}}


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(build, n=RUNS):
    """Returns (rows, notes) like bench_core.run."""
    with harness.Daemon(build=build) as d:
        c = d.client(d.client().create_key("bench")["key"])
        sid = c.create_sandbox()["id"]
        r = c.request("POST", "/mcp", INIT)
        session = r.headers["mcp-session-id"]
        hdrs = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
        ids = iter(range(1, 1 << 30))

        def mcp(name, args):
            r = c.request("POST", "/mcp", {"jsonrpc": "2.0", "id": next(ids),
                                           "method": "tools/call",
                                           "params": {"name": name, "arguments": args}},
                          headers=hdrs)
            assert r.status == 200 and not r.body["result"]["isError"], r
            return r.body["result"]["structuredContent"]

        def rest_tool():
            assert c.ok("POST", "/v1/sandboxes/%s/tools/sandbox_exec" % sid,
                        {"shell": "true"})["result"]["exit_code"] == 0

        def rest_exec():
            assert c.exec(sid, shell="true")["exit_code"] == 0

        def mcp_exec():
            assert mcp("sandbox_exec", {"sandbox_id": sid, "shell": "true"})["exit_code"] == 0

        def mcp_bash():
            assert mcp("sandbox_bash", {"sandbox_id": sid, "command": "true"})["exit_code"] == 0

        text = "".join("line %d = %d\n" % (i, i) for i in range(1000)).encode()
        c.ok("PUT", "/v1/sandboxes/%s/files/big.py" % sid, raw=text)
        flip = [0]

        def mcp_edit():
            a, b = ("line 500 = 500", "line 500 = 0") if flip[0] % 2 == 0 else \
                ("line 500 = 0", "line 500 = 500")
            flip[0] += 1
            mcp("edit_file", {"sandbox_id": sid, "path": "big.py", "old_string": a,
                              "new_string": b})

        def rest_get():
            c.ok("GET", "/v1/sandboxes/%s/files/big.py" % sid)

        for _ in range(3):
            for f in (mcp_exec, mcp_bash, rest_tool, rest_exec, mcp_edit, rest_get):
                f()
        m, bb, t, e, ed, g = [], [], [], [], [], []
        for _ in range(n):
            m.append(_timed(mcp_exec))
            bb.append(_timed(mcp_bash))
            t.append(_timed(rest_tool))
            e.append(_timed(rest_exec))
            ed.append(_timed(mcp_edit))
            g.append(_timed(rest_get))
        c.delete_sandbox(sid)
    notes = ["mcp: %d runs each, interleaved, one daemon and sandbox" % n]
    return [("mcp tools/call sandbox_exec true", m, "rest exec true", e),
            ("mcp tools/call sandbox_bash true", bb, "rest exec true", e),
            ("rest tools/sandbox_exec true", t, "rest exec true", e),
            ("mcp edit_file (1000 lines, exact)", ed, "rest GET the file", g)], notes


def main():
    ap = argparse.ArgumentParser(description="MCP and tool-layer overhead")
    ap.add_argument("--build", default="build")
    ap.add_argument("-n", type=int, default=RUNS)
    args = ap.parse_args()
    build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
    os.environ["SBX_BUILD"] = build
    rows, notes = run(build, args.n)
    pct = lambda xs, q: sorted(xs)[min(len(xs) - 1, int(len(xs) * q / 100))]  # noqa: E731
    head = "%-36s %8s %8s   %-20s %8s %8s   %6s" % ("operation", "p50 ms", "p95 ms",
                                                   "baseline", "p50 ms", "p95 ms", "x p50")
    print(head)
    print("-" * len(head))
    for name, xs, bname, bs in rows:
        print("%-36s %8.2f %8.2f   %-20s %8.2f %8.2f   %6.2f" % (
            name, pct(xs, 50) * 1e3, pct(xs, 95) * 1e3, bname, pct(bs, 50) * 1e3,
            pct(bs, 95) * 1e3, pct(xs, 50) / pct(bs, 50)))
    for n in notes:
        print("note: " + n)


if __name__ == "__main__":
    main()
