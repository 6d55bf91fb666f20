"""Every route and every error of docs/api-contract.md, through a real sbxd.

One daemon is shared by the module; each test uses its own user where it creates
sandboxes, so the per-key/per-user limits of one test never leak into another. The
exec checks share one sandbox.
"""

import json
import os
import stat
import threading
import time

import harness
from harness import assert_error, wait_for

D = harness.Shared()

SANDBOX_FIELDS = {"id", "object", "status", "backend", "runtime", "template", "template_digest",
                  "created_at", "expires_at", "ttl_seconds", "env", "limits"}
KEY_FIELDS = {"id", "object", "user", "role", "tool_level", "scope", "created_at"}


def teardown_module():
    D.close()


def admin():
    return D.get().client()


def user(name, n=1, tool_level="sandbox"):
    """A client with the n-th key of user `name` (created once per module)."""
    def make(d):
        k = d.client().create_key(name, "member", tool_level)
        return k
    k = D.once("key:%s:%d:%s" % (name, n, tool_level), make)
    return D.get().client(k["key"])


def main_sandbox():
    """alice's long-lived sandbox for the exec checks."""
    a = user("alice")
    sb = D.once("sb:main", lambda d: a.create_sandbox(ttl_seconds=3600))
    return a, sb["id"]


def ids(items):
    return sorted(x["id"] for x in items)


def check_sandbox(sb, ttl=3600, env=None):
    assert isinstance(sb, dict), sb
    missing = SANDBOX_FIELDS - set(sb)
    assert not missing, "sandbox object lacks %s: %r" % (sorted(missing), sb)
    assert isinstance(sb["id"], str) and sb["id"], sb
    assert sb["object"] == "sandbox", sb
    assert sb["status"] == "running", sb
    assert sb["backend"] == "v2", sb
    assert sb["runtime"] == harness.test_runtime(), sb
    assert sb["template"] == "base", sb
    assert isinstance(sb["template_digest"], str) and len(sb["template_digest"]) >= 12, sb
    for f in ("created_at", "expires_at", "ttl_seconds"):
        assert type(sb[f]) is int, "%s is not an integer: %r" % (f, sb)
    now = time.time()
    assert abs(sb["created_at"] - now) < 120, "created_at %r is not unix seconds" % sb
    assert sb["ttl_seconds"] == ttl, sb
    assert abs(sb["expires_at"] - (sb["created_at"] + ttl)) <= 1, sb
    assert sb["env"] == (env or {}), sb
    # The CPU default is every core of the host (docs/api-contract.md).
    assert sb["limits"] == {"memory_mb": 2048, "pids": 128,
                            "cpu_millicores": 1000 * os.cpu_count()}, sb


def other_id(sid):
    """An id of the same shape as sid that does not exist."""
    last = sid[-1]
    if last.isdigit():
        repl = "0" if last != "0" else "1"
    elif last.isalpha():
        repl = "a" if last != "a" else "b"
    else:
        repl = "0"
    return sid[:-1] + repl


# --- health, auth, keys ------------------------------------------------------------------

def test_healthz_without_key():
    c = harness.Client(D.get().port)
    r = c.request("GET", "/healthz", key=None)
    assert r.status == 200, r
    assert r.body == {"status": "ok"}, r
    # A key, even a bad one, does not matter for the health check.
    r = c.request("GET", "/healthz", key="sbx_nope")
    assert r.status == 200, r


def test_missing_and_wrong_key_401():
    d = D.get()
    c = harness.Client(d.port)
    before = admin().list_keys()
    for method, path, body in (("GET", "/v1/sandboxes", None),
                               ("POST", "/v1/sandboxes", {}),
                               ("GET", "/v1/keys", None),
                               ("POST", "/v1/keys", {"user": "x", "role": "admin",
                                                     "tool_level": "sandbox"}),
                               ("GET", "/v1/sandboxes/nope", None),
                               ("POST", "/v1/sandboxes/run", {"shell": "true"})):
        assert_error(c.request(method, path, body, key=None), 401, "missing_api_key")
        assert_error(c.request(method, path, body, key="sbx_" + "0" * 48), 401,
                     "invalid_api_key")
        assert_error(c.request(method, path, body, key=d.admin_key + "x"), 401,
                     "invalid_api_key")
        assert_error(c.request(method, path, body, key=d.admin_key[:-1]), 401,
                     "invalid_api_key")
    # Not a bearer token at all.
    r = c.request("GET", "/v1/keys", key=None, headers={"Authorization": "Basic YTpi"})
    assert_error(r, 401, ("missing_api_key", "invalid_api_key"))
    assert admin().list_keys() == before, "keys changed after rejected requests"


def test_key_create_list_delete():
    a = admin()
    before = a.list_keys()
    r = a.request("POST", "/v1/keys", {"user": "kate", "role": "member",
                                       "tool_level": "sandbox"})
    assert r.status == 201, r
    k = r.body
    assert set(k) == KEY_FIELDS | {"key"}, k
    assert k["object"] == "key" and k["user"] == "kate" and k["role"] == "member", k
    assert k["tool_level"] == "sandbox", k
    assert k["key"].startswith("sbx_") and len(k["key"]) >= 24, k
    assert type(k["created_at"]) is int and abs(k["created_at"] - time.time()) < 120, k
    assert k["id"] != k["key"] and k["key"] not in k["id"], "key id reveals the key: %r" % k

    r = a.request("GET", "/v1/keys")
    assert r.status == 200, r
    assert r.body["object"] == "list", r.body
    assert k["key"].encode() not in r.raw, "GET /v1/keys shows a key"
    assert d_admin_key() not in r.raw.decode(), "GET /v1/keys shows the admin key"
    listed = [x for x in r.body["data"] if x["id"] == k["id"]]
    assert len(listed) == 1, r.body
    assert listed[0] == {f: k[f] for f in KEY_FIELDS}, (listed, k)
    for x in r.body["data"]:
        assert "key" not in x, x
    assert ids(r.body["data"]) == sorted(ids(before) + [k["id"]])

    # The key works; GET /v1/keys/{id} is not a route that reveals it either.
    kc = D.get().client(k["key"])
    assert kc.request("GET", "/v1/sandboxes").status == 200
    r = a.request("GET", "/v1/keys/" + k["id"])
    assert k["key"].encode() not in r.raw, r

    r = a.request("DELETE", "/v1/keys/" + k["id"])
    assert r.status == 200, r
    assert r.body == {"id": k["id"], "object": "key", "deleted": True}, r.body
    # Deleted: rejected on the very next request.
    assert_error(kc.request("GET", "/v1/sandboxes"), 401, "invalid_api_key")
    assert_error(kc.request("POST", "/v1/sandboxes", {}), 401, "invalid_api_key")
    assert ids(a.list_keys()) == ids(before)
    assert_error(a.request("DELETE", "/v1/keys/" + k["id"]), 404, "key_not_found")
    assert_error(a.request("DELETE", "/v1/keys/key_does_not_exist"), 404, "key_not_found")
    assert ids(a.list_keys()) == ids(before)


def d_admin_key():
    return D.get().admin_key


def test_key_create_bad_input():
    a = admin()
    before = a.list_keys()
    bad = [
        {"role": "member", "tool_level": "sandbox"},                       # no user
        {"user": "", "role": "member", "tool_level": "sandbox"},           # empty user
        {"user": 5, "role": "member", "tool_level": "sandbox"},
        {"user": "u", "role": "root", "tool_level": "sandbox"},
        {"user": "u", "role": "member", "tool_level": "everything"},
        {"user": "u", "role": None, "tool_level": "sandbox"},
        {"user": "u", "role": "member", "tool_level": 3},
    ]
    for body in bad:
        assert_error(a.request("POST", "/v1/keys", body), 400, "invalid_request")
    assert_error(a.request("POST", "/v1/keys", raw=b"{\"user\":"), 400, "invalid_json")
    assert_error(a.request("POST", "/v1/keys", raw=b"[]"), 400,
                 ("invalid_request", "invalid_json"))
    assert a.list_keys() == before, "keys changed after rejected creates"


def test_member_cannot_use_admin_routes():
    a = admin()
    m = user("mallory")
    before = a.list_keys()
    victim = before[0]["id"]
    assert_error(m.request("GET", "/v1/keys"), 403, "admin_required")
    assert_error(m.request("POST", "/v1/keys", {"user": "mallory", "role": "admin",
                                                "tool_level": "sandbox"}), 403, "admin_required")
    assert_error(m.request("DELETE", "/v1/keys/" + victim), 403, "admin_required")
    # A member sees admin_required even for a key id that does not exist (no probing).
    assert_error(m.request("DELETE", "/v1/keys/nope"), 403, "admin_required")
    assert a.list_keys() == before
    # The admin key still works, and an admin-role key made by the admin can manage keys.
    k2 = a.create_key("root2", "admin", "none")
    a2 = D.get().client(k2["key"])
    assert a2.request("GET", "/v1/keys").status == 200
    a.delete_key(k2["id"])


def test_tool_level_below_sandbox_403():
    a, sid = main_sandbox()
    before = ids(a.list_sandboxes())
    for level in ("basic", "none"):
        k = admin().create_key("alice", "member", level)
        c = D.get().client(k["key"])
        for method, path, body in (("GET", "/v1/sandboxes", None),
                                   ("POST", "/v1/sandboxes", {}),
                                   ("GET", "/v1/sandboxes/" + sid, None),
                                   ("DELETE", "/v1/sandboxes/" + sid, None),
                                   ("POST", "/v1/sandboxes/%s/exec" % sid, {"shell": "true"}),
                                   ("POST", "/v1/sandboxes/run", {"shell": "true"})):
            assert_error(c.request(method, path, body), 403, "insufficient_tool_level")
        admin().delete_key(k["id"])
    assert ids(a.list_sandboxes()) == before
    assert a.get_sandbox(sid)["status"] == "running"


# --- sandboxes -----------------------------------------------------------------------------

def test_sandbox_create_get_list_delete():
    c = user("lena")
    c2 = user("lena", 2)    # a second key of the same user
    assert c.list_sandboxes() == []
    r = c.request("POST", "/v1/sandboxes", {"ttl_seconds": 86400, "env": {"FOO": "bar baz",
                                                                           "_x1": ""}},
                  timeout=120)
    assert r.status == 201, r
    sb = r.body
    check_sandbox(sb, ttl=86400, env={"FOO": "bar baz", "_x1": ""})
    sid = sb["id"]
    try:
        # Answered only once exec-ready: the first exec works at once, and sees the env.
        out = c.exec(sid, shell='printf "%s|%s" "$FOO" "${_x1-unset}"')
        assert out["stdout"] == "bar baz|", out
        got = c.get_sandbox(sid)
        assert got == sb, (got, sb)
        r = c.request("GET", "/v1/sandboxes")
        assert r.status == 200 and r.body["object"] == "list", r
        assert r.body["data"] == [sb], r.body
        # The user's other key sees the same sandboxes.
        assert c2.list_sandboxes() == [sb]
        assert c2.get_sandbox(sid) == sb
        # Defaults: template base, ttl 3600, no env.
        sb2 = c.create_sandbox(template="base", backend="v2")
        check_sandbox(sb2)
        assert sb2["id"] != sid
        assert ids(c.list_sandboxes()) == sorted([sid, sb2["id"]])
        r = c.request("DELETE", "/v1/sandboxes/" + sb2["id"])
        assert r.status == 200, r
        assert r.body == {"id": sb2["id"], "object": "sandbox", "deleted": True}, r.body
        assert_error(c.request("GET", "/v1/sandboxes/" + sb2["id"]), 404, "sandbox_not_found")
        assert_error(c.request("DELETE", "/v1/sandboxes/" + sb2["id"]), 404,
                     "sandbox_not_found")
        assert_error(c.request("POST", "/v1/sandboxes/%s/exec" % sb2["id"],
                               {"shell": "true"}), 404, "sandbox_not_found")
        assert c.list_sandboxes() == [sb]
    finally:
        c.request("DELETE", "/v1/sandboxes/" + sid)
    assert_error(c.request("GET", "/v1/sandboxes/" + sid), 404, "sandbox_not_found")
    assert c.list_sandboxes() == []


def _strip(r, sid):
    text = r.raw.decode("utf-8", "replace").replace(sid, "<ID>")
    hdrs = {k: v for k, v in r.headers.items()
            if k not in ("x-request-id", "date", "content-length")}
    return r.status, text.replace(other_id(sid), "<ID>"), hdrs


def test_other_users_sandbox_is_404_like_a_missing_one():
    a, sid = main_sandbox()
    bob = user("bob")
    missing = other_id(sid)
    for method, path, body in (("GET", "/v1/sandboxes/%s", None),
                               ("DELETE", "/v1/sandboxes/%s", None),
                               ("POST", "/v1/sandboxes/%s/exec", {"shell": "touch /workspace/bob"})):
        theirs = bob.request(method, path % sid, body)
        nothing = bob.request(method, path % missing, body)
        assert_error(theirs, 404, "sandbox_not_found")
        assert_error(nothing, 404, "sandbox_not_found")
        a1, b1 = _strip(theirs, sid), _strip(nothing, missing)
        assert a1 == b1, "another user's sandbox answers differently from a missing one:" \
                         "\n%r\n%r" % (a1, b1)
    assert sid not in ids(bob.list_sandboxes())
    # Nothing happened to alice's sandbox.
    assert a.get_sandbox(sid)["status"] == "running"
    r = a.exec(sid, shell="test -e /workspace/bob && echo yes || echo no")
    assert r["stdout"] == "no\n", r


def _rejected_creates(c, bodies, code):
    before = c.list_sandboxes()
    for body in bodies:
        r = c.request("POST", "/v1/sandboxes", body, timeout=120)
        assert_error(r, 400, code)
    assert c.list_sandboxes() == before, "sandboxes changed after rejected creates"


def test_invalid_ttl():
    c = user("tina")
    _rejected_creates(c, [{"ttl_seconds": v} for v in
                          (0, 86401, "abc", 1.5, -1, "60", True, [60], 2 ** 32, -2 ** 40)],
                      # (null is left out: the daemon treats an explicit null as "absent")
                      "invalid_ttl")
    # Beyond 64 bits the JSON parser itself gives up: either code is fair.
    r = c.request("POST", "/v1/sandboxes", raw=b'{"ttl_seconds": 100000000000000000000000}')
    assert_error(r, 400, ("invalid_ttl", "invalid_json"))
    assert c.list_sandboxes() == []
    # The same checks on the run route, which must not create anything either.
    for v in (0, 86401, "abc", 1.5):
        assert_error(c.request("POST", "/v1/sandboxes/run", {"ttl_seconds": v, "shell": "true"}),
                     400, "invalid_ttl")
    assert c.list_sandboxes() == []


def test_invalid_env():
    c = user("tina")
    bad = [{"SBX_X": "1"}, {"SBX_": "1"}, {"GOOGLE_X": "1"}, {"1A": "x"}, {"A-B": "x"},
           {"": "x"}, {"A B": "x"}, {"A=B": "x"}, {"É": "x"}, {"A": 1}, {"A": None},
           {"A": True}, {"A": ["x"]}, {"A": {"b": "c"}}, {"OK": "fine", "SBX_ADMIN_KEY": "x"}]
    _rejected_creates(c, [{"env": e} for e in bad], "invalid_env")
    # env itself not an object: a wrong type (the contract does not say which of the two).
    before = c.list_sandboxes()
    for e in ("A=B", ["A"], 5):
        assert_error(c.request("POST", "/v1/sandboxes", {"env": e}), 400,
                     ("invalid_env", "invalid_request"))
    assert c.list_sandboxes() == before


def test_invalid_template_and_backend():
    c = user("tina")
    _rejected_creates(c, [{"template": t} for t in ("nope", "../base", "", "BASE")],
                      "invalid_template")
    _rejected_creates(c, [{"backend": b} for b in ("v3", "", "gvisor", "V1")], "invalid_backend")


def test_concurrency_limits():
    k1 = user("carol", 1)
    k2 = user("carol", 2)
    made = []
    try:
        for _ in range(3):
            made.append((k1, k1.create_sandbox(ttl_seconds=600)["id"]))
        before = ids(k1.list_sandboxes())
        assert_error(k1.request("POST", "/v1/sandboxes", {"ttl_seconds": 600}, timeout=120),
                     429, "sandbox_concurrency_limit")
        assert_error(k1.request("POST", "/v1/sandboxes/run", {"shell": "true"}, timeout=120),
                     429, "sandbox_concurrency_limit")
        assert ids(k1.list_sandboxes()) == before
        for _ in range(2):
            made.append((k2, k2.create_sandbox(ttl_seconds=600)["id"]))
        before = ids(k2.list_sandboxes())
        assert len(before) == 5, before
        assert_error(k2.request("POST", "/v1/sandboxes", {"ttl_seconds": 600}, timeout=120),
                     429, "sandbox_concurrency_limit")
        assert ids(k2.list_sandboxes()) == before
        # Another user is not affected.
        other = user("dave")
        sb = other.create_sandbox(ttl_seconds=600)
        other.delete_sandbox(sb["id"])
        # Deleting frees the slot at once.
        c, sid = made.pop(0)
        c.delete_sandbox(sid)
        made.append((k2, k2.create_sandbox(ttl_seconds=600)["id"]))
        assert len(k2.list_sandboxes()) == 5
    finally:
        for c, sid in made:
            c.request("DELETE", "/v1/sandboxes/" + sid)
    assert k1.list_sandboxes() == []


# --- exec ----------------------------------------------------------------------------------

def _exec(c, sid, body, timeout=120):
    return c.request("POST", "/v1/sandboxes/%s/exec" % sid, body, timeout=timeout)


def test_exec_shell_exit_code_and_streams():
    a, sid = main_sandbox()
    r = _exec(a, sid, {"shell": "echo hello; echo oops >&2; exit 7"})
    assert r.status == 200, r
    b = r.body
    assert set(b) >= {"object", "exit_code", "stdout", "stderr", "duration_ms", "timed_out"}, b
    assert b["object"] == "exec", b
    assert b["exit_code"] == 7, b
    assert b["stdout"] == "hello\n", b
    assert b["stderr"] == "oops\n", b
    assert b["timed_out"] is False, b
    assert type(b["duration_ms"]) is int and 0 <= b["duration_ms"] < 60000, b
    r = a.exec(sid, shell="true")
    assert r["exit_code"] == 0 and r["stdout"] == "" and r["stderr"] == "", r
    # Pipes, quoting and multi-line output come back byte for byte.
    r = a.exec(sid, shell="printf 'a\\nb\\n' | tr a-z A-Z; printf '%s' \"x'y\"")
    assert r["stdout"] == "A\nB\nx'y", r


def test_exec_languages():
    a, sid = main_sandbox()
    r = a.exec(sid, language="python", code="import sys\nprint('py', 6 * 7)\n"
                                                "print('err', file=sys.stderr)\nsys.exit(3)")
    assert (r["exit_code"], r["stdout"], r["stderr"]) == (3, "py 42\n", "err\n"), r
    r = a.exec(sid, language="bash", code='x=41; echo "bash $((x + 1))"')
    assert (r["exit_code"], r["stdout"]) == (0, "bash 42\n"), r
    r = a.exec(sid, language="node", code="console.log('node', 6 * 7);"
                                          "console.error('nerr'); process.exitCode = 4;")
    assert (r["exit_code"], r["stdout"], r["stderr"]) == (4, "node 42\n", "nerr\n"), r


def _listing(a, sid):
    """The workspace's tree as the sandbox sees it (names and sizes)."""
    r = a.exec(sid, language="python", code=(
        "import os\n"
        "for root, dirs, files in sorted(os.walk('/workspace')):\n"
        "    for n in sorted(dirs + files):\n"
        "        p = os.path.join(root, n)\n"
        "        print(p, os.lstat(p).st_size)\n"))
    assert r["exit_code"] == 0, r
    return r["stdout"]


def test_exec_everyday_commands():
    """ls, stat, find, ps and friends work on the sandbox's file systems."""
    a, sid = main_sandbox()
    a.sh(sid, "mkdir -p /workspace/ls && echo hi > /workspace/ls/a.txt")
    for cmd, want in (("ls /workspace/ls", "a.txt\n"),
                      ("ls -a /workspace/ls", ".\n..\na.txt\n"),
                      ("stat -c %s /workspace/ls/a.txt", "3\n"),
                      # A subshell: a plain cd would stay in the default session
                      # (docs/sessions.md) and move the next tests' commands.
                      ("(cd /tmp && echo x > y && ls)", "y\n"),
                      ("find /workspace/ls -type f", "/workspace/ls/a.txt\n"),
                      ("ls -d /", "/\n")):
        r = a.exec(sid, shell=cmd)
        assert (r["exit_code"], r["stdout"]) == (0, want), "%s: %r" % (cmd, r)
    a.sh(sid, "rm -r /workspace/ls /tmp/y")
    r = a.exec(sid, shell="ps -eo pid,args")
    assert r["exit_code"] == 0 and "ps -eo" in r["stdout"], r


def test_exec_cwd_env_and_workspace():
    a, sid = main_sandbox()
    assert a.sh(sid, "pwd") == "/workspace\n"
    assert a.sh(sid, "pwd", cwd="/tmp") == "/tmp\n"
    r = a.exec(sid, language="python", code="import os; print(os.getcwd())", cwd="/tmp")
    assert r["stdout"] == "/tmp\n", r
    out = a.sh(sid, 'printf "%s" "$GREETING"', env={"GREETING": "hi there"})
    assert out == "hi there", out
    # env of one exec does not leak into the next.
    assert a.sh(sid, 'printf "%s" "${GREETING-unset}"') == "unset"
    # The workspace persists between execs; /tmp is writable too.
    a.sh(sid, "echo persisted > /workspace/f.txt && mkdir -p /workspace/d && echo t > /tmp/t")
    assert a.sh(sid, "cat f.txt") == "persisted\n"
    assert a.sh(sid, "pwd", cwd="/workspace/d") == "/workspace/d\n"
    before = _listing(a, sid)
    assert_error(_exec(a, sid, {"shell": "pwd", "cwd": "/does/not/exist"}), 400, "invalid_cwd")
    assert_error(_exec(a, sid, {"shell": "pwd", "cwd": 5}), 400,
                 ("invalid_cwd", "invalid_request"))
    for e in ({"SBX_X": "1"}, {"GOOGLE_APPLICATION_CREDENTIALS": "x"}, {"1A": "x"}, {"A": 1}):
        assert_error(_exec(a, sid, {"shell": "touch /workspace/bad", "env": e}), 400,
                     "invalid_env")
    assert _listing(a, sid) == before, "a rejected exec changed the workspace"


def test_exec_bad_requests():
    a, sid = main_sandbox()
    before = _listing(a, sid)
    for body in ({}, {"shell": "touch /workspace/x", "language": "bash",
                      "code": "touch /workspace/x"},
                 {"language": "ruby", "code": "puts 1"}, {"language": "python"},
                 {"code": "print(1)"}, {"shell": 5}, {"shell": ["ls"]},
                 {"language": "python", "code": 5}, {"shell": None}):
        assert_error(_exec(a, sid, body), 400, "invalid_request")
    # (null is left out on purpose: the daemon treats an explicit null as "absent".)
    for t in (0, 901, "x", -1, 1.5, "10", True, [5]):
        assert_error(_exec(a, sid, {"shell": "touch /workspace/x", "timeout_seconds": t}), 400,
                     "invalid_timeout")
    assert_error(a.request("POST", "/v1/sandboxes/%s/exec" % sid, raw=b"{\"shell\": "), 400,
                 "invalid_json")
    assert _listing(a, sid) == before, "a rejected exec changed the workspace"
    # Boundaries are accepted.
    assert a.exec(sid, shell="echo ok", timeout_seconds=1)["stdout"] == "ok\n"
    assert a.exec(sid, shell="echo ok", timeout_seconds=900)["stdout"] == "ok\n"


def _sleepers(a, sid):
    r = a.exec(sid, language="python", code=(
        "import os\n"
        "n = 0\n"
        "for p in os.listdir('/proc'):\n"
        "    if p.isdigit():\n"
        "        try:\n"
        "            c = open('/proc/%s/cmdline' % p, 'rb').read().split(b'\\0')\n"
        "        except OSError:\n"
        "            continue\n"
        "        if c and os.path.basename(c[0]) == b'sleep':\n"
        "            n += 1\n"
        "print(n)\n"))
    return int(r["stdout"])


def test_exec_timeout_kills_the_process_group():
    a, sid = main_sandbox()
    t0 = time.time()
    r = a.exec(sid, shell="echo started; sleep 100 & sleep 100", timeout_seconds=2)
    took = time.time() - t0
    assert r["timed_out"] is True, r
    assert r["exit_code"] == 137, r
    assert 1.5 <= took < 15, "a 2 s timeout took %.1fs" % took
    assert 1500 <= r["duration_ms"] < 15000, r
    assert r["stdout"] == "started\n", "output before the timeout is kept: %r" % r
    # The background sleep is gone too (give the kill a moment to land).
    wait_for(lambda: _sleepers(a, sid) == 0, 5, 0.5, "no sleep process left")
    out = a.exec(sid, shell="pgrep -x sleep || echo none")
    assert out["stdout"] == "none\n", out
    # The sandbox still works normally afterwards.
    r = a.exec(sid, shell="echo after")
    assert (r["exit_code"], r["stdout"], r["timed_out"]) == (0, "after\n", False), r


def test_concurrent_exec_is_busy():
    a, sid = main_sandbox()
    result = {}

    def long():
        result["r"] = _exec(a, sid, {"shell": "touch /workspace/long.started; sleep 3; echo slow"})

    a.request("DELETE", "/v1/sandboxes/%s/files/long.started" % sid)
    t = threading.Thread(target=long)
    t.start()
    try:
        # Running for sure (a fixed sleep is not, on a loaded host); 3 s are left.
        wait_for(lambda: a.request("GET", "/v1/sandboxes/%s/files/long.started" % sid).status
                 == 200, 60, 0.1, "the long exec to start")
        r = _exec(a, sid, {"shell": "touch /workspace/busy; echo fast"})
        assert_error(r, 409, "sandbox_busy")
        # Another key of the same user is refused the same way.
        assert_error(_exec(user("alice", 2), sid, {"shell": "echo"}), 409, "sandbox_busy")
    finally:
        t.join(60)
    assert result["r"].status == 200 and result["r"].body["stdout"] == "slow\n", result
    assert a.sh(sid, "test -e /workspace/busy && echo yes || echo no") == "no\n"
    assert a.sh(sid, "echo free") == "free\n"


def test_run_creates_execs_destroys():
    c = user("rita")
    assert c.list_sandboxes() == []
    r = c.request("POST", "/v1/sandboxes/run",
                  {"ttl_seconds": 60, "env": {"WHO": "run"}, "language": "python",
                   "code": "import os; print('hi', os.environ['WHO']); raise SystemExit(3)"},
                  timeout=180)
    assert r.status == 200, r
    b = r.body
    assert (b["exit_code"], b["stdout"], b["timed_out"]) == (3, "hi run\n", False), b
    assert b["object"] == "exec", b
    assert isinstance(b.get("sandbox_id"), str) and b["sandbox_id"], b
    assert type(b["duration_ms"]) is int and "stderr" in b, b
    assert_error(c.request("GET", "/v1/sandboxes/" + b["sandbox_id"]), 404, "sandbox_not_found")
    assert c.list_sandboxes() == []
    r = c.request("POST", "/v1/sandboxes/run", {"shell": "echo shell; pwd"}, timeout=180)
    assert r.status == 200 and r.body["stdout"] == "shell\n/workspace\n", r
    # Rejected before anything is created.
    assert_error(c.request("POST", "/v1/sandboxes/run", {"ttl_seconds": 60}), 400,
                 "invalid_request")
    assert_error(c.request("POST", "/v1/sandboxes/run", {"shell": "true", "timeout_seconds": 0}),
                 400, "invalid_timeout")
    assert_error(c.request("POST", "/v1/sandboxes/run", {"shell": "true", "env": {"SBX_A": "1"}}),
                 400, "invalid_env")
    assert c.list_sandboxes() == []
    # Its workspace dir is removed too (off the request path: allow a few seconds).
    d = D.get()
    wait_for(lambda: not os.path.exists(d.sandbox_dir(b["sandbox_id"])), 15, 0.3,
             "run's sandbox dir removed")


# --- generic errors ------------------------------------------------------------------------

def test_malformed_and_wrong_types():
    c = user("gina")
    before = c.list_sandboxes()
    for raw in (b"{", b"{\"ttl_seconds\": }", b"not json", b"{\"a\":1}garbage", b"\xff\xfe"):
        assert_error(c.request("POST", "/v1/sandboxes", raw=raw), 400, "invalid_json")
    for raw in (b"[]", b"[1,2]", b"\"str\"", b"42", b"null"):
        assert_error(c.request("POST", "/v1/sandboxes", raw=raw), 400,
                     ("invalid_request", "invalid_json"))
    assert c.list_sandboxes() == before


def test_unknown_route_and_wrong_method():
    a, sid = main_sandbox()
    for path in ("/v1/nope", "/v2/sandboxes", "/v1/sandboxes/%s/nope" % sid, "/"):
        assert_error(a.request("GET", path), 404, "not_found")
    for method, path in (("PUT", "/v1/sandboxes"), ("DELETE", "/v1/sandboxes"),
                         ("PATCH", "/v1/sandboxes/" + sid),
                         ("GET", "/v1/sandboxes/%s/exec" % sid),
                         ("PUT", "/v1/keys"), ("POST", "/healthz")):
        r = a.request(method, path, {} if method in ("PUT", "PATCH", "POST") else None)
        assert_error(r, 405, "method_not_allowed")
    # GET on a key id: the path exists only for DELETE (the contract does not say which).
    r = a.request("GET", "/v1/keys/x")
    if r.status == 405:
        assert_error(r, 405, "method_not_allowed")
    else:
        assert_error(r, 404, ("not_found", "key_not_found"))
    assert a.get_sandbox(sid)["status"] == "running"


def test_body_too_large_413():
    c = user("gina")
    before = c.list_sandboxes()
    big = json.dumps({"env": {"A": "x" * (2 * 1024 * 1024)}}).encode()
    assert_error(c.request("POST", "/v1/sandboxes", raw=big, timeout=60), 413, "body_too_large")
    assert_error(c.request("POST", "/v1/sandboxes", raw=big, timeout=60,
                           headers={"Transfer-Encoding": "chunked"}), 413, "body_too_large")
    a, sid = main_sandbox()
    big = json.dumps({"shell": "echo " + "x" * (2 * 1024 * 1024)}).encode()
    assert_error(a.request("POST", "/v1/sandboxes/%s/exec" % sid, raw=big, timeout=60), 413,
                 "body_too_large")
    assert c.list_sandboxes() == before
    # The daemon is fine afterwards.
    assert c.request("GET", "/v1/sandboxes").status == 200


def test_request_id_on_every_response():
    d = D.get()
    c = harness.Client(d.port)
    seen = []
    for method, path, key in (("GET", "/healthz", None), ("GET", "/v1/keys", None),
                              ("GET", "/v1/keys", d.admin_key), ("GET", "/nope", d.admin_key),
                              ("PUT", "/v1/keys", d.admin_key),
                              ("GET", "/v1/sandboxes/nope", d.admin_key)):
        r = c.request(method, path, key=key, check_request_id=False)
        rid = r.headers.get("x-request-id")
        assert rid, "%s %s -> %d has no x-request-id" % (method, path, r.status)
        seen.append(rid)
    assert len(set(seen)) == len(seen), "request ids repeat: %r" % seen


# --- expiry and the admin key -------------------------------------------------------------

def test_sandbox_expires_on_its_own():
    d = D.get()
    c = user("eve")
    t0 = time.time()  # the ttl runs from the create (which takes a while on a loaded host)
    sb = c.create_sandbox(ttl_seconds=6)
    check_sandbox(sb, ttl=6)
    path = d.sandbox_dir(sb["id"])
    assert os.path.isdir(path), "no sandbox dir at %s" % path
    # No request at all while waiting: the daemon must reap it by itself.
    wait_for(lambda: not os.path.exists(path), 15, 0.25, "expired sandbox dir removed")
    took = time.time() - t0
    assert_error(c.request("GET", "/v1/sandboxes/" + sb["id"]), 404, "sandbox_not_found")
    assert c.list_sandboxes() == []
    assert took >= 5, "sandbox gone %.1fs after its create, before its ttl of 6 s" % took


def test_a_ttl_shorter_than_the_start_ends_the_sandbox_not_its_create():
    """Three creates at once (the key's limit here) with a 1 s TTL, which starts at the
    create on a whole second: their starts outlast it. Each create still answers 201 with its sandbox, which then
    expires as any other; none is a 500 'did not start (expired)'."""
    d = D.get()
    c = user("eve")
    got = [None] * 3

    def create(i):
        got[i] = c.request("POST", "/v1/sandboxes", {"ttl_seconds": 1}, timeout=120)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(len(got))]
    # 0.8 s into a second, so that the TTL ends 0.2 s after the creates begin, long before
    # any gVisor start is over.
    time.sleep((1.8 - time.time() % 1) % 1)
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status for r in got] == [201] * len(got), [(r.status, r.body) for r in got]
    for r in got:
        assert r.body["status"] == "running" and r.body["ttl_seconds"] == 1, r.body
        path = d.sandbox_dir(r.body["id"])
        wait_for(lambda: not os.path.exists(path), 15, 0.25, "expired sandbox dir removed")
        assert_error(c.request("GET", "/v1/sandboxes/" + r.body["id"]), 404,
                     "sandbox_not_found")


def test_admin_key_file_on_fresh_data_dir():
    with harness.Daemon(admin_key=None) as d:
        path = os.path.join(d.data_dir, "admin.key")
        st = os.stat(path)
        assert stat.S_IMODE(st.st_mode) == 0o600, "admin.key mode %o" % stat.S_IMODE(st.st_mode)
        key = open(path).read().strip()
        assert key.startswith("sbx_") and len(key) >= 24, key
        c = d.client(key)
        assert c.request("GET", "/v1/keys").status == 200
        log = d.log_text()
        assert key not in log, "the daemon log contains the admin key"
        assert path in log or "admin.key" in log, "the log does not say where the key is"
        d.restart()
        assert open(path).read().strip() == key, "admin.key changed on restart"
        assert d.client(key).request("GET", "/v1/keys").status == 200
        assert key not in d.log_text()


def test_preset_admin_key_not_logged():
    d = D.get()
    # A member key made and used here, so the check does not hang on what ran before.
    k = d.client().create_key("unlogged")
    c = d.client(k["key"])
    sid = c.create_sandbox(ttl_seconds=120)["id"]
    c.sh(sid, "true")
    c.delete_sandbox(sid)
    log = d.log_text()
    assert d.admin_key not in log, "the daemon log contains SBX_ADMIN_KEY"
    assert k["key"] not in log, "the daemon log contains a member key"
    # Neither are the member keys the module's other tests made.
    for name, val in D.cache.items():
        if name.startswith("key:"):
            assert val["key"] not in log, "the daemon log contains a member key"
