"""Skill installs into a configuration (docs/skills.md): one round (a sandbox of the
configuration, the bundle, a one-line install script, the workspace snapshot, the sandbox
destroyed) beside what a client doing the same by hand would pay in the same run — create a
sandbox of the configuration, run the same script, delete it — and the cost a round adds to
each later sandbox of the configuration (start from the snapshot, /workspace/skills written).

  by hand          POST /v1/sandboxes {config_id}, exec the script, DELETE
  round            POST .../skills/catalog/{id}/install until install-events says done
  create (plain)   POST /v1/sandboxes {config_id} of a configuration without skills
  create (skills)  the same for the configuration with the skill installed

    python3 bench/bench_skill_installs.py [--build build] [-n 10]
"""

import argparse
import io
import os
import sys
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
sys.path.insert(0, HERE)
import bench_core  # noqa: E402
import harness  # noqa: E402

SCRIPT = "echo installed > /workspace/.bench-installed\n"


def bundle(version):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("bench/SKILL.md", "---\nname: bench\ndescription: bench\nversion: %s\n"
                   "install: install.sh\n---\n# bench\n" % version)
        z.writestr("bench/install.sh", SCRIPT)
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("-n", type=int, default=10)
    a = ap.parse_args()
    os.environ.setdefault("SBX_TEMPLATE_CACHE", "/var/cache/sbx/templates")
    env = {"SBX_MAX_PER_KEY": "20", "SBX_MAX_PER_USER": "20"}
    build = a.build if os.path.isabs(a.build) else os.path.join(REPO, a.build)
    with harness.Daemon(build=build, extra_env=env) as d:
        c = d.client()
        cfg = c.ok("POST", "/v1/sandbox-configs", {"name": "bench", "config": {}},
                   status=201)["id"]
        plain = c.ok("POST", "/v1/sandbox-configs", {"name": "plain", "config": {}},
                     status=201)["id"]
        hand, rounds, create_plain, create_skills = [], [], [], []
        for i in range(a.n):
            t = time.monotonic()
            sb = c.create_sandbox(config_id=plain)
            c.sh(sb["id"], SCRIPT)
            c.delete_sandbox(sb["id"])
            hand.append(time.monotonic() - t)
            cat = c.ok("POST", "/v1/skills/catalog", raw=bundle("1.0.%d" % i), status=201,
                       headers={"Content-Type": "application/zip"})["id"]
            t = time.monotonic()
            got = c.ok("POST", "/v1/skills/catalog/%s/install" % cat,
                       {"sandbox_config_ids": [cfg]}, status=202)["installs"][0]
            s = c.stream("GET", "/v1/sandbox-configs/%s/skills/%s/install-events"
                         % (cfg, got["skill_id"]), timeout=600)
            next(s)
            last = [ev for _, ev in s][-1]
            rounds.append(time.monotonic() - t)
            assert last["status"] == "ready", last
            for which, out in ((plain, create_plain), (cfg, create_skills)):
                t = time.monotonic()
                sb = c.create_sandbox(config_id=which)
                out.append(time.monotonic() - t)
                c.delete_sandbox(sb["id"])
    med = {k: bench_core.percentile(v, 50) for k, v in
           (("by hand", hand), ("round", rounds), ("create (plain)", create_plain),
            ("create (skills)", create_skills))}
    print("n=%d, medians (s):" % a.n)
    for k, v in med.items():
        print("  %-16s %.3f" % (k, v))
    print("round / by hand:          %.2fx" % (med["round"] / med["by hand"]))
    print("create skills / plain:    %.2fx" % (med["create (skills)"] / med["create (plain)"]))


if __name__ == "__main__":
    main()
