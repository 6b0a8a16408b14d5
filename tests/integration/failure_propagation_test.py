#!/usr/bin/env python3
"""A worker that exits 1 makes the launcher exit non-zero quickly, with no node left.

Usage: failure_propagation_test.py LAUNCHER APP

Runs 1 scheduler + 2 servers + 3 real HerdPS nodes of APP where worker 1 exits with
code 1 right after joining; the other workers then wait in a barrier that can never
complete, so only the launcher's failure handling can end the job.
"""
import os
import subprocess
import sys
import time
import uuid


def running_with(marker):
    """PIDs of live processes whose environment holds marker (this run's nodes only,
    even when other tests run the same binary at the same time)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in env and state != "Z":
            pids.append(int(pid))
    return pids


def main():
    launcher, app = sys.argv[1], os.path.realpath(sys.argv[2])
    marker = f"HERDPS_TEST_MARKER={uuid.uuid4().hex}"
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, launcher, "-n", "3", "-s", "2", "--timeout", "60",
         "--env", marker, "--", app, "--fail_rank", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=90, text=True)
    elapsed = time.monotonic() - start
    print(proc.stdout)
    failures = []
    if proc.returncode == 0:
        failures.append("launcher exited 0 although worker 1 failed")
    if proc.returncode == 124:
        failures.append("the job ran into its timeout instead of stopping on the failure")
    if "worker 1 exited with code 1" not in proc.stdout:
        failures.append("the launcher did not name the failed node")
    # Generous: the launcher kills within 2 s, but a loaded 2-core machine is slow
    # to start 6 processes.
    if elapsed > 30:
        failures.append(f"the launcher took {elapsed:.1f} s")
    time.sleep(0.5)
    left = running_with(marker)
    if left:
        failures.append(f"processes left running: {left}")
        for pid in left:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
    print(f"launcher exit code {proc.returncode} after {elapsed:.2f} s; nodes left: {len(left)}")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
