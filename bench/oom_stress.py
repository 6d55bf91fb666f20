"""Memory hogs back to back in one small sandbox (docs/runtime.md, "Memory"): for each,
whether the agent's watcher killed it (oom_killed), the host cgroup's peak use, and the
sandbox's status after. Not part of make test.

    SBX_TEMPLATE_CACHE=/var/cache/sbx/templates python3 bench/oom_stress.py [-n 16] [--mb 256]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import harness  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=16)
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--build", default="build")
    a = ap.parse_args()
    d = harness.Daemon(build=os.path.abspath(a.build))
    d.start()
    try:
        c = d.client()
        sid = c.create_sandbox(limits={"memory_mb": a.mb})["id"]
        cg = "/sys/fs/cgroup/memory/sbx/" + sid
        print("host cgroup limit %d MiB" % (int(open(cg + "/memory.limit_in_bytes").read()) >> 20))
        killed = 0
        for i in range(a.n):
            chunk = (1, 16, 64, 128)[i % 4]
            code = "x = []\nwhile True:\n    x.append(bytearray(%d << 20))\n" % chunk
            r = c.request("POST", "/v1/sandboxes/%s/exec" % sid, timeout=120,
                          body={"language": "python", "code": code, "timeout_seconds": 60})
            try:
                peak = int(open(cg + "/memory.max_usage_in_bytes").read()) >> 20
                open(cg + "/memory.max_usage_in_bytes", "w").write("0")
            except OSError:
                peak = None
            status = c.get_sandbox(sid)["status"]
            ok = r.status == 200 and r.body.get("oom_killed") is True
            killed += ok
            print("%2d chunk %3d MiB: %s, host peak %s MiB, sandbox %s"
                  % (i, chunk, "oom_killed" if ok else "HTTP %d" % r.status,
                     peak if peak is not None else "(machine died)", status))
            if peak is None:
                break
        print("%d of %d killed inside, sandbox %s" % (killed, a.n, c.get_sandbox(sid)["status"]))
    finally:
        d.cleanup()


if __name__ == "__main__":
    main()
