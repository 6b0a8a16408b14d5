#!/usr/bin/env python3
"""A fault schedule drawn from a seed, over the counter workload of server_restart_app.cc
(docs/fault-tolerance.md, "A fault schedule"): the same seed gives the same faults, at
the same moments after the job recovered from the one before.

Usage: fault_schedule_test.py SCHEDULE SEEDS APP

2 workers and 3 servers started by hand (4 in elastic_three_copies), PS_REPLICATION=2 (1
in elastic_one_copy, 3 in elastic_three_copies), SGD
counters: each worker pushes -1 (a counter's +1) to one of 64 keys at a time, about 1 ms
apart, until PUSHES were acknowledged. Faults come one at a time, each 0.5 to 2 s (drawn)
after the job recovered from the one before, on a server drawn from those live:

SCHEDULE is one of:
  kills   3 faults: SIGKILL, and a new server started in the dead one's place at once
          (it waits for the death, then catches up from the live servers).
  stops   3 faults, each drawn: SIGSTOP for 10-50% of PS_HEARTBEAT_TIMEOUT, then
          SIGCONT (nobody dies, the job stalls and goes on); or SIGSTOP
          until the server is declared dead, then SIGCONT (it reads that it is dead and
          exits 1) and a new server in its place.
  mixed   4 faults drawn from both, with every node losing 2% of what it receives
          (PS_DROP_RATE=0.02, PS_RESEND=1 at 100 ms), 16 pushes in flight per worker.
  elastic 5 faults, each drawn: a server added (started by hand without PS_RANK), a
          server leaving (SIGTERM, PS_LEAVE_ON_SIGTERM=1: it leaves gracefully and exits
          0), SIGKILL with a new server in its place, or SIGKILL and no new server (its
          keys are re-replicated, PS_REREPLICATE_AFTER=1, and it leaves the table); the
          job keeps 3 to 5 servers. Catch-ups go at PS_CATCH_UP_RATE=0.001 (1 kB/s: a
          key per slice), so that pushes, copies and faults come between their slices.
          As mixed, every node loses 2% of what it receives, 16 pushes in flight.
  elastic_chunks
          as elastic with values in chunks: 600 values a key (--value_len) and
          PS_CHUNK_BYTES=1024, so each key is 3 chunks, each on the ring at its own
          point, and catch-ups at PS_CATCH_UP_RATE=0.03 (a chunk per slice). Besides the
          counts, every value of each key equal at the end.
  elastic_one_copy
          as elastic with PS_REPLICATION=1 and only adds and leaves (a death loses
          keys with one copy): 5 faults, each drawn from those the job's 3 to 5
          servers allow. PS_CHUNK_BYTES=0, which a leave needs with one copy.
  elastic_three_copies
          as elastic with PS_REPLICATION=3 and 4 to 6 servers (4 at the start), and one
          more kind of fault: two servers killed at once and a new server started in
          each one's place (every key keeps a live replica). 5 faults.
  kills_three_copies
          as kills with PS_REPLICATION=3 and 4 servers, each fault drawn: one server
          killed, or two at once, each replaced at once.
  cuts    4 faults, each drawn: a server's network cable pulled for 10-50% of
          PS_HEARTBEAT_TIMEOUT, then plugged back in (nobody dies); or pulled until the
          server is declared dead, then plugged back in (it reads that it is dead and
          exits 1) and a new server started in its place on its host. Each server runs
          on a host of its own, the scheduler and the workers on a fourth: Linux network
          namespaces joined by a bridge (tests/multihost/netns_network.py; needs root
          and iproute2, else the run is skipped with exit status 77).

The job has recovered from a fault once the new server caught up (the scheduler says
so), the leaving or dead server left the table, or 1 s after a short stop ended. SEEDS is a seed
or a comma-separated list; each seed is a run, checked in full: every acknowledged
increment counted once (0 lost, 0 twice), no push failed, every node but the killed,
stopped-dead ones exits 0 (a server that left gracefully too), and the replicas agree:
each server live at the end saves its keys after ps::Finalize (--save_dir), and each key
(and chunk) has PS_REPLICATION copies (or one on every live server) identical, holding
every update (check_replicas). Each run prints its faults and, for each, when the
workers' throughput was back at 90% of the second before it, first (a measurement, not
checked). HERDPS_TEST_HEARTBEAT_TIMEOUT as for
replication_test.py.
"""
import os
import random
import re
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "multihost"))
from liveness_test import START_S, Job, Process, run_checks, wait_exits, wait_until  # noqa: E402
from netns_network import Network, Skip  # noqa: E402
from replication_test import HEARTBEAT_ENV, check_counts, read_checkpoint  # noqa: E402

WORKERS = 2
SERVERS = 3
KEYS = 64
PUSHES = {"kills": 16000, "kills_three_copies": 16000, "stops": 16000, "mixed": 8000,
          "elastic": 8000, "elastic_one_copy": 8000, "elastic_three_copies": 8000,
          "elastic_chunks": 8000, "cuts": 16000}
# Pushes in flight per worker: with messages lost, one push in ~7 waits for a resend
# (100 ms); 16 at a time keep the workload going meanwhile.
WINDOW = {"kills": 1, "kills_three_copies": 1, "stops": 1, "mixed": 16, "elastic": 16,
          "elastic_one_copy": 16, "elastic_three_copies": 16, "elastic_chunks": 16, "cuts": 1}
FAULTS = {"kills": 3, "kills_three_copies": 3, "stops": 3, "mixed": 4, "elastic": 5,
          "elastic_one_copy": 5, "elastic_three_copies": 5, "elastic_chunks": 5, "cuts": 4}
# Copies of each key, and servers at the start, where not 2 and SERVERS.
COPIES = {"elastic_one_copy": 1, "elastic_three_copies": 3, "kills_three_copies": 3}
FIRST_SERVERS = {"elastic_three_copies": 4, "kills_three_copies": 4}
# cuts: server r on host SERVER_HOSTS[r], the scheduler and the workers on JOB_HOST.
SERVER_HOSTS = ("a", "b", "c")
JOB_HOST = "d"
LOSSY = ("mixed", "elastic", "elastic_one_copy", "elastic_three_copies", "elastic_chunks")
ELASTIC = ("elastic", "elastic_one_copy", "elastic_three_copies", "elastic_chunks")
# Elastic: the keys of every ring change go a key per slice, about 30 ms apart, so that
# pushes, copies and faults come between the slices of one catch-up (chunks of 1 kB at
# 30 kB/s: a chunk per slice).
CATCH_UP_RATE_MB = {"elastic_chunks": "0.03"}
# elastic_chunks: values a key, and the chunk size that cuts each into 3 chunks.
CHUNKED_VALUES = 600
CHUNK_BYTES = "1024"
TIMEOUT_S = float(HEARTBEAT_ENV["PS_HEARTBEAT_TIMEOUT"])


def draw_faults(schedule, seed):
    """[(kind, gap_s, server, stop_s)], kind "kill", "kill_two" (server: the two ranks),
    "stop" (short), "stop_dead", "cut" (short), "cut_dead", "join" (server: the rank the
    scheduler gives it), "leave" or "retire" (killed, not replaced)."""
    rng = random.Random(f"{schedule}:{seed}")
    faults = []
    first = FIRST_SERVERS.get(schedule, SERVERS)
    live = list(range(first))
    next_rank = first  # the scheduler never gives a rank twice
    for _ in range(FAULTS[schedule]):
        if schedule == "kills":
            kind = "kill"
        elif schedule == "stops":
            kind = rng.choice(["stop", "stop_dead"])
        elif schedule == "mixed":
            kind = rng.choice(["kill", "stop", "stop_dead"])
        elif schedule == "cuts":
            kind = rng.choice(["cut", "cut_dead"])
        elif schedule == "elastic_one_copy":
            kind = rng.choice((["join"] if len(live) < 5 else []) +
                              (["leave"] if len(live) > 3 else []))
        elif schedule == "kills_three_copies":
            kind = rng.choice(["kill", "kill_two"])
        elif schedule == "elastic_three_copies":
            kind = rng.choice(["kill", "kill_two"] + (["join"] if len(live) < 6 else []) +
                              (["leave", "retire"] if len(live) > 4 else []))
        else:
            kind = rng.choice(["kill"] + (["join"] if len(live) < 5 else []) +
                              (["leave", "retire"] if len(live) > 3 else []))
        gap = rng.uniform(0.5, 2.0)
        if kind == "join":
            rank = next_rank
            next_rank += 1
            live.append(rank)
        elif kind == "kill_two":
            rank = tuple(rng.sample(live, 2))
        else:
            rank = rng.choice(live)
            if kind in ("leave", "retire"):
                live.remove(rank)
        # A short stop or cut lasts at most half of PS_HEARTBEAT_TIMEOUT (0.3 to 1.5 s at
        # 3 s).
        faults.append((kind, gap, rank, rng.uniform(0.1, 0.5) * TIMEOUT_S))
    return faults


def acks_per_slot(worker_texts):
    """{50 ms slot: acknowledged pushes, summed over workers} and the first worker's end
    (wall time), from each worker's "acks per 50 ms" line."""
    slots, ends = {}, []
    for text in worker_texts:
        m = re.search(r"acks per 50 ms from ([\d.]+):([\d ]*)", text)
        if not m:
            return None, None
        start, counts = float(m.group(1)), [int(x) for x in m.group(2).split()]
        for i, n in enumerate(counts):
            slot = int(round((start + 0.05 * i) / 0.05))
            slots[slot] = slots.get(slot, 0) + n
        ends.append(start + 0.05 * len(counts))
    return slots, min(ends)


def back_at_90(slots, at, until):
    """Seconds from `at` until the acknowledged pushes per 100 ms first reach 90% of
    their mean over the second before `at`, looking no further than `until`; None when
    they do not (or cannot be told)."""
    rate = lambda t: sum(slots.get(int(round(t / 0.05)) + d, 0) for d in (0, 1))  # noqa: E731
    baseline = sum(rate(at - 1.0 + 0.1 * i) for i in range(9)) / 9
    t = at + 0.05
    while baseline > 0 and t < until - 0.1:
        if rate(t) >= 0.9 * baseline:
            return t + 0.1 - at
        t += 0.05
    return None


def on_hosts(net):
    """start_by_hand's node_env and node_prefix for the cuts schedule: each server on a
    host of its own, the scheduler and the workers on JOB_HOST."""
    node_env, node_prefix = {}, {}
    names = (["scheduler"] + [f"server {r}" for r in range(SERVERS)] +
             [f"worker {r}" for r in range(WORKERS)])
    for name in names:
        host = SERVER_HOSTS[int(name.split()[1])] if name.startswith("server") else JOB_HOST
        node_env[name] = {"PS_NODE_HOST": net.address[host],
                          "PS_SCHEDULER_URI": net.address[JOB_HOST]}
        node_prefix[name] = ["ip", "netns", "exec", net.namespace[host]]
    return node_env, node_prefix


def run_one(schedule, seed, app, f, net=None):
    if net:
        for host in SERVER_HOSTS:
            net.restore(host)  # a run that failed mid-cut left it pulled
    with Job() as job:
        env = dict(HEARTBEAT_ENV, PS_REPLICATION=str(COPIES.get(schedule, 2)))
        if schedule in LOSSY:
            env.update(PS_RESEND="1", PS_RESEND_TIMEOUT="100", PS_DROP_RATE="0.02")
        if schedule in ELASTIC:
            env.update(PS_LEAVE_ON_SIGTERM="1", PS_REREPLICATE_AFTER="1",
                       PS_CATCH_UP_RATE=CATCH_UP_RATE_MB.get(schedule, "0.001"))
        if schedule == "elastic_one_copy":
            # With one copy of each key a server leaves only a job without chunks.
            env.update(PS_CHUNK_BYTES="0")
        pushes = PUSHES[schedule]
        save = os.path.join(job.tmp.name, "saved")
        os.makedirs(save)
        args = [f"--pushes={pushes}", f"--keys={KEYS}", f"--window={WINDOW[schedule]}",
                f"--save_dir={save}"]
        if schedule == "elastic_chunks":
            env.update(PS_CHUNK_BYTES=CHUNK_BYTES)
            args.append(f"--value_len={CHUNKED_VALUES}")
        node_env, node_prefix = on_hosts(net) if net else (None, None)
        first = FIRST_SERVERS.get(schedule, SERVERS)
        nodes = job.start_by_hand(app, WORKERS, first, args, extra_env=env,
                                  node_env=node_env, node_prefix=node_prefix)
        scheduler = nodes["scheduler"]
        workers = [nodes[f"worker {r}"] for r in range(WORKERS)]
        servers = {r: nodes[f"server {r}"] for r in range(first)}
        gone = []  # processes a fault ended (killed, or stopped until declared dead)
        departed = []  # servers that left gracefully: they exit 0
        if not wait_until(lambda: all(f"worker {r} pid" in workers[r].text()
                                      for r in range(WORKERS)), START_S):
            raise AssertionError("the workers did not start")
        faults = draw_faults(schedule, seed)
        applied = []  # (kind, server, wall time)
        caught_up = 0  # "caught up" lines the scheduler has said so far
        for kind, gap, rank, stop_s in faults:
            time.sleep(gap)
            if any(w.poll() is not None for w in workers):
                break  # the workers are done: no fault lands in the workload any more
            at = time.time()
            if kind == "join":
                template = next(iter(servers.values()))
                env_added = {k: v for k, v in template.env.items() if k != "PS_RANK"}
                servers[rank] = Process(f"server {rank} (added)", template.cmd, env_added,
                                        job.tmp.name)
                job.procs.append(servers[rank])
                applied.append((kind, rank, at))
                caught_up += 1  # the scheduler's line counts among the replacements'
                if not f.expect(wait_until(lambda: re.search(
                        rf"server {rank} \(node {8 + 2 * rank}\) caught up", scheduler.text()),
                        TIMEOUT_S + 30), f"the added server {rank} did not catch up"):
                    return
                continue
            if kind == "kill_two":
                for r in rank:
                    servers[r].kill()
                applied.append((kind, rank, at))
                for r in rank:
                    gone.append(servers[r])
                    servers[r] = Process(f"server {r} after fault {len(applied)}",
                                         servers[r].cmd, dict(servers[r].env, PS_RANK=str(r)),
                                         job.tmp.name)
                    job.procs.append(servers[r])
                caught_up += 2
                if not f.expect(wait_until(lambda: len(re.findall(
                        r"\) caught up: it holds its keys", scheduler.text())) >= caught_up,
                        TIMEOUT_S + 60), f"the new servers {rank} did not catch up"):
                    return
                continue
            victim = servers[rank]
            if kind == "leave":
                victim.proc.send_signal(signal.SIGTERM)
                applied.append((kind, rank, at))
                departed.append(servers.pop(rank))
                if not f.expect(wait_until(lambda: re.search(
                        rf"server {rank} \(node {8 + 2 * rank}\) left the job", scheduler.text()),
                        TIMEOUT_S + 30), f"server {rank} did not leave the job"):
                    return
                continue
            if kind == "retire":
                victim.kill()
                applied.append((kind, rank, at))
                gone.append(servers.pop(rank))
                if not f.expect(wait_until(lambda: re.search(
                        rf"dead server {rank} \(node {8 + 2 * rank}\) is retired",
                        scheduler.text()), 2 * TIMEOUT_S + 30),
                        f"server {rank}'s keys were not re-replicated"):
                    return
                continue
            host = SERVER_HOSTS[rank] if net else None
            if kind == "kill":
                victim.kill()
            elif kind in ("cut", "cut_dead"):
                net.cut(host)
            else:
                os.killpg(victim.proc.pid, signal.SIGSTOP)
            applied.append((kind, rank, at))
            if kind in ("stop", "cut"):
                time.sleep(stop_s)
                if kind == "cut":
                    net.restore(host)
                else:
                    os.killpg(victim.proc.pid, signal.SIGCONT)
                time.sleep(1.0)
                continue
            if kind in ("stop_dead", "cut_dead"):
                declared = rf"server {rank} \(node {8 + 2 * rank}, .*declared dead"
                if not f.expect(wait_until(lambda: len(re.findall(declared, scheduler.text()))
                                           > sum(1 for k, r, _ in applied[:-1]
                                                 if r == rank and k not in ("stop", "cut")),
                                           TIMEOUT_S + 10),
                                f"server {rank} stopped or cut off was not declared dead"):
                    return
                if kind == "cut_dead":
                    net.restore(host)  # it hears that it is dead, and exits
                else:
                    os.killpg(victim.proc.pid, signal.SIGCONT)
            gone.append(victim)
            # In the dead one's place: its rank (an added server was started without one).
            servers[rank] = Process(f"server {rank} after fault {len(applied)}", victim.cmd,
                                    dict(victim.env, PS_RANK=str(rank)), job.tmp.name)
            job.procs.append(servers[rank])
            caught_up += 1
            if not f.expect(wait_until(lambda: len(re.findall(r"\) caught up: it holds its keys",
                                                              scheduler.text())) >= caught_up,
                                       TIMEOUT_S + 30),
                            f"the new server {rank} did not catch up"):
                return
        survivors = [scheduler] + workers + list(servers.values()) + departed
        if not wait_exits(survivors + gone, 180):
            raise AssertionError("the job did not finish")
        print(f"seed {seed}: faults " + ", ".join(
            f"{kind} server {rank} at {at - applied[0][2]:.1f} s" for kind, rank, at in applied))
        f.expect(applied, "no fault landed while the workers pushed")
        texts = [w.text() for w in workers]
        check_counts(f, texts, pushes)
        slots, end = acks_per_slot(texts)
        for i, (kind, rank, at) in enumerate(applied):
            until = applied[i + 1][2] if i + 1 < len(applied) else end
            back = back_at_90(slots, at, until) if slots else None
            print(f"seed {seed}: {kind} server {rank}: throughput back at 90% " +
                  (f"{back:.2f} s after" if back is not None else "cannot be told"))
        for p in survivors:
            f.expect(p.proc.returncode == 0, f"seed {seed}: {p.name} exited "
                     f"{p.proc.returncode}, not 0")
        check_replicas(f, seed, save, sorted(servers), COPIES.get(schedule, 2), texts[0])
        left = job.left()
        f.expect(left == [], f"seed {seed}: processes left: {left}")


def check_replicas(f, seed, save, ranks, copies, worker0_text):
    """The copies of each key (and chunk) on the servers live at the end, as each saved
    them after ps::Finalize: at least `copies` of them (or every live server) identical,
    with the most steps (one per push applied), and those copies' counters add up to the
    increments worker 0 counted. A replica that applied a push twice holds a step more
    than the others, one that lost one a step less; a server that held a key before the
    ring last changed may still keep a stale copy (dropped 2 s after the change): fewer
    steps, not counted."""
    holders = {}
    for r in ranks:
        path = os.path.join(save, f"server-{r}.ckpt")
        if not f.expect(os.path.exists(path), f"seed {seed}: server {r} saved nothing"):
            return
        for key, record in read_checkpoint(path).items():
            holders.setdefault(key, []).append((r, record))
    need = min(copies, len(ranks))
    bad = []
    first_chunk = {}  # key: its first chunk's (chunk, counter of its top copies)
    for key, held in sorted(holders.items()):
        most = max(record[0] for _, record in held)
        top = [(r, record) for r, record in held if record[0] == most]
        identical = all(record == top[0][1] for _, record in top)
        if len(top) < need or not identical:
            bad.append(f"key {key[0]} chunk {key[1]}: steps " +
                       ", ".join(f"{record[0]} on server {r}" for r, record in held))
        if key[0] not in first_chunk or key[1] < first_chunk[key[0]][0]:
            first_chunk[key[0]] = (key[1], struct.unpack_from("<f", top[0][1][1])[0])
    total = round(sum(counter for _, counter in first_chunk.values()))
    m = re.search(r"counted (\d+) over", worker0_text)
    if m:
        f.expect(total == int(m.group(1)), f"seed {seed}: the replicas' counters add up to "
                 f"{total}, worker 0 counted {m.group(1)}")
    print(f"seed {seed}: {len(holders)} keys and chunks on the {len(ranks)} servers live at "
          f"the end; {len(holders) - len(bad)} with {need} or more identical copies "
          f"holding every update (their counters add up to {total})")
    f.expect(not bad, f"seed {seed}: {len(bad)} keys whose copies part (a replica lost or "
             f"doubled an update): " + "; ".join(bad[:5]))


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in PUSHES:
        print(__doc__, file=sys.stderr)
        return 2
    schedule, app = sys.argv[1], os.path.realpath(sys.argv[3])
    seeds = [int(s) for s in sys.argv[2].split(",")]
    if schedule != "cuts":
        return run_checks(lambda f: [run_one(schedule, seed, app, f) for seed in seeds])
    net = Network(SERVER_HOSTS + (JOB_HOST,))
    try:
        net.create()
    except Skip as e:
        print(f"skipped: {e}")
        return 77
    try:
        return run_checks(lambda f: [run_one(schedule, seed, app, f, net) for seed in seeds])
    finally:
        net.close()


if __name__ == "__main__":
    sys.exit(main())
