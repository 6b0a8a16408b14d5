#!/usr/bin/env python3
"""Round copies (PS_REPLICATE_ROUNDS=1, docs/fault-tolerance.md): under synchronous
aggregation each key's owner copies the rounds it closes to the key's replica instead of
every push, and the workers keep the pushes of rounds not copied yet. Nodes started by
hand on loopback (scheduler, 3 servers, 2 workers, PS_CONSISTENCY=bsp, PS_REPLICATION=2)
running tests/integration/sync_aggregation (APP).

  identical  Adam, no failure: after the run every key is on exactly 2 servers, identical
             bit for bit (values, Adam state, step counts), and every server copied and
             took closed rounds.
  killed     SGD, server 1 killed (SIGKILL) mid-run, while rounds it has not copied are
             open (the workers wait between a push's answer and the clock's end): in
             every clock each worker pulls
             every key and checks it holds exactly the rounds of the clocks before (one
             step each with the mean of that clock's pushes), so a round lost, applied
             twice or applied without a push of it fails the run. Both workers and the
             two servers left exit 0; the survivors said they rebuild server 1's rounds
             and apply them once every worker sent again what it kept. Up to 4 runs,
             until one's survivors applied rebuilt rounds (the kill fell while rounds
             only server 1 held were open); fails if none did.
  killed_chunks
             as killed with 600 values a key in chunks of 256 (PS_CHUNK_BYTES=1024):
             each close goes to the replica in many messages, applied at the last.
  killed_push_pull
             as killed, the workers pushing with KVWorker::PushPull.
  killed_late_table
             as killed, with server 2 losing 30% of what it receives (PS_DROP_RATE, and
             PS_RESEND=1 at 100 ms on every node), the table that says server 1 died
             among it: a worker's push sent again to server 2 then comes before server
             2's table gives it that push's keys, and waits for that table. Up to 6
             runs, until one's server 2 said a request waited for the table and its
             survivors applied rebuilt rounds; fails if none did. Not in ctest: a run
             goes on about 65 s after the kill (the losses slow every clock), and one
             run in several shows the wait.

With HERDPS_TEST_HEARTBEAT_TIMEOUT=default in the environment the nodes run with the
runtime's default heartbeats (dead after 10 s) instead of dead after 3 s.

Usage: round_copies_test.py HOW APP
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from liveness_test import START_S, Job, run_by_hand_test, wait_exits, wait_until  # noqa: E402
from replication_test import check_two_identical_copies  # noqa: E402

WORKERS = 2
SERVERS = 3
KEYS = 50
ROUNDS = 150  # of the killed runs: the kill comes 3 s in, mid-run
ENV = {"PS_CONSISTENCY": "bsp", "PS_REPLICATION": "2", "PS_REPLICATE_ROUNDS": "1"}
# HERDPS_TEST_HEARTBEAT_TIMEOUT=default runs with the runtime's own heartbeats (every 1 s,
# dead after 10 s) instead of the other failure tests' (every 0.5 s, dead after 3 s).
if os.environ.get("HERDPS_TEST_HEARTBEAT_TIMEOUT") == "default":
    ENV.update(PS_HEARTBEAT_INTERVAL="1", PS_HEARTBEAT_TIMEOUT="10")


def identical(app, f):
    with Job() as job:
        save = os.path.join(job.tmp.name, "saved")
        os.makedirs(save)
        args = ["--rounds=120", f"--keys={KEYS}", "--optimizer=adam", f"--save_dir={save}",
                "--settle_ms=1000"]
        nodes = job.start_by_hand(app, WORKERS, SERVERS, args, extra_env=ENV)
        if not wait_exits(list(nodes.values()), 90):
            raise AssertionError("the job did not finish")
        for name, p in nodes.items():
            f.expect(p.proc.returncode == 0, f"{name} exited {p.proc.returncode}, not 0")
        for r in range(SERVERS):
            text = nodes[f"server {r}"].text()
            f.expect("round copies: sent " in text and "round copies: sent 0 " not in text,
                     f"server {r} copied no closed round")
            f.expect(" from owners" in text and "took 0 from owners" not in text,
                     f"server {r} took no round copy")
        steps = check_two_identical_copies(f, save, SERVERS, KEYS)
        if steps is None:
            return
        print(f"{KEYS} keys, each on 2 servers, replicas identical bit for bit "
              f"(values, Adam state, {steps} steps in all), every round copied as a round")
        f.expect(job.left() == [], f"processes left: {job.left()}")


def killed(app, f, keys=KEYS, extra_args=(), extra_env=None):
    """Up to 4 runs, until one kills server 1 with rounds only it held open (each run
    checked whole). A push's round is open for 40 of each clock's ~45 ms."""
    for attempt in range(4):
        applied = killed_once(app, f, keys, extra_args, extra_env)
        if len(f) or applied:
            return
        print(f"run {attempt + 1}: the kill missed the open rounds; again")
    f.expect(False, "no rebuilt round was applied in 4 runs: the kills missed the open rounds")


def killed_late_table(app, f):
    """Up to 6 runs, until one's server 2 took a push of server 1's keys before its table
    gave them to it (and rebuilt rounds were applied)."""
    lossy = {"PS_RESEND": "1", "PS_RESEND_TIMEOUT": "100"}
    for attempt in range(6):
        texts = {}
        applied = killed_once(app, f, KEYS, (), lossy, {"server 2": {"PS_DROP_RATE": "0.3"}},
                              texts)
        if len(f):
            return
        waited = "it waits for the next table" in texts.get("server 2", "")
        if applied and waited:
            print(f"run {attempt + 1}: server 2 held a request until its table said server 1 "
                  "died")
            return
        print(f"run {attempt + 1}: " + ("no request waited for server 2's table"
                                         if applied else "the kill missed the open rounds")
              + "; again")
    f.expect(False, "in 6 runs no request waited for server 2's table with rebuilt rounds "
             "applied")


def killed_once(app, f, keys, extra_args, extra_env, node_env=None, texts=None):
    """One run; returns how many shard releases applied rebuilt rounds. texts: filled with
    each node's output."""
    with Job() as job:
        args = [f"--rounds={ROUNDS}", f"--keys={keys}", "--gap_ms=40", *extra_args]
        nodes = job.start_by_hand(app, WORKERS, SERVERS, args,
                                  extra_env=dict(ENV, **(extra_env or {})), node_env=node_env)
        if not wait_until(lambda: all(nodes[f"server {r}"].poll() is None
                                      for r in range(SERVERS)), START_S):
            raise AssertionError("a server did not start")
        time.sleep(3)
        if not f.expect(all(p.poll() is None for p in nodes.values()),
                        "the job ended before the kill: make it longer"):
            return 0
        nodes["server 1"].kill()
        killed_at = time.time()
        survivors = [p for name, p in nodes.items() if name != "server 1"]
        if not wait_exits(survivors, 120):
            raise AssertionError("the job did not finish after the kill")
        print(f"the job finished {time.time() - killed_at:.1f} s after the kill")
        for p in survivors:
            f.expect(p.proc.returncode == 0, f"{p.name} exited {p.proc.returncode}, not 0")
        for r in range(WORKERS):
            text = nodes[f"worker {r}"].text()
            f.expect("FAILED" not in text, f"worker {r} failed:\n" + "\n".join(
                line for line in text.splitlines() if "FAILED" in line)[:2000])
            f.expect(f"worker {r}: {ROUNDS} clocks over {keys} keys, 0 pushes failed, 0 wrong "
                     "values" in text, f"worker {r} did not check every clock")
        rebuilt = sum("rebuilds the rounds of its keys" in nodes[f"server {r}"].text()
                      for r in (0, 2))
        released = sum("every live worker sent again the pushes it kept for dead server 1"
                       in nodes[f"server {r}"].text() for r in (0, 2))
        f.expect(rebuilt == 2, f"{rebuilt} of the 2 servers left said they rebuild server 1's "
                 "rounds")
        f.expect(released == 2, f"{released} of the 2 servers left heard every worker")
        # The kill comes while the workers wait between a push's answer and the clock's
        # end (--gap_ms): the rounds open on server 1 then hold pushes only it had.
        applied = sum(nodes[f"server {r}"].text().count("rebuilt round(s) of a dead owner's keys")
                      for r in (0, 2))
        kept = [line for r in range(WORKERS) for line in nodes[f"worker {r}"].text().splitlines()
                if "this worker sent again" in line]
        f.expect(len(kept) == WORKERS, "a worker did not say it sent its kept pushes again")
        for line in kept:
            print(line.split("] ", 1)[-1])
        f.expect(job.left() == [], f"processes left: {job.left()}")
        if texts is not None:
            texts.update({name: p.text() for name, p in nodes.items()})
        return applied


HOWS = {
    "identical": identical,
    "killed": killed,
    # 600 values a key in chunks of 256 (PS_CHUNK_BYTES=1024): each chunk's round goes in
    # a message of its own, so a close is many messages, applied at the last one.
    "killed_chunks": lambda app, f: killed(app, f, keys=20, extra_args=["--value_len=600"],
                                           extra_env={"PS_CHUNK_BYTES": "1024"}),
    "killed_push_pull": lambda app, f: killed(app, f, extra_args=["--push_pull"]),
    "killed_late_table": killed_late_table,
}


def main():
    return run_by_hand_test(lambda how, app, f: HOWS[how](app, f), tuple(HOWS), __doc__)


if __name__ == "__main__":
    sys.exit(main())
