"""The namespaces backend (docs/runtime.md) against escape attempts specific to a shared
kernel: each probe runs inside a namespaces sandbox as its root and must be refused.

Then the isolation, egress and limits tests of this folder run again on namespaces (each
module loaded afresh with SBX_TEST_RUNTIME=namespaces). test_mountinfo_shows_no_host_paths
is left out: a namespaces sandbox's mountinfo names the host paths of its template and its
agent copy (bind mounts show their source path), which docs/runtime.md lists; nothing
beneath them is reachable (test_host_files_unreadable).
"""

import json
import os
import platform

import harness

HERE = os.path.dirname(os.path.abspath(__file__))
D = harness.Shared(extra_env={"SBX_BACKEND": "namespaces"})
RERUN = harness.Rerun(HERE, "namespaces")

# Every probe prints {name: errno or 0}; 0 means the call succeeded (an escape).
PROBES = r'''
import ctypes, errno, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return 0 if r >= 0 else ctypes.get_errno()
buf = ctypes.create_string_buffer(256)
out = {}
out["mount"] = 0 if libc.mount(b"none", b"/mnt", b"tmpfs", 0, None) == 0 else ctypes.get_errno()
out["remount_root_rw"] = (0 if libc.mount(None, b"/", None, 32 | 4096, None) == 0
                          else ctypes.get_errno())          # MS_REMOUNT|MS_BIND
out["umount_proc_sys"] = 0 if libc.umount2(b"/proc/sys", 2) == 0 else ctypes.get_errno()
out["unshare_user"] = sc(272, 0x10000000)                   # unshare(CLONE_NEWUSER)
out["unshare_mount"] = sc(272, 0x00020000)
out["clone_newuser"] = sc(56, 0x10000000 | 17, 0, 0, 0, 0)  # clone(CLONE_NEWUSER|SIGCHLD)
out["setns"] = sc(308, os.open("/proc/self/ns/net", os.O_RDONLY), 0)
out["keyctl"] = sc(250, 0, -3, 0, 0, 0)                     # KEYCTL_GET_KEYRING_ID
out["add_key"] = sc(248, ctypes.addressof(ctypes.create_string_buffer(b"user")),
                    ctypes.addressof(ctypes.create_string_buffer(b"x")), 0, 0, -3)
out["bpf"] = sc(321, 0, ctypes.addressof(buf), 64)          # BPF_MAP_CREATE
out["perf_event_open"] = sc(298, ctypes.addressof(buf), 0, -1, -1, 0)
out["userfaultfd"] = sc(323, 0)
out["io_uring_setup"] = sc(425, 8, ctypes.addressof(buf))
out["ptrace_attach_agent"] = sc(101, 16, 1, 0, 0)           # PTRACE_ATTACH to PID 1
out["process_vm_readv_agent"] = sc(310, 1, ctypes.addressof(buf), 1, ctypes.addressof(buf), 1, 0)
out["kexec_load"] = sc(246, 0, 0, 0, 0)
out["init_module"] = sc(175, 0, 0, 0)
out["chroot"] = 0 if libc.chroot(b"/tmp") == 0 else ctypes.get_errno()
out["mknod_dev"] = 0 if libc.mknod(b"/tmp/sda", 0o60600, os.makedev(8, 0)) == 0 else ctypes.get_errno()
out["sethostname"] = 0 if libc.sethostname(b"x", 1) == 0 else ctypes.get_errno()
out["setuid_root"] = 0 if libc.setuid(0) == 0 else ctypes.get_errno()  # commands run as 1000
out["open_by_handle_at"] = sc(304, -100, ctypes.addressof(buf), 0)
try:
    socket.socket(40, socket.SOCK_STREAM)                   # AF_VSOCK
    out["vsock"] = 0
except OSError as e:
    out["vsock"] = e.errno
def write(path, data):
    try:
        with open(path, "w") as f:
            f.write(data)
        return 0
    except OSError as e:
        return e.errno
out["proc_sys_kernel"] = write("/proc/sys/kernel/hostname", "pwned")
out["proc_sys_vm"] = write("/proc/sys/vm/drop_caches", "3")
out["proc_sys_net"] = write("/proc/sys/net/ipv4/ip_forward", "1")
out["sys_write"] = write("/sys/kernel/uevent_helper", "/tmp/x")
out["template_write"] = write("/usr/bin/pwned", "x")
print(json.dumps(out))
'''


def client():
    k = D.once("key", lambda d: d.client().create_key("nsesc", "member", "sandbox"))
    return D.get().client(k["key"])


def sandbox():
    c = client()
    sb = D.once("sb", lambda d: c.create_sandbox(ttl_seconds=3600))
    assert sb["runtime"] == "namespaces", sb
    return c, sb["id"]


def teardown_module():
    RERUN.close()
    D.close()


def test_escape_syscalls_and_writes_are_refused():
    if platform.machine() != "x86_64":
        raise harness.Skip("the probe's syscall numbers are x86_64's, this is %s"
                           % platform.machine())
    c, sid = sandbox()
    r = c.exec(sid, language="python", code=PROBES)
    assert r["exit_code"] == 0, r
    got = json.loads(r["stdout"].strip().splitlines()[-1])
    escaped = {k: v for k, v in got.items() if v == 0}
    assert not escaped, "succeeded inside the sandbox: %r (all: %r)" % (escaped, got)
    # Refused by the filter or the missing capabilities, not by an accident of arguments.
    for k in ("unshare_user", "clone_newuser", "setns", "keyctl", "add_key", "bpf",
              "perf_event_open", "userfaultfd", "io_uring_setup", "ptrace_attach_agent",
              "process_vm_readv_agent", "mount", "kexec_load", "init_module", "vsock"):
        assert got[k] == 1, "%s: errno %d, want EPERM (%r)" % (k, got[k], got)


def test_setuid_binaries_give_nothing():
    c, sid = sandbox()
    out = c.sh(sid, "find / -xdev -perm -4000 -type f 2>/dev/null | head -20")
    suid = out.split()
    assert "/usr/bin/mount" in suid, out   # the template has them; they must not help
    r = c.exec(sid, shell="/usr/bin/mount -t tmpfs x /mnt; echo rc=$?; "
                          "su -s /bin/sh -c 'grep CapEff /proc/self/status' nobody; echo rc=$?; "
                          "grep -E 'NoNewPrivs|CapEff' /proc/self/status")
    assert r["stdout"].count("rc=0") == 0, r
    assert "NoNewPrivs:\t1" in r["stdout"] and "CapEff:\t0000000000000000" in r["stdout"], r


def test_the_agent_and_the_host_are_out_of_reach():
    c, sid = sandbox()
    r = c.exec(sid, shell="kill -9 -1; echo rc=$?; ls /proc | grep -c '^[0-9]'; "
                          "cat /proc/1/environ | tr '\\0' '\\n' | grep -c SBX_ || true")
    assert r["exit_code"] == 0, r
    # kill -1 reaches only this sandbox's processes, and the agent (PID 1) ignores it.
    assert c.sh(sid, "echo alive").strip() == "alive"
    assert r["stdout"].split()[-1] == "0", r   # no daemon variables in the agent


# --- this folder's suites again, on namespaces --------------------------------------------

def test_ns_writes_outside_workspace_and_tmp_fail():
    RERUN("test_isolation", "test_writes_outside_workspace_and_tmp_fail")


def test_ns_only_loopback_interface():
    RERUN("test_isolation", "test_only_loopback_interface")


def test_ns_host_processes_invisible():
    RERUN("test_isolation", "test_host_processes_invisible")


def test_ns_host_files_unreadable():
    RERUN("test_isolation", "test_host_files_unreadable")


def test_ns_daemon_port_unreachable():
    RERUN("test_isolation", "test_daemon_port_unreachable")


def test_ns_no_daemon_secrets_in_env():
    RERUN("test_isolation", "test_no_daemon_secrets_in_env")


def test_ns_sandboxes_cannot_see_each_other():
    RERUN("test_isolation", "test_sandboxes_cannot_see_each_other")


def test_ns_raw_tcp_udp_and_dns_from_inside_reach_nothing():
    RERUN("test_egress_escape", "test_raw_tcp_udp_and_dns_from_inside_reach_nothing")


def test_ns_the_proxy_refuses_the_host_the_daemon_and_metadata():
    RERUN("test_egress_escape", "test_the_proxy_refuses_the_host_the_daemon_and_metadata")


def test_ns_process_limit_fails_fork_and_the_sandbox_lives_on():
    RERUN("test_limits", "test_process_limit_fails_fork_and_the_sandbox_lives_on")


def test_ns_memory_limit_stops_the_hog_not_the_host():
    RERUN("test_limits", "test_memory_limit_stops_the_hog_not_the_host")


def test_ns_traversal_and_planted_links():
    RERUN("test_paths", "test_traversal_and_planted_links")
