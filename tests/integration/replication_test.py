#!/usr/bin/env python3
"""Replication (PS_REPLICATION=2, 3 servers, 2 workers, unless said), nodes started by
hand as on several hosts, with the counter workload of server_restart_app.cc.

HOW is one of:
  replicas_are_identical  Adam on the servers, no failure; after ps::Finalize every
                          server saves its state: every key is on exactly 2 servers, its
                          owner and the next of the ring, with the same values,
                          optimizer state and step count, bit for bit.
  kill_one_of_three       SGD counters; server 1 killed with SIGKILL mid-run; once it is
                          declared dead its keys are served by their replicas, and the
                          workers' requests in flight to it go there again. No push
                          fails, and the final values are exactly the acknowledged
                          increments: none lost, none counted twice. Every survivor
                          exits 0: with PS_REPLICATION=2 one dead server lost nothing.
                          The test prints when the workers' throughput was back at 90%
                          of what it was before the kill (a measurement, not checked);
                          HERDPS_TEST_HEARTBEAT_TIMEOUT=S (default 3, heartbeats every
                          S/5; "default": the runtime's defaults) sets how fast the
                          death is declared.
  kill_one_of_three_lossy as kill_one_of_three with 600 pushes per worker, 16 in flight
                          at a time (--window), server 1
                          losing half of what it receives (PS_DROP_RATE=0.5, PS_RESEND=1
                          at 100 ms on every node): most of its requests wait for the
                          answers to their copies, so when it dies the workers send
                          parts again that its replicas already took as copies; each is
                          taken once and the counts are exact. Runs up to 4 times until
                          one shows such a push in the servers' logs (most runs do),
                          and fails if none did: it did not test what it is for.
  replaced_then_another_killed
                          SGD counters, 4000 pushes per worker per second of
                          PS_HEARTBEAT_TIMEOUT (12000 at 3 s): server 1 killed with
                          SIGKILL, a new server 1 started by hand at once (it waits for
                          the death, then catches up from servers 0 and 2 while the
                          pushes go on); once the scheduler says it caught up, server 2
                          is killed too. Two servers of three died, one at a time: no
                          push fails, the counts are exact, every survivor exits 0,
                          and each worker reads that server 1 came back from its
                          replicas with nothing lost. With --save_dir the two
                          survivors' states hold every key: those of server 2 once
                          (its replicas among them), the others on both, identical.
  rereplicated_then_another_killed
                          as replaced_then_another_killed, but no new server: with
                          PS_REREPLICATE_AFTER=1 the scheduler retires server 1 1 s after
                          its death, servers 0 and 2 copy its keys between them (each
                          key on both), and once it is out of the table server 2 is
                          killed. Two of three servers died and none replaced: no push
                          fails, the counts are exact, every survivor exits 0, and server
                          0 alone holds all the keys at the end.
  kill_two_of_four        PS_REPLICATION=3, 4 servers, each push adding 1 to 8 keys:
                          servers 1 and 2 killed with SIGKILL at once. Checked as
                          kill_one_of_three (both declared dead).
  stall_then_kill_two_of_four
                          as kill_two_of_four, the two servers first stopped (SIGSTOP)
                          for 0.5 s, so that the parts sent to them meanwhile were never
                          taken: each goes again split among its keys' new owners, and
                          the copy one new owner sends on of its piece reaches a server
                          that gets another piece of the same part; each key counts once.
                          Runs up to 3 times until the servers' logs show such a meeting
                          (most runs do), and fails if none did.
  stall_then_kill_two_of_four_push_pull
                          as stall_then_kill_two_of_four with KVWorker::PushPull: a
                          push-pull a new owner took before as a copy has its pull
                          served and its copies sent on; runs until a run shows one too.
  launched                as kill_one_of_three under tracker/launch (LAUNCH) with
                          --env PS_REPLICATION=2: the launcher says the job goes on and
                          exits 0.
  linear                  APP is apps/linear: 2 workers, 3 servers, BSP, 150 epochs on
                          the bundled data under LAUNCH, once as it is and once with
                          server 1 killed 2 s into the training: both exit 0, and the final training
                          losses differ by less than 0.001 (run-to-run noise is ~1e-5;
                          the loss starts at 0.69).
  linear_round_copies     as linear with --sync_aggregation and PS_REPLICATE_ROUNDS=1 in
                          both runs: each closed round is copied, not each push, and the
                          workers send again the pushes of rounds server 1 had not
                          copied; the losses agree as for linear.
  linear_cdgrab           as linear with --order cdgrab in both runs: the scheduler's
                          order plugin hands each worker its next epoch's order through
                          the failover; the losses agree as for linear.
  linear_restarted        as linear, the killed run with --restart-failed 1: a new
                          server 1 catches up from the live servers (its rounds of
                          synchronous aggregation with it) and serves its keys again;
                          the losses agree as for linear.

Usage: replication_test.py HOW APP [LAUNCH]
"""
import os
import re
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from liveness_test import (HEARTBEATS, START_S, Job, Process, run_checks,  # noqa: E402
                           wait_exits, wait_until)
from server_restart_test import launch_and_kill_server_1, worker_texts  # noqa: E402

WORKERS = 2
SERVERS = 3
KEYS = 64


def read_checkpoint(path):
    """{(key, chunk): (steps, values bytes, state bytes)} of a format-3 or 4 checkpoint
    (docs/optimizers.md), read from the format description."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"HERDPSCK", f"{path}: not a checkpoint"
    at = 8
    version, width, _pushes, count, name_len = struct.unpack_from("<IIQQI", data, at)
    assert version in (3, 4), f"{path}: format {version}"
    at += 4 + 4 + 8 + 8 + 4 + name_len
    (workers,) = struct.unpack_from("<I", data, at)
    at += 4 + 8 * workers
    records = {}
    for _ in range(count):
        key, length, steps, chunk = struct.unpack_from("<QIqI", data, at)
        at += 8 + 4 + 8 + 4
        if chunk:
            at += 16
        values = data[at:at + 4 * length]
        at += 4 * length
        state = data[at:at + 4 * length * width]
        at += 4 * length * width
        records[(key, chunk)] = (steps, values, state)
    return records


def check_two_identical_copies(f, save, servers, keys):
    """The checkpoints servers 0..servers-1 saved in `save` hold `keys` keys, each on
    exactly 2 servers, identical bit for bit. Returns the steps of all keys (None when a
    server saved nothing)."""
    holders = {}
    for r in range(servers):
        path = os.path.join(save, f"server-{r}.ckpt")
        if not f.expect(os.path.exists(path), f"server {r} saved nothing"):
            return None
        for key, record in read_checkpoint(path).items():
            holders.setdefault(key, []).append((r, record))
    f.expect(len(holders) == keys, f"{len(holders)} keys saved, not {keys}")
    differ = 0
    for key, copies in sorted(holders.items()):
        f.expect(len(copies) == 2,
                 f"key {key[0]} is on servers {[r for r, _ in copies]}, not on 2")
        if len(copies) == 2 and copies[0][1] != copies[1][1]:
            differ += 1
    f.expect(differ == 0, f"{differ} keys differ between their two replicas")
    return sum(c[0][1][0] for c in holders.values())


def replicas_are_identical(app, f):
    with Job() as job:
        save = os.path.join(job.tmp.name, "saved")
        os.makedirs(save)
        args = ["--pushes=1500", f"--keys={KEYS}", "--optimizer=adam", f"--save_dir={save}",
                "--push_gap_us=0"]
        nodes = job.start_by_hand(app, WORKERS, SERVERS, args,
                                  extra_env={"PS_REPLICATION": "2"})
        if not wait_exits(list(nodes.values()), 90):
            raise AssertionError("the job did not finish")
        for name, p in nodes.items():
            f.expect(p.proc.returncode == 0, f"{name} exited {p.proc.returncode}, not 0")
        steps = check_two_identical_copies(f, save, SERVERS, KEYS)
        if steps is None:
            return
        print(f"{KEYS} keys, each on 2 servers, replicas identical bit for bit "
              f"(values, Adam state, {steps} steps in all)")
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


PUSHES = 3000  # per worker, ~1 ms apart: the kill comes mid-run
# How fast a death is declared; the default is the other failure tests', safe on a busy
# machine; 1 s measures the recovery time the way docs/fault-tolerance.md quotes it;
# "default" runs with the runtime's own (a heartbeat every 1 s, dead after 10 s).
_TIMEOUT = os.environ.get("HERDPS_TEST_HEARTBEAT_TIMEOUT", "3")
HEARTBEAT_ENV = ({"PS_HEARTBEAT_INTERVAL": "1", "PS_HEARTBEAT_TIMEOUT": "10"}
                 if _TIMEOUT == "default" else
                 {"PS_HEARTBEAT_INTERVAL": str(float(_TIMEOUT) / 5),
                  "PS_HEARTBEAT_TIMEOUT": _TIMEOUT})


def check_counts(f, worker_texts, pushes=None, per_push=1):
    """The final values are exactly the acknowledged increments, and no push failed.
    worker_texts: each worker's output, worker 0's first; pushes: per worker (PUSHES);
    per_push: the keys each push adds 1 to."""
    pushes = PUSHES if pushes is None else pushes
    acknowledged = failed = 0
    for r, text in enumerate(worker_texts):
        m = re.search(rf"worker {r} acknowledged (\d+) .* failed (\d+)", text)
        if not f.expect(m is not None, f"worker {r} did not report its counts"):
            return
        acknowledged += int(m.group(1))
        failed += int(m.group(2))
    m = re.search(r"counted (\d+) over", worker_texts[0])
    if not f.expect(m is not None, "worker 0 did not count the final values"):
        return
    counted = int(m.group(1))
    acknowledged *= per_push  # increments
    print(f"acknowledged {acknowledged}, counted {counted}, pushes that failed and were "
          f"pushed again {failed}: lost {max(acknowledged - counted, 0)}, counted twice "
          f"{max(counted - acknowledged, 0)}")
    f.expect(acknowledged == WORKERS * pushes * per_push, f"acknowledged {acknowledged}")
    f.expect(counted >= acknowledged,
             f"{acknowledged - counted} acknowledged increments are missing")
    f.expect(counted <= acknowledged,
             f"{counted - acknowledged} increments counted twice")
    f.expect(failed == 0, f"{failed} pushes failed: the parts in flight to the dead server "
             "were not sent to its replicas")
    m = re.search(r"(\d+) keys whose values disagree", worker_texts[0])
    if m:  # --value_len: every chunk of a key had each update once
        f.expect(int(m.group(1)) == 0, f"{m.group(1)} keys whose values disagree (a chunk "
                 "lost or doubled an update)")


def recovery_s(worker_texts, killed_at, window_s=0.1):
    """Seconds from the kill until the workers' throughput (acknowledged pushes per
    window_s, summed; windows start every 50 ms) stays at 90% or more of its mean over
    the second before the kill, over the windows that end at least 0.1 s before the first
    worker finished: 0.1 s after the start of the last window below 90%. None when it
    cannot be told. The paced pushes of this workload jitter on a busy machine: a 100 ms
    window falls below 90% now and then with no fault at all, so the 0.5 s windows tell
    the recovery apart from that."""
    slots = {}
    ends = []
    for text in worker_texts:
        m = re.search(r"acks per 50 ms from ([\d.]+):([\d ]*)", text)
        if not m:
            return None
        start = float(m.group(1))
        counts = [int(x) for x in m.group(2).split()]
        for i, n in enumerate(counts):
            slot = int(round((start + 0.05 * i) / 0.05))
            slots[slot] = slots.get(slot, 0) + n
        ends.append(start + 0.05 * len(counts))
    width = int(round(window_s / 0.05))
    rate = lambda t: sum(slots.get(int(round(t / 0.05)) + d, 0)  # noqa: E731
                         for d in range(width))
    before = [rate(killed_at - 1.0 + 0.05 * i)
              for i in range(int(round((1.0 - window_s) / 0.05)))]
    baseline = sum(before) / len(before)
    if baseline <= 0:
        return None
    last_low = killed_at
    t = killed_at
    while t < min(ends) - 0.1 - window_s:
        if rate(t) < 0.9 * baseline:
            last_low = t + 0.1
        t += 0.05
    return last_low - killed_at


def kill_one_of_three(app, f, lossy=False):
    """lossy: server 1 loses half of what it receives (PS_DROP_RATE=0.5; resend on every
    node, at 100 ms), the answers of its replicas to its copies among it, so that many of
    its requests wait with their copies taken and their answers not sent yet: when it is
    killed, the workers send those parts again to the replicas that took the copies.
    Returns how many pushes the survivors said they had taken before (a lower bound)."""
    return kill_servers(app, f, SERVERS, 2, [1], lossy)[0]


def kill_servers(app, f, servers, replication, killed, lossy=False, per_push=1, window=16,
                 stalled=False, push_pull=False):
    """`servers` servers with PS_REPLICATION=`replication`; the servers of ranks `killed`
    get SIGKILL at the same moment mid-run (lossy: each loses half of what it receives
    before, as in kill_one_of_three; stalled: each gets SIGSTOP 0.5 s before); each push
    (push_pull: a KVWorker::PushPull, whose answers are checked) adds 1 to `per_push`
    keys. Returns (pushes the survivors said they had taken before, push-pulls with
    push_pull; pushes whose pieces met on a survivor), lower bounds both."""
    pushes = 600 if lossy else PUSHES
    killed_names = [f"server {r}" for r in killed]
    with Job() as job:
        args = [f"--pushes={pushes}", f"--keys={KEYS}", f"--keys_per_push={per_push}"] + \
            ([f"--window={window}"] if lossy or stalled else []) + \
            (["--push_pull"] if push_pull else [])
        env = dict(HEARTBEAT_ENV, PS_REPLICATION=str(replication))
        node_env = {}
        if lossy:
            env.update(PS_RESEND="1", PS_RESEND_TIMEOUT="100")
            node_env = {name: {"PS_DROP_RATE": "0.5"} for name in killed_names}
        nodes = job.start_by_hand(app, WORKERS, servers, args, extra_env=env,
                                  node_env=node_env)
        if not wait_until(lambda: all(f"worker {r} pid" in nodes[f"worker {r}"].text()
                                      for r in range(WORKERS)), START_S):
            raise AssertionError("the workers did not start")
        time.sleep(1.5)
        if stalled:
            for name in killed_names:
                os.kill(nodes[name].proc.pid, signal.SIGSTOP)
            time.sleep(0.5)
        for name in killed_names:
            nodes[name].kill()
        killed_at = time.time()
        survivors = [p for name, p in nodes.items() if name not in killed_names]
        if not wait_exits(survivors, 90):
            raise AssertionError("the job did not finish after the kill")
        print(f"the job finished {time.time() - killed_at:.1f} s after the kill")
        texts = [nodes[f"worker {r}"].text() for r in range(WORKERS)]
        check_counts(f, texts, pushes, per_push)
        for window_s, what in ((0.1, ""), (0.5, " (0.5 s windows)")):
            back = recovery_s(texts, killed_at, window_s)
            print(f"throughput back at 90%{what}: "
                  + (f"{back:.2f} s after the kill" if back is not None else "cannot be told"))
        for r in killed:
            f.expect(re.search(rf"server {r} \(node {8 + 2 * r}, .*declared dead",
                               nodes["scheduler"].text()) is not None,
                     f"the scheduler did not declare server {r} dead")
        for p in survivors:
            f.expect(p.proc.returncode == 0, f"{p.name} exited {p.proc.returncode}, not 0")
        f.expect("kept a live replica" in nodes["scheduler"].text(),
                 "the scheduler did not say the job lost nothing")
        # Each server's log says how many so far; the log samples a flood, so the last
        # count said is a lower bound.
        taken_twice = sum(max([int(n) for n in re.findall(
            r"was taken here before .*answered without applying it again \((\d+) so far\)",
            p.text())] or [0]) for p in survivors)
        print(f"pushes a replica had taken before they came again: at least {taken_twice}")
        pieces = sum(max([int(n) for n in re.findall(
            r"came again with keys it was not taken for .*\((\d+) so far\)", p.text())] or [0])
            for p in survivors)
        print(f"pushes whose pieces met on a server: at least {pieces}")
        if push_pull:
            push_pulls = sum(max([int(n) for n in re.findall(
                r"a push-pull of request .* was taken here before: .*\((\d+) so far\)",
                p.text())] or [0]) for p in survivors)
            print(f"push-pulls a server had taken before: at least {push_pulls}")
            taken_twice = push_pulls
            for r in range(WORKERS):
                m = re.search(rf"worker {r} push-pull answers wrong (\d+)", texts[r])
                f.expect(m is not None and m.group(1) == "0",
                         f"worker {r}: push-pull answers wrong: "
                         + (m.group(1) if m else "not reported"))
        left = job.left()
        f.expect(left == [], f"processes left: {left}")
        return taken_twice, pieces


# Per worker, ~1 ms apart: two deaths (each declared PS_HEARTBEAT_TIMEOUT after it) and a
# catch-up mid-run.
_TIMEOUT_S = 10.0 if _TIMEOUT == "default" else float(_TIMEOUT)
REPLACED_PUSHES = int(4000 * _TIMEOUT_S)


def start_counters_then_wait(job, app, **env):
    """The counter workload of the two-deaths cases (REPLACED_PUSHES per worker, every
    server saving its state at the end), PS_REPLICATION=2 and `env`; returns once the
    workers have pushed for 1 s: (nodes, the folder the servers save to)."""
    save = os.path.join(job.tmp.name, "saved")
    os.makedirs(save)
    args = [f"--pushes={REPLACED_PUSHES}", f"--keys={KEYS}", f"--save_dir={save}"]
    nodes = job.start_by_hand(app, WORKERS, SERVERS, args,
                              extra_env=dict(HEARTBEAT_ENV, PS_REPLICATION="2", **env))
    if not wait_until(lambda: all(f"worker {r} pid" in nodes[f"worker {r}"].text()
                                  for r in range(WORKERS)), START_S):
        raise AssertionError("the workers did not start")
    time.sleep(1.0)
    return nodes, save


def replaced_then_another_killed(app, f):
    with Job() as job:
        nodes, save = start_counters_then_wait(job, app)
        scheduler = nodes["scheduler"]
        victim = nodes["server 1"]
        victim.kill()
        killed_at = time.time()
        replacement = Process("server 1 again", victim.cmd, victim.env, job.tmp.name)
        job.procs.append(replacement)
        if not f.expect(wait_until(lambda: re.search(r"server 1 \(node 10\) caught up",
                                                     scheduler.text()), 60),
                        "the scheduler did not say the new server 1 caught up"):
            return
        caught_up_at = time.time()
        print(f"the new server 1 caught up {caught_up_at - killed_at:.1f} s after the kill")
        f.expect(any(nodes[f"worker {r}"].poll() is None for r in range(WORKERS)),
                 "the workers had finished before the catch-up: the test exercised nothing")
        nodes["server 2"].kill()
        survivors = [nodes[n] for n in ("scheduler", "server 0", "worker 0", "worker 1")]
        survivors.append(replacement)
        if not wait_exits(survivors, 120):
            raise AssertionError("the job did not finish after the second kill")
        print(f"the job finished {time.time() - caught_up_at:.1f} s after the catch-up")
        f.expect(re.search(r"server 2 \(node 12, .*declared dead", scheduler.text())
                 is not None, "the scheduler did not declare server 2 dead")
        texts = [nodes[f"worker {r}"].text() for r in range(WORKERS)]
        check_counts(f, texts, REPLACED_PUSHES)
        for r, text in enumerate(texts):
            f.expect(re.search(rf"worker {r} acknowledged \d+ lost 0 unacknowledged_applied 0 "
                               r"restarts 1", text) is not None,
                     f"worker {r} did not read one restart of server 1 with nothing lost")
            f.expect("server 1 restarted from its replicas" in text,
                     f"worker {r} did not read that server 1 came back from its replicas")
        for p in survivors:
            f.expect(p.proc.returncode == 0, f"{p.name} exited {p.proc.returncode}, not 0")
        sent = sum(int(n) for p in (nodes["server 0"], nodes["server 2"]) for n in
                   re.findall(r"sent server 1 the (\d+) keys it holds with this one", p.text()))
        # Server 2 dead for PS_REREPLICATE_AFTER (30 s: with the runtime's heartbeats the
        # job runs that long) is retired: server 0 sends server 1 the keys it lacks of it.
        rereplicated = sum(int(n) for n in re.findall(
            r"sent server 1 the (\d+) keys a leaving server's place gives it",
            nodes["server 0"].text()))
        held = {}
        for r in (0, 1):
            path = os.path.join(save, f"server-{r}.ckpt")
            if not f.expect(os.path.exists(path), f"server {r} saved nothing"):
                return
            held[r] = read_checkpoint(path)
        print(f"servers 0 and 2 sent the new server 1 {sent} keys, and server 0 {rereplicated} "
              f"when server 2 was re-replicated; it holds {len(held[1])}")
        # Every key was pushed before the catch-up: server 1's keys all came in it (or in
        # the re-replication of server 2, which gives it the keys it lacks).
        f.expect(sent + rereplicated == len(held[1]), f"servers 0 and 2 sent server 1 {sent} "
                 f"keys, and {rereplicated} in a re-replication; it holds {len(held[1])}")
        union = set(held[0]) | set(held[1])
        f.expect(len(union) == KEYS, f"servers 0 and 1 hold {len(union)} keys, not {KEYS}")
        shared = set(held[0]) & set(held[1])
        differ = sum(1 for key in shared if held[0][key] != held[1][key])
        print(f"{len(shared)} keys on both servers 0 and 1, {differ} differ")
        f.expect(differ == 0, f"{differ} keys differ between server 0 and the new server 1")
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


def rereplicated_then_another_killed(app, f):
    with Job() as job:
        nodes, save = start_counters_then_wait(job, app, PS_REREPLICATE_AFTER="1")
        scheduler = nodes["scheduler"]
        nodes["server 1"].kill()
        killed_at = time.time()
        if not f.expect(wait_until(lambda: re.search(r"dead server 1 \(node 10\) is retired",
                                                     scheduler.text()), 60),
                        "the scheduler did not say server 1's keys were re-replicated"):
            return
        retired_at = time.time()
        print(f"server 1 was retired {retired_at - killed_at:.1f} s after the kill")
        f.expect(any(nodes[f"worker {r}"].poll() is None for r in range(WORKERS)),
                 "the workers had finished before the re-replication: the test exercised "
                 "nothing")
        nodes["server 2"].kill()
        survivors = [nodes[n] for n in ("scheduler", "server 0", "worker 0", "worker 1")]
        if not wait_exits(survivors, 120):
            raise AssertionError("the job did not finish after the second kill")
        f.expect(re.search(r"server 2 \(node 12, .*declared dead", scheduler.text())
                 is not None, "the scheduler did not declare server 2 dead")
        texts = [nodes[f"worker {r}"].text() for r in range(WORKERS)]
        check_counts(f, texts, REPLACED_PUSHES)
        for p in survivors:
            f.expect(p.proc.returncode == 0, f"{p.name} exited {p.proc.returncode}, not 0")
        sent = sum(int(n) for r in (0, 2) for n in re.findall(
            r"sent server \d the (\d+) keys a leaving server's place gives it",
            nodes[f"server {r}"].text()))
        path = os.path.join(save, "server-0.ckpt")
        if not f.expect(os.path.exists(path), "server 0 saved nothing"):
            return
        held = read_checkpoint(path)
        print(f"servers 0 and 2 sent each other {sent} keys of server 1; server 0 holds "
              f"{len(held)} keys at the end")
        f.expect(sent > 0, "servers 0 and 2 sent each other no key of server 1")
        f.expect(len(held) == KEYS, f"server 0 holds {len(held)} keys, not {KEYS}")
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


def push_sent_again_after_its_copy(app, f, attempts=4):
    """kill_one_of_three_lossy: lossy runs until one shows a push taken twice (most do:
    the rest had every request in flight to server 1 held before its copy, behind a lost
    message), each checked in full."""
    for attempt in range(1, attempts + 1):
        if kill_one_of_three(app, f, lossy=True) > 0:
            print(f"run {attempt}: a replica took a push it had taken before once")
            return
        print(f"run {attempt}: no push came twice to a replica; again")
    f.append(f"in {attempts} runs no push came twice to a replica: the test did not "
             "exercise the de-duplication it is for")


def pieces_met_after_two_deaths(app, f, push_pull=False, attempts=3):
    """stall_then_kill_two_of_four: runs until one shows a push whose pieces met on a
    server (most do), each checked in full; with push_pull, until one also shows a
    push-pull a survivor had taken before (its pull served, its copies sent on)."""
    for attempt in range(1, attempts + 1):
        taken_twice, met = kill_servers(app, f, 4, 3, [1, 2], per_push=8, stalled=True,
                                        push_pull=push_pull)
        if met > 0 and (taken_twice > 0 or not push_pull):
            print(f"run {attempt}: pieces of one part met on a server {met} times at least")
            return
        print(f"run {attempt}: no two pieces of a part met on a server"
              + (" or no push-pull came twice" if push_pull else "") + "; again")
    f.append(f"in {attempts} runs no two pieces of a part met on a server"
             + (" (with a push-pull that came twice)" if push_pull else "")
             + ": the test did not exercise the key-by-key de-duplication it is for")


def launched(app, launch, f):
    with Job() as job:
        p, out = launch_and_kill_server_1(job, app, launch, SERVERS, PUSHES,
                                          dict(HEARTBEATS, PS_REPLICATION="2"))
        f.expect(p.proc.returncode == 0, f"the launcher exited {p.proc.returncode}, not 0")
        f.expect("server 1 was killed by signal 9 (SIGKILL); its keys fail over to their "
                 "replicas (PS_REPLICATION=2): the job goes on" in out,
                 "the launcher did not say the job goes on")
        check_counts(f, worker_texts(out))
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


def server_pid(rank, marker):
    """The pid of the server of `rank` among the processes whose environment holds
    marker (linear takes no marker argument: the test puts it in the environment)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if (f"HERDPS_TEST_MARKER={marker}".encode() in env and b"PS_ROLE=server" in env
                and f"PS_RANK={rank}".encode() in env):
            return int(entry)
    return None


def linear(app, launch, f, restart=False, round_copies=False, app_args=()):
    losses = {}
    for kill in (False, True):
        with Job() as job:
            cmd = [sys.executable, launch, "-n", str(WORKERS), "-s", str(SERVERS),
                   "--timeout", "120", "--consistency", "bsp",
                   "--env", "PS_REPLICATION=2", "--env", "PS_HEARTBEAT_INTERVAL=0.5",
                   "--env", "PS_HEARTBEAT_TIMEOUT=3", "--env", f"HERDPS_TEST_MARKER={job.marker}"]
            if kill and restart:
                cmd += ["--restart-failed", "1"]
            if round_copies:
                cmd += ["--env", "PS_REPLICATE_ROUNDS=1"]
            cmd += ["--", app, "--epochs", "150", *app_args]
            if round_copies:
                cmd += ["--sync_aggregation"]
            p = Process("killed" if kill else "whole", cmd, dict(os.environ), job.tmp.name)
            job.procs.append(p)
            if kill:
                if not wait_until(lambda: "epoch" in p.text(), START_S):
                    raise AssertionError("the training did not start")
                time.sleep(2)
                pid = server_pid(1, job.marker)
                if not f.expect(pid is not None, "server 1 not found"):
                    return
                os.kill(pid, signal.SIGKILL)
            if not wait_exits([p], 150):
                raise AssertionError("the job did not finish")
            out = p.text()
            f.expect(p.proc.returncode == 0,
                     f"the {p.name} run exited {p.proc.returncode}, not 0")
            m = re.search(r"\[worker 0\] final: train_loss ([\d.]+)", out)
            if not f.expect(m is not None, f"the {p.name} run printed no final loss"):
                return
            losses[kill] = float(m.group(1))
            if kill:
                f.expect("its keys fail over to their replicas" in out,
                         "the launcher did not say server 1's keys fail over")
            if kill and "cdgrab" in app_args:
                for r in range(WORKERS):
                    m = re.search(rf"worker {r}: order cdgrab, \d+ slots, changed after (\d+) "
                                  r"of (\d+) epochs", out)
                    f.expect(m is not None and m.group(1) == m.group(2),
                             f"worker {r}'s order did not change after every epoch: "
                             + (m.group(0) if m else "not reported"))
            if kill and round_copies:
                f.expect("every live worker sent again the pushes it kept for dead server 1"
                         in out, "no server said it applied server 1's rounds once every "
                         "worker sent its kept pushes again")
            if kill and restart:
                f.expect("a new server 1 takes its place, catching up from them" in out,
                         "the launcher did not start a new server 1")
                f.expect(re.search(r"server 1 \(node 10\) caught up", out) is not None,
                         "the new server 1 did not catch up")
    print(f"final training loss {losses[False]:.6f} as it is, {losses[True]:.6f} with server 1 "
          f"killed mid-run")
    f.expect(abs(losses[True] - losses[False]) < 1e-3,
             "the kill changed the final loss by more than 0.001")


def main():
    hows = ("replicas_are_identical", "kill_one_of_three", "kill_one_of_three_lossy",
            "replaced_then_another_killed", "rereplicated_then_another_killed", "launched",
            "linear", "linear_round_copies", "linear_cdgrab", "linear_restarted",
            "kill_two_of_four", "stall_then_kill_two_of_four",
            "stall_then_kill_two_of_four_push_pull")
    launched_hows = ("launched", "linear", "linear_round_copies", "linear_cdgrab",
                     "linear_restarted")
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in hows or \
            (sys.argv[1] in launched_hows) != (len(sys.argv) == 4):
        print(__doc__, file=sys.stderr)
        return 2
    how, app = sys.argv[1], os.path.realpath(sys.argv[2])
    if how == "launched":
        return run_checks(lambda f: launched(app, sys.argv[3], f))
    if how in ("linear", "linear_round_copies", "linear_cdgrab", "linear_restarted"):
        return run_checks(lambda f: linear(
            app, sys.argv[3], f, how == "linear_restarted", how == "linear_round_copies",
            ["--order", "cdgrab"] if how == "linear_cdgrab" else []))
    if how == "kill_one_of_three_lossy":
        return run_checks(lambda f: push_sent_again_after_its_copy(app, f))
    if how == "kill_two_of_four":
        return run_checks(lambda f: kill_servers(app, f, 4, 3, [1, 2], per_push=8))
    if how == "stall_then_kill_two_of_four":
        return run_checks(lambda f: pieces_met_after_two_deaths(app, f))
    if how == "stall_then_kill_two_of_four_push_pull":
        return run_checks(lambda f: pieces_met_after_two_deaths(app, f, push_pull=True))
    return run_checks(lambda f: {"replicas_are_identical": replicas_are_identical,
                                 "kill_one_of_three": kill_one_of_three,
                                 "replaced_then_another_killed":
                                     replaced_then_another_killed,
                                 "rereplicated_then_another_killed":
                                     rereplicated_then_another_killed}[how](app, f))


if __name__ == "__main__":
    sys.exit(main())
