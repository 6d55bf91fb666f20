"""Execution backends (docs/runtime.md): the namespaces backend under the daemon, the
choice of a backend (SBX_BACKEND, the fallback, a create's `runtime`), and local.

The first block reruns a selection of the core, files, sessions, pty, processes and kernel
tests on the namespaces backend: each of those modules is loaded a second time, with its
own daemon, started with SBX_TEST_RUNTIME=namespaces (the harness turns it into
SBX_BACKEND). The whole suites run on namespaces with
`SBX_TEST_RUNTIME=namespaces python3 tests/run.py`.
"""

import os
import secrets

import harness
from harness import assert_error, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
D = harness.Shared(extra_env={"SBX_BACKEND": "namespaces,gvisor"})
RERUN = harness.Rerun(HERE, "namespaces")


def teardown_module():
    RERUN.close()
    D.close()


# --- the core suites again, on namespaces -------------------------------------------------

def test_ns_core_sandbox_create_get_list_delete():
    RERUN("test_core", "test_sandbox_create_get_list_delete")


def test_ns_core_exec_shell_exit_code_and_streams():
    RERUN("test_core", "test_exec_shell_exit_code_and_streams")


def test_ns_core_exec_languages():
    RERUN("test_core", "test_exec_languages")


def test_ns_core_exec_everyday_commands():
    RERUN("test_core", "test_exec_everyday_commands")


def test_ns_core_exec_cwd_env_and_workspace():
    RERUN("test_core", "test_exec_cwd_env_and_workspace")


def test_ns_core_exec_timeout_kills_the_process_group():
    RERUN("test_core", "test_exec_timeout_kills_the_process_group")


def test_ns_core_concurrent_exec_is_busy():
    RERUN("test_core", "test_concurrent_exec_is_busy")


def test_ns_core_run_creates_execs_destroys():
    RERUN("test_core", "test_run_creates_execs_destroys")


def test_ns_files_put_get_roundtrip():
    RERUN("test_files", "test_put_get_roundtrip")


def test_ns_files_put_replaces_and_binary_bytes():
    RERUN("test_files", "test_put_replaces_and_binary_bytes")


def test_ns_files_listing_fields_and_recursion():
    RERUN("test_files", "test_listing_fields_and_recursion")


def test_ns_files_delete_file_and_tree():
    RERUN("test_files", "test_delete_file_and_tree")


def test_ns_files_quota_upload_507_and_usable_after_delete():
    RERUN("test_files", "test_quota_upload_507_and_usable_after_delete")


def test_ns_files_inputs_on_exec():
    RERUN("test_files", "test_inputs_on_exec")


def test_ns_sessions_default_session_keeps_cd():
    RERUN("test_sessions", "test_default_session_keeps_cd")


def test_ns_sessions_default_session_keeps_exports():
    RERUN("test_sessions", "test_default_session_keeps_exports")


def test_ns_sessions_timeout_kills_the_command_not_the_session():
    RERUN("test_sessions", "test_timeout_kills_the_command_not_the_session")


def test_ns_sessions_exports_and_cd_do_not_cross_sessions():
    RERUN("test_sessions", "test_exports_and_cd_do_not_cross_sessions")


def test_ns_sessions_share_the_filesystem():
    RERUN("test_sessions", "test_sessions_share_the_filesystem")


def test_ns_pty_quick_command_answers_at_once():
    RERUN("test_pty", "test_quick_command_answers_at_once")


def test_ns_pty_python_repl_driven_by_write_stdin():
    RERUN("test_pty", "test_python_repl_driven_by_write_stdin")


def test_ns_pty_tiocsti_refused_in_a_pty():
    RERUN("test_pty", "test_tiocsti_refused_in_a_pty")


def test_ns_processes_start_list_get_and_exit_status():
    RERUN("test_processes", "test_start_list_get_and_exit_status")


def test_ns_processes_delete_kills_the_process_group():
    RERUN("test_processes", "test_delete_kills_the_process_group")


def test_ns_processes_session_and_process_survive_sbxd_restart():
    RERUN("test_processes", "test_session_and_process_survive_sbxd_restart")


def test_ns_kernel_state_persists_and_answer_shape():
    RERUN("test_kernel", "test_state_persists_and_answer_shape")


def test_ns_kernel_interrupt_stops_cell_and_keeps_state():
    RERUN("test_kernel", "test_interrupt_stops_cell_and_keeps_state")


# --- namespaces under the daemon ----------------------------------------------------------

def client():
    k = D.once("key", lambda d: d.client().create_key("be", "member", "sandbox"))
    return D.get().client(k["key"])


def sandbox():
    c = client()
    sb = D.once("sb", lambda d: c.create_sandbox(ttl_seconds=3600))
    return c, sb["id"]


def test_default_is_the_first_of_the_list_and_the_object_says_so():
    c, sid = sandbox()
    sb = c.get_sandbox(sid)
    assert sb["runtime"] == "namespaces" and sb["memory_snapshots"] is False, sb
    log = D.get().log_text()
    assert "backend namespaces: works" in log and "backend gvisor: works" in log, log[-2000:]


def test_bsl_check_on_namespaces():
    """sbx-bsl is mounted by the namespaces backend too, over the template's mount point
    (docs/bsl.md); a template built before it has none and answers bsl_unavailable."""
    c, sid = sandbox()
    c.sh(sid, "printf 'Процедура А()\\n\\tЛишняя = 1;\\nКонецПроцедуры\\n' > m.bsl")
    r = c.request("POST", "/v1/sandboxes/%s/bsl/check" % sid, {"path": "m.bsl"})
    if r.status == 503:
        assert_error(r, 503, "bsl_unavailable")
        assert c.sh(sid, "test -e /opt/sbx/sbx-bsl || echo none").strip() == "none"
        return
    assert r.status == 200, r
    got = [(g["code"], g["line"]) for f in r.body["result"]["fileinfos"] for g in f["diagnostics"]]
    assert got == [("UnusedLocalVariable", 2)], got


def test_a_create_names_an_allowed_runtime():
    c = client()
    sb = c.create_sandbox(runtime="gvisor", ttl_seconds=600)
    try:
        assert sb["runtime"] == "gvisor" and sb["memory_snapshots"] is True, sb
        assert c.sh(sb["id"], "echo ok").strip() == "ok"
    finally:
        c.delete_sandbox(sb["id"])
    r = c.request("POST", "/v1/sandboxes", {"runtime": "local"})
    assert_error(r, 400, "invalid_runtime")
    assert "not enabled" in r.body["error"]["message"], r.body
    for bad in ("bogus", "", 7, ["gvisor"], "Gvisor"):
        assert_error(c.request("POST", "/v1/sandboxes", {"runtime": bad}), 400, "invalid_runtime")
    assert all(s["runtime"] in ("namespaces", "gvisor") for s in c.list_sandboxes())


def test_gvisor_runs_on_the_platform_sbxd_is_told():
    """SBX_RUNSC_PLATFORM reaches runsc: systrap by default (runsc 20240729's own default;
    the work inside runs 1.5-5x faster than on ptrace: docs/performance.md), and a name
    runsc does not know stops sbxd with the variable named."""
    c = client()
    sb = c.create_sandbox(runtime="gvisor", ttl_seconds=600)
    try:
        args = [a for _, a in harness.cmdlines()
                if a and a[0] == "runsc-sandbox" and sb["id"] in a]
        assert args and "--platform=systrap" in args[0], args
    finally:
        c.delete_sandbox(sb["id"])
    for bad in ("vmware", "PTRACE", "ptrace "):
        d = harness.Daemon(extra_env={"SBX_RUNSC_PLATFORM": bad})
        started = False
        try:
            d.start(timeout=20)
            started = True
        except AssertionError as e:
            assert "SBX_RUNSC_PLATFORM" in str(e), e
        finally:
            d.cleanup()
        assert not started, "sbxd started with SBX_RUNSC_PLATFORM=%r" % bad


IDLE_SLACK_NS = 1000000000  # SHIM_IDLE_SLACK_NS (src/runtime/shim_idle.h)
BUSY_SLACK_NS = 50000  # the kernel's default, SHIM_BUSY_SLACK_NS


def _sentry_slack(sid):
    """The timer slack of every thread of the sandbox's runsc process (the sentry)."""
    pids = [p for p, a in harness.cmdlines() if a and a[0] == "runsc-sandbox" and sid in a]
    assert len(pids) == 1, pids
    vals = set()
    for tid in os.listdir("/proc/%d/task" % pids[0]):
        try:
            with open("/proc/%s/timerslack_ns" % tid) as f:
                vals.add(int(f.read()))
        except OSError:
            pass  # a thread that just ended
    return vals


def test_an_idle_gvisor_sandbox_lets_its_polling_sleep():
    """systrap polls every 400 us for a sandbox's whole life (4-5 % of a host core each,
    docs/runtime.md, "Idle sandboxes"): while nothing of the user's runs the shim stretches
    the timer slack of the sandbox's runsc process, and a request puts it back before the
    agent reads it, so the user's own timers keep their precision."""
    c = client()
    sb = c.create_sandbox(runtime="gvisor", ttl_seconds=600)
    sid = sb["id"]
    try:
        wait_for(lambda: _sentry_slack(sid) == {IDLE_SLACK_NS}, 15, what="the slack stretched")
        # Right after the quiet spell: 200 sleeps of 1 ms, each a timer of the sentry's. With
        # the slack still stretched each would take up to a second (200 s in all).
        r = c.exec(sid, shell="python3 -c 'import time; t = time.monotonic(); "
                              "[time.sleep(0.001) for _ in range(200)]; "
                              "print(time.monotonic() - t)'")
        assert r["exit_code"] == 0, r
        assert float(r["stdout"]) < 10, r
        # While something of the user's runs, the slack stays the kernel's default.
        c.request("POST", "/v1/sandboxes/%s/processes" % sid, {"command": "sleep 30"})
        wait_for(lambda: _sentry_slack(sid) == {BUSY_SLACK_NS}, 15, what="the slack restored")
        assert _sentry_slack(sid) == {BUSY_SLACK_NS}
    finally:
        c.delete_sandbox(sid)


def test_inside_a_namespaces_sandbox():
    c, sid = sandbox()
    out = c.sh(sid, "cat /proc/self/uid_map /proc/self/gid_map; "
                    "grep -E '^(CapEff|CapBnd|CapPrm|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status; "
                    "ls /sys/class/net; hostname; cat /proc/1/cmdline | tr '\\0' ' '; echo; "
                    "touch /etc/x 2>&1 || true; touch /usr/x 2>&1 || true")
    lines = [x.split() for x in out.splitlines()]
    assert ["0", "1879048192", "65536"] in lines, out   # uid and gid maps: unprivileged ids
    for f in ("CapEff:", "CapBnd:", "CapPrm:", "CapAmb:"):
        assert [f, "0000000000000000"] in lines, out
    assert ["NoNewPrivs:", "1"] in lines and ["Seccomp:", "2"] in lines, out
    assert ["lo"] in lines, out                          # loopback only
    assert ["sandbox"] in lines, out
    assert ["/opt/sbx/sbx-agent"] in lines, out          # the agent is PID 1
    assert out.count("Read-only file system") == 2, out
    # The workspace: the same files on both sides, owned by the sandbox's user (uid 1000,
    # docs/security.md) on the host too, through the idmapped mount.
    c.sh(sid, "echo hi > /workspace/own.txt")
    p = os.path.join(D.get().sandbox_dir(sid), "workspace", "own.txt")
    st = os.stat(p)
    assert st.st_uid == 1000 and st.st_gid == 1000, st
    r = c.request("PUT", "/v1/sandboxes/%s/files/host.txt" % sid, raw=b"from host\n")
    assert r.status == 200, r
    assert c.sh(sid, "cat /workspace/host.txt; echo more >> /workspace/host.txt; "
                     "stat -c %u /workspace/host.txt").split() == ["from", "host", "1000"]


def _cgroup_dirs(sid):
    v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
    if v2:
        return {"all": "/sys/fs/cgroup/sbx/" + sid}
    return {c: "/sys/fs/cgroup/%s/sbx/%s" % (c, sid) for c in ("memory", "pids", "cpu")}


def _read(path):
    with open(path) as f:
        return f.read().strip()


def test_cgroup_limits_applied_and_removed():
    c = client()
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    dirs = _cgroup_dirs(sid)
    if "all" in dirs:
        d = dirs["all"]
        # memory_mb and the host's headroom above it (docs/runtime.md, "Memory").
        assert int(_read(d + "/memory.max")) == (2 * 2048 + 256) << 20
        assert _read(d + "/pids.max") == "128"
        # Every core of the host by default (docs/api-contract.md), so no quota at all: one
        # of every core caps nothing and throttles bursts (docs/performance.md).
        assert _read(d + "/cpu.max") == "max 100000"
    else:
        assert int(_read(dirs["memory"] + "/memory.limit_in_bytes")) == (2 * 2048 + 256) << 20
        assert _read(dirs["pids"] + "/pids.max") == "128"
        assert _read(dirs["cpu"] + "/cpu.cfs_quota_us") == "-1"
    procs = _read(list(dirs.values())[0] + "/cgroup.procs").split()
    assert procs, "the sandbox's processes are not in its cgroup"
    c.delete_sandbox(sid)
    wait_for(lambda: not any(os.path.exists(p) for p in dirs.values()), 15,
             what="cgroups removed after delete")
    wait_for(lambda: not os.path.exists(D.get().sandbox_dir(sid)), 15,
             what="directory removed")
    # A limit below the host's cores is a quota.
    capped = c.create_sandbox(ttl_seconds=600, limits={"cpu_millicores": 500})["id"]
    cdirs = _cgroup_dirs(capped)
    if "all" in cdirs:
        assert _read(cdirs["all"] + "/cpu.max") == "50000 100000"
    else:
        assert _read(cdirs["cpu"] + "/cpu.cfs_quota_us") == "50000"
    c.delete_sandbox(capped)


def test_survives_an_sbxd_restart():
    c, sid = sandbox()
    token = secrets.token_hex(6)
    c.sh(sid, "echo %s > /tmp/alive.txt" % token)   # /tmp is the container's own tmpfs
    D.get().restart(hard=True)
    c = client()
    assert c.sh(sid, "cat /tmp/alive.txt").strip() == token


def _post(c, sid, what, body=None):
    return c.request("POST", "/v1/sandboxes/%s/%s" % (sid, what), body, timeout=120)


def test_pause_resume_and_fork_keep_the_workspace_not_memory():
    c = client()
    sid = c.create_sandbox(ttl_seconds=900)["id"]
    token = secrets.token_hex(6)
    c.sh(sid, "echo %s > /workspace/w.txt; echo %s > /tmp/t.txt" % (token, token))
    r = _post(c, sid, "pause")
    assert r.status == 200 and r.body["status"] == "paused", r
    r = _post(c, sid, "resume")
    assert r.status == 200 and r.body["status"] == "running", r
    assert r.body["restored"] is False, r.body         # no memory: a cold start
    assert c.sh(sid, "cat /workspace/w.txt").strip() == token
    assert c.sh(sid, "cat /tmp/t.txt 2>/dev/null || echo gone").strip() == "gone"

    r = _post(c, sid, "fork", {"count": 2, "ttl_seconds": 600})
    assert r.status == 200, r
    kids = [k["id"] for k in r.body["data"]]
    assert len(kids) == 2 and all(k["restored"] is False for k in r.body["data"]), r.body
    for i, k in enumerate(kids):
        sb = c.get_sandbox(k)
        assert sb["runtime"] == "namespaces" and sb["parent_id"] == sid, sb
        assert c.sh(k, "cat /workspace/w.txt").strip() == token
        c.sh(k, "echo kid%d > /workspace/w.txt" % i)
    assert c.sh(sid, "cat /workspace/w.txt").strip() == token   # the copies diverge
    assert [c.sh(k, "cat /workspace/w.txt").strip() for k in kids] == ["kid0", "kid1"]
    for k in kids + [sid]:
        c.delete_sandbox(k)


# --- choosing a backend at start-up --------------------------------------------------------

def test_fallback_picks_namespaces_when_runsc_is_unusable():
    env = {"SBX_BACKEND": "gvisor,namespaces", "SBX_RUNSC": "/bin/false"}
    with harness.Daemon(extra_env=env) as d:
        log = d.log_text()
        assert "backend gvisor: unusable, left out" in log, log[-2000:]
        assert "namespaces is the default of 1" in log, log[-2000:]
        c = d.client()
        sb = c.create_sandbox(ttl_seconds=300)
        assert sb["runtime"] == "namespaces", sb
        assert c.sh(sb["id"], "echo ok").strip() == "ok"
        assert_error(c.request("POST", "/v1/sandboxes", {"runtime": "gvisor"}), 400,
                     "invalid_runtime")
        c.delete_sandbox(sb["id"])


def test_no_working_backend_stops_the_daemon():
    why = harness.refused_start({"SBX_BACKEND": "gvisor", "SBX_RUNSC": "/bin/false"})
    assert "no execution backend" in why, why


def test_bad_backend_lists_are_refused():
    cases = (({"SBX_BACKEND": "firecracker"}, "unknown backend"),
             ({"SBX_BACKEND": "local"}, "SBX_ALLOW_LOCAL"),
             ({"SBX_BACKEND": "namespaces,local", "SBX_ALLOW_LOCAL": "1"}, "SBX_ALLOW_LOCAL"))
    for (env, words), why in zip(cases, harness.refused_starts([e for e, _ in cases])):
        assert words in why, (env, why)


def test_local_only_when_the_operator_allows_it_and_says_so_loudly():
    env = {"SBX_BACKEND": "namespaces,local", "SBX_ALLOW_LOCAL": "yes-no-isolation"}
    with harness.Daemon(extra_env=env) as d:
        c = d.client()
        sb = c.create_sandbox(runtime="local", ttl_seconds=300)
        assert sb["runtime"] == "local" and sb["memory_snapshots"] is False, sb
        assert c.sh(sb["id"], "echo hi > /workspace/l.txt; cat /workspace/l.txt").strip() == "hi"
        # No isolation: the host's own pid namespace.
        assert c.sh(sb["id"], "test -e /proc/%d && echo host" % os.getpid()).strip() == "host"
        log = d.log_text()
        assert "backend local: ENABLED" in log and "NO ISOLATION" in log, log[-2000:]
        c.delete_sandbox(sb["id"])
        assert c.create_sandbox(ttl_seconds=60)["runtime"] == "namespaces"


def test_a_killed_shim_takes_its_container_along():
    c = client()
    sid = c.create_sandbox(ttl_seconds=600)["id"]
    state = os.path.join(D.get().sandbox_dir(sid), "state")
    with open(os.path.join(state, "shim.pid")) as f:
        shim = int(f.read())
    procs = _read(list(_cgroup_dirs(sid).values())[0] + "/cgroup.procs").split()
    assert procs, "no processes in the sandbox's cgroup"
    os.kill(shim, 9)
    # The parent-death signal ends the agent, and with it the pid namespace.
    wait_for(lambda: not any(os.path.exists("/proc/" + p) for p in procs), 15,
             what="the container's processes gone with the shim")
    # Kept as failed with its workspace (docs/runtime.md, "When a machine dies").
    wait_for(lambda: c.get_sandbox(sid)["status"] == "failed", 30,
             what="the daemon to mark the sandbox failed")
    wait_for(lambda: not any(os.path.exists(p) for p in _cgroup_dirs(sid).values()), 15,
             what="cgroups removed by the cleanup helper")
    c.delete_sandbox(sid)
