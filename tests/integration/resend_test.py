#!/usr/bin/env python3
"""Reliable delivery (PS_RESEND=1) under injected message loss (PS_DROP_RATE).

Usage:
  resend_test.py LAUNCHER KV_CORRECTNESS exact  --rate R [--runs N] [--keys K] [--jobs J]
  resend_test.py LAUNCHER FIFO_ORDER     fifo   --rate R [--pushes P]
  resend_test.py LAUNCHER FIFO_ORDER     memory --rate R [--pushes P]

Every node of every job gets PS_RESEND=1, PS_DROP_RATE=R, a short PS_RESEND_TIMEOUT
(--resend-timeout-ms 0: the default) and a PS_DROP_SEED of its own per run, so a failing
run can be replayed. Drops hit every
message a node receives: joins, heartbeats, barriers, ACKs and data alike.

  exact   N runs of kv_correctness (2 servers, 2 workers): every run must exit 0 with
          both workers reporting their keys correct; at R >= 0.05 every run must have
          really dropped messages and resent some, and over all runs drops and resends
          must have happened at any R.
  fifo    one run of fifo_order (1 worker, 2 servers): 0 inversions, final values
          exact, and (R > 0) messages really dropped and resent. At R = 0 it checks
          that resend alone lets many asynchronous pushes complete.
  memory  one run of fifo_order with its stats sampler (every 100 ms): the messages
          held out of order on a node never exceed the reorder window (4095 per
          sender) and are seen above 0 while the job runs; at the end nothing is held
          and nothing awaits an ACK on any node.

The apps print one "stats: key=value ..." line per node (ps::NodeStats); the launcher
prefixes every line with the node ("[server 0] "). Every job is bounded by the
launcher's --timeout and by a wait here; the launcher stops its nodes itself, and
this script kills the launcher's process group if it is still there.
"""
import argparse
import concurrent.futures
import os
import re
import signal
import subprocess
import sys
import threading
import time

# PS_RESEND_TIMEOUT unless --resend-timeout-ms says otherwise: short, so runs stay fast.
RESEND_TIMEOUT_MS = 20
# The receiver's reorder window (kReorderWindow in ps/runtime/postoffice.cc): at most this many
# minus one messages are held per sender.
REORDER_WINDOW = 4096

LINE = re.compile(r"^\[(scheduler|server \d+|worker \d+)\] (stats|stats-sample): (.*)$")


def parse_stats(output):
    """{node: final stats dict}, [(node, sample dict)] from the apps' stats lines."""
    final, samples = {}, []
    for line in output.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        fields = dict(kv.split("=", 1) for kv in m.group(3).split())
        values = {k: int(v) for k, v in fields.items()}
        if m.group(2) == "stats":
            final[m.group(1)] = values
        else:
            samples.append((m.group(1), values))
    return final, samples


# Launchers still running (each leads its own process group with its nodes), so that a
# SIGTERM to this script (ctest's timeout) stops them too.
_live = set()
_live_lock = threading.Lock()
_resend_timeout_ms = RESEND_TIMEOUT_MS


def _stop_all(signum, _frame):
    with _live_lock:
        for proc in list(_live):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    sys.exit(128 + signum)


def run_job(launcher, app, workers, servers, rate, seed, app_args, job_timeout):
    """Runs one job; returns (exit code, output, seconds). Never leaves a process."""
    env_args = []
    for kv in ("PS_RESEND=1", f"PS_RESEND_TIMEOUT={_resend_timeout_ms}",
               f"PS_DROP_RATE={rate}", f"PS_DROP_SEED={seed}"):
        if kv != "PS_RESEND_TIMEOUT=0":  # 0: the default
            env_args += ["--env", kv]
    cmd = [sys.executable, launcher, "-n", str(workers), "-s", str(servers),
           "--timeout", str(job_timeout)] + env_args + ["--", app] + app_args
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    with _live_lock:
        _live.add(proc)
    try:
        out, _ = proc.communicate(timeout=job_timeout + 20)
    except subprocess.TimeoutExpired:
        out = "(the launcher itself did not end in time)"
    finally:
        if proc.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                time.sleep(1)
            proc.wait(timeout=10)
        with _live_lock:
            _live.discard(proc)
    return proc.returncode, out, time.monotonic() - start


def total(final, key):
    return sum(s.get(key, 0) for s in final.values())


def reproduce(launcher, app, workers, servers, rate, seed, app_args):
    timeout = f"--env PS_RESEND_TIMEOUT={_resend_timeout_ms} " if _resend_timeout_ms else ""
    return (f"{launcher} -n {workers} -s {servers} --env PS_RESEND=1 {timeout}"
            f"--env PS_DROP_RATE={rate} "
            f"--env PS_DROP_SEED={seed} -- {app} {' '.join(app_args)}")


def check_exact(args):
    workers, servers = 2, 2
    app_args = ["--keys", str(args.keys)]
    seeds = [int(args.rate * 1e6) + run + 1 for run in range(args.runs)]
    failures, drops, resent = [], 0, 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        jobs = {seed: pool.submit(run_job, args.launcher, args.app, workers, servers,
                                  args.rate, seed, app_args, args.job_timeout)
                for seed in seeds}
        for seed in seeds:
            rc, out, secs = jobs[seed].result()
            final, _ = parse_stats(out)
            run_drops, run_resent = total(final, "injected_drops"), total(final, "resent")
            drops, resent = drops + run_drops, resent + run_resent
            print(f"seed {seed}: exit {rc} in {secs:.1f} s; injected_drops={run_drops} "
                  f"resent={run_resent} duplicates={total(final, 'duplicates')} "
                  f"from_gone_nodes={total(final, 'from_gone_nodes')}")
            problems = []
            if rc != 0:
                problems.append(f"the job exited {rc}")
            for w in range(workers):
                if f"[worker {w}] worker {w}: {args.keys} keys correct" not in out:
                    problems.append(f"worker {w} did not report its keys correct")
            if len(final) != workers + servers + 1:
                problems.append(f"stats lines from {len(final)} of "
                                f"{workers + servers + 1} nodes")
            if args.rate >= 0.05 and run_drops == 0:
                problems.append("no message was dropped")
            # Not checked per run: that something was resent. A run's few drops may all
            # fall on messages whose loss needs no resend (resent=0 with 14 drops was seen
            # on a loaded machine, the job exact); the check over all runs below holds.
            if problems:
                failures.append(f"seed {seed}: " + "; ".join(problems) + "\n  reproduce: " +
                                reproduce(args.launcher, args.app, workers, servers,
                                          args.rate, seed, app_args) + "\n  output:\n" +
                                out)
    exact = args.runs - len(failures)
    print(f"drop rate {args.rate}: exact in {exact}/{args.runs} runs; "
          f"injected_drops={drops} resent={resent} over all runs")
    if drops == 0 or resent == 0:
        failures.append("over all runs no message was dropped or none was resent: the "
                        "runs did not exercise reliable delivery")
    return failures


def run_fifo(args, extra):
    workers, servers = 1, 2
    seed = int(args.rate * 1e6) + 7
    app_args = ["--pushes", str(args.pushes)] + extra
    rc, out, secs = run_job(args.launcher, args.app, workers, servers, args.rate, seed,
                            app_args, args.job_timeout)
    final, samples = parse_stats(out)
    print("\n".join(l for l in out.splitlines() if "stats-sample:" not in l))
    print(f"exit {rc} in {secs:.1f} s; injected_drops={total(final, 'injected_drops')} "
          f"resent={total(final, 'resent')} duplicates={total(final, 'duplicates')}")
    failures = []
    if rc != 0:
        failures.append(f"the job exited {rc}")
    if f"pushes={args.pushes} " not in out or " inversions=0 mismatched_keys=0" not in out:
        failures.append("the worker did not report 0 inversions and exact values")
    if len(final) != workers + servers + 1:
        failures.append(f"stats lines from {len(final)} of {workers + servers + 1} nodes")
    if args.rate > 0 and (total(final, "injected_drops") == 0 or total(final, "resent") == 0):
        failures.append("no message was dropped or none was resent")
    if failures:
        failures.append("reproduce: " + reproduce(args.launcher, args.app, workers, servers,
                                                   args.rate, seed, app_args))
    return failures, final, samples, workers + servers + 1


def check_fifo(args):
    failures, _, _, _ = run_fifo(args, [])
    return failures


def check_memory(args):
    failures, final, samples, nodes = run_fifo(args, ["--stats_every_ms", "100"])
    bound = (REORDER_WINDOW - 1) * (nodes - 1)  # every other node may be a sender
    max_held = {}
    for node, s in samples:
        max_held[node] = max(max_held.get(node, 0), s["held"])
    for node in sorted(final):
        s = final[node]
        print(f"{node}: max held_out_of_order sampled {max_held.get(node, 0)} "
              f"(bound {bound}), largest awaiting_ack sampled "
              f"{s.get('max_awaiting_ack_sampled')}, at the end held={s['held']} "
              f"awaiting_ack={s['awaiting_ack']}, samples={s.get('samples')}")
        if max_held.get(node, 0) > bound:
            failures.append(f"{node} held {max_held[node]} messages out of order, over the "
                            f"bound of {bound}")
        if s["held"] != 0:
            failures.append(f"{node} still holds {s['held']} messages out of order at the end")
        if s["awaiting_ack"] != 0:
            failures.append(f"{node} still has {s['awaiting_ack']} messages awaiting an ACK "
                            f"at the end")
    if not samples:
        failures.append("no stats samples were printed")
    elif max(max_held.values()) == 0:
        failures.append("held_out_of_order was 0 in every sample although messages were "
                        "dropped while many were in flight: it does not count what the "
                        "receiver holds, so its bound cannot be checked")
    return failures


def main():
    p = argparse.ArgumentParser()
    p.add_argument("launcher")
    p.add_argument("app")
    p.add_argument("check", choices=("exact", "fifo", "memory"))
    p.add_argument("--rate", type=float, required=True)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=4, help="jobs run at the same time (exact)")
    p.add_argument("--pushes", type=int, default=20000)
    p.add_argument("--resend-timeout-ms", type=int, default=RESEND_TIMEOUT_MS,
                   help="PS_RESEND_TIMEOUT for every node (default: %(default)s; 0 leaves "
                        "it at the runtime's default)")
    p.add_argument("--job-timeout", type=int, default=90,
                   help="the launcher's --timeout for each job, in seconds")
    args = p.parse_args()
    global _resend_timeout_ms
    _resend_timeout_ms = args.resend_timeout_ms
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop_all)
    args.app = os.path.realpath(args.app)
    start = time.monotonic()
    failures = {"exact": check_exact, "fifo": check_fifo, "memory": check_memory}[args.check](
        args)
    print(f"{args.check} at drop rate {args.rate}: {time.monotonic() - start:.1f} s")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
