"""Layering (docs/architecture.md#layering), read from the built objects and the sources:

- a module is a .c file; A depends on B when A's object calls or reads a symbol B's object
  defines (nm) or when A.c includes B.h;
- no circle of dependencies joins files of different folders, and a circle inside one
  folder is allowed only when every file in it says why in a comment at its top
  ("Import circle with ...");
- the HTTP layer (src/daemon/http/) neither includes nor calls any feature: only common/,
  auth/ and store/ below it."""

import os
import re
import subprocess

import harness

REPO = harness.REPO
INFRA_OK = ("src/common/", "src/proto/", "src/daemon/auth/", "src/daemon/store/",
            "src/daemon/http/")
NOTE = "Import circle with"


def _objects():
    b = harness.build_dir()
    for top in ("obj", "agent-obj"):
        root = os.path.join(b, top)
        for d, _, fs in os.walk(root):
            for f in fs:
                if f.endswith(".o"):
                    p = os.path.join(d, f)
                    rel = os.path.relpath(p, root)[:-2]
                    if rel.startswith("src/"):
                        yield top, rel, p


_GRAPH = []


def _graph():
    if not _GRAPH:
        _GRAPH.append(_build_graph())
    return _GRAPH[0]


def _build_graph():
    defs, uses = {}, {}
    objs = {path: (top, mod) for top, mod, path in _objects()}
    # One nm for every object: one process per object took minutes on a loaded machine.
    out = subprocess.run(["nm", "-A", *objs], capture_output=True, text=True,
                         check=True).stdout
    for key in objs.values():
        uses[key] = set()
    for line in out.splitlines():
        path, sep, rest = line.partition(":")
        if not sep or path not in objs:
            continue
        key = objs[path]
        parts = rest.split()
        if len(parts) == 3 and parts[1] in "TDBRC":
            defs.setdefault((key[0], parts[2]), key)
        elif len(parts) == 2 and parts[0] == "U":
            uses[key].add(parts[1])
    g = {k: {defs[(k[0], s)] for s in u if (k[0], s) in defs} - {k} for k, u in uses.items()}
    for (top, mod) in list(g):
        src = os.path.join(REPO, mod + ".c")
        if not os.path.exists(src):
            continue
        for line in open(src, errors="replace"):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if m:
                inc = os.path.normpath(os.path.join(os.path.dirname(mod), m.group(1)))
                target = (top, os.path.splitext(inc)[0])
                if target in g and target != (top, mod):
                    g[(top, mod)].add(target)
    return g


def _circles(g):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(m for _, m in comp))

    import sys
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for v in list(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_across_folders_and_inside_only_with_a_reason():
    circles = _circles(_graph())
    bad = []
    for comp in circles:
        folders = {os.path.dirname(m) for m in comp}
        if len(folders) > 1:
            bad.append("across folders: %s" % " <-> ".join(comp))
            continue
        for m in comp:
            with open(os.path.join(REPO, m + ".c"), errors="replace") as f:
                head = f.read(1500)
            if NOTE not in head:
                bad.append("%s is in the circle %s without a comment at its top saying why"
                           % (m, " <-> ".join(comp)))
    assert not bad, "\n".join(bad)


def test_the_http_layer_knows_no_feature():
    http = os.path.join(REPO, "src/daemon/http")
    bad = []
    for f in sorted(os.listdir(http)):
        if not f.endswith((".c", ".h")):
            continue
        for line in open(os.path.join(http, f)):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            inc = os.path.normpath(os.path.join("src/daemon/http", m.group(1)))
            if not inc.startswith(INFRA_OK):
                bad.append("%s includes %s" % (f, inc))
    g = _graph()
    for (top, mod), deps in g.items():
        if mod.startswith("src/daemon/http/"):
            for _, dep in deps:
                if not dep.startswith(INFRA_OK):
                    bad.append("%s calls into %s" % (mod, dep))
    assert not bad, "\n".join(bad)
