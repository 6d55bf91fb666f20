"""The SDKs' memory on large transfers, measured in the same run at two file sizes.

  For the TypeScript SDK (files.putFile, files.download) and the Python SDK (files.put_file,
  files.download): the client process's peak RSS growth while it uploads, then downloads, a
  20 MiB and a 90 MiB file through a real sbxd. Streaming means the peak does not follow the
  file size: the ratio peak(90 MiB) / peak(20 MiB) stays near 1 or below (holding the file
  would make it about 4.5). GC timing moves a few tens of MiB between the two phases.

    python3 bench/bench_sdk.py --build build

Needs sdk/typescript built (tsc) and Debian's python3-httpx, python3-wsproto.
"""

import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

TS = r"""
import { Sbx } from '%s/sdk/typescript/dist/index.js';
const [file, back] = process.argv.slice(1);
const c = new Sbx(); const sb = await c.sandboxes.create();
const rss = () => process.resourceUsage().maxRSS >> 10;
const r0 = rss();
await c.sandboxes.files.putFile(sb.id, 'big.bin', file);
const r1 = rss();
await c.sandboxes.files.download(sb.id, 'big.bin', back);
console.log(r0, r1, rss());
await c.sandboxes.delete(sb.id);
""" % REPO

PY = r"""
import resource, sys
sys.path.insert(0, '%s/sdk/python')
from sbx import Sbx
file, back = sys.argv[1:]
rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
c = Sbx()
with c.sandbox() as sb:
    r0 = rss()
    c.sandboxes.files.put_file(sb['id'], 'big.bin', file)
    r1 = rss()
    c.sandboxes.files.download(sb['id'], 'big.bin', back)
    print(r0, r1, rss())
""" % REPO


def measure(argv, env, file, back):
    out = subprocess.run(argv + [file, back], env=env, check=True, stdout=subprocess.PIPE)
    r0, r1, r2 = map(int, out.stdout.split())
    with open(file, "rb") as a, open(back, "rb") as b:
        assert a.read() == b.read(), "the download differs from the upload"
    return r1 - r0, r2 - r1


def main():
    ap = argparse.ArgumentParser(description="SDK transfer memory")
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    build = args.build if os.path.isabs(args.build) else os.path.join(REPO, args.build)
    os.environ["SBX_BUILD"] = build
    sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
    from harness import Daemon

    d = Daemon()
    tmp = tempfile.mkdtemp(prefix="sbx-bench-sdk-")
    try:
        d.start()
        env = dict(os.environ, SBX_URL="http://127.0.0.1:%d" % d.port, SBX_API_KEY=d.admin_key)
        sdks = [("typescript", ["node", "--input-type=module", "-e", TS]),
                ("python", ["/usr/bin/python3", "-c", PY])]
        print("%-11s %6s %14s %16s %12s" % ("sdk", "MiB", "upload +RSS", "download +RSS",
                                             "peak +RSS"))
        for name, argv in sdks:
            grown = {}
            for mib in (20, 90):
                file = os.path.join(tmp, "f%d.bin" % mib)
                with open(file, "wb") as f:  # written in pieces: a child inherits our peak RSS
                    for _ in range(mib):
                        f.write(os.urandom(1 << 20))
                up, down = measure(argv, env, file, os.path.join(tmp, "back.bin"))
                os.unlink(os.path.join(tmp, "back.bin"))
                grown[mib] = max(up + down, 1)
                print("%-11s %6d %11d MiB %13d MiB %8d MiB" % (name, mib, up, down, up + down))
            print("%-11s ratio peak(90)/peak(20): %.2f" % (name, grown[90] / grown[20]))
    finally:
        d.cleanup()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
