#!/usr/bin/env python3
"""Node failure handling, end to end: which nodes notice a slow, frozen, killed or
vanished node, how fast, and what they do then.

Usage: liveness_test.py BEHAVIOUR LAUNCHER APP

BEHAVIOUR is one of the functions registered in BEHAVIOURS below; each is its own
ctest test. APP is liveness_app (see liveness_app.cc for its modes). Nodes run either
under LAUNCHER (tracker/launch) or started here one by one, as on several hosts, with
their own PS_JOB_TOKEN and port. Every node's argv carries a marker unique to this run,
so that the test can tell through /proc that nothing is left, and kill what is.

Heartbeats are short (every 0.5 s, dead after 3 s of silence); the issue asks that
failures be noticed within PS_HEARTBEAT_TIMEOUT + 2 s.
"""
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import uuid

INTERVAL_S = 0.5
TIMEOUT_S = 3.0
DETECT_S = TIMEOUT_S + 2  # the bound for noticing a failure
HEARTBEATS = {"PS_HEARTBEAT_INTERVAL": str(INTERVAL_S), "PS_HEARTBEAT_TIMEOUT": str(TIMEOUT_S)}
START_S = 30  # bound for a job to come up on a loaded machine


class Failures(list):
    def expect(self, ok, what):
        if not ok:
            self.append(what)
        return ok


def marked_pids(marker):
    """Live processes whose argv holds marker (the launcher and this run's nodes)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state != "Z":
            pids.append(int(entry))
    return pids


def kill_marked(marker):
    for pid in marked_pids(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def wait_until(predicate, limit_s, poll_s=0.02):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll_s)
    return predicate()


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tracker"))
import ports  # noqa: E402  (tracker/ports.py: a port no other process is handed meanwhile)


def free_port():
    return ports.free_port("127.0.0.1")


class Process:
    """One child process (in its own session) whose merged output goes to a file."""

    def __init__(self, name, cmd, env, logdir):
        self.name = name
        self.log_path = os.path.join(logdir, name.replace(" ", "_") + ".log")
        self.log = open(self.log_path, "wb")
        self.cmd, self.env = cmd, env  # to start the same node again
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.exited_at = None  # time.time() when first seen exited

    def text(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def poll(self):
        rc = self.proc.poll()
        if rc is not None and self.exited_at is None:
            self.exited_at = time.time()
        return rc

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.log.close()


def run_by_hand_test(run, hows, doc):
    """The main of a test script `SCRIPT HOW APP`: runs run(how, app, failures) for a HOW
    in hows, prints every failure, returns the exit status."""
    if len(sys.argv) != 3 or sys.argv[1] not in hows:
        print(doc, file=sys.stderr)
        return 2
    how, app = sys.argv[1], os.path.realpath(sys.argv[2])
    return run_checks(lambda failures: run(how, app, failures))


def run_checks(check):
    """Runs check(failures), an AssertionError counting as one more failure; prints
    every failure and returns the exit status."""
    failures = Failures()
    try:
        check(failures)
    except AssertionError as e:
        failures.append(str(e))
    for what in failures:
        print("FAILED:", what)
    return 1 if failures else 0


def wait_exits(procs, limit_s):
    """Polls until every process in procs has exited or limit_s passed; each records
    when it was first seen exited."""
    return wait_until(lambda: all([p.poll() is not None for p in procs]), limit_s)


def node_pid(text, role, rank):
    m = re.search(rf"liveness_app: {role} {rank} pid (\d+) started", text)
    return int(m.group(1)) if m else None


def failed_request(text, rank):
    """(wall time, status) of worker rank's first failed request, or None."""
    m = re.search(rf"worker {rank}: request failed at ([\d.]+), [\d.]+ s after its last "
                  r"success: (.*)", text)
    return (float(m.group(1)), m.group(2)) if m else None


class Job:
    """Context: a temp dir for logs and a run marker; kills every marked process on
    exit, and prints every log so that a failing run can be read in ctest's output."""

    def __enter__(self):
        self.marker = f"herdps-liveness-{uuid.uuid4().hex}"
        self.tmp = tempfile.TemporaryDirectory(prefix="liveness-")
        self.procs = []
        return self

    def launch(self, app, launcher, workers, servers, app_args, timeout_s, env=None,
               options=()):
        """Under the launcher, with the short HEARTBEATS unless env (a dict) is given,
        and the launcher's `options`."""
        cmd = [sys.executable, launcher, "-n", str(workers), "-s", str(servers),
               "--timeout", str(timeout_s), *options]
        for k, v in (HEARTBEATS if env is None else env).items():
            cmd += ["--env", f"{k}={v}"]
        cmd += ["--", app, f"--marker={self.marker}", *app_args]
        p = Process("launcher", cmd, dict(os.environ), self.tmp.name)
        self.procs.append(p)
        return p

    def start_by_hand(self, app, workers, servers, app_args, extra_env=None, node_env=None,
                      node_prefix=None):
        """Scheduler, servers and workers as separate processes, each told only what a
        node on another host would be told (plus extra_env, and node_env[name] for the
        node of that name; node_prefix[name] goes before its command, as `ip netns exec
        NS`). Returns {"scheduler": p, "server 0": p, ...}."""
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("PS_", "DMLC_"))}
        base.update(HEARTBEATS)
        base.update(extra_env or {})
        base.update({"PS_NUM_WORKER": str(workers), "PS_NUM_SERVER": str(servers),
                     "PS_SCHEDULER_URI": "127.0.0.1", "PS_SCHEDULER_PORT": str(free_port()),
                     "PS_NODE_HOST": "127.0.0.1", "PS_JOB_TOKEN": secrets.token_hex(16),
                     "PS_START_TIMEOUT": str(START_S)})
        nodes = {}
        for role, count in (("scheduler", 1), ("server", servers), ("worker", workers)):
            for rank in range(count):
                name = "scheduler" if role == "scheduler" else f"{role} {rank}"
                env = dict(base, PS_ROLE=role, PS_RANK=str(rank), **(node_env or {}).get(name, {}))
                prefix = (node_prefix or {}).get(name, [])
                p = Process(name, [*prefix, app, f"--marker={self.marker}", *app_args], env,
                            self.tmp.name)
                self.procs.append(p)
                nodes[name] = p
        return nodes

    def left(self):
        """Marked processes still alive, after giving killed ones a moment to go."""
        wait_until(lambda: not marked_pids(self.marker), 2.0)
        return marked_pids(self.marker)

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        kill_marked(self.marker)
        for p in self.procs:
            print(f"----- {p.name}: exit {p.proc.returncode} -----")
            print(p.text(), end="")
        self.tmp.cleanup()
        return False


# --- under tracker/launch ------------------------------------------------------------

def _slow_handle(launcher, app, f, slow_s, rounds, own_thread, handle_after_ms=0):
    """Worker 0's request sleeps slow_s in server app 0's handle while both workers do
    `rounds` rounds (a worker barrier, and with own_thread round trips to server app 1)
    with 0.1 s pauses; every round must finish before the slow answer."""
    args = ["--mode=slow_handle", f"--slow_ms={int(slow_s * 1000)}", f"--rounds={rounds}",
            "--round_ms=100", f"--own_thread={str(own_thread).lower()}",
            f"--handle_after_ms={handle_after_ms}"]
    with Job() as job:
        p = job.launch(app, launcher, 2, 1, args, slow_s + 40)
        f.expect(wait_exits([p], slow_s + 55), "the job did not end")
        out = p.text()
        f.expect(p.proc.returncode == 0, f"the job exited {p.proc.returncode}, not 0")
        f.expect(f"server 0: holding the slow request for {int(slow_s * 1000)} ms" in out,
                 "the server never held the slow request")
        f.expect("worker 0: the slow request was still pending after the rounds" in out,
                 "the rounds did not all happen while the handle slept")
        m = re.search(r"worker 0: the slow request returned (.+) after ([\d.]+) s", out)
        if f.expect(m is not None, "worker 0 did not report the slow request"):
            f.expect(m.group(1) == "OK", f"the slow request returned {m.group(1)}")
            f.expect(float(m.group(2)) >= slow_s - 0.5,
                     f"the slow request returned after {m.group(2)} s, before the sleep ended")
            print(f"the slow request returned {m.group(1)} after {m.group(2)} s")
        what = "barriers and app-1 round trips" if own_thread else "barriers"
        for rank in (0, 1):
            m = re.search(rf"worker {rank}: {rounds} rounds of {what} in ([\d.]+) s; longest "
                          r"gap between rounds ([\d.]+) s", out)
            if f.expect(m is not None, f"worker {rank} did not finish {rounds} rounds of {what}"):
                print(f"worker {rank}: {rounds} rounds in {m.group(1)} s, longest gap "
                      f"{m.group(2)} s")
                # 0.1 s pauses and loopback round trips: a gap near the heartbeat timeout
                # means something waited for the sleeping handle.
                f.expect(float(m.group(2)) < TIMEOUT_S,
                         f"worker {rank} waited {m.group(2)} s between two rounds")
        f.expect("declared dead" not in out and " is dead" not in out,
                 "a node was declared dead")
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


def slow_handle_is_not_declared_dead(launcher, app, f):
    """A server whose request handle (on its own thread) sleeps 20 s on one request is
    not declared dead; meanwhile the workers' barriers and their requests to a second
    app on that server proceed, and the slow request finally returns OK."""
    # 120 rounds take ~13 s of the 20.
    _slow_handle(launcher, app, f, 20, 120, own_thread=True)


def slow_handle_with_default_delivery_is_not_declared_dead(launcher, app, f):
    """As slow_handle_is_not_declared_dead for a KVServer with the default delivery (the
    handle may block the node's data path, never its heartbeats or barriers): 14 s. The
    server sets its handle 0.5 s after Start, so the slow request waits for it first
    and runs when the handle is set (not under any lock of the node's)."""
    # 40 rounds take ~4.5 s on a quiet machine, longer than PS_HEARTBEAT_TIMEOUT; the
    # margin is for a machine busy with other tests.
    _slow_handle(launcher, app, f, 14, 40, own_thread=False, handle_after_ms=500)


def _launched_workload(job, launcher, app, workers, servers):
    """Starts a push/pull workload under the launcher; returns (launcher process, its
    output once every worker runs)."""
    p = job.launch(app, launcher, workers, servers,
                   ["--mode=workload", "--run_s=30", "--linger_ms=1000"], 45)
    def ready():
        out = p.text()
        return ("liveness_app: scheduler 0 pid" in out and "liveness_app: server 0 pid" in out
                and all(f"worker {r}: workload running" in out for r in range(workers)))
    if not wait_until(ready, START_S):
        raise AssertionError("the workload did not start")
    time.sleep(0.5)  # mid-workload
    return p, p.text()


def frozen_server_fails_pending_requests_and_ends_the_job(launcher, app, f):
    """A server frozen by SIGSTOP mid-workload: every worker's pending Wait returns
    Unavailable naming it within PS_HEARTBEAT_TIMEOUT + 2 s; the workers exit 1, the
    launcher ends the job with 1 and nothing is left (the frozen server included)."""
    with Job() as job:
        p, out = _launched_workload(job, launcher, app, 2, 2)
        os.kill(node_pid(out, "server", 0), signal.SIGSTOP)
        frozen_at = time.time()
        if not wait_exits([p], DETECT_S + 10):
            raise AssertionError("the job did not end")
        out = p.text()
        for rank in (0, 1):
            failed = failed_request(out, rank)
            if not f.expect(failed is not None, f"worker {rank} reported no failed request"):
                continue
            at, status = failed
            print(f"worker {rank}: request failed {at - frozen_at:.2f} s after the freeze")
            f.expect(at - frozen_at <= DETECT_S,
                     f"worker {rank}'s request failed {at - frozen_at:.2f} s after the freeze")
            f.expect(status.startswith("Unavailable: server 0 (node 8,") and "is dead" in status,
                     f"worker {rank}'s error does not name dead server 0: {status}")
        f.expect(re.search(r"server 0 \(node 8, .*\) has been silent for more than "
                           r"PS_HEARTBEAT_TIMEOUT=3 s: declared dead", out) is not None,
                 "the scheduler did not declare server 0 dead")
        f.expect(p.proc.returncode == 1, f"the launcher exited {p.proc.returncode}, not 1")
        f.expect(re.search(r"worker \d exited with code 1; stopping the other nodes", out)
                 is not None, "the launcher did not name a failed worker")
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


def _killed_node_ends_the_launched_job(launcher, app, f, role, rank, label):
    with Job() as job:
        p, out = _launched_workload(job, launcher, app, 2, 2)
        os.kill(node_pid(out, role, rank), signal.SIGKILL)
        killed_at = time.time()
        if not wait_exits([p], DETECT_S + 10):
            raise AssertionError("the job did not end")
        print(f"the launcher ended {p.exited_at - killed_at:.2f} s after the kill")
        f.expect(p.exited_at - killed_at <= DETECT_S,
                 f"the job ended {p.exited_at - killed_at:.2f} s after the kill")
        f.expect(p.proc.returncode == 128 + signal.SIGKILL,
                 f"the launcher exited {p.proc.returncode}, not 137")
        f.expect(f"{label} was killed by signal 9 (SIGKILL); stopping the other nodes" in p.text(),
                 f"the launcher did not name the killed {label}")
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


def killed_server_ends_the_launched_job(launcher, app, f):
    """SIGKILL of a server mid-workload: the launcher ends the job with 137 at once
    (before the workers could notice; killed_server_fails_requests_naming_it covers
    them) and nothing is left."""
    _killed_node_ends_the_launched_job(launcher, app, f, "server", 0, "server 0")


def killed_scheduler_ends_the_launched_job(launcher, app, f):
    """SIGKILL of the scheduler mid-workload: the launcher ends the job with 137 and
    nothing is left."""
    _killed_node_ends_the_launched_job(launcher, app, f, "scheduler", 0, "scheduler")


# --- nodes started by hand ------------------------------------------------------------

def _hand_workload(job, app):
    nodes = job.start_by_hand(app, 2, 2, ["--mode=workload", "--run_s=30"])
    def ready():
        return all("workload running" in nodes[f"worker {r}"].text() for r in (0, 1))
    if not wait_until(ready, START_S):
        raise AssertionError("the workload did not start")
    time.sleep(0.5)
    return nodes


def killed_server_fails_requests_naming_it(launcher, app, f):
    """Nodes started by hand; SIGKILL of server 0 mid-workload: each worker's request
    ends with Unavailable naming server 0 within PS_HEARTBEAT_TIMEOUT + 2 s, and the
    worker exits 1 with that message."""
    with Job() as job:
        nodes = _hand_workload(job, app)
        nodes["server 0"].proc.send_signal(signal.SIGKILL)
        killed_at = time.time()
        workers = [nodes["worker 0"], nodes["worker 1"]]
        f.expect(wait_exits(workers, DETECT_S + 5), "a worker did not exit")
        for rank, w in enumerate(workers):
            failed = failed_request(w.text(), rank)
            if f.expect(failed is not None, f"worker {rank} reported no failed request"):
                at, status = failed
                print(f"worker {rank}: request failed {at - killed_at:.2f} s after the kill")
                f.expect(at - killed_at <= DETECT_S,
                         f"worker {rank}'s request failed {at - killed_at:.2f} s after the kill")
                f.expect(status.startswith("Unavailable: server 0 (node 8, tcp://127.0.0.1:")
                         and "is dead: silent for more than PS_HEARTBEAT_TIMEOUT" in status,
                         f"worker {rank}'s error does not name dead server 0: {status}")
            f.expect(w.proc.returncode == 1, f"worker {rank} exited {w.proc.returncode}, not 1")
            if w.exited_at is not None:
                f.expect(w.exited_at - killed_at <= DETECT_S + 0.5,
                         f"worker {rank} exited {w.exited_at - killed_at:.2f} s after the kill")
        f.expect("server 0 (node 8" in nodes["scheduler"].text() and
                 "declared dead" in nodes["scheduler"].text(),
                 "the scheduler did not declare server 0 dead")


def killed_scheduler_makes_every_node_exit_non_zero(launcher, app, f):
    """Nodes started by hand; SIGKILL of the scheduler mid-workload: every server and
    worker says the scheduler has been silent and exits 1 within
    PS_HEARTBEAT_TIMEOUT + 2 s."""
    with Job() as job:
        nodes = _hand_workload(job, app)
        nodes["scheduler"].proc.send_signal(signal.SIGKILL)
        killed_at = time.time()
        others = [n for name, n in nodes.items() if name != "scheduler"]
        f.expect(wait_exits(others, DETECT_S + 5), "a node did not exit")
        for n in others:
            text = n.text()
            f.expect(n.proc.returncode == 1, f"{n.name} exited {n.proc.returncode}, not 1")
            if n.exited_at is not None:
                print(f"{n.name}: exited {n.proc.returncode} {n.exited_at - killed_at:.2f} s "
                      "after the kill")
                f.expect(n.exited_at - killed_at <= DETECT_S,
                         f"{n.name} exited {n.exited_at - killed_at:.2f} s after the kill")
            f.expect(re.search(r"the scheduler at tcp://127\.0\.0\.1:\d+ has been silent for "
                               r"[\d.]+ s \(PS_HEARTBEAT_TIMEOUT=3", text) is not None,
                     f"{n.name} did not say that the scheduler has been silent")
        # Every worker reports the error: a request in flight when its node gave up ends
        # with it, and so does one issued in the second before the node exits (its send
        # fails at once).
        for rank in (0, 1):
            failed = failed_request(nodes[f"worker {rank}"].text(), rank)
            f.expect(failed is not None, f"worker {rank} reported no failed request")
            if failed is not None:
                f.expect("the scheduler at" in failed[1] and failed[1].startswith("Unavailable"),
                         f"worker {rank}'s error does not name the scheduler: {failed[1]}")
        for rank in (0, 1):
            f.expect(f"server {rank}: ps::Finalize failed: Barrier: the scheduler at" in
                     nodes[f"server {rank}"].text(),
                     f"server {rank} did not report its failed ps::Finalize")


def frozen_worker_says_it_was_stalled_and_exits_non_zero(launcher, app, f):
    """Nodes started by hand; worker 0 frozen by SIGSTOP for twice the heartbeat timeout,
    then resumed: the scheduler has declared it dead meanwhile; the worker says that it
    did not run itself (it does not blame a silent scheduler), learns from the scheduler
    that it is dead, and exits 1 saying so. The others finish and exit 1 (the job lost
    a node)."""
    args = ["--mode=rounds", "--rounds=40", "--round_ms=100"]
    with Job() as job:
        nodes = job.start_by_hand(app, 2, 1, args)
        w0 = nodes["worker 0"]
        if not wait_until(lambda: "worker 0: round 2 done" in w0.text(), START_S):
            raise AssertionError("worker 0 did not get through 3 rounds")
        w0.proc.send_signal(signal.SIGSTOP)
        time.sleep(2 * TIMEOUT_S)
        w0.proc.send_signal(signal.SIGCONT)
        resumed_at = time.time()
        f.expect(wait_exits([w0], DETECT_S + 2), "worker 0 did not exit after it resumed")
        text = w0.text()
        if w0.exited_at is not None:
            print(f"worker 0: exited {w0.proc.returncode} {w0.exited_at - resumed_at:.2f} s "
                  "after it resumed")
        f.expect(w0.proc.returncode == 1, f"worker 0 exited {w0.proc.returncode}, not 1")
        f.expect(re.search(r"this node did not run for [\d.]+ s \(it was stopped, or starved "
                           r"of CPU\)", text) is not None, "worker 0 did not say it was stalled")
        f.expect(re.search(r"the scheduler declared this node dead \(silent for more than "
                           r"PS_HEARTBEAT_TIMEOUT=3 s: this node did not run for [\d.]+ s",
                           text) is not None,
                 "worker 0 did not say that the scheduler declared it dead after its stall")
        f.expect("has been silent" not in text, "worker 0 blamed a silent scheduler")
        rest = [n for name, n in nodes.items() if name != "worker 0"]
        f.expect(wait_exits(rest, 30), "not every other node exited")
        for n in rest:
            f.expect(n.proc.returncode == 1, f"{n.name} exited {n.proc.returncode}, not 1")
        f.expect("worker 1: finished 40 rounds, all sums correct" in nodes["worker 1"].text(),
                 "worker 1 did not finish its rounds")


def blocked_callbacks_do_not_stall_the_control_loop(launcher, app, f):
    """Nodes started by hand; worker 0 has 6000 pushes with callbacks pending at server 0,
    which never answers and is then killed. Every request ends Unavailable and its
    callback goes to the worker's own thread, where the first blocks twice the heartbeat
    timeout while the others fill the thread's queue (4096): the worker's control loop
    does not wait for room, so its heartbeats go on and it is not declared dead; then
    every callback runs."""
    args = ["--mode=callbacks", "--callbacks=6000", f"--block_ms={int(2000 * TIMEOUT_S)}"]
    with Job() as job:
        nodes = job.start_by_hand(app, 1, 1, args)
        w0 = nodes["worker 0"]
        if not wait_until(lambda: "worker 0: 6000 pushes wait" in w0.text(), START_S):
            raise AssertionError("worker 0 did not issue its pushes")
        time.sleep(0.5)
        nodes["server 0"].proc.send_signal(signal.SIGKILL)
        f.expect(wait_exits([w0], 3 * TIMEOUT_S + 20), "worker 0 did not exit")
        text = w0.text()
        f.expect("worker 0: 6000 of 6000 callbacks ran; the newest 4096 requests: 4096 ended "
                 "Unavailable" in text,
                 "worker 0 did not see every callback run and every request end Unavailable")
        f.expect("declared this node dead" not in text, "worker 0 was declared dead")
        f.expect(w0.proc.returncode == 1, f"worker 0 exited {w0.proc.returncode}, not 1 "
                 "(the job lost server 0)")
        sched = nodes["scheduler"]
        f.expect(wait_exits([sched], 20), "the scheduler did not exit")
        f.expect(re.search(r"worker 0 \(node 9,.*declared dead", sched.text()) is None,
                 "the scheduler declared worker 0 dead")


def ipc_files_of_a_lost_job_are_removed(launcher, app, f):
    """Nodes started by hand over ipc, with socket files in a private TMPDIR; SIGKILL of
    the scheduler: every node that gives up removes its socket files (a node whose app
    exits on its own first, and the killed scheduler, cannot). A node that binds ipc
    endpoints later removes socket files that nobody listens on and that are over a
    minute old: the rest go when the next job's scheduler starts."""
    def ipc_files(d):
        return sorted(n for n in os.listdir(d) if re.fullmatch(r"herdps-\d+\.ipc", n))
    with tempfile.TemporaryDirectory(prefix="liveness-ipc-") as tmpdir, Job() as job:
        env = {"PS_TRANSPORT": "ipc", "TMPDIR": tmpdir}
        nodes = job.start_by_hand(app, 2, 2, ["--mode=workload", "--run_s=30"], extra_env=env)
        if not wait_until(lambda: all("workload running" in nodes[f"worker {r}"].text()
                                      for r in (0, 1)), START_S):
            raise AssertionError("the workload did not start")
        f.expect(len(ipc_files(tmpdir)) == 10, f"socket files while the job runs: "
                 f"{ipc_files(tmpdir)}, expected 2 per node")
        nodes["scheduler"].proc.send_signal(signal.SIGKILL)
        others = [n for name, n in nodes.items() if name != "scheduler"]
        f.expect(wait_exits(others, DETECT_S + 5), "a node did not exit")
        left = ipc_files(tmpdir)
        print(f"socket files left after the lost scheduler: {left}")
        gave_up = 0
        for n in others:
            text = n.text()
            if "has been silent for" not in text:
                continue  # its app exited first, on a request that failed
            gave_up += 1
            mine = re.findall(r"listening at ipc://.*?/(herdps-\d+\.ipc)", text)
            f.expect(len(mine) == 1 and "control ipc://" in text,
                     f"{n.name} did not say where it listens")
            own = set(re.findall(r"(herdps-\d+\.ipc)", re.search(
                r"listening at (ipc://\S+) \(control (ipc://\S+);", text).group(0)))
            f.expect(not own & set(left), f"{n.name} gave up but left its socket files "
                     f"{sorted(own & set(left))}")
        f.expect(gave_up > 0, "no node gave up on the lost scheduler")
        # Over a minute old, as a crash long ago would have left them.
        old = time.time() - 120
        for name in left:
            os.utime(os.path.join(tmpdir, name), (old, old))
        fresh = job.start_by_hand(app, 1, 1, ["--mode=workload", "--run_s=1"], extra_env=env)
        f.expect(wait_until(lambda: not set(left) & set(ipc_files(tmpdir)), START_S),
                 f"the stale socket files are still there: {ipc_files(tmpdir)}")
        f.expect(wait_exits(list(fresh.values()), START_S), "the second job did not end")
        # Whichever of its nodes binds first removes them.
        f.expect(any(re.search(rf"removed {len(left)} socket files of ended nodes", n.text())
                     for n in fresh.values()),
                 "no node of the second job said it removed the stale files")
        f.expect(ipc_files(tmpdir) == [], f"files left after the second job: {ipc_files(tmpdir)}")


def bench_stops_when_its_raw_server_dies(launcher, app, f):
    """APP is apps/bench. Nodes started by hand; the server (which also runs the raw
    ZeroMQ baseline) is killed while the worker measures: the worker's HerdPS requests
    fail, and its raw client gives up after --raw_timeout_s instead of waiting for an
    answer for ever: it exits 1 saying so."""
    args = ["--undefok=marker", "--workload=kv", "--sizes=64", "--ops=push", "--windows=1",
            "--seconds=120", "--rounds=60", "--max_requests=1000000000", "--raw_timeout_s=3"]
    with Job() as job:
        nodes = job.start_by_hand(app, 1, 1, args)
        w0 = nodes["worker 0"]
        if not wait_until(lambda: "raw MB/s" in w0.text(), START_S):
            raise AssertionError("the bench did not start measuring")
        time.sleep(1)
        nodes["server 0"].proc.send_signal(signal.SIGKILL)
        f.expect(wait_exits([w0], DETECT_S + 3 + 20), "the bench's worker did not exit")
        f.expect(w0.proc.returncode == 1, f"the bench's worker exited {w0.proc.returncode}, not 1")
        f.expect("bench: the raw ZeroMQ server did not answer within 3000 ms" in w0.text(),
                 "the bench's worker did not say that the raw server stopped answering")


def _dropped_worker_continuation(app, f, quit_how):
    """Worker 1 of 2 stops after its third round (killed, or exits 0 without
    Finalize); worker 0, the servers and the scheduler must finish their work, then exit
    1 saying that the job lost worker 1 (a supervisor must not read success)."""
    rounds = 20
    args = ["--mode=rounds", f"--rounds={rounds}", "--round_ms=100"]
    if quit_how == "exit0":
        args += ["--quit_rank=1", "--quit_after=3"]
    with Job() as job:
        nodes = job.start_by_hand(app, 2, 2, args)
        w1 = nodes["worker 1"]
        if not wait_until(lambda: "worker 1: round 2 done" in w1.text(), START_S):
            raise AssertionError("worker 1 did not get through 3 rounds")
        if quit_how == "kill":
            w1.proc.send_signal(signal.SIGKILL)
        stopped_at = time.time()
        f.expect(wait_exits([w1], 5), "worker 1 did not stop")
        if quit_how == "kill":
            f.expect(w1.proc.returncode == -signal.SIGKILL, f"worker 1 ended {w1.proc.returncode}")
        else:
            f.expect(w1.proc.returncode == 0 and
                     "worker 1: exiting with code 0 without ps::Finalize" in w1.text(),
                     f"worker 1 ended {w1.proc.returncode} without saying it quits")
        # Worker 0 waits in the barrier of round 4 until worker 1 is declared dead, then
        # does its other rounds (~2 s) and finalizes.
        bound = DETECT_S + rounds * 0.1 + 8
        rest = [n for name, n in nodes.items() if name != "worker 1"]
        f.expect(wait_exits(rest, bound), f"not every other node exited within {bound} s")
        for n in rest:
            if n.exited_at is not None:
                print(f"{n.name}: exited {n.proc.returncode} {n.exited_at - stopped_at:.2f} s "
                      "after worker 1 stopped")
        for n in rest:
            f.expect(n.proc.returncode == 1, f"{n.name} exited {n.proc.returncode}, not 1")
            label = "scheduler 0" if n.name == "scheduler" else n.name
            f.expect(f"{label}: finalized" in n.text(), f"{n.name} did not finalize")
            f.expect("the job lost worker 1 (node 11) (declared dead): this process exits "
                     "with status 1" in n.text(), f"{n.name} did not say why it exits 1")
        w0 = nodes["worker 0"].text()
        f.expect(f"worker 0: finished {rounds} rounds, all sums correct" in w0,
                 "worker 0 did not finish its rounds")
        sched = nodes["scheduler"].text()
        f.expect(re.search(r"worker 1 \(node 11, tcp://127\.0\.0\.1:\d+\) has been silent for "
                           r"more than PS_HEARTBEAT_TIMEOUT=3 s: declared dead", sched)
                 is not None, "the scheduler did not declare worker 1 dead")
        f.expect(len(re.findall(r"has been silent for more than PS_HEARTBEAT_TIMEOUT=3 s: "
                                r"declared dead", sched)) == 1,
                 "the scheduler declared another node dead")


def killed_worker_is_dropped_and_the_others_finish(launcher, app, f):
    """Nodes started by hand; SIGKILL of worker 1 of 2: it is declared dead and dropped
    from barriers; worker 0 finishes its rounds, ps::Finalize (with barrier) completes
    and the scheduler, servers and worker 0 exit 1, naming the lost worker."""
    _dropped_worker_continuation(app, f, "kill")


def worker_exiting_without_finalize_is_dropped_and_the_others_finish(launcher, app, f):
    """As killed_worker_is_dropped_and_the_others_finish, for a worker that exits 0
    without ps::Finalize."""
    _dropped_worker_continuation(app, f, "exit0")


def no_node_is_declared_dead_at_drop_rate_0_5(launcher, app, f):
    """Under the launcher with PS_RESEND=1, PS_DROP_RATE=0.5 and the default heartbeats
    (every 1 s, dead after 10 s): a 30 s push/pull workload. Heartbeats are never
    resent, so half of them and of their answers are lost; liveness counts any message
    from a node, and a node whose answer is overdue asks again at every check: nobody
    is declared dead, nobody gives up, the job exits 0."""
    env = {"PS_RESEND": "1", "PS_DROP_RATE": "0.5", "PS_RESEND_TIMEOUT": "50"}
    with Job() as job:
        p = job.launch(app, launcher, 2, 2, ["--mode=workload", "--run_s=30"], 90, env=env)
        f.expect(wait_exits([p], 110), "the job did not end")
        out = p.text()
        f.expect(p.proc.returncode == 0, f"the job exited {p.proc.returncode}, not 0")
        for rank in (0, 1):
            f.expect(f"worker {rank}: no request failed in 30 s" in out,
                     f"worker {rank} did not finish its workload")
        f.expect("declared dead" not in out and "has been silent" not in out,
                 "a node was declared dead, or gave up on a silent scheduler")
        left = job.left()
        f.expect(left == [], f"processes left: {left}")


BEHAVIOURS = {fn.__name__: fn for fn in (
    bench_stops_when_its_raw_server_dies,
    ipc_files_of_a_lost_job_are_removed,
    no_node_is_declared_dead_at_drop_rate_0_5,
    frozen_worker_says_it_was_stalled_and_exits_non_zero,
    blocked_callbacks_do_not_stall_the_control_loop,
    slow_handle_is_not_declared_dead,
    slow_handle_with_default_delivery_is_not_declared_dead,
    frozen_server_fails_pending_requests_and_ends_the_job,
    killed_server_ends_the_launched_job,
    killed_scheduler_ends_the_launched_job,
    killed_server_fails_requests_naming_it,
    killed_scheduler_makes_every_node_exit_non_zero,
    killed_worker_is_dropped_and_the_others_finish,
    worker_exiting_without_finalize_is_dropped_and_the_others_finish,
)}


def run_behaviour(behaviours, usage):
    """main() of a test script: argv is BEHAVIOUR LAUNCHER APP; runs that behaviour."""
    if len(sys.argv) != 4 or sys.argv[1] not in behaviours:
        print(usage, file=sys.stderr)
        print("behaviours: " + ", ".join(behaviours), file=sys.stderr)
        return 2
    behaviour, launcher, app = sys.argv[1], sys.argv[2], os.path.realpath(sys.argv[3])
    failures = Failures()
    began = time.monotonic()
    try:
        behaviours[behaviour](launcher, app, failures)
    except AssertionError as e:
        failures.append(str(e))
    print(f"{behaviour}: {time.monotonic() - began:.1f} s")
    for what in failures:
        print("FAILED:", what)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(run_behaviour(BEHAVIOURS, __doc__))
