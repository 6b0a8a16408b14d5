#!/usr/bin/env python3
"""Tests for tracker/launch, the HerdPS job launcher.

Nodes are small Python / shell programs, so no C++ build is needed. Every
node command carries a per-test marker string in its argv, which lets the
tests check through /proc that no node (or node descendant) survives the
launcher, and lets tearDown kill any survivor so a failing test leaves
nothing behind.
"""

import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = os.path.normpath(os.path.join(HERE, "..", "..", "tracker", "launch"))
LIMIT_S = 30

# Node program run as `python3 -c NODE MODE MARKER`. Every mode first starts
# a grandchild that sleeps, so that cleanup of whole process groups is
# exercised too, then says "ready".
NODE = r"""
import os, signal, subprocess, sys, time
mode, marker = sys.argv[1], sys.argv[2]
role, rank = os.environ["PS_ROLE"], int(os.environ["PS_RANK"])
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                  marker + "-grandchild"])
print("ready", flush=True)
me = role == "worker" and rank == 1
if mode == "fail" and me:
    time.sleep(0.5)
    sys.exit(1)
if mode == "signal" and me:
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)
if mode == "escape":
    # A descendant in its own session keeps the output pipe open after the
    # node exits; the launcher must not wait for it.
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                      marker + "-escaped"], start_new_session=True)
    sys.exit(0)
time.sleep(60)
"""


# Node program run as `python3 -c JOB_NODE GO DONE MARKER` under --job-file: each node
# says what it got; the scheduler says that every node joined once GO exists (the
# launcher writes the job file then, not before); every node waits for DONE. A server
# without PS_RANK, as --add-servers starts, only says what it got.
JOB_NODE = r"""
import os, sys, time
go, done = sys.argv[1], sys.argv[2]
print("role=%s rank=%s token=%s cwd=%s" % (os.environ["PS_ROLE"],
      os.environ.get("PS_RANK", "none"), os.environ["PS_JOB_TOKEN"], os.getcwd()),
      flush=True)
if "PS_RANK" not in os.environ:
    sys.exit(0)
deadline = time.monotonic() + 20
if os.environ["PS_ROLE"] == "scheduler":
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.05)
    print("all 3 nodes joined (1 servers, 1 workers)", flush=True)
while not os.path.exists(done) and time.monotonic() < deadline:
    time.sleep(0.05)
"""

# Node program run by --add-servers as `python3 -c ADDED_NODE MODE MARKER`: says what it
# got, then "ready". MODE leave: on SIGTERM it says "leaving" and exits 0, as a server
# with PS_LEAVE_ON_SIGTERM=1 does. MODE one_fails: the first server to start exits 3, the
# other says "done" 1 s later and exits 0.
ADDED_NODE = r"""
import os, signal, sys, time
mode = sys.argv[1]
print("role=%s rank=%s x=%s y=%s cwd=%s" % (os.environ.get("PS_ROLE"),
      os.environ.get("PS_RANK", "none"), os.environ.get("PS_X"),
      os.environ.get("PS_Y", "none"), os.getcwd()), flush=True)
if mode == "leave":
    def leave(*_):
        print("leaving", flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, leave)
    print("ready", flush=True)
    time.sleep(30)
    sys.exit(1)
try:
    os.close(os.open("first", os.O_CREAT | os.O_EXCL))
    sys.exit(3)
except FileExistsError:
    time.sleep(1)
    print("done", flush=True)
"""


def marker_pids(marker):
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if marker.encode() in cmdline:
            pids.append(int(entry))
    return pids


class LaunchTest(unittest.TestCase):
    def setUp(self):
        self.marker = f"herdps-launch-test-{uuid.uuid4().hex}"

    def tearDown(self):
        for pid in marker_pids(self.marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def launch(self, *args, **kw):
        return subprocess.run([sys.executable, LAUNCH, *args],
                              capture_output=True, text=True,
                              timeout=LIMIT_S, **kw)

    def node_cmd(self, mode):
        return [sys.executable, "-c", NODE, mode, self.marker]

    def assert_nothing_left(self):
        # A SIGKILLed process can take a moment to disappear from /proc.
        deadline = time.monotonic() + 1.0
        while marker_pids(self.marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(marker_pids(self.marker), [])

    def wait_for_processes(self, count):
        deadline = time.monotonic() + LIMIT_S
        while len(marker_pids(self.marker)) < count:
            self.assertLess(time.monotonic(), deadline, "nodes never started")
            time.sleep(0.05)

    def test_launcher_is_executable(self):
        self.assertTrue(os.access(LAUNCH, os.X_OK))

    def test_all_nodes_succeed(self):
        echo = ('echo "$PS_ROLE $PS_RANK $PS_NUM_WORKER $PS_NUM_SERVER '
                '$PS_SCHEDULER_URI $PS_SCHEDULER_PORT $PS_NODE_HOST '
                '$PS_TRANSPORT"; '
                'echo "dmlc $DMLC_ROLE $DMLC_NUM_WORKER $DMLC_NUM_SERVER '
                '$DMLC_PS_ROOT_URI $DMLC_PS_ROOT_PORT $DMLC_NODE_HOST"; '
                'echo "to stderr" >&2')
        r = self.launch("-n", "3", "-s", "2", "--", "sh", "-c", echo)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        ports = set()
        for label, role, rank in [("scheduler", "scheduler", 0),
                                  ("server 0", "server", 0),
                                  ("server 1", "server", 1),
                                  ("worker 0", "worker", 0),
                                  ("worker 1", "worker", 1),
                                  ("worker 2", "worker", 2)]:
            mine = [l[len(label) + 3:] for l in lines
                    if l.startswith(f"[{label}] ")]
            self.assertEqual(len(mine), 3, r.stdout)
            ps = mine[0].split()
            self.assertEqual(ps[:5], [role, str(rank), "3", "2", "127.0.0.1"])
            self.assertEqual(ps[6:], ["127.0.0.1", "tcp"])
            self.assertEqual(
                mine[1].split(),
                ["dmlc", role, "3", "2", "127.0.0.1", ps[5], "127.0.0.1"])
            self.assertIn("to stderr", mine)
            ports.add(ps[5])
        self.assertEqual(len(ports), 1)
        self.assertTrue(1 <= int(ports.pop()) <= 65535)

    def test_output_is_line_prefixed_and_decoded(self):
        script = r"printf 'a\nb\377c\nno newline'"
        r = self.launch("-n", "1", "-s", "1", "--", "sh", "-c", script)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [l for l in r.stdout.splitlines() if l.startswith("[worker 0]")]
        self.assertEqual(lines, ["[worker 0] a", "[worker 0] b\ufffdc",
                                 "[worker 0] no newline"])

    def test_a_line_appears_when_the_node_prints_it(self):
        # Worker 0 prints a line with print() (Python buffers stdout in blocks when it
        # is a pipe, like C's stdio) and then waits, up to a bound, for this test to
        # have seen that line in the launcher's output. Only if the line reaches the
        # launcher when printed, not when the node exits, does the node exit 0.
        code = ("import os, sys, time\n"
                "if os.environ['PS_ROLE'] != 'worker': sys.exit(0)\n"
                "print('ready', sys.argv[2])\n"
                "deadline = time.monotonic() + 20\n"
                "while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:\n"
                "    time.sleep(0.05)\n"
                "sys.exit(0 if os.path.exists(sys.argv[1]) else 3)\n")
        with tempfile.TemporaryDirectory() as tmp:
            seen = os.path.join(tmp, "seen")
            proc = subprocess.Popen(
                [sys.executable, LAUNCH, "-n", "1", "-s", "1", "--", sys.executable, "-c",
                 code, seen, self.marker], stdout=subprocess.PIPE, text=True,
                env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"})
            try:
                lines = []
                for line in proc.stdout:
                    lines.append(line)
                    if line.startswith("[worker 0] ready"):
                        open(seen, "w").close()
                self.assertEqual(proc.wait(timeout=LIMIT_S), 0,
                                 "worker 0's line came only when it exited:\n" +
                                 "".join(lines))
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                proc.stdout.close()

    def test_no_output_is_lost(self):
        r = self.launch("-n", "2", "-s", "1", "--", "sh", "-c",
                        'i=0; while [ $i -lt 5000 ]; do echo "line $i"; '
                        'i=$((i+1)); done')
        self.assertEqual(r.returncode, 0, r.stderr)
        for label in ["scheduler", "server 0", "worker 0", "worker 1"]:
            mine = [l for l in r.stdout.splitlines()
                    if l.startswith(f"[{label}] line ")]
            self.assertEqual(len(mine), 5000, label)
            self.assertEqual(mine[-1], f"[{label}] line 4999")

    def test_failure_stops_everything(self):
        start = time.monotonic()
        r = self.launch("-n", "3", "-s", "2", "--", *self.node_cmd("fail"))
        elapsed = time.monotonic() - start
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertLess(elapsed, 10)
        self.assertIn("launch: worker 1 exited with code 1; stopping the "
                      "other nodes", r.stderr)
        self.assertIn("[worker 0] ready", r.stdout)
        self.assert_nothing_left()

    def test_signal_death_is_a_failure(self):
        start = time.monotonic()
        r = self.launch("-n", "2", "-s", "1", "--", *self.node_cmd("signal"))
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(r.returncode, 128 + signal.SIGKILL, r.stderr)
        self.assertIn("worker 1 was killed by signal 9", r.stderr)
        self.assert_nothing_left()

    def test_timeout(self):
        start = time.monotonic()
        r = self.launch("-n", "2", "-s", "1", "--timeout", "1", "--",
                        *self.node_cmd("sleep"))
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(r.returncode, 124, r.stderr)
        self.assertIn("launch: timeout after 1 s; stopping all nodes", r.stderr)
        self.assert_nothing_left()

    def _interrupt(self, sig, expected):
        proc = subprocess.Popen(
            [sys.executable, LAUNCH, "-n", "2", "-s", "1", "--",
             *self.node_cmd("sleep")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # 4 nodes, each with one grandchild.
            self.wait_for_processes(8)
            start = time.monotonic()
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=LIMIT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(proc.returncode, expected, err)
        self.assert_nothing_left()

    def test_sigint(self):
        self._interrupt(signal.SIGINT, 130)

    def test_sigterm(self):
        self._interrupt(signal.SIGTERM, 143)

    def test_escaped_descendant_does_not_block_exit(self):
        start = time.monotonic()
        r = self.launch("-n", "1", "-s", "1", "--", *self.node_cmd("escape"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(time.monotonic() - start, 10)
        self.assertIn("[worker 0] ready", r.stdout)

    def test_usage_errors(self):
        with tempfile.TemporaryDirectory() as tmp:
            flag = os.path.join(tmp, "started")
            touch = ["sh", "-c", 'touch "$0"', flag]
            cases = [
                ["-n", "1", "-s", "1"],
                ["-n", "1", "-s", "1", "sh", "-c", "true"],
                ["-n", "1", "-s", "1", "--"],
                ["-n", "1", "-s", "1", "--", "herdps-no-such-command-x"],
                ["-n", "1", "-s", "1", "--", os.path.join(tmp, "missing")],
                ["-n", "0", "-s", "1", "--", *touch],
                ["-n", "x", "-s", "1", "--", *touch],
                ["-n", "1", "-s", "0", "--", *touch],
                ["-s", "1", "--", *touch],
                ["-n", "1", "-s", "1", "--env", "NOEQUALS", "--", *touch],
                ["-n", "1", "-s", "1", "--env", "=v", "--", *touch],
                ["-n", "1", "-s", "1", "--transport", "udp", "--", *touch],
                ["-n", "1", "-s", "1", "--launcher", "ssh", "--", *touch],
                ["-n", "1", "-s", "1", "--consistency", "ssp", "--", *touch],
                ["-n", "1", "-s", "1", "--consistency", "ssp:-1", "--", *touch],
                ["-n", "1", "-s", "1", "--consistency", "ssp:1.5", "--", *touch],
                ["-n", "1", "-s", "1", "--consistency", "ssp:1000001", "--", *touch],
                ["-n", "1", "-s", "1", "--consistency", "sync", "--", *touch],
                ["-n", "1", "-s", "1", "--consistency", "bsp",
                 "--env", "PS_CONSISTENCY=asp", "--", *touch],
            ]
            for args in cases:
                with self.subTest(args=args):
                    r = self.launch(*args)
                    self.assertEqual(r.returncode, 2, r.stderr)
                    self.assertIn("launch: error:", r.stderr)
                    self.assertEqual(r.stdout, "")
                    self.assertFalse(os.path.exists(flag))

    def test_a_command_without_dashes_is_named_with_the_fix(self):
        # Forgetting '--' is the commonest slip: the error names the words taken for
        # the node command and shows where '--' goes; nothing starts.
        with tempfile.TemporaryDirectory() as tmp:
            flag = os.path.join(tmp, "started")
            r = self.launch("-n", "1", "-s", "1", "sh", "-c", 'touch "$0"', flag)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("launch: error: unrecognized arguments: sh -c", r.stderr)
            self.assertIn("put '--' before it: launch [options] -- sh -c", r.stderr)
            self.assertFalse(os.path.exists(flag))
        r = self.launch("-n", "1", "-s", "1")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("missing '--' before the node command", r.stderr)

    def write_job_file(self, directory, command, env=None):
        path = os.path.join(directory, "job.json")
        job = {"format": 1, "command": command, "cwd": directory,
               "env": env or {"PS_ROLE": "server", "PS_JOB_TOKEN": "t" * 32}}
        with open(path, "w") as f:
            json.dump(job, f)
        return path

    def test_add_servers_usage_errors(self):
        with tempfile.TemporaryDirectory() as tmp:
            flag = os.path.join(tmp, "started")
            good = self.write_job_file(tmp, ["sh", "-c", 'touch "$0"', flag])
            not_json = os.path.join(tmp, "not.json")
            with open(not_json, "w") as f:
                f.write("PS_JOB_TOKEN=x\n")
            no_command = os.path.join(tmp, "no-command.json")
            with open(no_command, "w") as f:
                json.dump({"format": 1, "env": {}, "command": [], "cwd": tmp}, f)
            cases = [
                (["--add-servers", "0", "--job-file", good], "--add-servers must be >= 1"),
                (["--add-servers", "-2", "--job-file", good], "--add-servers must be >= 1"),
                (["--add-servers", "x", "--job-file", good], "invalid int value"),
                (["--add-servers", "1"], "--add-servers needs --job-file PATH"),
                (["--add-servers", "1", "--job-file", os.path.join(tmp, "missing.json")],
                 "cannot read it (No such file or directory)"),
                (["--add-servers", "1", "--job-file", tmp], "cannot read it"),
                (["--add-servers", "1", "--job-file", not_json], "not a job file"),
                (["--add-servers", "1", "--job-file", no_command],
                 "its 'command' is not a non-empty list"),
                (["--add-servers", "1", "--job-file", good, "-n", "1"],
                 "-n/--num-workers is an option for starting a job"),
                (["--add-servers", "1", "--job-file", good, "--port", "9000"],
                 "--port is an option for starting a job"),
                (["--add-servers", "1", "--job-file", good, "--env", "PS_RANK=3"],
                 "the scheduler gives each the next free rank"),
                (["--add-servers", "1", "--job-file", good, "--"],
                 "no server command after '--'"),
                (["--add-servers", "1", "--job-file", good, "--", "herdps-no-such-command-x"],
                 "command not found"),
                (["--add-servers", "1", "--job-file", good, "sh", "-c", "true"],
                 "put '--' before it"),
                (["-n", "1", "-s", "1", "--job-file", os.path.join(tmp, "no", "job.json"),
                  "--", "true"], "cannot create a file in"),
                (["-n", "1", "-s", "1", "--job-file", tmp, "--", "true"], "is a directory"),
            ]
            for args, message in cases:
                with self.subTest(args=args):
                    r = self.launch(*args)
                    self.assertEqual(r.returncode, 2, r.stderr)
                    self.assertIn("launch: error:", r.stderr)
                    self.assertIn(message, r.stderr)
                    self.assertEqual(r.stdout, "")
                    self.assertFalse(os.path.exists(flag))

    def test_job_file_is_written_once_every_node_joined_and_goes_with_the_job(self):
        with tempfile.TemporaryDirectory() as tmp:
            go, done = os.path.join(tmp, "go"), os.path.join(tmp, "done")
            path = os.path.join(tmp, "job.json")
            proc = subprocess.Popen(
                [sys.executable, LAUNCH, "-n", "1", "-s", "1", "--env", "PS_X=job",
                 "--job-file", path, "--", sys.executable, "-c", JOB_NODE, go, done,
                 self.marker, "{role}"],
                cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                self.wait_for_processes(4)  # the launcher and its 3 nodes
                time.sleep(0.5)
                self.assertFalse(os.path.exists(path), "written before every node joined")
                open(go, "w").close()
                deadline = time.monotonic() + LIMIT_S
                while not os.path.exists(path):
                    self.assertLess(time.monotonic(), deadline, "no job file")
                    time.sleep(0.05)
                self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
                with open(path) as f:
                    job = json.load(f)
                added = self.launch("--add-servers", "1", "--job-file", path)
                open(done, "w").close()
                out, err = proc.communicate(timeout=LIMIT_S)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            self.assertEqual(proc.returncode, 0, err)
            self.assertFalse(os.path.exists(path), "the job file outlived the job")
            self.assertIn(f"`tracker/launch --add-servers N --job-file {path}` adds servers",
                          err)
            self.assertEqual(job["cwd"], tmp)
            self.assertEqual(job["command"][-1], "server")
            env = job["env"]
            self.assertEqual(env["PS_ROLE"], "server")
            self.assertEqual(env["DMLC_ROLE"], "server")
            self.assertEqual(env["PS_X"], "job")
            self.assertNotIn("PS_RANK", env)
            token = env["PS_JOB_TOKEN"]
            self.assertIn(f"[server 0] role=server rank=0 token={token} cwd={tmp}", out)
            self.assertEqual(added.returncode, 0, added.stderr)
            self.assertEqual(added.stdout, f"[added server 0] role=server rank=none "
                             f"token={token} cwd={tmp}\n")
            self.assert_nothing_left()

    def test_add_servers_passes_sigterm_on_and_exits_0_when_they_leave(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = self.write_job_file(
                tmp, [sys.executable, "-c", ADDED_NODE, "leave", self.marker],
                {"PS_ROLE": "server", "PS_X": "file", "PS_JOB_TOKEN": "t" * 32})
            # The launcher's own PS_* variables give way to the job file's.
            env = dict(os.environ, PS_RANK="7", PS_Y="mine")
            proc = subprocess.Popen(
                [sys.executable, LAUNCH, "--add-servers", "2", "--job-file", path,
                 "--env", "PS_X=option"], env=env,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                lines, ready = [], 0
                for line in proc.stdout:
                    lines.append(line)
                    ready += line.endswith("] ready\n")
                    if ready == 2:
                        break
                proc.send_signal(signal.SIGTERM)
                out, err = proc.communicate(timeout=LIMIT_S)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            out = "".join(lines) + out
            self.assertEqual(proc.returncode, 0, err)
            for i in (0, 1):
                self.assertIn(f"[added server {i}] role=server rank=none x=option y=none "
                              f"cwd={tmp}\n", out)
                self.assertIn(f"[added server {i}] leaving\n", out)
            self.assertIn("launch: got SIGTERM; passing it on to the added servers", err)
            self.assert_nothing_left()

    def test_a_failed_added_server_sets_the_status_and_the_others_go_on(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = self.write_job_file(
                tmp, [sys.executable, "-c", ADDED_NODE, "one_fails", self.marker])
            r = self.launch("--add-servers", "2", "--job-file", path)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertRegex(r.stderr, r"launch: added server [01] exited with code 3; the "
                             r"other added servers go on")
            self.assertRegex(r.stdout, r"\[added server [01]\] done")
            self.assert_nothing_left()

    def test_help_documents_options_and_env(self):
        r = self.launch("-h")
        self.assertEqual(r.returncode, 0)
        for word in ["--num-workers", "--num-servers", "--host", "--port",
                     "--transport", "--env", "--timeout", "--grace",
                     "--launcher", "--verbose", "--consistency", "--metrics",
                     "--job-file", "--add-servers", "[added server I]",
                     "PS_LEAVE_ON_SIGTERM",
                     "SIGUSR1", "PS_METRICS_PORT",
                     "PS_CONSISTENCY", "PS_ROLE", "PS_RANK",
                     "PS_NUM_WORKER", "PS_NUM_SERVER", "PS_SCHEDULER_URI",
                     "PS_SCHEDULER_PORT", "PS_NODE_HOST", "PS_TRANSPORT",
                     "DMLC_ROLE", "DMLC_NUM_WORKER", "DMLC_NUM_SERVER",
                     "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT",
                     "DMLC_NODE_HOST", "PS_JOB_TOKEN"]:
            self.assertIn(word, r.stdout)

    def test_env_transport_and_port(self):
        r = self.launch("-n", "2", "-s", "1", "--env", "A=B",
                        "--env", "HERDPS_X=1=2", "--transport", "ipc",
                        "--port", "23456", "--verbose", "--",
                        "sh", "-c", 'echo "$A $HERDPS_X $PS_TRANSPORT '
                        '$PS_SCHEDULER_PORT $DMLC_PS_ROOT_PORT"')
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [l for l in r.stdout.splitlines() if l.startswith("[")]
        self.assertEqual(len(lines), 4, r.stdout)
        for line in lines:
            self.assertTrue(line.endswith("] B 1=2 ipc 23456 23456"), line)
        self.assertIn("PS_ROLE=worker", r.stderr)  # --verbose

    def test_consistency_is_set_for_every_node(self):
        for mode in ("bsp", "ssp:3", "asp", "SSP:0"):
            with self.subTest(mode=mode):
                r = self.launch("-n", "2", "-s", "1", "--consistency", mode, "--",
                                "sh", "-c", 'echo "model=$PS_CONSISTENCY"')
                self.assertEqual(r.returncode, 0, r.stderr)
                lines = [l for l in r.stdout.splitlines() if l.startswith("[")]
                self.assertEqual(len(lines), 4, r.stdout)
                for line in lines:
                    self.assertTrue(line.endswith("] model=" + mode), line)

    def test_metrics_port_is_set_for_the_scheduler_only(self):
        r = self.launch("-n", "1", "-s", "1", "--metrics", "127.0.0.1:9187", "--",
                        "sh", "-c", 'echo "metrics=${PS_METRICS_PORT:-unset}"')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("[scheduler] metrics=127.0.0.1:9187", r.stdout)
        self.assertIn("[server 0] metrics=unset", r.stdout)
        self.assertIn("[worker 0] metrics=unset", r.stdout)

    def test_sigusr1_reaches_the_scheduler_only_and_stops_nothing(self):
        # Each node says whether SIGUSR1 is ignored when it starts (the scheduler's is,
        # until its runtime takes it over), then listens for it itself.
        node = (
            "import os, signal, sys, time\n"
            "role = os.environ['PS_ROLE']\n"
            "ignored = signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN\n"
            "signal.signal(signal.SIGUSR1, lambda *_: print('got SIGUSR1', flush=True))\n"
            "print('ready, SIGUSR1 ignored' if ignored else 'ready', flush=True)\n"
            "time.sleep(6)\n")
        proc = subprocess.Popen(
            [sys.executable, LAUNCH, "-n", "1", "-s", "1", "--", sys.executable, "-c", node,
             self.marker], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            self.wait_for_processes(4)  # the launcher and its 3 nodes
            time.sleep(1.5)  # every node has set its handler
            proc.send_signal(signal.SIGUSR1)
            out, err = proc.communicate(timeout=LIMIT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("[scheduler] ready, SIGUSR1 ignored", out)
        self.assertIn("[server 0] ready\n", out)
        self.assertIn("[scheduler] got SIGUSR1", out)
        self.assertNotIn("[server 0] got SIGUSR1", out)
        self.assertNotIn("[worker 0] got SIGUSR1", out)
        self.assertIn("got SIGUSR1; the scheduler prints who waits for whom", err)
        self.assert_nothing_left()

    def test_job_token_is_shared_secret_and_never_shown(self):
        cmd = 'echo "token=$PS_JOB_TOKEN"'
        first = self.launch("-n", "2", "-s", "1", "--verbose", "--", "sh", "-c", cmd)
        second = self.launch("-n", "2", "-s", "1", "--", "sh", "-c", cmd)
        self.assertEqual(first.returncode, 0, first.stderr)
        tokens = {l.split("token=")[1] for l in first.stdout.splitlines() if "token=" in l}
        self.assertEqual(len(tokens), 1, first.stdout)  # one token, every node
        token = tokens.pop()
        self.assertGreaterEqual(len(token), 32)
        self.assertNotIn(token, first.stderr)  # --verbose masks it
        self.assertIn("PS_JOB_TOKEN='<secret>'", first.stderr)
        self.assertNotIn(token, second.stdout)  # a new one per job

    def test_node_exit_code_is_propagated(self):
        r = self.launch("-n", "1", "-s", "1", "--", "sh", "-c",
                        '[ "$PS_ROLE" = server ] && exit 7; exit 0')
        self.assertEqual(r.returncode, 7, r.stderr)
        self.assertIn("server 0 exited with code 7", r.stderr)


if __name__ == "__main__":
    unittest.main()
