#!/usr/bin/env python3
"""A HerdPS job over three hosts on one machine, made of Linux network namespaces.

Usage: netns_test.py CASE --launch LAUNCH --kv-correctness APP --liveness-app APP

Every run builds a small network of its own (netns_network.py): the namespaces
herdps-<pid>-a, -b and -c are three hosts, each with one interface holding 10.213.N.1,
.2 or .3/24, cabled to a bridge in a fourth namespace, herdps-<pid>-hub, the switch.
Nothing in the root namespace is touched. LAUNCH
(tracker/launch) runs here with --launcher ssh and a host file of the three
addresses; its --ssh-command, netns_ssh (next to this file), reaches a host by
entering that host's namespace, and --scheduler-on first-host puts the scheduler on
host a, so every node runs in a namespace and advertises its host's address
(PS_NODE_HOST, the host file's address). Servers then workers go round-robin from
host b, which for 2 servers and 2 workers gives

    host a (.1): scheduler, worker 0
    host b (.2): server 0, worker 1
    host c (.3): server 1

CASE is one of:

  kv_correctness_is_exact_across_3_hosts
      APP kv_correctness --keys 2000 on that layout: every node joins with its own
      host's address (PS_VERBOSE=1 logs it), every worker's pulls are exact and the
      job exits 0.
  cut_host_is_declared_dead_and_the_job_ends_naming_it
      APP liveness_app's push/pull workload on that layout, with heartbeats every
      0.2 s and PS_HEARTBEAT_TIMEOUT=3 s; mid-workload, host c's cable is pulled (its
      port on the bridge goes down). As the README's "When a node dies" says: the
      scheduler declares server 1 dead, every worker's request ends with Unavailable
      naming server 1 at host c's address, server 1, cut off from its scheduler, says
      so and exits 1, and the launcher ends the job with status 1, all within bounds.
  cut_scheduler_host_ends_the_nodes_cut_off_from_it
      The same workload; host a's cable is pulled, which cuts the scheduler (and
      worker 0) off from the others. The nodes of hosts b and c, whose scheduler has
      gone silent, say so and exit 1 (the first of them ends the job, so not every
      one may get to say it), and the launcher ends the job with status 1, naming a
      node of host b or c, within bounds.

In every case the launcher must have left no process in any namespace.

Exits 0 when the case passes, 1 when it fails, and 77 (ctest's SKIP_RETURN_CODE) with
a message saying why when the network cannot be made here: not root, no iproute2, or
a kernel or container that refuses network namespaces, veth pairs or bridges. The
network goes on every exit, also on SIGTERM, SIGINT and SIGHUP: every process left in
its namespaces is killed, then the namespaces are deleted. A run killed by SIGKILL
leaves its namespaces behind; the next run deletes those whose driver is gone.
"""

import argparse
import ctypes
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

from netns_network import HOSTS, Network, Skip

HERE = os.path.dirname(os.path.abspath(__file__))
NETNS_SSH = os.path.join(HERE, "netns_ssh")
SKIP = 77
SCHEDULER_PORT = 9091       # any port is free on a host of our own
JOB_TIMEOUT_S = 60          # the launcher's --timeout
# Where --scheduler-on first-host and round-robin from the second host put the
# scheduler, 2 servers and 2 workers.
LAYOUT = {"scheduler 0": "a", "worker 0": "a", "server 0": "b", "worker 1": "b",
          "server 1": "c"}
START_S = 30                # bound for a job to come up on a loaded machine

# The cut cases: short heartbeats, so that a dead host shows quickly. 3 s rather than
# less because the machine may be busy with other builds and tests.
HEARTBEAT_INTERVAL_S = 0.2
HEARTBEAT_TIMEOUT_S = 3
REQUEST_TIMEOUT_S = 10
DETECT_S = HEARTBEAT_TIMEOUT_S + 2  # from the cut to the workers' failed requests
LINGER_MS = 1500  # a worker whose request failed waits this long before it exits
# From the cut to the launcher's exit: detection, the node's exit, the launcher's
# --grace (1 s) for the others, and slack for a loaded machine.
END_S = DETECT_S + LINGER_MS / 1000 + 1 + 3


class Failed(Exception):
    """The case cannot go on; the message says why."""


def wait_until(predicate, limit_s, poll_s=0.05):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll_s)
    return predicate()


def die_with_driver():
    """preexec_fn of the launcher: SIGTERM to it (which stops every node) should this
    driver die without a chance to clean up, as under SIGKILL. Best effort."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    driver = os.getpid()

    def setup():
        prctl(ctypes.c_int(1), ctypes.c_ulong(signal.SIGTERM))  # PR_SET_PDEATHSIG
        if os.getppid() != driver:
            os._exit(1)
    return setup


class Job:
    """tracker/launch over the network's three hosts, its merged output in a file."""

    def __init__(self, args, net, tmp, workers, servers, env, command):
        self.log_path = os.path.join(tmp, "launch.log")
        hostfile = os.path.join(tmp, "hosts")
        with open(hostfile, "w") as f:
            f.write("".join(f"{net.address[h]}  # host {h}\n" for h in HOSTS))
        argv = [sys.executable, args.launch, "--launcher", "ssh",
                "--ssh-command", f"sh {shlex.quote(NETNS_SSH)}", "-H", hostfile,
                "--scheduler-on", "first-host", "--port", str(SCHEDULER_PORT),
                "-n", str(workers), "-s", str(servers), "--timeout", str(JOB_TIMEOUT_S)]
        # The ssh launcher forwards only PS_* and DMLC_* variables; a sanitizer build
        # (tests/sanitizer/run) needs its options on every node too.
        sanitizer = {k: v for k, v in os.environ.items()
                     if k in ("TSAN_OPTIONS", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS")}
        for key, value in {**sanitizer, **env}.items():
            argv += ["--env", f"{key}={value}"]
        argv += ["--", *command]
        print("$", shlex.join(argv))
        self.log = open(self.log_path, "wb")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, cwd=tmp, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, HERDPS_NETNS_HOSTS=net.ssh_map()),
                                     start_new_session=True, preexec_fn=die_with_driver())
        self.ended = None  # time.monotonic() when first seen exited

    def text(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def done(self):
        if self.proc.poll() is not None and self.ended is None:
            self.ended = time.monotonic()
        return self.ended is not None

    def wait(self, limit_s):
        if not wait_until(self.done, limit_s):
            raise Failed(f"the launcher is still running {limit_s:g} s later")
        return self.proc.returncode

    def close(self):
        """Stops the launcher if it still runs (it then stops every node), and prints
        its output so that a failing run can be read in ctest's log."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        print(f"----- launcher output (exit {self.proc.returncode}) -----")
        print(self.text(), end="")
        print("-----")


def expect(failures, ok, what):
    if not ok:
        failures.append(what)
    return ok


def expect_nothing_left(failures, net):
    wait_until(lambda: not net.pids(), 3.0)
    left = net.pids()
    expect(failures, not left, f"processes left in the namespaces: {left}")


def kv_correctness_is_exact_across_3_hosts(args, net, tmp, failures):
    """Every node joins with its own host's address, every pull is exact, exit 0."""
    # PS_VERBOSE=1 makes every node log the endpoint it advertises once it has joined.
    job = Job(args, net, tmp, 2, 2, {"PS_VERBOSE": 1},
              [args.kv_correctness, "--keys", "2000"])
    try:
        rc = job.wait(JOB_TIMEOUT_S + 15)
        print(f"the job ran {job.ended - job.started:.2f} s")
    finally:
        job.close()
    out = job.text()
    expect(failures, rc == 0, f"the launcher exited {rc}, not 0")
    for rank in (0, 1):
        expect(failures, f"[worker {rank}] worker {rank}: 2000 keys correct" in out,
               f"worker {rank} did not report 2000 correct keys")
    expect(failures, "[scheduler] " in out and "all 4 nodes joined (2 servers, 2 workers)" in out,
           "the scheduler did not report 4 nodes joined")
    for label, host in LAYOUT.items():
        prefix = "scheduler" if label.startswith("scheduler") else label
        expect(failures, re.search(
            rf"\[{prefix}\] .*joined as {label} \(node \d+, "
            rf"tcp://{re.escape(net.address[host])}:\d+\)", out),
            f"{label} did not join with host {host}'s address, {net.address[host]}")
    expect_nothing_left(failures, net)


def run_workload_and_cut(args, net, tmp, host):
    """Runs liveness_app's workload on LAYOUT with short heartbeats and pulls host's
    cable once every worker has run for a second. Returns (the launcher's status and
    output, the cut's wall-clock time, seconds from the cut to the launcher's exit)."""
    env = {"PS_HEARTBEAT_INTERVAL": HEARTBEAT_INTERVAL_S,
           "PS_HEARTBEAT_TIMEOUT": HEARTBEAT_TIMEOUT_S,
           "PS_REQUEST_TIMEOUT": REQUEST_TIMEOUT_S}
    command = [args.liveness_app, "--mode=workload", f"--run_s={JOB_TIMEOUT_S}",
               f"--linger_ms={LINGER_MS}"]
    job = Job(args, net, tmp, 2, 2, env, command)
    try:
        def running():
            out = job.text()
            return job.done() or all(f"[worker {r}] worker {r}: workload running" in out
                                     for r in (0, 1))
        if not wait_until(running, START_S) or job.done():
            raise Failed("the workload did not start on every worker")
        print(f"the workload runs {time.monotonic() - job.started:.2f} s after the start")
        time.sleep(1.0)  # mid-workload
        net.cut(host)
        cut_wall, cut_at = time.time(), time.monotonic()
        print(f"pulled host {host}'s cable at {cut_wall:.3f}")
        rc = job.wait(END_S + 10)
        print(f"the launcher exited {rc} {job.ended - cut_at:.2f} s after the cut")
    finally:
        job.close()
    return rc, job.text(), cut_wall, job.ended - cut_at


def cut_host_is_declared_dead_and_the_job_ends_naming_it(args, net, tmp, failures):
    """Host c (server 1) cut off mid-workload: declared dead, every worker's request
    fails naming it (or, on a slow machine, server 1's own exit comes first), server 1
    gives up on its silent scheduler, the job exits 1."""
    rc, out, cut_wall, ended_after = run_workload_and_cut(args, net, tmp, "c")
    c, port = re.escape(net.address["c"]), r":\d+"
    server1 = rf"server 1 \(node \d+, tcp://{c}{port}\)"
    # Both sides of the cut stop hearing each other at once, and both give up after
    # PS_HEARTBEAT_TIMEOUT: usually the scheduler declares server 1 dead first and the
    # workers' requests fail naming it; on a slow machine server 1 may give up on its
    # scheduler first, and its exit ends the job before the scheduler gets to say it.
    # Either is what the control plane says; the first is checked in full.
    declared = re.search(
        rf"\[scheduler\] .*{server1} has been silent for more than "
        rf"PS_HEARTBEAT_TIMEOUT={HEARTBEAT_TIMEOUT_S} s: declared dead", out)
    first = re.search(rf"launch: server 1 on {c} exited with code 1; stopping", out)
    print("order: " + ("the scheduler declared server 1 dead" if declared else
                       "server 1 gave up on its scheduler first"))
    expect(failures, declared or first,
           "neither did the scheduler declare server 1, on host c, dead, nor did server 1's "
           "own exit end the job")
    for rank in (0, 1) if declared else ():
        m = re.search(rf"\[worker {rank}\] worker {rank}: request failed at ([\d.]+), "
                      rf"[\d.]+ s after its last success: (.*)", out)
        if not m and first:
            continue  # server 1's exit stopped the job before this worker's request failed
        if not expect(failures, m, f"worker {rank} reported no failed request"):
            continue
        after = float(m.group(1)) - cut_wall
        print(f"worker {rank}'s request failed {after:.2f} s after the cut")
        expect(failures, after <= DETECT_S,
               f"worker {rank}'s request failed {after:.2f} s after the cut, not within "
               f"{DETECT_S} s")
        expect(failures, re.fullmatch(
            rf"Unavailable: {server1} is dead: silent for more than "
            rf"PS_HEARTBEAT_TIMEOUT={HEARTBEAT_TIMEOUT_S} s", m.group(2)),
            f"worker {rank}'s error does not name dead server 1 on host c: {m.group(2)}")
    a = re.escape(net.address["a"])
    expect(failures, re.search(
        rf"\[server 1\] .*server 1: the scheduler at tcp://{a}:{SCHEDULER_PORT} has been "
        rf"silent for [\d.]+ s \(PS_HEARTBEAT_TIMEOUT={HEARTBEAT_TIMEOUT_S} s\): it is "
        r"gone and the job cannot go on", out),
        "server 1, cut off, did not say that its scheduler is silent")
    expect(failures, rc == 1, f"the launcher exited {rc}, not 1")
    hosts = "|".join(re.escape(net.address[h]) for h in HOSTS)
    expect(failures, re.search(
        rf"launch: (?:server 1 on {c}|worker \d on (?:{hosts})) exited with code 1; "
        r"stopping the other nodes", out),
        "the launcher did not name server 1 or a worker as the node that failed")
    expect(failures, ended_after <= END_S,
           f"the job ended {ended_after:.2f} s after the cut, not within {END_S} s")
    expect_nothing_left(failures, net)


def cut_scheduler_host_ends_the_nodes_cut_off_from_it(args, net, tmp, failures):
    """Host a (the scheduler, worker 0) cut off mid-workload: the nodes on hosts b and
    c give up on their silent scheduler and the job exits 1, naming one of them."""
    rc, out, _, ended_after = run_workload_and_cut(args, net, tmp, "a")
    a = re.escape(net.address["a"])
    silent = (rf"the scheduler at tcp://{a}:{SCHEDULER_PORT} has been silent for [\d.]+ s "
              rf"\(PS_HEARTBEAT_TIMEOUT={HEARTBEAT_TIMEOUT_S} s\): it is gone and the job "
              r"cannot go on")
    # The first of them to exit ends the job, so the others may not get to say it.
    cut_off = [label for label, host in LAYOUT.items() if host != "a"
               and re.search(rf"\[{label}\] .*{label}: {silent}", out)]
    print(f"said that the scheduler is silent: {', '.join(cut_off) or 'none'}")
    expect(failures, cut_off, "no node on hosts b and c said that the scheduler is silent")
    expect(failures, rc == 1, f"the launcher exited {rc}, not 1")
    elsewhere = "|".join(re.escape(net.address[h]) for h in ("b", "c"))
    expect(failures, re.search(
        rf"launch: (?:server|worker) \d on (?:{elsewhere}) exited with code 1; "
        r"stopping the other nodes", out),
        "the launcher did not name a node of host b or c as the node that failed")
    expect(failures, ended_after <= END_S,
           f"the job ended {ended_after:.2f} s after the cut, not within {END_S} s")
    expect_nothing_left(failures, net)


CASES = {f.__name__: f for f in (kv_correctness_is_exact_across_3_hosts,
                                 cut_host_is_declared_dead_and_the_job_ends_naming_it,
                                 cut_scheduler_host_ends_the_nodes_cut_off_from_it)}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--launch", required=True, help="tracker/launch")
    p.add_argument("--kv-correctness", required=True, help="the kv_correctness app")
    p.add_argument("--liveness-app", required=True, help="the liveness_app app")
    args = p.parse_args(argv)
    for path in ("launch", "kv_correctness", "liveness_app"):
        setattr(args, path, os.path.realpath(getattr(args, path)))
    return args


def main(argv):
    args = parse_args(argv)

    def on_signal(sig, _frame):
        raise SystemExit(128 + sig)  # unwinds through the finally below
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    net, failures = Network(), []
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="herdps-netns-") as tmp:
            try:
                net.create()
            except Skip as e:
                print(f"SKIPPED: {e}")
                return SKIP
            try:
                CASES[args.case](args, net, tmp, failures)
            except Failed as e:
                failures.append(str(e))
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # the network goes, whatever comes
        net.close()
    for what in failures:
        print("FAILED:", what)
    print(f"{args.case}: {'failed' if failures else 'passed'} in "
          f"{time.monotonic() - started:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
