#!/usr/bin/env python3
"""A server added by tracker/launch --add-servers to a job that tracker/launch runs.

HOW is one of:
  launched  the counter workload of server_restart_app.cc (SGD counters on 1024 keys, 2
            workers, 3 servers, PS_REPLICATION=2, the default PS_CHUNK_BYTES) under
            `launch --job-file F`; 1.5 s into the pushes, `launch --add-servers 1
            --job-file F` starts a fourth server with the job's settings from F (mode
            0600, no PS_RANK). The scheduler adds it as server 3 and it catches up while
            the pushes go on. No push fails, the final values are exactly the
            acknowledged increments, both launchers exit 0, F is gone once the job has
            ended and no process is left.

Usage: server_added_by_launcher_test.py HOW APP LAUNCH
"""
import json
import os
import re
import stat
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from liveness_test import START_S, Job, Process, run_checks, wait_exits, wait_until  # noqa: E402
from replication_test import HEARTBEAT_ENV, WORKERS, check_counts  # noqa: E402
from server_restart_test import worker_texts  # noqa: E402

SERVERS = 3
KEYS = 1024
PUSHES = 8000  # per worker, ~1 ms apart: the add comes early, the catch-up while they push
ADD_AT_S = 1.5


def check_job_file(f, path, app):
    """The job file holds what a new server needs, and only its owner can read it."""
    mode = stat.S_IMODE(os.stat(path).st_mode)
    f.expect(mode == 0o600, f"the job file has mode {mode:o}, not 600")
    with open(path) as jf:
        job = json.load(jf)
    env = job.get("env", {})
    f.expect(env.get("PS_ROLE") == "server", f"the job file's PS_ROLE is {env.get('PS_ROLE')}")
    f.expect("PS_RANK" not in env, "the job file gives the new server a PS_RANK")
    f.expect(len(env.get("PS_JOB_TOKEN", "")) >= 32, "the job file holds no job token")
    f.expect(env.get("PS_REPLICATION") == "2", "the job file lost the --env pairs")
    f.expect(job.get("command", [None])[0] == app, f"the job file's command is "
             f"{job.get('command')}")


def launched(app, launch, f):
    with Job() as job:
        job_file = os.path.join(job.tmp.name, "job.json")
        env = dict(HEARTBEAT_ENV, PS_REPLICATION="2")
        p = job.launch(app, launch, WORKERS, SERVERS, [f"--pushes={PUSHES}", f"--keys={KEYS}"],
                       120, env=env, options=["--job-file", job_file])
        if not wait_until(lambda: all(f"worker {r} pid" in p.text() for r in range(WORKERS)),
                          START_S):
            raise AssertionError("the workers did not start")
        # The launcher writes it once it reads the scheduler's word that every node
        # joined, which can come after the workers' first lines.
        if not f.expect(wait_until(lambda: os.path.exists(job_file), 10),
                        "the job launcher wrote no job file within 10 s of the workers' start"):
            return
        check_job_file(f, job_file, app)
        time.sleep(ADD_AT_S)
        # The marker in its argv lets the cleanup and the final check find this launcher;
        # its server carries the job's marker in the command from the job file.
        adder = Process("add-servers launcher",
                        [sys.executable, launch, "--add-servers", "1", "--job-file", job_file,
                         "--env", f"HERDPS_TEST_MARKER={job.marker}"],
                        dict(os.environ), job.tmp.name)
        job.procs.append(adder)
        added_at = time.time()
        if not f.expect(wait_until(lambda: re.search(r"server 3 \(node 14\) caught up",
                                                     p.text()), 60),
                        "the scheduler did not say server 3 caught up"):
            return
        print(f"server 3 added and caught up {time.time() - added_at:.2f} s after the "
              "add-servers launcher started")
        f.expect(not any(f"worker {r} acknowledged" in p.text() for r in range(WORKERS)),
                 "the workers had finished before the add: the test exercised nothing")
        if not wait_exits([p, adder], 120):
            raise AssertionError("the job did not finish")
        f.expect(p.proc.returncode == 0, f"the job launcher exited {p.proc.returncode}, not 0")
        f.expect(adder.proc.returncode == 0,
                 f"the add-servers launcher exited {adder.proc.returncode}, not 0")
        f.expect(re.search(r"^\[added server 0\] server_restart_app: server 3 pid \d+ started",
                           adder.text(), re.M) is not None,
                 "the add-servers launcher's output has no line of the new server 3")
        check_counts(f, worker_texts(p.text()), PUSHES)
        f.expect(not os.path.exists(job_file), "the job file outlived the job")
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


def main():
    if len(sys.argv) != 4 or sys.argv[1] != "launched":
        print(__doc__, file=sys.stderr)
        return 2
    app, launch = os.path.realpath(sys.argv[2]), sys.argv[3]
    return run_checks(lambda f: launched(app, launch, f))


if __name__ == "__main__":
    sys.exit(main())
