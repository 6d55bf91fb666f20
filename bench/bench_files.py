"""Files and artifacts throughput, measured in the same run as its baseline.

  upload    PUT /v1/sandboxes/{id}/files/big.bin, 100 MB from a file on disk, streamed
            vs  `cp` of the same file to a fresh name on the same disk
            and `cp` then `sync` of the copy: an upload is answered once its bytes are
                on disk (docs/files.md), which cp alone never waits for
  download  GET of the same file into a file on disk
            vs  `cp` of the same file on the same disk
            and curl copying the same file from/to a file:// URL: what the client costs
            on its own (a read and a write through user space, where cp copies in the
            kernel), the floor of any HTTP transfer measured with curl
  artifacts cold   GET /v1/sandboxes/{id}/artifacts with 1 000 small files in /workspace/out,
                   all rewritten with new bytes before each run (each copied into the blob
                   store, hashed, typed, scanned and signed)
  artifacts warm   the same GET again with out/ unchanged (answered from the cache)
            vs  sha256sum of the same files from the host
            and `file --mime-type` of them, split over one process per core as sbxd
                splits them over its workers: libmagic typing them, part of the cold
                listing's work that no cache can skip

Ratios are the baseline's time over the API's (1.0 = as fast as the baseline; the aim is
at least 0.6 for the transfers).

    python3 bench/bench_files.py --build build [-n 5] [--only upload,download,artifacts]
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
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import harness  # noqa: E402

SIZE = 100 * 1000 * 1000
ARTIFACTS = 1000
CORES = min(os.cpu_count() or 1, 8)  # sbxd's scan workers: one per core, at most 8


def _curl(args):
    """curl as the client: the client's own cost stays close to cp's."""
    subprocess.run(["curl", "-sS", "-f", "-o", "/dev/null"] + args, check=True)


def _put_file(port, key, path, src):
    _curl(["-T", src, "-H", "Authorization: Bearer " + key,
           "http://127.0.0.1:%d%s" % (port, path)])


def _get_file(port, key, path, dst):
    subprocess.run(["curl", "-sS", "-f", "-o", dst, "-H", "Authorization: Bearer " + key,
                    "http://127.0.0.1:%d%s" % (port, path)], check=True)


def _cp(src, dst, durable=False):
    t = time.perf_counter()
    subprocess.run(["cp", src, dst], check=True)
    if durable:
        subprocess.run(["sync", dst], check=True)
    return time.perf_counter() - t


def _curl_copy(src, dst, upload):
    """The client's own floor: curl moving the same bytes file to file, no server."""
    t = time.perf_counter()
    if upload:
        subprocess.run(["curl", "-sS", "-T", src, "file://" + dst], check=True)
    else:
        subprocess.run(["curl", "-sS", "-o", dst, "file://" + src], check=True)
    return time.perf_counter() - t


def _write_out(c, sid, round_):
    c.sh(sid, "mkdir -p /workspace/out && cd /workspace/out && python3 -c \"\n"
              "import os\nfor i in range(%d):\n"
              "    open('f%%04d.txt' %% i, 'w').write('artifact %%d round %d\\n' %% i * 50)\n\""
              % (ARTIFACTS, round_))


def run(build, n, only=("upload", "download", "artifacts")):
    """Returns rows (name, sbx seconds list, baseline name, baseline seconds list) and notes."""
    os.environ["SBX_BUILD"] = build
    rows, notes = [], []
    with harness.Daemon() as d:
        c = d.client()
        sid = c.create_sandbox(ttl_seconds=3600)["id"]
        tmp = tempfile.mkdtemp(prefix="sbx-bench-files-", dir=d.tmp)
        if "upload" in only or "download" in only:
            src = os.path.join(tmp, "src.bin")
            with open(src, "wb") as f:
                for _ in range(SIZE // (1 << 20) + 1):
                    f.write(os.urandom(1 << 20))
                f.truncate(SIZE)
            up, down, cp_times, cp_sync, curl_up, curl_down = [], [], [], [], [], []
            _put_file(d.port, c.key, "/v1/sandboxes/%s/files/big.bin" % sid, src)
            for i in range(n):
                if "upload" in only:
                    t = time.perf_counter()
                    _put_file(d.port, c.key, "/v1/sandboxes/%s/files/big.bin" % sid, src)
                    up.append(time.perf_counter() - t)
                if "download" in only:
                    dst = os.path.join(tmp, "down.bin")
                    t = time.perf_counter()
                    _get_file(d.port, c.key, "/v1/sandboxes/%s/files/big.bin" % sid, dst)
                    down.append(time.perf_counter() - t)
                    os.unlink(dst)
                cp_times.append(_cp(src, os.path.join(tmp, "cp%d.bin" % i)))
                os.unlink(os.path.join(tmp, "cp%d.bin" % i))
                if "upload" in only:
                    cp_sync.append(_cp(src, os.path.join(tmp, "cp%d.bin" % i), True))
                    os.unlink(os.path.join(tmp, "cp%d.bin" % i))
                copy = os.path.join(tmp, "curl%d.bin" % i)
                (curl_up if "upload" in only else curl_down).append(
                    _curl_copy(src, copy, "upload" in only))
                os.unlink(copy)
                if "upload" in only and "download" in only:
                    curl_down.append(_curl_copy(src, copy, False))
                    os.unlink(copy)
            if up:
                rows.append(("upload 100 MB (PUT files)", up, "cp 100 MB", cp_times))
                rows.append(("upload 100 MB (PUT files)", up, "curl -T to file://", curl_up))
                rows.append(("upload 100 MB (PUT files)", up, "cp + fsync 100 MB", cp_sync))
            if down:
                rows.append(("download 100 MB (GET files)", down, "cp 100 MB", cp_times))
                rows.append(("download 100 MB (GET files)", down, "curl from file://",
                             curl_down))
        if "artifacts" in only:
            cold, warm, hash_base, magic_base = [], [], [], []
            for i in range(n):
                _write_out(c, sid, i)
                t = time.perf_counter()
                r = c.ok("GET", "/v1/sandboxes/%s/artifacts" % sid, timeout=300)
                cold.append(time.perf_counter() - t)
                assert len(r["data"]) == ARTIFACTS, len(r["data"])
                for _ in range(3):
                    t = time.perf_counter()
                    r = c.ok("GET", "/v1/sandboxes/%s/artifacts" % sid, timeout=300)
                    warm.append(time.perf_counter() - t)
                    assert len(r["data"]) == ARTIFACTS, len(r["data"])
                t = time.perf_counter()
                subprocess.run("sha256sum %s/workspace/out/* > /dev/null" % d.sandbox_dir(sid),
                               shell=True, check=True)
                hash_base.append(time.perf_counter() - t)
                t = time.perf_counter()
                subprocess.run("cd %s/workspace/out && ls | xargs -P%d -n%d file --mime-type"
                               " > /dev/null" % (d.sandbox_dir(sid), CORES,
                                                 -(-ARTIFACTS // CORES)), shell=True, check=True)
                magic_base.append(time.perf_counter() - t)
            rows.append(("artifacts 1000, cold (hash+scan)", cold, "sha256sum of them",
                         hash_base))
            rows.append(("artifacts 1000, cold (hash+scan)", cold,
                         "file --mime-type, %d procs" % CORES, magic_base))
            rows.append(("artifacts 1000, unchanged (cached)", warm, "sha256sum of them",
                         hash_base))
        notes.append("files: %d MB per transfer, %d runs; disk of %s" % (SIZE // 10**6, n, tmp))
        shutil.rmtree(tmp, ignore_errors=True)
    return rows, notes


def main():
    ap = argparse.ArgumentParser(description="sbx files benchmark")
    ap.add_argument("--build", default="build")
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--only", default="upload,download,artifacts",
                    help="comma-separated rows to run (upload, download, artifacts)")
    args = ap.parse_args()
    build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
    rows, notes = run(build, args.n, tuple(args.only.split(",")))
    for name, xs, bname, bs in rows:
        s, b = sorted(xs)[len(xs) // 2], sorted(bs)[len(bs) // 2]
        print("%-36s %8.1f ms (%.1f-%.1f)   %-18s %8.1f ms   ratio (baseline/sbx) %.2f"
              % (name, s * 1000, min(xs) * 1000, max(xs) * 1000, bname, b * 1000, b / s))
    for n_ in notes:
        print("note: " + n_)


if __name__ == "__main__":
    main()
