#!/usr/bin/env python3
"""The restart path without replication, with nodes started by hand as on several
hosts: a server killed with SIGKILL mid-run, a new process started in its place (same
PS_RANK, same PS_CHECKPOINT_DIR); the job finishes with exit 0 everywhere but the
killed server, and the acknowledged updates the workers report lost equal what a
checker counts from the final values.

HOW is one of:
  from_checkpoint  the new server resumes from the dead one's checkpoint
                   (PS_CHECKPOINT_EVERY=100pushes): it loses the acknowledged pushes
                   since the last checkpoint, and the workers say how many. It is
                   started right after the kill, before the scheduler declares the old
                   one dead (as a launcher restarts it), and waits for that.
  empty            no checkpoints: the new server starts empty, and the workers report
                   every push the dead one acknowledged as lost. It is started once
                   the old one is declared dead.
  launcher         as from_checkpoint, under tracker/launch --restart-failed 1 (LAUNCH),
                   which starts the new server itself: the launcher exits 0.

Usage: server_restart_test.py HOW APP [LAUNCH]

APP is server_restart_app (server_restart_app.cc). By hand, heartbeats come every 0.5 s
and a silent node is dead after 3 s, unless HERDPS_TEST_HEARTBEAT_TIMEOUT=default (the
runtime's defaults: 1 s, 10 s).
"""
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from liveness_test import (DETECT_S, HEARTBEATS, START_S, Job, Process,  # noqa: E402
                           run_checks, wait_exits, wait_until)

WORKERS = 2
SERVERS = 2
PUSHES = 3000  # per worker; ~1 ms apart, so the run lasts several seconds
KEYS = 64


def check_counts(f, texts):
    """The workers' lost-update report against the checker's count. texts: each
    worker's output, worker 0's first."""
    acknowledged = lost = unacked = 0
    for r, text in enumerate(texts):
        m = re.search(rf"worker {r} acknowledged (\d+) lost (\d+) unacknowledged_applied "
                      r"(\d+) restarts (\d+)", text)
        if not f.expect(m is not None, f"worker {r} did not report its counts"):
            return None
        acknowledged += int(m.group(1))
        lost += int(m.group(2))
        unacked += int(m.group(3))
        f.expect(int(m.group(4)) == 1, f"worker {r} saw {m.group(4)} restarts, not 1")
    m = re.search(r"counted (\d+) over", texts[0])
    if not f.expect(m is not None, "worker 0 did not count the final values"):
        return None
    counted = int(m.group(1))
    print(f"acknowledged {acknowledged}, counted {counted}: the checker counts "
          f"{acknowledged - counted} lost; the workers report {lost} lost and {unacked} "
          f"applied though reported failed")
    f.expect(acknowledged == WORKERS * PUSHES, f"acknowledged {acknowledged}")
    f.expect(acknowledged - counted == lost - unacked,
             f"the checker counts {acknowledged - counted} lost, the workers report "
             f"{lost} - {unacked}")
    return lost


def launch_and_kill_server_1(job, app, launch, servers, pushes, env, options=()):
    """Runs the counter workload (2 workers, `servers` servers) under the launcher with
    `env` and the launcher's `options`, kills server 1 with SIGKILL 1.5 s into the
    pushes, and waits for the job to end. Returns the launcher's process and output."""
    p = job.launch(app, launch, WORKERS, servers, [f"--pushes={pushes}", f"--keys={KEYS}"],
                   120, env=env, options=options)

    def server_1_pid():
        m = re.search(r"server_restart_app: server 1 pid (\d+) started", p.text())
        return int(m.group(1)) if m else None
    if not wait_until(lambda: all(f"worker {r} pid" in p.text() for r in range(WORKERS))
                      and server_1_pid(), START_S):
        raise AssertionError("the job did not start")
    time.sleep(1.5)
    os.kill(server_1_pid(), signal.SIGKILL)
    if not wait_exits([p], 90):
        raise AssertionError("the job did not finish after server 1 was killed")
    return p, p.text()


def worker_texts(out):
    """Each worker's lines of a launcher's output, worker 0's first."""
    return ["\n".join(line for line in out.splitlines() if line.startswith(f"[worker {r}]"))
            for r in range(WORKERS)]


def run_launched(app, launch, f):
    with Job() as job:
        ckpt = os.path.join(job.tmp.name, "ckpt")
        env = dict(HEARTBEATS, PS_CHECKPOINT_DIR=ckpt, PS_CHECKPOINT_EVERY="100pushes")
        p, out = launch_and_kill_server_1(job, app, launch, SERVERS, PUSHES, env,
                                          ["--restart-failed", "1"])
        f.expect(p.proc.returncode == 0, f"the launcher exited {p.proc.returncode}, not 0")
        f.expect("server 1 was killed by signal 9 (SIGKILL); starting a new server 1 in its "
                 "place (restart 1 of --restart-failed 1)" in out,
                 "the launcher did not say it restarts server 1")
        f.expect(re.search(r"\[server 1\] server_restart_app: server 1 pid \d+ started from "
                           r".*server-1\.ckpt", out) is not None,
                 "the new server 1 did not resume from server-1.ckpt")
        check_counts(f, worker_texts(out))
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


def run(how, app, f):
    with Job() as job:
        ckpt = os.path.join(job.tmp.name, "ckpt")
        env = {"PS_CHECKPOINT_DIR": ckpt, "PS_CHECKPOINT_EVERY": "100pushes"} \
            if how == "from_checkpoint" else {}
        if os.environ.get("HERDPS_TEST_HEARTBEAT_TIMEOUT") == "default":
            # The runtime's own heartbeats: a heartbeat every 1 s, dead after 10 s.
            env.update({"PS_HEARTBEAT_INTERVAL": "1", "PS_HEARTBEAT_TIMEOUT": "10"})
        args = [f"--pushes={PUSHES}", f"--keys={KEYS}"]
        nodes = job.start_by_hand(app, WORKERS, SERVERS, args, extra_env=env)
        victim = nodes["server 1"]
        if not wait_until(lambda: all(f"worker {r} pid" in nodes[f"worker {r}"].text()
                                      for r in range(WORKERS)), START_S):
            raise AssertionError("the workers did not start")
        time.sleep(1.5)  # well into the pushes: server 1 has written checkpoints
        victim.kill()
        killed_at = time.time()

        def declared_dead():
            return re.search(r"server 1 \(node 10, .*declared dead", nodes["scheduler"].text())
        if how == "empty" and not wait_until(declared_dead, DETECT_S + 5):
            raise AssertionError("the scheduler did not declare server 1 dead")
        replacement = Process("server 1 again", victim.cmd, victim.env, job.tmp.name)
        job.procs.append(replacement)
        if how == "from_checkpoint":
            f.expect(wait_until(lambda: "waits to take server 1's place" in
                                nodes["scheduler"].text(), START_S),
                     "the scheduler did not say the new server waits for server 1's death")
            f.expect(not declared_dead(), "server 1 was declared dead before its "
                     "replacement joined: the test did not exercise the wait")
        survivors = [n for name, n in nodes.items() if name != "server 1"] + [replacement]
        if not wait_exits(survivors, 90):
            raise AssertionError("the job did not finish after the replacement joined")
        print(f"the job finished {time.time() - killed_at:.1f} s after the kill")
        for p in survivors:
            f.expect(p.proc.returncode == 0, f"{p.name} exited {p.proc.returncode}, not 0")
        back = replacement.text()
        if how == "from_checkpoint":
            f.expect(re.search(r"server 1 pid \d+ started from .*server-1\.ckpt", back) is not None,
                     "the new server 1 did not resume from server-1.ckpt")
        else:
            f.expect(re.search(r"server 1 pid \d+ started$", back, re.M) is not None,
                     "the new server 1 did not start empty")
        f.expect("joined the running job as server 1" in back,
                 "the new server did not say it joined the running job in server 1's place")
        lost = check_counts(f, [nodes[f"worker {r}"].text() for r in range(WORKERS)])
        if how == "empty" and lost is not None:
            f.expect(lost > 0, "a restart without checkpoints lost nothing")
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


def main():
    hows = ("from_checkpoint", "empty", "launcher")
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in hows or \
            (sys.argv[1] == "launcher") != (len(sys.argv) == 4):
        print(__doc__, file=sys.stderr)
        return 2
    how, app = sys.argv[1], os.path.realpath(sys.argv[2])
    if how == "launcher":
        return run_checks(lambda f: run_launched(app, sys.argv[3], f))
    return run_checks(lambda f: run(how, app, f))


if __name__ == "__main__":
    sys.exit(main())
