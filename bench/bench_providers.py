"""A provider sandbox (docs/providers.md) against the same work on the provider directly: two
sbxd, the inner one the provider (its E2B surface), the outer one SBX_BACKEND=e2b. Measured
in one run: sandbox create (to running), an exec round trip (`true`), and 50 MB of command
output carried through the agent's channel (`head -c 50M /dev/zero`: through the provider it
crosses envd's process stream as base64 data events; the daemon keeps 1 MiB of it and counts
the rest), and a 50 MB file downloaded and uploaded through the files API (on the provider
sandbox they go through the agent: docs/providers.md, "Files and artifacts"). Prints medians
and the ratios outer / inner. Not part of `make bench` or the tests.

    SBX_TEMPLATE_CACHE=/var/cache/sbx/templates python3 bench/bench_providers.py --build build -n 5
"""

from benchdaemon import median, setup, timed

FILE_BYTES = 50 * 1024 * 1024


def measure(c, n):
    out = {"create": [], "exec true": [], "50 MB output": [], "50 MB download": [],
           "50 MB upload": []}
    sids = []
    for _ in range(n):
        dt, sb = timed(lambda: c.create_sandbox(ttl_seconds=600))
        out["create"].append(dt)
        sids.append(sb["id"])
        if len(sids) > 2:
            c.delete_sandbox(sids.pop(0))
    sid = sids[-1]
    for _ in range(n * 4):
        dt, r = timed(lambda: c.exec(sid, shell="true"))
        assert r["exit_code"] == 0, r
        out["exec true"].append(dt)
    for _ in range(n):
        dt, r = timed(lambda: c.exec(sid, shell="head -c 52428800 /dev/zero"))
        assert r["exit_code"] == 0, r
        out["50 MB output"].append(dt)
    c.sh(sid, "head -c %d /dev/urandom > /workspace/big.bin" % FILE_BYTES)
    path = "/v1/sandboxes/%s/files/big.bin" % sid
    for _ in range(n):
        dt, r = timed(lambda: c.request("GET", path, timeout=300))
        assert r.status == 200 and len(r.raw) == FILE_BYTES, r
        out["50 MB download"].append(dt)
    blob = r.raw
    for _ in range(n):
        dt, r = timed(lambda: c.request("PUT", path, raw=blob, timeout=300))
        assert r.status == 200 and r.body["size"] == FILE_BYTES, r
        out["50 MB upload"].append(dt)
    for s in sids:
        c.delete_sandbox(s)
    return out


def main():
    args, harness = setup(5)
    with harness.Daemon(extra_env={"SBX_MAX_PER_KEY": "20", "SBX_MAX_PER_USER": "20"}) as inner:
        key = inner.client().create_key("provider")["key"]
        direct = measure(inner.client(inner.client().create_key("direct")["key"]), args.n)
        env = {"SBX_BACKEND": "e2b", "SBX_E2B_API_URL": "http://127.0.0.1:%d/e2b/api" % inner.port,
               "SBX_E2B_SANDBOX_URL": "http://127.0.0.1:%d/e2b/sandbox" % inner.port,
               "SBX_E2B_API_KEY": key, "SBX_E2B_TEMPLATE_ID": "base"}
        with harness.Daemon(extra_env=env) as outer:
            via = measure(outer.client(outer.client().create_key("bench")["key"]), args.n)
    print("%-14s %12s %12s %7s   (median ms, n=%d)" % ("operation", "provider", "direct", "ratio",
                                                       args.n))
    for name in ("create", "exec true", "50 MB output", "50 MB download", "50 MB upload"):
        a, b = median(via[name]) * 1000, median(direct[name]) * 1000
        print("%-14s %12.1f %12.1f %7.2f" % (name, a, b, a / b))


if __name__ == "__main__":
    main()
