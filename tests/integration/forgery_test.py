#!/usr/bin/env python3
"""Messages forged by a process outside the job are refused and counted; values intact.

Usage: forgery_test.py APP FORGER [--impersonate push|answer|barrier] [--open_job]

Starts a job by hand on loopback (scheduler, 1 server, 2 workers of APP, a random
PS_JOB_TOKEN) and runs FORGER, a process that is not part of the job, against it:

  join     while worker 1 has not started yet, the forger asks the scheduler for a
           worker seat, once without a token and once with a wrong one; then the real
           worker 1 starts and must get rank 1.
  push     pushes in the workers' names to the server (after worker 0 pushed).
  answer   pull answers in the server's name to worker 0, which has a pull in flight
           (the forger copies its request id and incarnation).
  barrier  barrier releases in the scheduler's name to worker 0, waiting in a barrier
           that worker 1 enters later.

Self-checks (the test must FAIL with them): --impersonate PHASE gives the forger, in
that phase, the real routing identity of the node it speaks for (worker 1, the server,
the scheduler: the one thing it cannot guess), so its messages pass the sender check;
--open_job starts the job without PS_JOB_TOKEN, so the forger's join takes worker 1's
seat.

Passes when every node exits 0 having seen exactly the real workers' values, the pull
was not finished and the barrier not released by a forgery, worker 1 has rank 1, the
server and worker 0 counted the forged messages and the scheduler refused >= 2 joins.
"""
import argparse
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time

JOB_TIMEOUT_S = 120
WAIT_S = 60
# The whole run, under CTest's TIMEOUT (240 s), so that the driver, not CTest, ends it
# and kills what it started.
OVERALL_S = 200


class Job:
    """The nodes and forger runs of one test; every process in its own group."""

    def __init__(self, app, forger, workdir, impersonate, open_job):
        self.app, self.forger, self.workdir = app, forger, workdir
        self.impersonate = impersonate
        self.procs = {}  # name -> Popen
        self.port = free_port()
        self.env = dict(os.environ)
        self.env.update({
            "PS_NUM_WORKER": "2", "PS_NUM_SERVER": "1",
            "PS_SCHEDULER_URI": "127.0.0.1", "PS_SCHEDULER_PORT": str(self.port),
            "PS_NODE_HOST": "127.0.0.1", "PS_JOB_TOKEN": secrets.token_hex(16),
            "PS_START_TIMEOUT": "60", "GLOG_logtostderr": "1",
        })
        if open_job:
            del self.env["PS_JOB_TOKEN"]

    def log(self, name):
        return os.path.join(self.workdir, name + ".log")

    def start(self, name, role, rank):
        env = dict(self.env, PS_ROLE=role, PS_RANK=str(rank))
        out = open(self.log(name), "w")
        self.procs[name] = subprocess.Popen(
            [self.app, "--sync_dir", self.workdir,
             # A self-check fails by waiting for what does not come: keep that short.
             "--wait_s", str(15 if self.impersonate else WAIT_S),
             f"--print_identity={'true' if self.impersonate else 'false'}"], env=env,
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        out.close()

    def forge(self, mode, *args, speaks_for=None):
        """Runs the forger (bounded); returns (exit code, output). speaks_for: the node id
        whose identity the forger gets with --impersonate."""
        name = f"forger-{mode}"
        if self.impersonate == mode:
            owner = {1: "scheduler", 8: "server", 11: "worker1"}[speaks_for]
            identity = self.wait_for_line(owner, rf"^IDENTITY node {speaks_for} (\S+)").group(1)
            args = args + ("--routing_id", identity)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PS_")}
        with open(self.log(name), "w") as out:
            proc = subprocess.Popen([self.forger, "--mode", mode] + list(args), env=env,
                                    stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            self.procs[name] = proc
            try:
                rc = proc.wait(timeout=45)
            except subprocess.TimeoutExpired:
                rc = "timeout"
        return rc, read(self.log(name))

    def wait_for_line(self, name, pattern):
        """The first match of pattern in the node's output (bounded wait)."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            m = re.search(pattern, read(self.log(name)), re.M)
            if m:
                return m
            if self.procs[name].poll() is not None:
                # One last look: the line may have come just before the exit.
                m = re.search(pattern, read(self.log(name)), re.M)
                if m:
                    return m
                raise RuntimeError(f"{name} exited ({self.procs[name].returncode}) before "
                                   f"printing /{pattern}/")
            time.sleep(0.02)
        raise RuntimeError(f"{name} did not print /{pattern}/ within {WAIT_S} s")

    def report(self, name, count):
        tmp = os.path.join(self.workdir, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"{count}\n")
        os.rename(tmp, os.path.join(self.workdir, name))

    def kill_all(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tracker"))
import ports  # noqa: E402  (tracker/ports.py: a port no other process is handed meanwhile)


def free_port():
    return ports.free_port("127.0.0.1")


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def sent_count(output):
    m = re.search(r"forger: sent (\d+) forged messages", output)
    return int(m.group(1)) if m else 0


def stat(output, who, field):
    m = re.search(rf"^STATS {who} .*\b{field}=(\d+)", output, re.M)
    return int(m.group(1)) if m else None


def run(job, failures):
    began = time.monotonic()
    job.start("scheduler", "scheduler", 0)
    job.start("server", "server", 0)
    job.start("worker0", "worker", 0)

    # d. Worker 1 is not there yet: the forger asks for its seat.
    rc, out = job.forge("join", "--endpoint", f"tcp://127.0.0.1:{job.port}")
    print(out, end="")
    if rc != 0:
        failures.append(f"the forger's joins were not both refused (forger exit {rc})")
    # The real worker 1 starts a few seconds late, after the forger's attempts.
    time.sleep(max(0.5, began + 3 - time.monotonic()))
    job.start("worker1", "worker", 1)

    # a. Forged pushes, once worker 0 has pushed.
    # Nodes print their data endpoint, then their control endpoint.
    server_endpoint = job.wait_for_line("server", r"^ENDPOINT server (\S+) \S+").group(1)
    job.wait_for_line("worker0", r"^READY push")
    rc, out = job.forge("push", "--endpoint", server_endpoint, "--value", "1000",
                        speaks_for=11)
    print(out, end="")
    if rc != 0 or sent_count(out) == 0:
        failures.append(f"the forger could not send pushes (exit {rc})")
    job.report("forger_push_done", sent_count(out))

    # b. Forged answers to the pull worker 0 has in flight, with its exact ids.
    worker0 = job.wait_for_line("worker0", r"^ENDPOINT worker0 (\S+) (\S+)")
    worker0_endpoint, worker0_control = worker0.group(1), worker0.group(2)
    job.wait_for_line("worker0", r"^READY answer")
    slow = job.wait_for_line(
        "server", r"^SLOW_PULL request_id=(\d+) incarnation=(\d+) timestamp=(\d+)")
    rc, out = job.forge("answer", "--endpoint", worker0_endpoint, "--value", "666",
                        "--request_id", slow.group(1), "--incarnation", slow.group(2),
                        "--timestamp", slow.group(3), "--count", "64", speaks_for=8)
    print(out, end="")
    if rc != 0 or sent_count(out) == 0:
        failures.append(f"the forger could not send answers (exit {rc})")
    job.report("forger_answer_done", sent_count(out))

    # c. Forged barrier releases while worker 0 waits for worker 1.
    job.wait_for_line("worker0", r"^READY barrier")
    rc, out = job.forge("barrier", "--endpoint", worker0_control, speaks_for=1)
    print(out, end="")
    if rc != 0 or sent_count(out) == 0:
        failures.append(f"the forger could not send barrier releases (exit {rc})")
    job.report("forger_barrier_done", sent_count(out))

    deadline = time.monotonic() + JOB_TIMEOUT_S
    for name in ("worker0", "worker1", "server", "scheduler"):
        proc = job.procs[name]
        try:
            proc.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            failures.append(f"{name} did not finish within {JOB_TIMEOUT_S} s")

    logs = {name: read(job.log(name)) for name in ("scheduler", "server", "worker0", "worker1")}
    for name, text in logs.items():
        print(f"----- {name} (exit {job.procs[name].returncode})")
        print(text, end="")
    for name in logs:
        if job.procs[name].returncode != 0:
            failures.append(f"{name} exited with {job.procs[name].returncode}")

    w0, w1 = logs["worker0"], logs["worker1"]
    checks = [
        (r"^PHASE push: .* 400 keys, 0 wrong", w0, "values changed by forged pushes"),
        (r"^PHASE answer: .*the pull was in flight; pull OK, 400 keys, 0 wrong", w0,
         "a forged answer reached the pull"),
        (r"^PHASE barrier: released after worker 1 entered it", w0,
         "the barrier was released early"),
        (r"^PHASE final: worker 0 pull OK, 400 keys, 0 wrong", w0, "worker 0's final values"),
        (r"^PHASE final: worker 1 pull OK, 400 keys, 0 wrong", w1, "worker 1's final values"),
        (r"^RANK worker 1 id 11$", w1, "the real worker 1 did not get rank 1"),
        (r"^RANK worker 0 id 9$", w0, "worker 0 did not get rank 0"),
    ]
    for pattern, text, what in checks:
        if not re.search(pattern, text, re.M):
            failures.append(what)
    if "FAILED" in w0 + w1:
        failures.append("a worker reported a failed check")
    server_forged = stat(logs["server"], "server", "forged_messages")
    worker_forged = stat(w0, "worker0", "forged_messages")
    refused = stat(logs["scheduler"], "scheduler", "refused_joins")
    print(f"server forged_messages={server_forged}, worker 0 forged_messages={worker_forged}, "
          f"scheduler refused_joins={refused}")
    if not server_forged:
        failures.append(f"the server counted no forged messages ({server_forged})")
    if not worker_forged:
        failures.append(f"worker 0 counted no forged messages ({worker_forged})")
    if refused is None or refused < 2:
        failures.append(f"the scheduler refused {refused} joins, expected >= 2")
    sched = logs["scheduler"]
    refusal_at = sched.find("refused the join of")
    complete_at = sched.find("nodes joined")
    if refusal_at < 0 or complete_at < 0 or refusal_at > complete_at:
        failures.append("the scheduler did not log refused joins before the job was complete")


class Interrupted(RuntimeError):
    pass


def interrupt(signum, _frame):
    raise Interrupted(f"stopped by signal {signum} (the run is bounded to {OVERALL_S} s)")


def main():
    signal.signal(signal.SIGALRM, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    signal.alarm(OVERALL_S)
    parser = argparse.ArgumentParser()
    parser.add_argument("app")
    parser.add_argument("forger")
    parser.add_argument("--impersonate", choices=["push", "answer", "barrier"])
    parser.add_argument("--open_job", action="store_true")
    args = parser.parse_args()
    failures = []
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="herdps-forgery-") as workdir:
        job = Job(os.path.realpath(args.app), os.path.realpath(args.forger), workdir,
                  args.impersonate, args.open_job)
        try:
            run(job, failures)
        except RuntimeError as e:
            failures.append(str(e))
            for name in ("scheduler", "server", "worker0", "worker1"):
                print(f"----- {name}")
                print(read(job.log(name)), end="")
        finally:
            signal.alarm(0)
            job.kill_all()
    print(f"finished in {time.monotonic() - start:.1f} s")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
