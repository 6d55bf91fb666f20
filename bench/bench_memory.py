"""What an idle sandbox costs the host in memory, beside a bare gVisor container, same run.

  sbx, N idle    N sandboxes created through sbxd and left idle; for each, the PSS
                 (/proc/<pid>/smaps_rollup) of every process that names it on its command
                 line: sbx-shim, any `runsc` left running (none since the shim starts it
                 detached), runsc-gofer, runsc-sandbox (the sentry and the agent inside
                 it); the mean per sandbox, by process, and
                 sbxd's RSS growth divided by N; then their CPU while idle, before and
                 after one exec each
  sbx, one       the same with a single sandbox
          vs  one `runsc run --detach` of the same template's /bin/sleep with the daemon's
              runsc flags (its sandbox and gofer: what gVisor alone costs)

PSS splits shared pages between the processes that map them, so N sandboxes sharing runsc's
binary and the template's files cost less each than one alone.

    python3 bench/bench_memory.py --build build [-n 15]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import bench_core  # noqa: E402
import harness  # noqa: E402

SETTLE_S = 3  # an idle sandbox's agent and sentry finish starting up
IDLE_CPU_S = 5  # how long the idle sandboxes' CPU is counted


def _kb(path, field):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _procs(token):
    """(pid, role) of every process whose command line contains token."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if not argv or not any(token in a for a in argv):
            continue
        name = os.path.basename(argv[0])
        if "shim" in name:
            role = "sbx-shim"
        elif "gofer" in argv:
            role = "runsc-gofer"
        elif "boot" in argv:
            role = "runsc-sandbox"
        elif "runsc" in name or name == "exe":
            role = "runsc"
        else:
            continue
        out.append((int(p), role))
    return out


def _pss_by_role(token):
    by = {}
    for pid, role in _procs(token):
        by[role] = by.get(role, 0) + _kb("/proc/%d/smaps_rollup" % pid, "Pss")
    return by


def _cpu_ticks(tokens):
    """utime + stime of every process naming one of tokens (its threads included)."""
    procs = [pid for t in tokens for pid, _ in _procs(t)]
    total = 0
    for pid in procs:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total


def _idle_cpu(tokens):
    """Per cent of a host core each of tokens' sandboxes spends doing nothing."""
    t0 = _cpu_ticks(tokens)
    time.sleep(IDLE_CPU_S)
    spent = (_cpu_ticks(tokens) - t0) / os.sysconf("SC_CLK_TCK")
    return 100.0 * spent / IDLE_CPU_S / max(1, len(tokens))


def _measure(d, c, n, create_ms=None, cpu=None):
    rss0 = _kb("/proc/%d/status" % d.proc.pid, "VmRSS")
    sids = []
    for _ in range(n):
        t0 = time.perf_counter()
        sids.append(c.create_sandbox(ttl_seconds=3600)["id"])
        if create_ms is not None:
            create_ms.append((time.perf_counter() - t0) * 1000)
    time.sleep(SETTLE_S)
    total = {}
    for sid in sids:
        for role, kb in _pss_by_role(sid).items():
            total[role] = total.get(role, 0) + kb
    rss1 = _kb("/proc/%d/status" % d.proc.pid, "VmRSS")
    if cpu is not None:
        cpu.append(_idle_cpu(sids))
        for sid in sids:  # used once: its session's spare shell waits for the next command
            c.exec(sid, shell="true")
        # Idle from a look of the agent's on: up to a second after its last command a
        # sandbox still counts as busy (docs/runtime.md, "Idle sandboxes").
        time.sleep(SETTLE_S)
        cpu.append(_idle_cpu(sids))
    for sid in sids:
        c.delete_sandbox(sid)
    return {r: kb / n for r, kb in total.items()}, (rss1 - rss0) / n


def _bare(flags):
    rootfs = bench_core.template_rootfs()
    tmp = tempfile.mkdtemp(prefix="sbx-bench-mem-")
    root = os.path.join(tmp, "root")
    os.makedirs(root)
    base = ["runsc", "--root", root] + flags
    cid = "sbxmem-%d" % os.getpid()
    try:
        b = bench_core._bundle(os.path.join(tmp, "sleep"), rootfs, ["/bin/sleep", "100000"])
        bench_core._timed(base + ["run", "--detach", "--bundle", b, cid], detached=True)
        time.sleep(SETTLE_S)
        # Its gofer and sandbox name the root, not the id.
        return _pss_by_role(root), _idle_cpu([root])
    finally:
        subprocess.run(base + ["kill", cid, "KILL"], capture_output=True)
        subprocess.run(base + ["delete", "--force", cid], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


def run(build, n=15):
    """Returns printable lines."""
    env = {"SBX_MAX_PER_KEY": str(n), "SBX_MAX_PER_USER": str(n)}
    with harness.Daemon(build=build, extra_env=env) as d:
        c = d.client()
        one = c.create_sandbox(ttl_seconds=600)["id"]
        flags = bench_core.daemon_runsc_flags(one) or bench_core.RUNSC_FLAGS
        c.delete_sandbox(one)
        alone, rss_alone = _measure(d, c, 1)
        create_ms, cpu = [], []
        many, rss_many = _measure(d, c, n, create_ms, cpu)
    bare, bare_cpu = _bare(flags)
    mib = lambda kb: kb / 1024.0
    roles = ("runsc-sandbox", "runsc-gofer", "runsc", "sbx-shim")
    head = "%-30s %9s   %s" % ("memory per idle sandbox", "PSS MiB",
                               "  ".join("%s %s" % (r, "MiB") for r in roles))
    lines = [head, "-" * len(head)]
    for name, by, rss in (("sbx, %d idle" % n, many, rss_many), ("sbx, one alone", alone, rss_alone)):
        lines.append("%-30s %9.1f   %s   sbxd RSS %+.2f MiB" % (
            name, mib(sum(by.values())), "  ".join("%14.1f" % mib(by.get(r, 0)) for r in roles),
            mib(rss)))
    lines.append("%-30s %9.1f   %s" % (
        "baseline: runsc run, one", mib(sum(bare.values())),
        "  ".join("%14.1f" % mib(bare.get(r, 0)) for r in roles)))
    if n >= 10:
        # Five creates at each end, so that one slow create does not decide it.
        first = sorted(create_ms[:5])[2]
        last = sorted(create_ms[-5:])[2]
        lines.append("note: create with 0-4 idle beside it %.0f ms (median of 5), with %d-%d "
                     "idle %.0f ms: x%.2f" % (first, n - 5, n - 1, last, last / first))
    lines.append("note: idle CPU per sandbox at %d idle: %.2f %% of a host core never used, "
                 "%.2f %% after one exec (its spare shell waiting); a bare runsc container "
                 "(sleep) %.2f %%; over %d s" % (n, cpu[0], cpu[1], bare_cpu, IDLE_CPU_S))
    lines.append("note: memory: ratio sbx (%d idle) / bare runsc container %.2f; PSS from "
                 "/proc/<pid>/smaps_rollup %d s after the creates" % (
                     n, sum(many.values()) / max(1, sum(bare.values())), SETTLE_S))
    return lines


def main():
    ap = argparse.ArgumentParser(description="sbx memory per idle sandbox")
    ap.add_argument("--build", default="build")
    ap.add_argument("-n", type=int, default=15, help="idle sandboxes (default 15)")
    args = ap.parse_args()
    build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
    os.environ["SBX_BUILD"] = build
    for line in run(build, args.n):
        print(line)


if __name__ == "__main__":
    main()
