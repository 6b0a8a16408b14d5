#!/usr/bin/env python3
"""Data that reaches a server before its node table never runs app code on the control
loop (early_data_app.cc).

Usage: early_data_test.py APP

Runs the job (1 scheduler, 1 server, 2 workers that push without waiting for the start
barrier) RUNS times, nodes started by hand, all with PS_RESEND=1 but only the server
losing messages (PS_DROP_RATE, a PS_DROP_SEED per run): when the server loses its node
table, the workers' pushes come before the table resent. Every run must exit 0 with the
server's handle never run on the control loop, and over all runs some messages must
have reached the server before its node table (otherwise the runs did not exercise
what this tests).

The resend timeout is 100 ms: each run's time is the server's control messages (its
barriers, its leave) resent with a doubling backoff, so 300 ms made the 8 runs take
2.5 minutes for nothing this checks.
"""
import os
import re
import secrets
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from liveness_test import Process, free_port, wait_exits  # noqa: E402
from script_checks import check, failures, tail  # noqa: E402

RUNS = 8
LINE = re.compile(r"server 0: (\d+) requests, (\d+) messages before its node table, (\d+) on "
                  r"the control loop")


def run_job(app, seed, logdir):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PS_", "DMLC_"))}
    base.update({"PS_NUM_WORKER": "2", "PS_NUM_SERVER": "1", "PS_SCHEDULER_URI": "127.0.0.1",
                 "PS_SCHEDULER_PORT": str(free_port()), "PS_NODE_HOST": "127.0.0.1",
                 "PS_JOB_TOKEN": secrets.token_hex(16), "PS_RESEND": "1",
                 "PS_RESEND_TIMEOUT": "100", "PS_START_TIMEOUT": "60"})
    procs = []
    for role, rank, drops in (("scheduler", 0, "0"), ("server", 0, "0.5"), ("worker", 0, "0"),
                              ("worker", 1, "0")):
        env = dict(base, PS_ROLE=role, PS_RANK=str(rank), PS_DROP_RATE=drops,
                   PS_DROP_SEED=str(seed))
        procs.append(Process(f"{role} {rank}", [app, "--pushes=5"], env, logdir))
    ended = wait_exits(procs, 120)
    for p in procs:
        p.kill()
    out = "".join(p.text() for p in procs)
    return ended and all(p.proc.returncode == 0 for p in procs), out


def main(app):
    early_total = 0
    for seed in range(1, RUNS + 1):
        with tempfile.TemporaryDirectory(prefix="early-data-") as logdir:
            ok, out = run_job(os.path.realpath(app), seed, logdir)
        m = LINE.search(out)
        if not check(ok and m is not None, f"seed {seed}: every node exits 0 and the server "
                     "reports"):
            print(tail(out, 40))
            continue
        handled, early, on_loop = (int(g) for g in m.groups())
        print(f"seed {seed}: {handled} requests, {early} messages before the server's node "
              f"table, {on_loop} on the control loop")
        check(on_loop == 0, f"seed {seed}: no request ran its handle on the control loop")
        early_total += early
    check(early_total > 0, f"some messages reached the server before its node table "
          f"({early_total} over {RUNS} runs)")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
