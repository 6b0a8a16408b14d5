#!/usr/bin/env python3
"""The shared-memory path when a peer dies: nothing is left behind.

Usage: shm_test.py BEHAVIOUR LAUNCHER APP

APP is shm_app in --mode=loop (see shm_app.cc): workers push and pull 1 MiB values, so
every worker and the server exchange frames through rings of shared memory (memfds
named herdps-ring, visible in /proc/<pid>/maps as "/memfd:herdps-ring (deleted)").
Each behaviour first checks that the rings are really in use (the nodes say so from
their van's counters, and /proc shows the mappings), then SIGKILLs a node and checks:

  killed_worker_leaves_no_ring_mapped_and_no_segment: nodes started by hand, worker 1
    of 2 killed; the server, kept busy by worker 0, unmaps both of its rings with
    worker 1 (the one worker 1 made, and its own to worker 1) within the heartbeat
    timeout plus the van's grace; everyone else finishes, then exits 1 (the job lost a
    node).
  killed_server_ends_the_job_and_leaves_no_segment: under the launcher, the server
    killed; the launcher ends the job.

and in both, once the job has ended: no process of the run is left (so no mapping of
a ring survives anywhere) and /dev/shm holds no herdps entry it did not hold before.
"""
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from liveness_test import (DETECT_S, START_S, Failures, Job, run_behaviour,  # noqa: E402
                           wait_exits, wait_until)

RING = "memfd:herdps-ring"


def ring_mappings(pid):
    """How many rings process pid has mapped (one line of /proc/<pid>/maps per ring)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return sum(RING in line for line in f)
    except OSError:
        return 0


def shm_entries():
    try:
        return {e for e in os.listdir("/dev/shm") if "herdps" in e}
    except OSError:
        return set()


def check_nothing_left(job, before, f):
    f.expect(not job.left(), f"processes of the run are left: {job.left()}")
    new = shm_entries() - before
    f.expect(not new, f"/dev/shm holds new entries: {sorted(new)}")


def killed_worker_leaves_no_ring_mapped_and_no_segment(launcher, app, f):
    before = shm_entries()
    with Job() as job:
        # Worker 0 keeps the server busy (its van looks for dead senders as data comes)
        # until told to stop, however long the start took.
        stop_file = os.path.join(job.tmp.name, "stop")
        nodes = job.start_by_hand(app, 2, 1, ["--mode=loop", "--forever_rank=1", "--run_s=120",
                                              f"--stop_file={stop_file}"])
        w0, w1, server = nodes["worker 0"], nodes["worker 1"], nodes["server 0"]
        busy = lambda: all(f"shm_app: worker {r} shm in use" in w.text()
                           for r, w in ((0, w0), (1, w1)))
        if not wait_until(busy, START_S):
            raise AssertionError("the workers never used shared memory")
        # Each worker: its ring to the server and the server's to it. The server: both.
        f.expect(ring_mappings(w1.proc.pid) == 2,
                 f"worker 1 maps {ring_mappings(w1.proc.pid)} rings, expected 2")
        mapped = ring_mappings(server.proc.pid)
        f.expect(mapped == 4, f"the server maps {mapped} rings, expected 4")
        w1.proc.send_signal(signal.SIGKILL)
        killed_at = time.time()
        f.expect(wait_exits([w1], 5), "worker 1 did not stop")
        # Its own ring to worker 1 goes when worker 1 is declared dead; worker 1's ring
        # when the server's van sees the process gone (and its grace of 5 s is over).
        bound = DETECT_S + 5 + 3
        gone = wait_until(lambda: ring_mappings(server.proc.pid) == 2, bound, 0.2)
        f.expect(gone, f"the server still maps {ring_mappings(server.proc.pid)} rings "
                       f"{bound} s after worker 1 was killed, expected 2 (worker 0's)")
        if gone:
            print(f"the server unmapped worker 1's rings {time.time() - killed_at:.1f} s "
                  "after the kill")
        with open(stop_file, "w"):
            pass
        rest = [n for name, n in nodes.items() if name != "worker 1"]
        f.expect(wait_exits(rest, 40), "not every other node exited")
        # The job lost a node: everyone else finishes, then exits 1 saying so.
        for n in rest:
            f.expect(n.proc.returncode == 1, f"{n.name} exited {n.proc.returncode}, not 1")
            f.expect("the job lost worker 1 (node 11) (declared dead)" in n.text(),
                     f"{n.name} did not say that the job lost worker 1")
        f.expect("shm_app: worker 0 finished" in w0.text(), "worker 0 did not finish")
        check_nothing_left(job, before, f)


def killed_server_ends_the_job_and_leaves_no_segment(launcher, app, f):
    before = shm_entries()
    with Job() as job:
        p = job.launch(app, launcher, 1, 1, ["--mode=loop", "--forever_rank=0"], 60)
        if not wait_until(lambda: "shm_app: worker 0 shm in use" in p.text(), START_S):
            raise AssertionError("the worker never used shared memory")
        pids = {role: int(m) for role, m in
                re.findall(r"shm_app: (worker|server) 0 pid (\d+) started", p.text())}
        f.expect(set(pids) == {"worker", "server"}, f"pids not found: {pids}")
        for role, pid in pids.items():
            f.expect(ring_mappings(pid) == 2,
                     f"the {role} maps {ring_mappings(pid)} rings, expected 2")
        os.kill(pids["server"], signal.SIGKILL)
        f.expect(wait_exits([p], DETECT_S + 10), "the launcher did not end the job")
        f.expect(p.proc.returncode not in (0, None), f"the launcher exited {p.proc.returncode}")
        f.expect("server 0 was killed by signal 9 (SIGKILL)" in p.text(),
                 "the launcher did not name the killed server")
        check_nothing_left(job, before, f)


BEHAVIOURS = {fn.__name__: fn for fn in (
    killed_worker_leaves_no_ring_mapped_and_no_segment,
    killed_server_ends_the_job_and_leaves_no_segment,
)}


if __name__ == "__main__":
    sys.exit(run_behaviour(BEHAVIOURS, __doc__))
