#!/usr/bin/env python3
"""CURVE end to end: a job holding its key is exact, nobody without the key gets in,
and the key is on no command line.

Usage: security_test.py SCENARIO --app APP [--probe PROBE] [--launch LAUNCH] [--no-curve]

Scenarios:

  launch     tracker/launch --secure --verbose runs APP (1 server, 2 workers). While
             the job runs, the driver reads every node's environment from /proc (the
             same user may): PS_SECURE=1 and one 40-character PS_CURVE_SECRET_KEY on all
             four nodes; then every /proc/*/cmdline on the machine: the key is on none.
             The launcher's --verbose output shows the key masked, every node logs
             "CURVE on", the workers' pulls are exact and the server refused nothing.
  strangers  a secure job started by hand (the server reads its key from a 0600 file,
             the other nodes from the environment), with a worker seat still open while
             two strangers try to take it: a worker without PS_SECURE and one with
             another key; both must fail to start (PS_START_TIMEOUT=5) and the
             scheduler must never see their joins. Then, with the job complete, PROBE
             (tests/security/curve_probe.cc, raw ZeroMQ) sends forged pushes to the
             server without CURVE, with another key and with only the job's public key:
             all refused; and with the job's key (the positive control): admitted, and
             counted by the server as forged (the sender check), which shows that what
             the refused probes sent would have been counted had it arrived. Passes when
             the server counted exactly the control's pushes as forged, refused >= 3
             handshakes, dropped nothing, the pulls are exact, and the key is on no
             command line. --no-curve runs the same job without CURVE: the test must
             then FAIL (the self-check).
  no_key     PS_SECURE=1 without a key, and with a key file others may read, stop a
             node at start with a clear error; tracker/launch refuses --env
             PS_CURVE_SECRET_KEY=..., a key without --secure, and --secure with
             PS_SECURE=0.

Exit 0 when every check passed; otherwise 1, naming each failed check.
"""
import argparse
import atexit
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

WAIT_S = 60
Z85_DIGITS = ("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
              ".-:+=^!/*?&<>()[]{}@%$#")

failures = []


def check(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)
    return ok


def z85(data):
    out = []
    for i in range(0, len(data), 4):
        value, digits = int.from_bytes(data[i:i + 4], "big"), []
        for _ in range(5):
            value, digit = divmod(value, 85)
            digits.append(Z85_DIGITS[digit])
        out.extend(reversed(digits))
    return "".join(out)


def new_key():
    return z85(secrets.token_bytes(32))


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tracker"))
import ports  # noqa: E402  (tracker/ports.py: a port no other process is handed meanwhile)


def free_port():
    return ports.free_port("127.0.0.1")


class Proc:
    """A process in its own group whose merged output is collected line by line."""

    def __init__(self, name, argv, env, stderr_apart=False):
        self.name, self.lines, self.err_lines = name, [], []
        self.lock = threading.Lock()
        self.p = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if stderr_apart else subprocess.STDOUT,
            start_new_session=True)
        self.readers = [threading.Thread(target=self._read, args=(self.p.stdout, self.lines),
                                         daemon=True)]
        if stderr_apart:
            self.readers.append(threading.Thread(
                target=self._read, args=(self.p.stderr, self.err_lines), daemon=True))
        for r in self.readers:
            r.start()

    def _read(self, stream, into):
        for raw in iter(stream.readline, b""):
            with self.lock:
                into.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def text(self):
        with self.lock:
            return "\n".join(self.lines)

    def err_text(self):
        with self.lock:
            return "\n".join(self.err_lines)

    def wait(self, timeout):
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        for r in self.readers:
            r.join(5)
        return rc

    def kill(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.p.wait()


def wait_until(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def all_cmdlines():
    """(pid, argv bytes) of every process whose command line this user can read."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    found.append((int(name), f.read()))
            except OSError:
                pass
    return found


def environ_of(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        records = f.read().split(b"\0")
    env = {}
    for r in records:
        k, sep, v = r.partition(b"=")
        if sep:
            env[k.decode(errors="replace")] = v.decode(errors="replace")
    return env


def check_key_on_no_command_line(key, when):
    hits = [pid for pid, argv in all_cmdlines() if key.encode() in argv]
    check(not hits, f"{when}: the key is on no command line of the "
          f"{len(all_cmdlines())} processes readable (found in pids {hits})")


def stats(text, who):
    m = re.search(rf"STATS {who} (.*)", text)
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))} if m else None


def new_workdir():
    """A scratch directory for one scenario, removed when this test process exits."""
    path = tempfile.mkdtemp(prefix="herdps-security-")
    atexit.register(shutil.rmtree, path, True)
    return path


def write_go(workdir, number):
    tmp = os.path.join(workdir, "go.tmp")
    with open(tmp, "w") as f:
        f.write(f"{number}\n")
    os.rename(tmp, os.path.join(workdir, "go"))


def scenario_launch(args):
    workdir = new_workdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PS_SECURE", "PS_CURVE_"))}
    job = Proc("launch", [sys.executable, args.launch, "-n", "2", "-s", "1", "--secure",
                          "--verbose", "--timeout", "120", "--", args.app,
                          "--sync_dir", workdir], env, stderr_apart=True)
    try:
        ready = wait_until(lambda: job.text().count("READY worker") == 2
                           and "ENDPOINT server" in job.text(), WAIT_S)
        if not check(ready, "the secure job came together under tracker/launch --secure"):
            print(job.text()[-3000:], job.err_text()[-2000:], sep="\n")
            return
        marker = b"--sync_dir\0" + workdir.encode() + b"\0"
        nodes = [pid for pid, argv in all_cmdlines()
                 if argv.startswith(args.app.encode() + b"\0") and marker in argv]
        check(len(nodes) == 4, f"found the job's 4 node processes ({len(nodes)})")
        keys = set()
        for pid in nodes:
            env_of = environ_of(pid)
            check(env_of.get("PS_SECURE") == "1", f"node pid {pid} has PS_SECURE=1")
            keys.add(env_of.get("PS_CURVE_SECRET_KEY", ""))
        key = next(iter(keys)) if len(keys) == 1 else ""
        check(len(keys) == 1 and len(key) == 40 and all(c in Z85_DIGITS for c in key),
              "every node holds the same 40-character Z85 key")
        if key:
            check_key_on_no_command_line(key, "during the job")
        write_go(workdir, 0)
        rc = job.wait(WAIT_S)
        out, err = job.text(), job.err_text()
        check(rc == 0, f"the job exits 0 (got {rc})")
        if rc != 0:
            print(out[-3000:], err[-2000:], sep="\n")
        check(len(re.findall(r"RESULT worker \d keys=\d+ wrong=0 status=ok", out)) == 2,
              "both workers pulled exactly the sums of the pushes")
        check(out.count("CURVE on") >= 4, "every node logged that CURVE is on")
        check("PS_CURVE_SECRET_KEY='<secret>'" in err and "PS_SECURE=1" in err,
              "--verbose shows PS_SECURE=1 and the key masked")
        if key:
            check(key not in out and key not in err, "the key is in none of the job's output")
        server = stats(out, "server")
        check(server is not None and server["refused_handshakes"] == 0
              and server["forged_messages"] == 0 and server["dropped_messages"] == 0,
              f"the server refused, dropped and counted as forged nothing ({server})")
    finally:
        job.kill()


def scenario_strangers(args):
    workdir = new_workdir()
    key, other = new_key(), new_key()
    key_file = os.path.join(workdir, "job.key")
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (key + "\n").encode())
    os.close(fd)
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PS_", "DMLC_"))}
    base.update({"PS_NUM_WORKER": "2", "PS_NUM_SERVER": "1", "PS_SCHEDULER_URI": "127.0.0.1",
                 "PS_SCHEDULER_PORT": str(port), "PS_NODE_HOST": "127.0.0.1",
                 "PS_JOB_TOKEN": secrets.token_hex(16), "PS_START_TIMEOUT": str(WAIT_S),
                 "GLOG_logtostderr": "1"})
    curve = not args.no_curve

    def env(role, rank=0, how="env"):
        e = dict(base, PS_ROLE=role, PS_RANK=str(rank))
        if how == "env" and curve:
            e.update(PS_SECURE="1", PS_CURVE_SECRET_KEY=key)
        elif how == "file" and curve:
            e.update(PS_SECURE="1", PS_CURVE_SECRET_KEY_FILE=key_file)
        elif how == "other":
            e.update(PS_SECURE="1", PS_CURVE_SECRET_KEY=other, PS_START_TIMEOUT="5")
        elif how == "plain":
            e.update(PS_START_TIMEOUT="5")
        return e

    app = [args.app, "--sync_dir", workdir, "--wait_s", str(WAIT_S)]
    procs = []
    try:
        scheduler = Proc("scheduler", app, env("scheduler"))
        server = Proc("server", app, env("server", 0, "file"))
        worker0 = Proc("worker 0", app, env("worker", 0))
        procs += [scheduler, server, worker0]
        time.sleep(1)
        # Worker 1's seat is open: strangers try to take it.
        plain = Proc("plain stranger", app, env("worker", 1, "plain"))
        wrong = Proc("stranger with another key", app, env("worker", 1, "other"))
        procs += [plain, wrong]
        for stranger in (plain, wrong):
            rc = stranger.wait(30)
            text = stranger.text()
            check(rc == 3 and "START FAILED" in text and "did not come together" in text,
                  f"the {stranger.name} cannot join (exit {rc}, START FAILED after "
                  "PS_START_TIMEOUT)")
            if rc != 3:
                print(text[-2000:])
        check(re.search(r"cannot connect to \S+ .*CURVE handshake", wrong.text()) is not None,
              "the stranger with another key logs that the CURVE handshake failed")
        check(all(p.p.poll() is None for p in (scheduler, server, worker0)),
              "the job's nodes still run")
        worker1 = Proc("worker 1", app, env("worker", 1))
        procs.append(worker1)
        ready = wait_until(lambda: "READY worker 0" in worker0.text()
                           and "READY worker 1" in worker1.text()
                           and "ENDPOINT server" in server.text(), WAIT_S)
        if not check(ready, "the job came together once the real worker 1 started"):
            for p in procs:
                print(f"--- {p.name}\n{p.text()[-1500:]}")
            return
        endpoint = re.search(r"ENDPOINT server (\S+)", server.text()).group(1)
        controls = 0
        probe_env = dict(base, PS_CURVE_SECRET_KEY=key)
        for mode, expect in (("plain", "refused"), ("other_key", "refused"),
                             ("public_only", "refused"), ("job_key", "admitted")):
            probe = Proc(f"probe {mode}", [args.probe, "--endpoint", endpoint, "--mode", mode,
                                           "--expect", expect, "--pushes", "3"], probe_env)
            rc = probe.wait(30)
            check(rc == 0, f"a raw ZeroMQ client with {mode} is {expect}: "
                  f"{probe.text().strip()}")
            if mode == "job_key" and rc == 0:
                controls = 3
        check_key_on_no_command_line(key, "during the job")
        write_go(workdir, controls)
        for p in (scheduler, server, worker0, worker1):
            rc = p.wait(WAIT_S)
            check(rc == 0, f"{p.name} exits 0 (got {rc})")
            if rc != 0:
                print(p.text()[-2000:])
        results = worker0.text() + "\n" + worker1.text()
        check(len(re.findall(r"RESULT worker \d keys=\d+ wrong=0 status=ok", results)) == 2,
              "both workers pulled exactly the sums of the real workers' pushes")
        srv = stats(server.text(), "server") or {}
        sch = stats(scheduler.text(), "scheduler") or {}
        check(srv.get("forged_messages") == controls,
              f"the server counted as forged exactly the {controls} pushes of the probe "
              f"holding the key, nothing of the others ({srv})")
        check(srv.get("refused_handshakes", 0) >= 3,
              "the server refused the 3 probes without the key")
        check(srv.get("dropped_messages") == 0, "the server dropped no malformed message")
        check(sch.get("refused_joins") == 0,
              f"the scheduler never saw a stranger's join ({sch})")
        check(sch.get("refused_handshakes", 0) >= 2,
              "the scheduler refused both strangers' connections")
    finally:
        for p in procs:
            p.kill()


def scenario_no_key(args):
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PS_", "DMLC_"))}
    base.update({"PS_ROLE": "worker", "PS_NUM_WORKER": "1", "PS_NUM_SERVER": "1",
                 "PS_SCHEDULER_URI": "127.0.0.1", "PS_SCHEDULER_PORT": str(port),
                 "GLOG_logtostderr": "1"})
    workdir = new_workdir()
    loose = os.path.join(workdir, "loose.key")
    with open(loose, "w") as f:
        f.write(new_key() + "\n")
    os.chmod(loose, 0o644)
    for extra, says in (({"PS_SECURE": "1"}, "PS_CURVE_SECRET_KEY_FILE"),
                        ({"PS_SECURE": "1", "PS_CURVE_SECRET_KEY_FILE": loose}, "chmod 600"),
                        ({"PS_SECURE": "1", "PS_CURVE_SECRET_KEY": "x" * 39}, "Z85")):
        started = time.monotonic()
        node = Proc("node", [args.app], dict(base, **extra))
        rc = node.wait(30)
        took = time.monotonic() - started
        check(rc == 3 and "START FAILED" in node.text() and says in node.text() and took < 10,
              f"{sorted(extra)} stops the node at start in {took:.1f} s saying '{says}'")
        if rc != 3:
            print(node.text()[-1500:])
    key = new_key()
    launch = [sys.executable, args.launch, "-n", "1", "-s", "1"]
    for argv, extra, says in (
            (["--secure", "--env", f"PS_CURVE_SECRET_KEY={key}"], {}, "command line"),
            ([], {"PS_CURVE_SECRET_KEY": key}, "--secure"),
            (["--secure"], {"PS_SECURE": "0"}, "disagree")):
        run = Proc("launch", launch + argv + ["--", args.app], dict(base, **extra),
                   stderr_apart=True)
        rc = run.wait(30)
        check(rc == 2 and says in run.err_text() and key not in run.err_text(),
              f"tracker/launch {' '.join(a.split('=')[0] for a in argv)} with "
              f"{sorted(extra)} is a usage error saying '{says}'")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("scenario", choices=("launch", "strangers", "no_key"))
    p.add_argument("--app", required=True)
    p.add_argument("--probe")
    p.add_argument("--launch")
    p.add_argument("--no-curve", action="store_true",
                   help="strangers: run the job without CURVE (the test must fail)")
    args = p.parse_args()
    {"launch": scenario_launch, "strangers": scenario_strangers,
     "no_key": scenario_no_key}[args.scenario](args)
    if failures:
        print(f"{len(failures)} check(s) failed:", *failures, sep="\n  ")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
