"""Agents' work inside the sandbox, step by step, as ratios to the host from the same run
(docs/performance.md, "Work inside the sandbox").

The job (bench/workload/job.py): a git clone of a repository with history and 3 000 files,
git status, add and commit, npm install from a registry served on loopback, pip install of
local wheels, a C build with make -j2, a Python test suite, SQLite with many small
transactions, tar and untar, find + rg, rm -rf. Its inputs are made first in each place,
untimed; each step is timed by the job itself, where it runs.

  host        the job chrooted into the base template's tree (the same git, gcc, node, pip
              as inside), /workspace a host directory on the data dir's filesystem, /tmp a tmpfs
  namespaces  in a sandbox of sbx's namespaces backend, through the API, in /workspace
  gvisor      in a default sandbox (gVisor), through the API, in /workspace
  floor       in a bare `runsc run` container with the daemon's own runsc flags and the
              same mounts (/workspace a bind mount of a host directory, /tmp a tmpfs): what
              gVisor itself costs, with nothing of sbx in the way

    python3 bench/bench_workload.py --build build [-n 1] [--only host,gvisor,floor]
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import bench_core  # noqa: E402
import harness  # noqa: E402

JOB = os.path.join(HERE, "workload", "job.py")
PLACES = ("host", "namespaces", "gvisor", "floor")
JOB_TIMEOUT_S = 900  # the exec API's own maximum


def _parse(out):
    for line in out.splitlines():
        if line.startswith('{"steps"'):
            return json.loads(line)["steps"]
    raise RuntimeError("the job printed no result:\n" + out[-3000:])


def on_host(scratch):
    """The job chrooted into the template, in a mount namespace of its own (nothing on the
    host's mounts changes)."""
    rootfs = bench_core.template_rootfs()
    ws = os.path.join(scratch, "host-ws")
    os.makedirs(ws)
    shutil.copy(JOB, ws)
    script = ('set -e; R="$1"; W="$2"; shift 2; mount --bind "$W" "$R/workspace"; '
              'mount -t tmpfs tmpfs "$R/tmp"; mount -t proc proc "$R/proc"; '
              'mount --rbind /dev "$R/dev"; '
              'exec chroot "$R" env -i PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 HOME=/tmp '
              'sh -c "cd /workspace && python3 job.py prepare /workspace/wl && '
              'python3 job.py run /workspace/wl"')
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
                        rootfs, ws], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=2 * JOB_TIMEOUT_S)
    out = p.stdout.decode(errors="replace")
    if p.returncode != 0:
        raise RuntimeError("host job failed:\n" + out[-3000:])
    return _parse(out)


def in_sandbox(c, runtime):
    sb = c.create_sandbox(runtime=runtime, ttl_seconds=3600)
    sid = sb["id"]
    try:
        with open(JOB, "rb") as f:
            r = c.request("PUT", "/v1/sandboxes/%s/files/job.py" % sid, raw=f.read())
        if r.status != 200:
            raise RuntimeError("upload: %r" % r)
        for what in ("prepare", "run"):
            r = c.request("POST", "/v1/sandboxes/%s/exec" % sid,
                          {"shell": "python3 /workspace/job.py %s /workspace/wl" % what,
                           "timeout_seconds": JOB_TIMEOUT_S}, timeout=JOB_TIMEOUT_S + 60)
            if r.status != 200 or r.body.get("exit_code") != 0:
                raise RuntimeError("%s %s: %r" % (runtime, what, r))
        flags = bench_core.daemon_runsc_flags(sid) if runtime == "gvisor" else None
        return _parse(r.body["stdout"]), flags
    finally:
        c.delete_sandbox(sid)


def on_bare_runsc(scratch, flags):
    """The floor: the job in `runsc run` of the template with the daemon's flags."""
    rootfs = bench_core.template_rootfs()
    ws = os.path.join(scratch, "floor-ws")
    os.makedirs(ws)
    shutil.copy(JOB, ws)
    bundle = os.path.join(scratch, "floor-bundle")
    bench_core._bundle(bundle, rootfs, ["sh", "-c", "cd /workspace && python3 job.py prepare "
                                        "/workspace/wl && python3 job.py run /workspace/wl"])
    cfg_path = os.path.join(bundle, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["process"]["env"] = ["PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp"]
    cfg["mounts"] = [m for m in cfg["mounts"] if m["destination"] not in ("/tmp",)] + [
        {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "nodev", "mode=1777"]},
        {"destination": "/workspace", "type": "bind", "source": ws,
         "options": ["rbind", "rw", "nosuid", "nodev"]}]
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    root = os.path.join(scratch, "floor-root")
    cid = "sbxbench-wl-%d" % os.getpid()
    p = subprocess.run(["runsc", "--root", root] + flags + ["run", "--bundle", bundle, cid],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=2 * JOB_TIMEOUT_S)
    subprocess.run(["runsc", "--root", root, "delete", "--force", cid],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = p.stdout.decode(errors="replace")
    if p.returncode != 0:
        raise RuntimeError("bare runsc job failed:\n" + out[-3000:])
    return _parse(out)


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def run(build, n=1, only=PLACES, env=None):
    """Returns {place: [steps of each round]} and the runsc flags of the daemon's sandboxes."""
    scratch = tempfile.mkdtemp(prefix="sbx-bench-wl-", dir=os.environ.get("SBX_BENCH_DIR"))
    res = {p: [] for p in only}
    flags = None
    try:
        extra = {"SBX_BACKEND": "gvisor,namespaces", "SBX_MAX_PER_KEY": "4"}
        extra.update(env or {})
        with harness.Daemon(build=build, extra_env=extra) as d:
            c = d.client(d.client().create_key("bench", "member", "sandbox")["key"])
            for i in range(n):
                # Interleaved, so that a change in the machine's load falls on every place.
                for p in only:
                    if p == "host":
                        res[p].append(on_host(os.path.join(scratch, "r%d" % i)))
                    elif p in ("namespaces", "gvisor"):
                        steps, f = in_sandbox(c, p)
                        flags = f or flags
                        res[p].append(steps)
                    elif p == "floor":
                        if flags is None:
                            flags = bench_core.RUNSC_FLAGS
                        res[p].append(on_bare_runsc(os.path.join(scratch, "f%d" % i), flags))
                    print("  %s round %d done" % (p, i + 1), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return res, flags


def report(res, flags):
    places = [p for p in PLACES if res.get(p)]
    names = [s[0] for s in next(iter(res.values()))[0]]

    def med(place, i):
        xs = sorted(r[i][1] for r in res[place])
        return xs[len(xs) // 2]

    head = "%-42s" % "step (median s)" + "".join("%11s" % p for p in places)
    others = [p for p in places if p != "host"]
    if "host" in places:
        head += "".join("%13s" % ("x " + p) for p in others)
        if "gvisor" in places and "floor" in places:
            head += "%15s" % "gvisor/floor"
    print(head)
    print("-" * len(head))
    ratios = {p: [] for p in others}
    over_floor = []
    for i, name in enumerate(names):
        line = "%-42s" % name[:42] + "".join("%11.2f" % med(p, i) for p in places)
        if "host" in places:
            h = med("host", i)
            for p in others:
                x = med(p, i) / h if h > 0 else float("nan")
                ratios[p].append(x)
                line += "%13.2f" % x
            if "gvisor" in places and "floor" in places:
                f = med("floor", i)
                over_floor.append(med("gvisor", i) / f if f > 0 else float("nan"))
                line += "%15.2f" % over_floor[-1]
        print(line)
    if "host" in places:
        print("-" * len(head))
        line = "%-42s" % "geometric mean of the ratios" + " " * 11 * len(places)
        line += "".join("%13.2f" % geomean(ratios[p]) for p in others)
        if over_floor:
            line += "%15.2f" % geomean(over_floor)
        print(line)
        for p in others:
            print("note: %s: geometric mean x%.2f of the host, worst step x%.2f (%s)" % (
                p, geomean(ratios[p]), max(ratios[p]), names[ratios[p].index(max(ratios[p]))]))
    if flags:
        print("note: runsc flags of the daemon's sandboxes (the floor's too): %s" % " ".join(flags))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("-n", type=int, default=1, help="rounds (each place once per round)")
    ap.add_argument("--only", default=",".join(PLACES))
    args = ap.parse_args()
    build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
    only = tuple(p for p in PLACES if p in args.only.split(","))
    res, flags = run(build, args.n, only)
    report(res, flags)


if __name__ == "__main__":
    main()
