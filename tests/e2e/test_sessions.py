"""Shell sessions (docs/sessions.md) through a real sbxd: every example of the product's
sessions document (spec 003) in our API, plus every bad input of the session routes.

One daemon for the module; one sandbox with the default session for most checks, and
one created with enable_default_session: false. Paths the document puts at / (/app,
/build, /test) live under /workspace here: the root filesystem is read-only.
"""

import http.client
import json
import time

import harness
from harness import assert_error

D = harness.Shared()

SESSION_FIELDS = {"id", "object", "cwd", "env", "command_timeout_ms", "created_at", "default"}


def teardown_module():
    D.close()


def user(name="sessions"):
    k = D.once("key:" + name, lambda d: d.client().create_key(name, "member", "sandbox"))
    return D.get().client(k["key"])


def main_sandbox():
    """A sandbox with the default session, and a sandbox-wide variable."""
    a = user()
    sb = D.once("sb:main", lambda d: a.create_sandbox(env={"SANDBOX_WIDE": "yes"}))
    return a, sb["id"]


def path(sid, rest=""):
    return "/v1/sandboxes/%s/sessions%s" % (sid, rest)


def run(a, sid, cmd, **fields):
    """exec that must answer 200; returns the result."""
    return a.exec(sid, shell=cmd, **fields)


def out(a, sid, cmd, **fields):
    r = run(a, sid, cmd, **fields)
    assert r["exit_code"] == 0, r
    return r["stdout"]


def sessions(a, sid):
    r = a.request("GET", path(sid))
    assert r.status == 200, r
    assert r.body["object"] == "list", r.body
    return {s["id"]: s for s in r.body["data"]}


def create(a, sid, **fields):
    r = a.request("POST", path(sid), fields)
    assert r.status == 201, r
    assert set(r.body) >= SESSION_FIELDS, r.body
    assert r.body["object"] == "session", r.body
    return r.body


# --- the default session -------------------------------------------------------------

def test_default_session_keeps_cd():
    a, sid = main_sandbox()
    out(a, sid, "mkdir -p /workspace/app")
    run(a, sid, "cd /workspace/app")
    assert out(a, sid, "pwd") == "/workspace/app\n"
    run(a, sid, "cd /workspace")


def test_default_session_keeps_exports():
    a, sid = main_sandbox()
    run(a, sid, "export MY_VAR=hello")
    assert out(a, sid, 'echo "$MY_VAR"') == "hello\n"
    # Values with newlines and quotes survive the trip through the session's state.
    run(a, sid, "export TRICKY=$'a\\nb \"c\" $d'")
    assert out(a, sid, 'printf %s "$TRICKY"') == 'a\nb "c" $d'
    # What is not exported is not kept (each command is a fresh shell): documented.
    run(a, sid, "PLAIN=1")
    assert out(a, sid, 'echo "[$PLAIN]"') == "[]\n"
    # The sandbox's own env is there from the start.
    assert out(a, sid, 'echo "$SANDBOX_WIDE"') == "yes\n"


def test_every_kind_of_exported_value_comes_back_as_it_was():
    """The state is what bash's `export -p` prints, read back by the agent: each quoting
    bash uses, and what it does not pass to a child, as bash would."""
    a, sid = main_sandbox()
    a.ok("POST", path(sid), {"session_id": "values"}, status=201)
    values = {
        "Q_DQ": 'back\\slash "quote" $dollar `tick`',
        "Q_NL": "two\nlines\ttab",
        "Q_CTL": "bell\x07esc\x1b\x01",
        "Q_UTF8": "\u0103\u00ee\u0219\u021b \u2713",
        "Q_EMPTY": "",
        "Q_SQ": "it's",
    }

    def ansi_c(v):  # bash's $'...' for v: raw UTF-8, escapes for the rest
        return "".join("\\" + ch if ch in "\\'" else "\\x%02x" % ord(ch) if ord(ch) < 32
                       else ch for ch in v)
    script = "; ".join("export %s=$'%s'" % (k, ansi_c(v)) for k, v in values.items())
    run(a, sid, script, session_id="values")
    for k, v in values.items():
        got = out(a, sid, 'printf %%s "$%s"' % k, session_id="values")
        assert got == v, (k, got, v)
    # Readonly and integer exports are kept with their value; an exported array, a variable
    # exported but never set, and a removed export are not.
    run(a, sid, "declare -rx Q_RO=fixed; declare -ix Q_INT=6*7; declare -ax Q_ARR=(1 2); "
                "export Q_UNSET; unset Q_EMPTY", session_id="values")
    assert out(a, sid, 'echo "$Q_RO $Q_INT [${Q_ARR-none}] [${Q_UNSET-none}] [${Q_EMPTY-gone}]"',
               session_id="values") == "fixed 42 [none] [none] [gone]\n"
    # In POSIX mode bash prints `export N=...`; a function named export changes nothing.
    run(a, sid, "set -o posix; export Q_POSIX='p q'", session_id="values")
    run(a, sid, "export() { :; }; export Q_FN=kept", session_id="values")
    assert out(a, sid, 'echo "$Q_POSIX|$Q_FN"', session_id="values") == "p q|\n"
    # Something else the command writes on the state pipe drops that command's state only.
    # A state far larger than the pipe (bash prints $'\001' for each byte: 1.6 MB here).
    r = run(a, sid, "for v in Q_B1 Q_B2 Q_B3 Q_B4; do "
                    "export $v=$(head -c 100000 /dev/zero | tr '\\0' '\\1'); done",
            session_id="values")
    assert r["session"]["saved"] is True, r["session"]
    assert out(a, sid, 'echo "${#Q_B1} ${#Q_B4}"', session_id="values") == "100000 100000\n"
    run(a, sid, "unset Q_B1 Q_B2 Q_B3 Q_B4", session_id="values")
    # One variable past what execve takes (128 KiB) is not kept: no later command could start.
    r = run(a, sid, "export Q_HUGE=$(head -c 200000 /dev/zero | tr '\\0' a)", session_id="values")
    assert r["session"]["saved"] is False, r["session"]
    assert out(a, sid, 'echo "[${Q_HUGE-none}]"', session_id="values") == "[none]\n"
    r = run(a, sid, "export Q_LOST=1; printf 'x\\0y' >&100", session_id="values")
    assert r["session"]["saved"] is False, r
    assert out(a, sid, 'echo "[$Q_LOST][$Q_RO]"', session_id="values") == "[][fixed]\n"


def test_default_session_listed_and_flagged():
    a, sid = main_sandbox()
    sb = a.get_sandbox(sid)
    assert sb["enable_default_session"] is True, sb
    s = sessions(a, sid)
    assert "default" in s, s
    assert s["default"]["default"] is True and s["default"]["object"] == "session", s


def test_exec_result_names_its_session():
    a, sid = main_sandbox()
    r = run(a, sid, "true")
    assert r["session"] == {"id": "default", "created": False, "saved": True}, r


def test_exit_ends_only_the_command():
    a, sid = main_sandbox()
    out(a, sid, "mkdir -p /workspace/ex")
    r = run(a, sid, "cd /workspace/ex; export AFTER_EXIT=1; exit 3")
    assert r["exit_code"] == 3 and r["session"]["saved"] is True, r
    # The state it reached before `exit` is kept, and the session goes on.
    assert out(a, sid, 'pwd; echo "$AFTER_EXIT"') == "/workspace/ex\n1\n"
    # `exec` replaces the shell: that command's state is not saved, and the flag says so.
    r = run(a, sid, "cd /; export LOST=1; exec true")
    assert r["exit_code"] == 0 and r["session"]["saved"] is False, r
    assert out(a, sid, 'pwd; echo "[$LOST]"') == "/workspace/ex\n[]\n"
    run(a, sid, "cd /workspace")


def test_a_shell_started_ahead_is_still_a_fresh_one():
    """The next command's bash is started once a command ends (docs/sessions.md, "The spare
    shell"); what it runs must not tell, however long it waited."""
    a, sid = main_sandbox()
    out(a, sid, "mkdir -p /workspace/ahead && cd /workspace/ahead")
    time.sleep(1.5)
    # bash counts SECONDS from its start; a fresh shell says 0.
    assert out(a, sid, 'echo "$SECONDS $0 $#"; pwd') == "0 /bin/bash 0\n/workspace/ahead\n"
    # The directory replaced from elsewhere while the next shell waited in the old one.
    out(a, sid, "rm -rf /workspace/ahead && mkdir /workspace/ahead && touch /workspace/ahead/f",
        session_id="elsewhere")
    assert out(a, sid, "ls") == "f\n"
    # Quotes, newlines and exit codes come through as for any command.
    r = run(a, sid, "echo \"it's\" 'a \"b\"'\nexit 4")
    assert r["exit_code"] == 4 and r["stdout"] == 'it\'s a "b"\n', r
    assert out(a, sid, "pwd; cd /workspace") == "/workspace/ahead\n"


def shell_pid(a, sid, **fields):
    return int(out(a, sid, "echo $$", **fields))


def test_one_shell_runs_command_after_command():
    """The resident shell (docs/sessions.md): commands that change nothing but the
    directory and the exports run one after another in the same bash."""
    a, sid = main_sandbox()
    s = "resident-a"
    shell_pid(a, sid, session_id=s)
    first = shell_pid(a, sid, session_id=s)
    out(a, sid, "mkdir -p /tmp/res && cd /tmp/res && export RES=1 RES2=\"it's \\\"q\\\"\"",
        session_id=s)
    assert out(a, sid, 'echo "$$ $PWD $RES $RES2"', session_id=s) == \
        "%d /tmp/res 1 it's \"q\"\n" % first
    r = run(a, sid, "echo out; echo err >&2; false", session_id=s)
    assert (r["stdout"], r["stderr"], r["exit_code"]) == ("out\n", "err\n", 1), r
    assert r["session"]["saved"] is True, r
    # Each command still starts as a fresh bash of the session would, SECONDS counted from
    # its start (whole seconds of the clock: 1 when it started just before one ticks over).
    out(a, sid, "sleep 2.2", session_id=s)
    status, secs, zero, argc = out(a, sid, 'echo "$? $SECONDS $0 $#"; [ -t 0 ] || cat',
                                   session_id=s).split()
    assert (status, zero, argc) == ("0", "/bin/bash", "0") and int(secs) <= 1, secs
    assert shell_pid(a, sid, session_id=s) == first


# What a command may leave in a shell that a fresh bash of the session would not have:
# after each, the next command runs in another bash and sees none of it.
LEFTOVERS = [
    ("x=1", '[ -z "${x+set}" ]'),
    ("f() { :; }", "! declare -F f"),
    ("alias ll=ls", "! alias ll"),
    ("set -o noglob", "[[ $- != *f* ]]"),
    ("shopt -s extglob", "! shopt -q extglob"),
    ("trap 'echo int' INT", '[ -z "$(trap -p INT)" ]'),
    ("umask 077", '[ "$(umask)" = 0022 ]'),
    ("ulimit -S -s 4096", '[ "$(ulimit -S -s)" != 4096 ]'),
    ("IFS=,", "[ \"$IFS\" = $' \\t\\n' ]"),
    ("exec 7>/dev/null", "[ ! -e /proc/self/fd/7 ]"),
    ("pushd /tmp >/dev/null", '[ "$(dirs -p | wc -l)" = 1 ]'),
    ("export -n MOVED", '[ -z "${MOVED+set}" ]'),
    ("sleep 30 &", '[ -z "$(jobs -p)" ]'),
    ("[[ ab =~ (a) ]]", '[ -z "${BASH_REMATCH+set}" ]'),
    ("getopts a opt -a", '[ "$OPTIND" = 1 ]'),
]


def test_what_a_command_leaves_in_its_shell_retires_it():
    a, sid = main_sandbox()
    s = "resident-b"
    for left, check in LEFTOVERS:
        out(a, sid, "export MOVED=1", session_id=s)
        before = shell_pid(a, sid, session_id=s)
        r = run(a, sid, left, session_id=s)
        assert r["exit_code"] == 0 and r["session"]["saved"] is True, (left, r)
        r = run(a, sid, check + ' && echo "clean $$"', session_id=s)
        assert r["stdout"].startswith("clean ") and int(r["stdout"].split()[1]) != before, \
            (left, check, r)
    run(a, sid, "pkill -f 'sleep 30' || true")


def test_its_own_exit_trap_runs_in_the_command():
    a, sid = main_sandbox()
    s = "resident-c"
    shell_pid(a, sid, session_id=s)
    r = run(a, sid, "cd /tmp; trap 'echo bye; echo gone >&2' EXIT; echo hi; (exit 5)",
            session_id=s)
    # As from a fresh bash: the trap's output in this command's, its status, nothing saved.
    assert (r["stdout"], r["stderr"], r["exit_code"]) == ("hi\nbye\n", "gone\n", 5), r
    assert r["session"]["saved"] is False, r
    assert out(a, sid, "pwd", session_id=s) == "/workspace\n"


def test_a_process_left_in_the_shells_group_outlives_a_later_timeout():
    a, sid = main_sandbox()
    s = "resident-d"
    out(a, sid, "(sleep 300 & echo $! > /tmp/left.pid)", session_id=s)
    r = run(a, sid, "sleep 30", session_id=s, timeout_seconds=1)
    assert r["timed_out"] is True, r
    assert out(a, sid, "kill -0 $(cat /tmp/left.pid) && echo alive") == "alive\n"
    run(a, sid, "kill $(cat /tmp/left.pid)")


def test_the_shells_plumbing_is_out_of_reach():
    a, sid = main_sandbox()
    s = "resident-e"
    shell_pid(a, sid, session_id=s)
    # Noise on the shell's state pipe, a closed control pipe: the command still ends.
    r = run(a, sid, "printf 'junk\\0d0\\0' >&100; exec 101<&-; echo still", session_id=s,
            timeout_seconds=30)
    assert r["stdout"] == "still\n" and r["timed_out"] is False, r
    assert out(a, sid, "echo next", session_id=s) == "next\n"
    # The user cannot see what another session's root commands are, nor their output.
    r = run(a, sid, "ls /dev/sbx")
    assert r["exit_code"] != 0 and "Permission denied" in r["stderr"], r


def test_timeout_kills_the_command_not_the_session():
    a, sid = main_sandbox()
    r = run(a, sid, "cd /tmp; sleep 30", timeout_seconds=1)
    assert r["timed_out"] is True and r["exit_code"] == 137, r
    assert r["session"]["saved"] is False, r
    assert out(a, sid, "pwd") == "/workspace\n"


def test_streamed_exec_runs_in_the_session():
    a, sid = main_sandbox()
    conn = http.client.HTTPConnection("127.0.0.1", D.get().port, timeout=60)
    conn.request("POST", "/v1/sandboxes/%s/exec" % sid,
                 json.dumps({"shell": "cd /tmp; export STREAMED=1; echo hi"}),
                 {"Authorization": "Bearer " + a.key, "Content-Type": "application/json",
                  "Accept": "text/event-stream"})
    resp = conn.getresponse()
    assert resp.status == 200, (resp.status, resp.read())
    events = [json.loads(line[6:]) for line in resp.read().decode().splitlines()
              if line.startswith("data: ")]
    conn.close()
    assert [e["data"] for e in events if e["type"] == "stdout"] == ["hi\n"], events
    end = events[-1]
    assert end["type"] == "exit" and end["session"]["saved"] is True, end
    assert out(a, sid, 'pwd; echo "$STREAMED"') == "/tmp\n1\n"
    run(a, sid, "cd /workspace")


def test_output_limit_as_for_any_exec():
    a, sid = main_sandbox()
    r = run(a, sid, "head -c 1100000 /dev/zero | tr '\\0' x; cd /tmp")
    assert r["stdout_truncated"] is True and len(r["stdout"]) == 1024 * 1024, len(r["stdout"])
    assert r["session"]["saved"] is True, r["session"]
    assert out(a, sid, "pwd; cd /workspace") == "/tmp\n"


def test_exec_env_is_for_that_command_only():
    a, sid = main_sandbox()
    assert out(a, sid, 'echo "$ONE_OFF"', env={"ONE_OFF": "x"}) == "x\n"
    assert out(a, sid, 'echo "[$ONE_OFF]"') == "[]\n"
    # ... unless the command itself exports a new value.
    run(a, sid, "export KEEP=changed", env={"KEEP": "given"})
    assert out(a, sid, 'echo "$KEEP"') == "changed\n"


def test_exec_cwd_overrides_for_that_command():
    a, sid = main_sandbox()
    assert out(a, sid, "pwd", cwd="/tmp") == "/tmp\n"
    assert out(a, sid, "pwd") == "/workspace\n"


def test_python_runs_in_the_session_cwd_and_env():
    a, sid = main_sandbox()
    out(a, sid, "mkdir -p /workspace/py && cd /workspace/py && export PYV=7")
    r = a.exec(sid, language="python", code="import os; print(os.getcwd(), os.environ['PYV'])")
    assert r["stdout"] == "/workspace/py 7\n", r
    run(a, sid, "cd /workspace")


def test_without_default_session_each_exec_is_isolated():
    a = user()
    sb = D.once("sb:nodefault", lambda d: a.create_sandbox(enable_default_session=False))
    sid = sb["id"]
    assert sb["enable_default_session"] is False, sb
    assert a.get_sandbox(sid)["enable_default_session"] is False
    out(a, sid, "mkdir -p /workspace/app")
    r = run(a, sid, "cd /workspace/app; export MY_VAR=hello")
    assert "session" not in r, r
    assert out(a, sid, 'pwd; echo "[$MY_VAR]"') == "/workspace\n[]\n"
    assert "default" not in sessions(a, sid)
    # An explicit session still keeps state there.
    run(a, sid, "cd /workspace/app", session_id="work")
    assert out(a, sid, "pwd", session_id="work") == "/workspace/app\n"
    assert out(a, sid, "pwd") == "/workspace\n"


def test_enable_default_session_must_be_boolean():
    a = user("sessions-bad")
    before = a.list_sandboxes()
    for bad in ("no", 0, 1, [], {}):
        r = a.request("POST", "/v1/sandboxes", {"enable_default_session": bad})
        assert_error(r, 400, "invalid_request")
    assert a.list_sandboxes() == before


# --- auto-created sessions -----------------------------------------------------------

def test_unknown_session_is_created_with_defaults():
    a, sid = main_sandbox()
    r = run(a, sid, "echo hello", session_id="new-session")
    assert r["stdout"] == "hello\n", r
    assert r["session"] == {"id": "new-session", "created": True, "saved": True}, r
    s = sessions(a, sid)["new-session"]
    assert s["cwd"] == "/workspace" and s["command_timeout_ms"] is None, s
    assert out(a, sid, "pwd", session_id="new-session") == "/workspace\n"


def test_deleted_session_comes_back_without_its_env():
    a, sid = main_sandbox()
    s = create(a, sid, id="temp", env={"MY_VAR": "value"})
    assert s["env"] == {"MY_VAR": "value", "SANDBOX_WIDE": "yes"}, s
    assert out(a, sid, 'echo "$MY_VAR"', session_id="temp") == "value\n"
    r = a.request("DELETE", path(sid, "/temp"))
    assert r.status == 200 and r.body == {"id": "temp", "object": "session", "deleted": True}, r
    assert "temp" not in sessions(a, sid)
    r = run(a, sid, 'echo "$MY_VAR"', session_id="temp")
    assert r["stdout"] == "\n" and r["session"]["created"] is True, r


# --- named sessions ------------------------------------------------------------------

def test_sessions_have_their_own_env_and_cwd():
    a, sid = main_sandbox()
    out(a, sid, "mkdir -p /workspace/build /workspace/test")
    b = create(a, sid, id="build", env={"NODE_ENV": "production"}, cwd="/workspace/build")
    t = create(a, sid, id="test", env={"NODE_ENV": "test"}, cwd="/workspace/test")
    assert b["cwd"] == "/workspace/build" and b["env"]["NODE_ENV"] == "production", b
    assert b["default"] is False, b
    assert out(a, sid, 'echo "$NODE_ENV $PWD"', session_id="build") == \
        "production /workspace/build\n"
    assert out(a, sid, 'echo "$NODE_ENV $PWD"', session_id="test") == "test /workspace/test\n"
    listed = sessions(a, sid)
    assert listed["build"]["cwd"] == "/workspace/build", listed
    assert t["id"] in listed


def test_exports_and_cd_do_not_cross_sessions():
    a, sid = main_sandbox()
    create(a, sid, id="s1")
    create(a, sid, id="s2")
    out(a, sid, "mkdir -p /workspace/project1")
    run(a, sid, "export MY_VAR=hello; cd /workspace/project1", session_id="s1")
    assert out(a, sid, 'echo "[$MY_VAR]"; pwd', session_id="s2") == "[]\n/workspace\n"
    assert out(a, sid, 'echo "[$MY_VAR]"; pwd', session_id="s1") == \
        "[hello]\n/workspace/project1\n"


def test_same_variable_differs_per_session():
    a, sid = main_sandbox()
    k1 = create(a, sid, env={"API_KEY": "key-1"})
    k2 = create(a, sid, env={"API_KEY": "key-2"})
    assert k1["id"] != k2["id"] and k1["id"].startswith("sess_"), (k1, k2)
    assert out(a, sid, 'echo "$API_KEY"', session_id=k1["id"]) == "key-1\n"
    assert out(a, sid, 'echo "$API_KEY"', session_id=k2["id"]) == "key-2\n"


def test_sessions_share_the_filesystem():
    a, sid = main_sandbox()
    run(a, sid, "echo data > /workspace/file.txt", session_id="s1")
    assert out(a, sid, "cat /workspace/file.txt", session_id="s2") == "data\n"


def test_dev_and_app_sessions_keep_secrets_apart():
    a, sid = main_sandbox()
    create(a, sid, id="dev", env={"ANTHROPIC_API_KEY": "sk-test-not-real"})
    create(a, sid, id="app", env={"PORT": "3000"})
    assert out(a, sid, 'echo "$ANTHROPIC_API_KEY"', session_id="dev") == "sk-test-not-real\n"
    assert out(a, sid, 'echo "[$ANTHROPIC_API_KEY] $PORT"', session_id="app") == "[] 3000\n"


def test_session_command_timeout_and_override():
    a, sid = main_sandbox()
    s = create(a, sid, id="ci", command_timeout_ms=1000)
    assert s["command_timeout_ms"] == 1000, s
    t0 = time.time()
    r = run(a, sid, "sleep 10", session_id="ci")
    assert r["timed_out"] is True and r["exit_code"] == 137, r
    assert time.time() - t0 < 5, "the session's 1 s timeout did not apply"
    r = run(a, sid, "sleep 2; echo done", session_id="ci", timeout_seconds=10)
    assert r["timed_out"] is False and r["stdout"] == "done\n", r
    # Other sessions keep the ordinary default.
    r = run(a, sid, "sleep 1.5; echo fine", session_id="s1")
    assert r["stdout"] == "fine\n", r


def test_cleanup_of_a_temporary_session():
    a, sid = main_sandbox()
    create(a, sid, id="scratch")
    try:
        run(a, sid, "true", session_id="scratch")
    finally:
        r = a.request("DELETE", path(sid, "/scratch"))
        assert r.status == 200, r
    assert "scratch" not in sessions(a, sid)


def test_default_session_cannot_be_deleted():
    a, sid = main_sandbox()
    before = sessions(a, sid)
    r = a.request("DELETE", path(sid, "/default"))
    assert_error(r, 400, "cannot_delete_default_session")
    assert "destroy the sandbox" in r.body["error"]["message"], r.body
    assert sessions(a, sid) == before


def test_removed_cwd_falls_back_to_workspace():
    a, sid = main_sandbox()
    run(a, sid, "mkdir -p /tmp/gone && cd /tmp/gone", session_id="fallback")
    run(a, sid, "rmdir /tmp/gone")
    assert out(a, sid, "pwd", session_id="fallback") == "/workspace\n"


# --- bad input -----------------------------------------------------------------------

def test_create_session_bad_input():
    a, sid = main_sandbox()
    create(a, sid, id="dup")
    before = sessions(a, sid)
    cases = [
        ({"id": "has space"}, 400, "invalid_session_id"),
        ({"id": "x" * 65}, 400, "invalid_session_id"),
        ({"id": ""}, 400, "invalid_session_id"),
        ({"id": 7}, 400, "invalid_session_id"),
        ({"id": "../etc"}, 400, "invalid_session_id"),
        ({"env": {"1BAD": "x"}}, 400, "invalid_env"),
        ({"env": {"SBX_X": "x"}}, 400, "invalid_env"),
        ({"env": {"A": 1}}, 400, "invalid_env"),
        ({"env": ["A=1"]}, 400, "invalid_env"),
        ({"cwd": "relative"}, 400, "invalid_cwd"),
        ({"cwd": 5}, 400, "invalid_cwd"),
        ({"cwd": "/no/such/dir"}, 400, "invalid_cwd"),
        ({"cwd": "/etc/hostname"}, 400, "invalid_cwd"),
        ({"command_timeout_ms": 0}, 400, "invalid_timeout"),
        ({"command_timeout_ms": -5}, 400, "invalid_timeout"),
        ({"command_timeout_ms": 900001}, 400, "invalid_timeout"),
        ({"command_timeout_ms": "1000"}, 400, "invalid_timeout"),
        ({"command_timeout_ms": 1.5}, 400, "invalid_timeout"),
        ({"id": "dup"}, 409, "session_exists"),
        ({"id": "default"}, 409, "session_exists"),
    ]
    for body, status, code in cases:
        r = a.request("POST", path(sid), body)
        assert_error(r, status, code)
    for raw in (b"{", b"[]", b"nope"):
        r = a.request("POST", path(sid), raw=raw)
        assert_error(r, 400, ("invalid_json", "invalid_request"))
    assert sessions(a, sid) == before


def test_session_routes_unknown_sandbox_and_auth():
    a, sid = main_sandbox()
    other = user("sessions-other")
    before = sessions(a, sid)
    for method, p, body in (("POST", path(sid), {"id": "x"}), ("GET", path(sid), None),
                            ("DELETE", path(sid, "/s1"), None)):
        assert_error(other.request(method, p, body), 404, "sandbox_not_found")
        assert_error(a.request(method, p.replace(sid, "sb_0000"), body), 404,
                     "sandbox_not_found")
        assert_error(a.request(method, p, body, key=None), 401, "missing_api_key")
    assert_error(a.request("PUT", path(sid), {}), 405, "method_not_allowed")
    assert sessions(a, sid) == before


def test_delete_unknown_session():
    a, sid = main_sandbox()
    before = sessions(a, sid)
    assert_error(a.request("DELETE", path(sid, "/nope")), 404, "session_not_found")
    assert_error(a.request("DELETE", path(sid, "/bad%20id")), 404, "session_not_found")
    assert sessions(a, sid) == before


def test_exec_bad_session_id():
    a, sid = main_sandbox()
    before = sessions(a, sid)
    for bad in ("", "a b", "x" * 65, 5, ["s1"]):
        r = a.request("POST", "/v1/sandboxes/%s/exec" % sid,
                      {"shell": "touch /workspace/should-not-exist", "session_id": bad})
        assert_error(r, 400, "invalid_session_id")
    assert sessions(a, sid) == before
    assert out(a, sid, "ls /workspace/should-not-exist 2>/dev/null || echo absent") == "absent\n"


def test_session_limit():
    a = user("sessions-limit")
    sb = a.create_sandbox()
    sid = sb["id"]
    try:
        have = len(sessions(a, sid))  # the default one
        for i in range(32 - have):
            create(a, sid, id="n%d" % i)
        before = sessions(a, sid)
        assert len(before) == 32
        assert_error(a.request("POST", path(sid), {"id": "one-more"}), 429, "too_many_sessions")
        r = a.request("POST", "/v1/sandboxes/%s/exec" % sid,
                      {"shell": "true", "session_id": "one-more"})
        assert_error(r, 429, "too_many_sessions")
        assert sessions(a, sid) == before
        a.request("DELETE", path(sid, "/n0"))
        create(a, sid, id="one-more")
    finally:
        a.delete_sandbox(sid)
