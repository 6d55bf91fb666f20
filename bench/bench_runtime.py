"""The runtime layer's figures for docs/runtime.md, without a daemon (through
tests/e2e/rt_driver.c and sbx-shim, as tests/e2e/test_runtime.py drives them):

  start_ms            rt_start of a busybox sandbox (3 runs)
  destroy_call_ms     rt_destroy itself, as the driver times it (a live shim, and one killed)
  destroy_total_ms    until the directory and the runsc container are gone
  ping_rtt_us         a 64-byte frame through the shim to the echoing agent and back
  host_pipe_rtt_us    the same echo through a pipe to cat on the host
  echo_throughput_MBps 256 KiB frames through the shim

    python3 bench/bench_runtime.py [BUILD]        # default build
"""

import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))


def main():
    if len(sys.argv) > 1:
        os.environ["SBX_BUILD"] = os.path.abspath(sys.argv[1])
    import test_runtime as rt  # noqa: E402 (after SBX_BUILD is set)
    frame, recv_frame, PING, DATA, HDR = rt.frame, rt.recv_frame, rt.PING, rt.DATA, rt.HDR
    t = {}
    try:
        starts = []
        for _ in range(3):
            sb = rt.Sandbox().start()
            starts.append(sb.start_ms)
            if len(starts) < 3:
                sb.destroy()
                sb.wait_gone()
        s = sb.connect()
        n = 300
        t0 = time.perf_counter()
        for _ in range(n):
            s.sendall(frame(0, PING, 0, b"x" * 64))
            recv_frame(s)
        rtt_us = (time.perf_counter() - t0) / n * 1e6
        payload = os.urandom(256 * 1024)
        t0 = time.perf_counter()
        total = 0
        for _ in range(64):
            s.sendall(frame(1, DATA, 1, payload))
            recv_frame(s)
            total += len(payload)
        mbps = total / (time.perf_counter() - t0) / 1e6
        s.close()
        t0 = time.time()
        out = sb.destroy()
        done = sb.wait_gone()
        t.update(destroy_call_ms=int(out.split()[1]), destroy_total_ms=int((done - t0) * 1000))
        # rt_destroy when the shim is gone (the helper path): a killed shim's sandbox.
        sb = rt.Sandbox().start()
        os.kill(sb.shim_pid(), signal.SIGKILL)
        end = time.time() + 10
        while sb.alive() and time.time() < end:
            time.sleep(0.05)
        out = sb.destroy()
        sb.wait_gone()
        t["destroy_without_shim_call_ms"] = int(out.split()[1])
        # The same echo without the shim and runsc: a pipe to cat on the host.
        cat = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               bufsize=0)
        t0 = time.perf_counter()
        for _ in range(n):
            cat.stdin.write(frame(0, PING, 0, b"x" * 64))
            b = b""
            while len(b) < HDR.size + 64:
                b += cat.stdout.read(HDR.size + 64 - len(b))
        host_rtt_us = (time.perf_counter() - t0) / n * 1e6
        cat.stdin.close()
        cat.wait()
        t.update(start_ms=starts, ping_rtt_us=int(rtt_us), host_pipe_rtt_us=int(host_rtt_us),
                 echo_throughput_MBps=round(mbps, 1))
    finally:
        rt.teardown_module()
    print(json.dumps(t))


if __name__ == "__main__":
    main()
