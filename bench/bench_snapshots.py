"""Memory snapshots: pause, resume, fork(1) and fork(5) through sbxd, beside `runsc
checkpoint` and `runsc restore` called directly on the same template, agent and machine in
the same run (docs/snapshots.md).

Two cases: an idle sandbox, and one whose Python kernel holds 500 MB. For each, one
sandbox is driven through the API n times (pause, half a second, resume; fork(1);
fork(5), copies deleted at once), then sbxd is stopped and a second sandbox, made the
same way, is checkpointed and restored n times with runsc alone:

  runsc checkpoint   `runsc checkpoint --image-path` until it exits (the container stops)
  runsc restore      `runsc restore --detach=false` with fresh stdio pipes until the agent
                     answers a HELLO on them (what "ready" means for sbxd too)
  checkpoint + 5 restores
                     a checkpoint (uncompressed, as a fork's), then five `runsc restore`s
                     of its image side by side, until every agent has answered: the floor
                     under fork(5) on this machine, whatever sbx does around it (the
                     copies even share the workspace, where sbx clones one for each)

    python3 bench/bench_snapshots.py [--build build] [-n 20] [--mb 500]   (--mb 0: idle only)
"""

import argparse
import fcntl
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import harness  # noqa: E402
import bench_core  # noqa: E402

ENV = {"SBX_MAX_PER_KEY": "20", "SBX_MAX_PER_USER": "20"}
# The image a fork makes, read once by each copy (docs/snapshots.md), as sbx makes it.
FAN_FLAGS = ["--compression=none"]
# A paused sandbox is resumed later, not at once: by then the stopped container's shim
# has deleted it (a resume right after its pause waits ~30-60 ms for that).
SETTLE = 0.5


def _post(c, sid, what, body=None):
    t0 = time.perf_counter()
    r = c.request("POST", "/v1/sandboxes/%s/%s" % (sid, what), body, timeout=600)
    dt = time.perf_counter() - t0
    assert r.status == 200, "%s: %r" % (what, r)
    return dt, r.body


def _fill(c, sid, mb):
    if mb:
        r = c.request("POST", "/v1/sandboxes/%s/run_code" % sid,
                      {"code": "blob = b'\\x01' * (%d << 20)\nlen(blob)" % mb}, timeout=600)
        assert r.status == 200 and r.body["error"] is None, r
    else:
        r = c.request("POST", "/v1/sandboxes/%s/run_code" % sid, {"code": "1"}, timeout=600)
        assert r.status == 200, r


def _frame(stream, typ, payload):
    return struct.pack(">IIBBH", len(payload), stream, typ, 0, 0) + payload


def _read_frame(f):
    h = f.read(12)
    if len(h) < 12:
        raise AssertionError("the restored agent did not answer")
    n, stream, typ, _, _ = struct.unpack(">IIBBH", h)
    return stream, typ, f.read(n)


def _busy(state):
    fd = os.open(state, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _prepare(rd, wr):
    """snapshot_prepare (untimed): the agent closes its egress listener, which gVisor
    cannot checkpoint (docs/snapshots.md)."""
    wr.write(_frame(1, 2, b'{"op":"snapshot_prepare"}'))
    wr.flush()
    while True:
        stream, typ, payload = _read_frame(rd)
        if stream == 1:
            assert typ == 6, payload  # EXIT
            return


def _restore(root, img, bundle, cid):
    """`runsc restore` of img as cid, answered HELLO on fresh stdio pipes; the process."""
    proc = subprocess.Popen(
        ["runsc", "--root", root] + bench_core.RUNSC_FLAGS +
        ["restore", "--image-path", img, "--bundle", bundle, "--detach=false", cid],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    proc.stdin.write(_frame(0, 1, b'{"version":1,"role":"daemon","restored":true}'))
    proc.stdin.flush()
    return proc


def _greeted(proc):
    stream, typ, payload = _read_frame(proc.stdout)
    assert stream == 0 and typ == 1 and json.loads(payload)["role"] == "agent"


def _copy_bundle(bundle, cid, dest):
    """The sandbox's bundle for another container id: the same root and mounts (the copies
    share the workspace, less work than sbx's clones), a cgroup of its own."""
    with open(os.path.join(bundle, "config.json")) as f:
        spec = json.load(f)
    spec["linux"]["cgroupsPath"] = os.path.join(
        os.path.dirname(spec["linux"]["cgroupsPath"]), cid)
    os.makedirs(dest, exist_ok=True)
    with open(os.path.join(dest, "config.json"), "w") as f:
        json.dump(spec, f)
    return dest


def _kill(root, cid, proc):
    subprocess.run(["runsc", "--root", root, "kill", cid, "KILL"], capture_output=True)
    proc.wait()
    subprocess.run(["runsc", "--root", root, "delete", "--force", cid], capture_output=True)


def _direct(d, sid, n, fan=5):
    """Checkpoint/restore the sandbox n times with runsc alone (sbxd must be stopped); then
    n times checkpoint and fan restores of the image side by side: what a fork(fan) cannot
    do with less, whatever sbx does around it."""
    root = os.path.join(d.data_dir, "runsc")
    state = os.path.join(d.sandbox_dir(sid), "state")
    bundle = os.path.join(state, "bundle")
    img = tempfile.mkdtemp(prefix="sbx-bench-img-")
    ck, rs, fanned = [], [], []
    proc = None
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(os.path.join(state, "shim.sock"))
    f = sock.makefile("rwb")
    f.write(_frame(0, 1, b'{"version":1,"role":"daemon"}'))
    f.flush()
    _read_frame(f)
    _prepare(f, f)
    try:
        for i in range(n):
            shutil.rmtree(img, ignore_errors=True)
            os.makedirs(img)
            if proc:
                _prepare(proc.stdout, proc.stdin)
            t0 = time.perf_counter()
            subprocess.run(["runsc", "--root", root, "checkpoint", "--image-path", img, sid],
                           check=True, capture_output=True)
            ck.append(time.perf_counter() - t0)
            if proc:
                proc.wait()
            # The first container belonged to a shim, which deletes it and its cgroups
            # itself, holding a lock on the state dir until it exits (rt_busy).
            for _ in range(500):
                if not any(f.startswith(sid + "_") for f in os.listdir(root)) and \
                        not _busy(state):
                    break
                subprocess.run(["runsc", "--root", root, "delete", "--force", sid],
                               capture_output=True)
                time.sleep(0.01)
            t0 = time.perf_counter()
            proc = _restore(root, img, bundle, sid)
            _greeted(proc)
            rs.append(time.perf_counter() - t0)
        others = ["%s-c%d" % (sid, k) for k in range(1, fan)]
        bundles = [_copy_bundle(bundle, o, os.path.join(img + "-b", o)) for o in others]
        for i in range(n):
            shutil.rmtree(img, ignore_errors=True)
            os.makedirs(img)
            _prepare(proc.stdout, proc.stdin)
            t0 = time.perf_counter()
            subprocess.run(["runsc", "--root", root, "checkpoint", "--image-path", img] +
                           FAN_FLAGS + [sid], check=True, capture_output=True)
            took = time.perf_counter() - t0
            # The stopped container's teardown is not timed: a fork holds its parent, and
            # tears down nothing before the copies.
            proc.wait()
            subprocess.run(["runsc", "--root", root, "delete", "--force", sid],
                           capture_output=True)
            t0 = time.perf_counter()
            procs = [_restore(root, img, bundle, sid)] + [
                _restore(root, img, b, o) for o, b in zip(others, bundles)]
            for p in procs:
                _greeted(p)
            fanned.append(took + time.perf_counter() - t0)
            proc = procs[0]
            for o, p in zip(others, procs[1:]):
                _kill(root, o, p)
    finally:
        sock.close()
        if proc:
            _kill(root, sid, proc)
        shutil.rmtree(img, ignore_errors=True)
        shutil.rmtree(img + "-b", ignore_errors=True)
    return ck, rs, fanned


def _gone(d, ids, timeout=30):
    """Wait until deleted copies are torn down (their shims remove their directories): the
    next timed operation should not share the CPU with them, as the baselines do not."""
    end = time.time() + timeout
    while time.time() < end and any(os.path.exists(d.sandbox_dir(i)) for i in ids):
        time.sleep(0.02)


def _case(build, n, mb):
    label = "%d MB kernel" % mb if mb else "idle"
    pause, resume, f1, f5 = [], [], [], []
    restored = {"resume": 0, "fork": 0, "of": 0}
    with harness.Daemon(build=build, extra_env=ENV) as d:
        adm = d.client()
        c = d.client(adm.create_key("bench")["key"])
        sid = c.create_sandbox(ttl_seconds=7200)["id"]
        _fill(c, sid, mb)
        for _ in range(n):
            dt, _ = _post(c, sid, "pause")
            pause.append(dt)
            time.sleep(SETTLE)
            dt, b = _post(c, sid, "resume")
            resume.append(dt)
            restored["resume"] += b["restored"]
            for count, xs in ((1, f1), (5, f5)):
                dt, b = _post(c, sid, "fork", {"count": count})
                xs.append(dt)
                for k in b["data"]:
                    restored["fork"] += k["restored"]
                    restored["of"] += 1
                    c.delete_sandbox(k["id"])
                _gone(d, [k["id"] for k in b["data"]])
        c.delete_sandbox(sid)
        other = c.create_sandbox(ttl_seconds=7200)["id"]
        _fill(c, other, mb)
        d.stop()
        ck, rs, fanned = _direct(d, other, n)
        d.start()
    both = [a + b for a, b in zip(ck, rs)]
    rows = [
        ("pause, %s" % label, pause, "runsc checkpoint", ck),
        ("resume, %s" % label, resume, "runsc restore", rs),
        ("fork(1), %s" % label, f1, "checkpoint + restore", both),
        ("fork(5), %s" % label, f5, "checkpoint + restore", both),
        ("fork(5), %s" % label, f5, "checkpoint + 5 restores", fanned),
    ]
    notes = ["snapshots (%s): restored %d/%d resumes, %d/%d fork copies" % (
        label, restored["resume"], n, restored["fork"], restored["of"])]
    return rows, notes


def run(build, n=20, mb=500):
    rows, notes = [], []
    for size in (0, mb) if mb else (0,):
        r, t = _case(build, n, size)
        rows += r
        notes += t
    notes.append("snapshots: sbx's pause includes the agent's snapshot_prepare; a fork holds the"
                 " parent paused for one checkpoint and the workspace clones (runsc 20240729"
                 " or newer, else it restores it too) and restores every copy side by side")
    return rows, notes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--mb", type=int, default=500)
    args = ap.parse_args()
    build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
    os.environ["SBX_BUILD"] = build
    sys.path.insert(0, HERE)
    from bench_core import percentile as p
    rows, notes = run(build, args.n, args.mb)
    head = "%-30s %8s %8s   %-22s %8s %8s   %7s" % (
        "operation (sbx)", "p50 ms", "p95 ms", "baseline", "p50 ms", "p95 ms", "x p50")
    print(head)
    print("-" * len(head))
    for name, xs, bname, bs in rows:
        print("%-30s %8.1f %8.1f   %-22s %8.1f %8.1f   %7.2f" % (
            name, p(xs, 50) * 1000, p(xs, 95) * 1000, bname, p(bs, 50) * 1000,
            p(bs, 95) * 1000, p(xs, 50) / p(bs, 50)))
    for t in notes:
        print("note: " + t)


if __name__ == "__main__":
    main()
