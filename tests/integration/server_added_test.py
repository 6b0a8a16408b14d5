#!/usr/bin/env python3
"""A server added to a running job (PS_REPLICATION=2 unless said), nodes started by hand as on
several hosts, with the counter workload of server_restart_app.cc.

HOW is one of:
  added_by_hand     SGD counters on 1024 keys, 2 workers and 3 servers; 1.5 s into the
                    run a fourth server is started by hand with the job's settings and
                    no PS_RANK. The scheduler adds it as server 3 (entering), the live
                    servers send it the keys the grown ring gives it while the pushes go
                    on, and once it holds them the ring places keys on it. No push fails,
                    the final values (pulled from the grown ring) are exactly the
                    acknowledged increments, every process exits 0. Prints the keys that
                    moved against the ring's share (R/N of the keys, 1/N of the copies)
                    and the workers' throughput around the move. With --save_dir, every
                    key the new server holds came in the catch-up and equals its copy on
                    another server, bit for bit.
  added_throttled   as added_by_hand with PS_CATCH_UP_RATE=0.01 (10 kB/s): each live
                    server sends the new one its keys in slices of about 100 bytes, paced;
                    the pushes go on meanwhile. Besides added_by_hand's checks, every
                    sender sent more than 10 messages and took at least 0.8 times its
                    bytes over the rate.
  added_twice       as added_by_hand with two servers started at once: one enters, the
                    other waits until it holds its keys, then enters too (5 servers).
  added_then_removed
                    as added_by_hand, every server with PS_LEAVE_ON_SIGTERM=1; once the
                    new server 3 caught up, server 0 gets SIGTERM: it leaves gracefully,
                    the other servers take over the keys a ring without it gives them
                    while it serves them, then it leaves the table and exits 0. Counts
                    exact, every process exits 0; prints the keys that moved for each
                    change against the ring's share.
  added_then_removed_chunks
                    as added_then_removed with values in chunks: 256 keys of 600 values
                    (--value_len) and PS_CHUNK_BYTES=1024, so each key is 3 chunks, each
                    placed on the ring at its own point; the chunks move as keys do.
                    Besides the counts, every value of each key equal at the end (each
                    chunk had every update once), every chunk on exactly 2 servers.
  added_by_hand_chunks_one_copy
                    as added_by_hand_one_copy with those chunks (with one copy of each
                    key a server can be added but cannot leave a job with chunks).
  added_by_hand_one_copy, added_then_removed_one_copy
                    as added_by_hand and added_then_removed with PS_REPLICATION=1: each
                    key's one copy moves, a push that reaches a key's old server by the
                    old ring is copied to its new one, and the parts in flight to the
                    server that left go to its keys' new servers. Checkpoints every hour
                    (PS_CHECKPOINT_DIR): the servers that took keys save them at once
                    (the files must appear within 10 s of each change). At the end
                    each key is on exactly one server.
  removed_after_a_lost_answer_one_copy
                    PS_REPLICATION=1, every server with PS_LEAVE_ON_SIGTERM=1; server 0
                    applies its 50th push from a worker and does not answer it, as if the
                    answer were lost (PS_LOSE_PUSH_ANSWER=50): that worker waits. Server 0
                    then gets SIGTERM and leaves: the catch-ups it sends name the pushes it
                    took, so the key's new server, which the worker sends the part to
                    again, answers it as taken without applying it a second time. Counts
                    exact, no push fails, every process exits 0, and a server logged the
                    push as taken before.
  added_while_another_stopped
                    as added_by_hand, but server 1 gets SIGSTOP just before the fourth
                    server starts: the new server waits for server 1's keys, which never
                    come. Once server 1 is declared dead the scheduler calls the add off
                    (the ring stays as it was, the new server is told and exits 1 saying
                    why), server 1's keys fail over to their replicas, and the job goes
                    on: counts exact, no push fails, the others exit 0.
  removed_while_another_stopped
                    every server with PS_LEAVE_ON_SIGTERM=1; server 1 gets SIGSTOP, then
                    server 0 SIGTERM: its leave waits for server 1, which never says it
                    holds its keys. Once server 1 is declared dead the scheduler calls
                    the leave off, server 0 serves its keys on (it asks again, and waits
                    while a server is dead), server 1's keys fail over, and the job goes
                    on: counts exact, no push fails, server 0 and the others exit 0.
  added_while_another_stalls
                    as added_while_another_stopped with the runtime's heartbeats (dead
                    after 10 s) and PS_RING_CHANGE_TIMEOUT=3: the scheduler calls the add
                    off at its deadline, with server 1 still stopped but not dead; server
                    1 gets SIGCONT, the new server exits 1 saying why, and a fifth server
                    started then is added (as server 4). Counts exact, no push fails,
                    the others exit 0, no node declared dead.
  removed_while_another_stalls
                    as removed_while_another_stopped with those settings: the leave is
                    called off at its deadline, server 1 gets SIGCONT, server 0 asks
                    again and leaves, exiting 0. Counts exact, no push fails.

Usage: server_added_test.py HOW APP
"""
import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from liveness_test import START_S, Job, Process, run_checks, wait_exits, wait_until  # noqa: E402
from replication_test import (HEARTBEAT_ENV, WORKERS, check_counts,  # noqa: E402
                              read_checkpoint)

SERVERS = 3
KEYS = 1024
PUSHES = 8000  # per worker, ~1 ms apart: the add comes early, the move while they push
ADD_AT_S = 1.5
CHUNKED_VALUES = 600  # values a key with _chunks: 2400 bytes, 3 chunks of CHUNK_BYTES
CHUNKED_KEYS = 256
CHUNK_BYTES = 1024
WHAT = {False: "keys", True: "chunks"}


def rates_around(worker_texts, at, before_s=1.0, after_s=1.0):
    """Acknowledged pushes per second (both workers) over the second before `at` and the
    lowest over any 200 ms in the second after it; None when it cannot be told."""
    slots = {}
    for text in worker_texts:
        m = re.search(r"acks per 50 ms from ([\d.]+):([\d ]*)", text)
        if not m:
            return None
        start = float(m.group(1))
        for i, n in enumerate(int(x) for x in m.group(2).split()):
            slot = int(round((start + 0.05 * i) / 0.05))
            slots[slot] = slots.get(slot, 0) + n
    first = int(round(at / 0.05))
    before = sum(slots.get(first - d, 0) for d in range(1, int(before_s / 0.05) + 1)) / before_s
    lowest = min(sum(slots.get(s + d, 0) for d in range(4)) / 0.2
                 for s in range(first, first + int(after_s / 0.05) - 3))
    return before, lowest


def start_counters(job, app, args, leave_on_sigterm, env_over=None, copies=2):
    """The counter workload on SERVERS servers and WORKERS workers started by hand, once
    the workers have pushed for ADD_AT_S, with PS_REPLICATION=copies and chunks off unless
    env_over sets PS_CHUNK_BYTES (settings over the test's). Returns the nodes by name."""
    env = dict(HEARTBEAT_ENV, PS_REPLICATION=str(copies), PS_CHUNK_BYTES="0")
    env.update(env_over or {})
    if leave_on_sigterm:
        env["PS_LEAVE_ON_SIGTERM"] = "1"
    nodes = job.start_by_hand(app, WORKERS, SERVERS, args, extra_env=env)
    if not wait_until(lambda: all(f"worker {r} pid" in nodes[f"worker {r}"].text()
                                  for r in range(WORKERS)), START_S):
        raise AssertionError("the workers did not start")
    time.sleep(ADD_AT_S)
    return nodes


def changed_while_another_stopped(app, f, add):
    """An add (add=True) or a leave of server 0 while server 1 is stopped until dead."""
    # The workers push on past the death, which comes PS_HEARTBEAT_TIMEOUT after the stop
    # (10 s with the runtime's defaults, HERDPS_TEST_HEARTBEAT_TIMEOUT=default).
    pushes = max(PUSHES, int(2500 * float(HEARTBEAT_ENV["PS_HEARTBEAT_TIMEOUT"])))
    with Job() as job:
        nodes = start_counters(job, app, [f"--pushes={pushes}", f"--keys={KEYS}"],
                               leave_on_sigterm=not add)
        scheduler = nodes["scheduler"]
        stopped = nodes["server 1"]
        stopped.proc.send_signal(signal.SIGSTOP)
        stopped_at = time.time()
        new = None
        if add:
            template = nodes["server 0"]
            added_env = {k: v for k, v in template.env.items() if k != "PS_RANK"}
            new = Process("added server", template.cmd, added_env, job.tmp.name)
            job.procs.append(new)
            called_off = (r"server 3 \(node 14, [^)]*\) is not added: server 1 died while "
                          r"it caught up")
        else:
            nodes["server 0"].proc.send_signal(signal.SIGTERM)
            called_off = r"server 0's leave is called off \(server 1 is gone\)"
        what = "add" if add else "leave"
        if not f.expect(wait_until(lambda: re.search(called_off, scheduler.text()), 60),
                        f"the scheduler did not call the {what} off"):
            return
        print(f"the {what} was called off {time.time() - stopped_at:.2f} s after server 1 "
              "was stopped")
        f.expect(all(nodes[f"worker {r}"].poll() is None for r in range(WORKERS)),
                 f"the workers had finished before the {what} was called off: the test "
                 "exercised nothing")
        if add:
            f.expect(wait_exits([new], 30), "the server not added did not exit")
            f.expect(new.proc.returncode == 1,
                     f"the server not added exited {new.proc.returncode}, not 1")
            f.expect("this server was not added to the job" in new.text(),
                     "the server not added did not say why it exits")
            f.expect(not re.search(r"server 3 \(node 14\) caught up", scheduler.text()),
                     "the scheduler says server 3 caught up")
        else:
            f.expect(not re.search(r"server 0 \(node 8\) left the job", scheduler.text()),
                     "the scheduler says server 0 left the job")
        others = [p for name, p in nodes.items() if name != "server 1"]
        if not wait_exits(others, 120):
            raise AssertionError("the job did not finish")
        stopped.kill()
        check_counts(f, [nodes[f"worker {r}"].text() for r in range(WORKERS)], pushes)
        for p in others:
            f.expect(p.proc.returncode == 0, f"{p.name} exited {p.proc.returncode}, not 0")
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


def logged_at(text, pattern):
    """The time of day, in seconds, of the first glog line of text that matches pattern;
    None when none does."""
    for line in text.splitlines():
        if re.search(pattern, line):
            m = re.match(r"[IWEF]\d{8} (\d\d):(\d\d):(\d\d\.\d+) ", line)
            if m:
                return int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    return None


def changed_while_another_stalls(app, f, add):
    """An add (add=True) or a leave of server 0 while server 1 is stopped past the ring
    change's deadline (PS_RING_CHANGE_TIMEOUT), but not until it is declared dead: the
    runtime's own heartbeats (dead after 10 s of silence)."""
    deadline_s = 3
    env = {"PS_HEARTBEAT_INTERVAL": "1", "PS_HEARTBEAT_TIMEOUT": "10",
           "PS_RING_CHANGE_TIMEOUT": str(deadline_s)}
    pushes = 12000  # ~1 ms apart: past the call-off and the second try
    with Job() as job:
        nodes = start_counters(job, app, [f"--pushes={pushes}", f"--keys={KEYS}"],
                               leave_on_sigterm=not add, env_over=env)
        scheduler = nodes["scheduler"]
        stopped = nodes["server 1"]
        template = nodes["server 0"]
        added_env = {k: v for k, v in template.env.items() if k != "PS_RANK"}
        stopped.proc.send_signal(signal.SIGSTOP)
        stopped_at = time.time()
        within = rf"within PS_RING_CHANGE_TIMEOUT={deadline_s} s"
        new = []
        if add:
            new.append(Process("added server", template.cmd, added_env, job.tmp.name))
            job.procs.append(new[-1])
            called_off = (r"server 3 \(node 14, [^)]*\) is not added: it did not hold its "
                          rf"keys {within}")
            began = r"server 3 \(node 14\) at \S+ is added to the job"
        else:
            nodes["server 0"].proc.send_signal(signal.SIGTERM)
            called_off = (r"server 0's leave is called off \(not every live server said it "
                          rf"holds its keys {within}\)")
            began = r"server 0 asks to leave the job: it is leaving"
        what = "add" if add else "leave"
        off = f.expect(wait_until(lambda: re.search(called_off, scheduler.text()), 30),
                       f"the scheduler did not call the {what} off at its deadline")
        stopped.proc.send_signal(signal.SIGCONT)
        stopped_for = time.time() - stopped_at
        if not off:
            return
        print(f"the {what} was called off; server 1 ran again {stopped_for:.2f} s after it "
              "was stopped")
        f.expect(stopped_for < 8, f"server 1 was stopped for {stopped_for:.2f} s: too close "
                 "to PS_HEARTBEAT_TIMEOUT=10 to tell a deadline from a death")
        start, end = logged_at(scheduler.text(), began), logged_at(scheduler.text(), called_off)
        if f.expect(start is not None and end is not None,
                    f"the scheduler did not log when the {what} began and ended"):
            print(f"the {what} began, and was called off {end - start:.2f} s later")
            f.expect(end - start >= deadline_s, f"the {what} was called off "
                     f"{end - start:.2f} s after it began, before its deadline")
        f.expect(not re.search(r"declared dead", scheduler.text()),
                 "the scheduler declared a node dead")
        f.expect(all(nodes[f"worker {r}"].poll() is None for r in range(WORKERS)),
                 f"the workers had finished before the {what} was called off: the test "
                 "exercised nothing")
        if add:
            f.expect(wait_exits(new, 30), "the server not added did not exit")
            f.expect(new[0].proc.returncode == 1,
                     f"the server not added exited {new[0].proc.returncode}, not 1")
            f.expect("this server was not added to the job" in new[0].text(),
                     "the server not added did not say why it exits")
            # The job grows once its servers all run: a second try is added (rank 4: the
            # rank of a server not added is not given again).
            again = Process("added again", template.cmd, added_env, job.tmp.name)
            job.procs.append(again)
            done = r"server 4 \(node 16\) caught up"
        else:
            again = None
            done = r"server 0 \(node 8\) left the job"
        if not f.expect(wait_until(lambda: re.search(done, scheduler.text()), 60),
                        "the second try did not finish: " + done):
            return
        print(f"the second try finished {time.time() - stopped_at:.2f} s after the stop")
        f.expect(all(nodes[f"worker {r}"].poll() is None for r in range(WORKERS)),
                 "the workers had finished before the second try: the test exercised nothing")
        everyone = list(nodes.values()) + ([again] if again else [])
        if not wait_exits(everyone, 120):
            raise AssertionError("the job did not finish")
        check_counts(f, [nodes[f"worker {r}"].text() for r in range(WORKERS)], pushes)
        for p in everyone:
            f.expect(p.proc.returncode == 0, f"{p.name} exited {p.proc.returncode}, not 0")
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


CATCH_UP_RATE_MB = 0.01


def removed_after_a_lost_answer(app, f):
    lose_at = 50
    with Job() as job:
        env = dict(HEARTBEAT_ENV, PS_REPLICATION="1", PS_CHUNK_BYTES="0",
                   PS_LEAVE_ON_SIGTERM="1")
        nodes = job.start_by_hand(app, WORKERS, SERVERS, [f"--pushes={PUSHES}", f"--keys={KEYS}"],
                                  extra_env=env,
                                  node_env={"server 0": {"PS_LOSE_PUSH_ANSWER": str(lose_at)}})
        scheduler, leaving = nodes["scheduler"], nodes["server 0"]
        lost = (rf"PS_LOSE_PUSH_ANSWER: the answer to push {lose_at} "
                r"\(request (\d+) from node (\d+)\)")
        if not f.expect(wait_until(lambda: re.search(lost, leaving.text()), START_S),
                        "server 0 did not say it left an answer unsent"):
            return
        request, worker = re.search(lost, leaving.text()).groups()
        time.sleep(ADD_AT_S)  # the other worker pushes on, this one waits
        f.expect(all(nodes[f"worker {r}"].poll() is None for r in range(WORKERS)),
                 "the workers had finished before the leave: the test exercised nothing")
        leaving.proc.send_signal(signal.SIGTERM)
        if not f.expect(wait_until(lambda: re.search(r"server 0 \(node 8\) left the job",
                                                     scheduler.text()), 60),
                        "the scheduler did not say server 0 left the job"):
            return
        if not wait_exits(list(nodes.values()), 120):
            raise AssertionError("the job did not finish")
        check_counts(f, [nodes[f"worker {r}"].text() for r in range(WORKERS)], PUSHES)
        for p in nodes.values():
            f.expect(p.proc.returncode == 0, f"{p.name} exited {p.proc.returncode}, not 0")
        taken = f"a push of request {request} from node {worker} was taken here before"
        named = [p.name for p in nodes.values() if p.name.startswith("server ")
                 and taken in p.text()]
        print(f"request {request} of node {worker}, sent again, was answered as taken before "
              f"by: {named}")
        f.expect(named, f"no server answered request {request} of node {worker}, sent again, "
                 "as taken before")
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


def added(app, f, how):
    # PS_REPLICATION=1: each key's one copy moves (the ring's share is then 1/N).
    copies = 1 if how.endswith("_one_copy") else 2
    how = how[:-len("_one_copy")] if copies == 1 else how
    chunked = how.endswith("_chunks")
    how = how[:-len("_chunks")] if chunked else how
    # Records per key: 600 values of 4 bytes in chunks of 1024 bytes.
    chunks = -(-CHUNKED_VALUES * 4 // CHUNK_BYTES) if chunked else 1
    # Fewer keys with chunks (their pushes are 600 times longer): every key must have
    # been pushed before the add, even on a slow machine.
    keys = CHUNKED_KEYS if chunked else KEYS
    records = keys * chunks
    count = 2 if how == "added_twice" else 1
    remove = how == "added_then_removed"
    throttled = how == "added_throttled"
    with Job() as job:
        save = os.path.join(job.tmp.name, "saved")
        os.makedirs(save)
        args = [f"--pushes={PUSHES}", f"--keys={keys}", f"--save_dir={save}"]
        env = {"PS_CATCH_UP_RATE": str(CATCH_UP_RATE_MB)} if throttled else {}
        if chunked:
            args.append(f"--value_len={CHUNKED_VALUES}")
            env["PS_CHUNK_BYTES"] = str(CHUNK_BYTES)
        periodic = os.path.join(job.tmp.name, "periodic")
        if copies == 1:
            # Checkpoints once an hour: a file within the run is the one a server saves
            # once it took keys in a catch-up.
            env.update(PS_CHECKPOINT_DIR=periodic, PS_CHECKPOINT_EVERY="3600s")
        nodes = start_counters(job, app, args, leave_on_sigterm=remove, env_over=env,
                               copies=copies)
        # The checks below take every key to be on a server before the add: on a slow
        # machine ADD_AT_S may not be enough for the workers to push each once.
        if not f.expect(wait_until(lambda: all(
                "every key acknowledged" in nodes[f"worker {r}"].text()
                for r in range(WORKERS)), 60),
                "the workers did not push every key within 60 s"):
            return
        scheduler = nodes["scheduler"]
        template = nodes["server 0"]
        added_env = {k: v for k, v in template.env.items() if k != "PS_RANK"}
        new = []
        for i in range(count):
            p = Process(f"added server {i}", template.cmd, added_env, job.tmp.name)
            job.procs.append(p)
            new.append(p)
        added_at = time.time()
        ranks = list(range(SERVERS, SERVERS + count))
        for rank in ranks:
            if not f.expect(wait_until(lambda: re.search(
                    rf"server {rank} \(node {8 + 2 * rank}\) caught up", scheduler.text()), 60),
                    f"the scheduler did not say server {rank} caught up"):
                return
        print(f"{count} server(s) added and caught up {time.time() - added_at:.2f} s after "
              "they started")
        if copies == 1:
            saved = [os.path.join(periodic, f"server-{rank}.ckpt") for rank in ranks]
            f.expect(wait_until(lambda: all(os.path.exists(p) for p in saved), 10),
                     f"the added servers did not save their keys once caught up: {saved}")
        f.expect(all(nodes[f"worker {r}"].poll() is None for r in range(WORKERS)),
                 "the workers had finished before the add: the test exercised nothing")
        if remove:
            time.sleep(1.0)
            leaving = nodes["server 0"]
            leaving.proc.send_signal(signal.SIGTERM)
            asked_at = time.time()
            if not f.expect(wait_until(lambda: re.search(r"server 0 \(node 8\) left the job",
                                                         scheduler.text()), 60),
                            "the scheduler did not say server 0 left the job"):
                return
            print(f"server 0 left the job {time.time() - asked_at:.2f} s after its SIGTERM")
            if copies == 1:
                took = [os.path.join(periodic, f"server-{r}.ckpt") for r in range(1, SERVERS)]
                f.expect(wait_until(lambda: all(os.path.exists(p) for p in took), 10),
                         f"the servers that took server 0's keys did not save them: {took}")
            f.expect(all(nodes[f"worker {r}"].poll() is None for r in range(WORKERS)),
                     "the workers had finished before the leave: the test exercised nothing")
        everyone = list(nodes.values()) + new
        if not wait_exits(everyone, 120):
            raise AssertionError("the job did not finish")
        texts = [nodes[f"worker {r}"].text() for r in range(WORKERS)]
        check_counts(f, texts, PUSHES)
        for p in everyone:
            f.expect(p.proc.returncode == 0, f"{p.name} exited {p.proc.returncode}, not 0")
        for what, at in [("add", added_at)] + ([("leave", asked_at)] if remove else []):
            rates = rates_around(texts, at)
            if rates:
                print(f"throughput: {rates[0]:.0f} pushes/s over the second before the "
                      f"{what}, at least {rates[1]:.0f}/s over any 200 ms of the second "
                      "after it")
        leave_sent = {}
        if remove:
            for p in everyone:
                for rank, n in re.findall(r"sent server (\d+) the (\d+) keys a leaving "
                                          r"server's place gives it", p.text()):
                    leave_sent[int(rank)] = leave_sent.get(int(rank), 0) + int(n)
            moved = sum(leave_sent.values())
            total = SERVERS + count
            print(f"server 0 left: {moved} of {records} {WHAT[chunked]} got a new copy "
                  f"({moved / records:.3f}; the {WHAT[chunked]} it held are {copies}/{total} = "
                  f"{copies / total:.3f} of them, and {moved / (copies * records):.3f} of the "
                  f"copies moved, against 1/{total} = {1 / total:.3f}), to servers "
                  f"{sorted(leave_sent)}")
            f.expect(0 < moved < records, f"{moved} {WHAT[chunked]} moved when server 0 left")
            f.expect(0 not in leave_sent, "the leaving server was sent keys")
        if throttled:
            sends = [(int(n), int(b), int(m), float(t)) for p in everyone for n, b, m, t in
                     re.findall(r"sent server 3 the (\d+) keys it holds with this one \((\d+) "
                                r"bytes\) and \d+ pushes taken once, in (\d+) messages over "
                                r"([\d.e-]+) s", p.text())]
            f.expect(len(sends) == SERVERS, f"{len(sends)} servers said what they sent, not "
                     f"{SERVERS}")
            for keys, sent_bytes, messages, took in sends:
                least = 0.8 * sent_bytes / (CATCH_UP_RATE_MB * 1e6)
                print(f"a sender: {keys} keys, {sent_bytes} bytes in {messages} messages over "
                      f"{took:.2f} s (at {CATCH_UP_RATE_MB} MB/s: at least {least:.2f} s)")
                f.expect(messages > 10, f"{messages} messages: the keys were not sliced")
                f.expect(took >= least, f"{sent_bytes} bytes in {took:.2f} s: faster than "
                         f"{CATCH_UP_RATE_MB} MB/s")
        servers_before = SERVERS
        for rank in ranks:
            pattern = rf"sent server {rank} the (\d+) keys it holds with this one"
            sent = sum(int(n) for p in everyone for n in re.findall(pattern, p.text()))
            total = servers_before + 1
            print(f"server {rank}: {sent} of {records} {WHAT[chunked]} moved to it "
                  f"({sent / records:.3f}; the ring's share with {copies} copies of each is "
                  f"{copies}/{total} = {copies / total:.3f}, and "
                  f"{sent / (copies * records):.3f} of the copies, against 1/{total} = "
                  f"{1 / total:.3f})")
            f.expect(0 < sent < records, f"{sent} {WHAT[chunked]} moved to server {rank}")
            path = os.path.join(save, f"server-{rank}.ckpt")
            if not f.expect(os.path.exists(path), f"server {rank} saved nothing"):
                return
            held = read_checkpoint(path)
            # Every key was pushed before the add: the new server's keys all came in it
            # (a later add takes some of them over again; the count is of the first).
            if count == 1:
                got = sent + leave_sent.get(rank, 0)
                f.expect(got == len(held), f"server {rank} was sent {got} keys and holds "
                         f"{len(held)}")
            if copies == 1:  # its keys' old copies are erased: nothing to compare with
                servers_before += 1
                continue
            others = {}
            for r in range(SERVERS + count):
                if r != rank:
                    others[r] = read_checkpoint(os.path.join(save, f"server-{r}.ckpt"))
            unmatched = [key for key, record in held.items()
                         if not any(o.get(key) == record for o in others.values())]
            # A server added later may have taken a key's place from this one: this one
            # keeps a stale copy it never serves.
            later = [r for r in ranks if r > rank]
            moved_on = [key for key in unmatched if any(key in others[r] for r in later)]
            print(f"server {rank} holds {len(held)} keys; {len(unmatched)} equal no other "
                  f"server's copy, {len(moved_on)} of them held by a server added later")
            f.expect(len(unmatched) == len(moved_on), f"{len(unmatched) - len(moved_on)} keys "
                     f"of server {rank} equal no other copy")
            servers_before += 1
        # Two seconds after each change every server erased the keys it no longer holds:
        # at the end each key is on exactly `copies` of the servers in the job, identical.
        final = [r for r in range(SERVERS + count) if not (remove and r == 0)]
        states = {r: read_checkpoint(os.path.join(save, f"server-{r}.ckpt")) for r in final}
        held_by = {}
        for r, state in states.items():
            for key, record in state.items():
                held_by.setdefault(key, []).append(record)
        wrong = sum(1 for records in held_by.values() if len(records) != copies)
        differ = sum(1 for records in held_by.values()
                     if len(records) == copies and any(r != records[0] for r in records))
        what = WHAT[chunked]
        print(f"{len(held_by)} {what} on servers {final}: {wrong} not on exactly {copies} of "
              f"them, {differ} whose {copies} copies differ")
        f.expect(len(held_by) == records, f"{len(held_by)} {what}, not {records}")
        if chunked:
            in_chunks = sum(1 for _key, chunk in held_by if chunk)
            f.expect(in_chunks == records, f"{records - in_chunks} keys are stored whole, "
                     "not in chunks")
        f.expect(wrong == 0, f"{wrong} {what} are not on exactly {copies} servers")
        f.expect(differ == 0, f"{differ} {what}' copies differ")
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


def main():
    hows = ("added_by_hand", "added_throttled", "added_twice", "added_then_removed",
            "added_by_hand_one_copy", "added_then_removed_one_copy",
            "added_then_removed_chunks", "added_by_hand_chunks_one_copy",
            "removed_after_a_lost_answer_one_copy", "added_while_another_stopped",
            "removed_while_another_stopped",
            "added_while_another_stalls", "removed_while_another_stalls")
    if len(sys.argv) != 3 or sys.argv[1] not in hows:
        print(__doc__, file=sys.stderr)
        return 2
    how, app = sys.argv[1], os.path.realpath(sys.argv[2])
    if how.endswith("_while_another_stalls"):
        add = how.startswith("added")
        return run_checks(lambda f: changed_while_another_stalls(app, f, add))
    if how.endswith("_while_another_stopped"):
        add = how.startswith("added")
        return run_checks(lambda f: changed_while_another_stopped(app, f, add))
    if how == "removed_after_a_lost_answer_one_copy":
        return run_checks(lambda f: removed_after_a_lost_answer(app, f))
    return run_checks(lambda f: added(app, f, how))


if __name__ == "__main__":
    sys.exit(main())
