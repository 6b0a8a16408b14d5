#!/usr/bin/env python3
"""Tests for tracker/launch's ssh, mpirun and srun launchers.

Usage: test_remote_launchers.py [--hello PATH] [unittest options and test names]
(PATH: the hello app to run; build/apps/hello by default)

No sshd and no Slurm are needed: tests/tracker/fake_ssh runs the remote command on
this host (hosts 127.0.0.1, 127.0.0.2 and 127.0.0.3 all live here, so each node
binds the address of its own "host"), and tests/tracker/fake_srun starts the tasks
of a step here. The mpirun tests run Open MPI's or MPICH's real mpirun and are
skipped without one; the real Slurm test is skipped unless `sinfo` works. As in
test_launch.py, every node command carries a per-test marker, by which the tests
check through /proc that nothing survives a job, on any "host".
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

# A node's log line as the launcher prints it: "[worker 0] " then glog's "I20261201 ...".
GLOG_LINE = re.compile(r"^\[[a-z]+ \d+\] [IWEF]\d{8} ")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tracker"))
import launchers  # noqa: E402
import node_entry  # noqa: E402
import ports  # noqa: E402
from test_launch import LAUNCH, LIMIT_S, NODE, marker_pids  # noqa: E402

# The ssh launcher hands remote nodes only PS_* and DMLC_* variables: under
# tests/sanitizer/run, its options (suppressions, report files) go along explicitly.
SANITIZER_ENV = [a for k in ("TSAN_OPTIONS", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS")
                 if k in os.environ for a in ("--env", f"{k}={os.environ[k]}")]

FAKE_SSH = os.path.join(HERE, "fake_ssh")
FAKE_SRUN = os.path.join(HERE, "fake_srun")
HELLO = os.path.join(REPO, "build", "apps", "hello")
if __name__ == "__main__" and "--hello" in sys.argv:
    # CTest passes the build's hello (nothing when the build has no apps).
    at = sys.argv.index("--hello")
    HELLO = sys.argv[at + 1] if at + 1 < len(sys.argv) else ""
    del sys.argv[at:at + 2]
HOSTS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
MPIRUN = shutil.which("mpirun")


def hello_lines(workers):
    total = 3 * workers * (workers + 1) // 2  # 3 rounds of rank + 1 from each worker
    return [f"[worker {i}] worker {i}: pulled 1000 keys x 4 values, all equal {total}: OK"
            for i in range(workers)]


def free_port():
    return str(ports.free_port("127.0.0.1"))


def slurm_works():
    if not shutil.which("sinfo") or not shutil.which("salloc"):
        return False
    try:
        return subprocess.run(["sinfo"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


class JobTest(unittest.TestCase):
    """Runs the launcher with a marker in every node command and checks that no
    marked process survives."""

    def setUp(self):
        self.marker = f"herdps-remote-test-{uuid.uuid4().hex}"
        self.tmp = tempfile.TemporaryDirectory()
        self.hostfile = os.path.join(self.tmp.name, "hosts")
        with open(self.hostfile, "w") as f:
            f.write("# three hosts, all on loopback\n")
            f.write("\n".join(f"{h} slots=2" for h in HOSTS) + "\n")

    def tearDown(self):
        for pid in marker_pids(self.marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        self.tmp.cleanup()

    def launch(self, *args, env=None):
        full = dict(os.environ)
        full.update(env or {})
        return subprocess.run([sys.executable, LAUNCH, *SANITIZER_ENV, *args],
                              capture_output=True, text=True, timeout=LIMIT_S, env=full)

    def start(self, *args, env=None):
        full = dict(os.environ)
        full.update(env or {})
        return subprocess.Popen([sys.executable, LAUNCH, *SANITIZER_ENV, *args], env=full,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def node_cmd(self, mode):
        return [sys.executable, "-c", NODE, mode, self.marker]

    def wait_for_grandchildren(self, count):
        """Waits until count nodes run (each starts one marked grandchild)."""
        deadline = time.monotonic() + LIMIT_S
        while len(marker_pids(self.marker + "-grandchild")) < count:
            self.assertLess(time.monotonic(), deadline, "nodes never started")
            time.sleep(0.05)

    def assert_nothing_left(self, within=2.0):
        deadline = time.monotonic() + within
        while marker_pids(self.marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(marker_pids(self.marker), [])

    def node_lines(self, stdout):
        """The nodes' own output lines, without their log lines (glog: "I1201 ...")."""
        return sorted(l for l in stdout.splitlines()
                      if l.startswith(("[server", "[worker")) and not GLOG_LINE.match(l))

    def assert_hello(self, r, workers):
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(self.node_lines(r.stdout), hello_lines(workers))

    def stop_with(self, proc, sig, nodes):
        try:
            self.wait_for_grandchildren(nodes)
            start = time.monotonic()
            proc.send_signal(sig)
            _, err = proc.communicate(timeout=LIMIT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertLess(time.monotonic() - start, 10)
        return err


SSH = ["--launcher", "ssh", "--ssh-command", FAKE_SSH]


class SshLauncherTest(JobTest):
    def setUp(self):
        super().setUp()
        self.ssh = [*SSH, "-H", self.hostfile]

    @unittest.skipUnless(os.access(HELLO, os.X_OK), f"no {HELLO}")
    def test_hello_over_three_hosts_is_exact(self):
        r = self.launch(*self.ssh, "-n", "4", "-s", "2", "--timeout", "60", "--", HELLO)
        self.assert_hello(r, 4)

    @unittest.skipUnless(os.access(HELLO, os.X_OK), f"no {HELLO}")
    def test_hello_with_the_scheduler_on_the_first_host_is_exact(self):
        r = self.launch(*self.ssh, "--scheduler-on", "first-host", "--port", free_port(),
                        "-n", "3", "-s", "1", "--timeout", "60", "--", HELLO)
        self.assert_hello(r, 3)

    def test_nodes_go_round_robin_and_advertise_their_hosts_address(self):
        show = ('echo "${FAKE_SSH_HOST:-here} $PS_NODE_HOST $DMLC_NODE_HOST '
                '$PS_SCHEDULER_URI $PS_NUM_WORKER $PS_NUM_SERVER {role} $PS_RANK '
                '$A ${PS_FROM_LAUNCHER:-unset} ${HERDPS_NOT_PASSED:-unset}"')
        r = self.launch(*self.ssh, "-n", "3", "-s", "2", "--env", "A=b", "--",
                        "sh", "-c", show,
                        env={"PS_FROM_LAUNCHER": "yes", "HERDPS_NOT_PASSED": "x"})
        self.assertEqual(r.returncode, 0, r.stderr)
        got = {l.split("] ")[0][1:]: l.split("] ")[1].split() for l in r.stdout.splitlines()}
        common = ["127.0.0.1", "3", "2"]
        self.assertEqual(got["scheduler"],
                         ["here", "127.0.0.1", "127.0.0.1", *common, "scheduler", "0",
                          "b", "yes", "x"])
        placed = [("server 0", 0), ("server 1", 1), ("worker 0", 2), ("worker 1", 0),
                  ("worker 2", 1)]
        for label, host in placed:
            role, rank = label.split()
            self.assertEqual(got[label], [HOSTS[host], HOSTS[host], HOSTS[host], *common,
                                          role, rank, "b", "yes", "unset"], label)

    def test_failure_on_one_host_stops_every_host(self):
        start = time.monotonic()
        r = self.launch(*self.ssh, "-n", "3", "-s", "2", "--", *self.node_cmd("fail"))
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(r.returncode, 1, r.stderr)
        # worker 1 is the 4th of server 0, server 1, worker 0, worker 1: HOSTS[0].
        self.assertIn("launch: worker 1 on 127.0.0.1 exited with code 1; stopping the "
                      "other nodes", r.stderr)
        self.assertIn("[worker 2] ready", r.stdout)  # on 127.0.0.2
        self.assert_nothing_left()

    def test_node_killed_by_a_signal_is_reported_as_such(self):
        r = self.launch(*self.ssh, "-n", "2", "-s", "1", "--", *self.node_cmd("signal"))
        self.assertEqual(r.returncode, 128 + signal.SIGKILL, r.stderr)
        self.assertIn("worker 1 on 127.0.0.3 was killed by signal 9 (SIGKILL)", r.stderr)
        self.assert_nothing_left()

    def test_sigterm_to_the_launcher_stops_every_host(self):
        proc = self.start(*self.ssh, "-n", "2", "-s", "2", "--", *self.node_cmd("sleep"))
        self.stop_with(proc, signal.SIGTERM, 5)
        self.assertEqual(proc.returncode, 143)
        self.assert_nothing_left()

    def test_a_killed_launcher_still_stops_every_host(self):
        # Everything on "other hosts": with the scheduler here, SIGKILL would leave
        # its grandchild behind (the local launcher's known limit).
        proc = self.start(*self.ssh, "--scheduler-on", "first-host", "--port", free_port(),
                          "-n", "2", "-s", "1", "--", *self.node_cmd("sleep"))
        self.stop_with(proc, signal.SIGKILL, 4)
        self.assert_nothing_left(within=5.0)

    def test_timeout_stops_every_host(self):
        r = self.launch(*self.ssh, "-n", "2", "-s", "1", "--timeout", "1", "--",
                        *self.node_cmd("sleep"))
        self.assertEqual(r.returncode, 124, r.stderr)
        self.assert_nothing_left()

    def test_escaped_descendant_does_not_hold_the_job(self):
        start = time.monotonic()
        r = self.launch(*self.ssh, "-n", "1", "-s", "1", "--", *self.node_cmd("escape"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(time.monotonic() - start, 10)
        self.assertIn("[worker 0] ready", r.stdout)

    def test_ssh_failure_is_reported_with_the_host(self):
        refuse = ("sh -c 'echo \"ssh: connect to host $0 port 22: Connection refused\" >&2; "
                  "exit 255'")
        r = self.launch("--launcher", "ssh", "-H", self.hostfile, "--ssh-command", refuse,
                        "-n", "1", "-s", "1", "--", "true")
        self.assertEqual(r.returncode, 255, r.stderr)
        self.assertRegex(r.stderr, r"launch: ssh to 127\.0\.0\.\d for (server|worker) 0 "
                         r"failed \(exit 255\); stopping the other nodes")
        self.assertIn("] ssh: connect to host 127.0.0.", r.stdout)

    def test_output_is_prefixed_and_not_lost(self):
        r = self.launch(*self.ssh, "-n", "2", "-s", "1", "--", "sh", "-c",
                        'i=0; while [ $i -lt 3000 ]; do echo "line $i"; i=$((i+1)); done; '
                        "printf 'no newline' >&2")
        self.assertEqual(r.returncode, 0, r.stderr)
        for label in ["scheduler", "server 0", "worker 0", "worker 1"]:
            mine = [l for l in r.stdout.splitlines() if l.startswith(f"[{label}] ")]
            self.assertEqual(len(mine), 3001, label)
            self.assertEqual(mine[2999], f"[{label}] line 2999")
            self.assertIn(f"[{label}] no newline", mine)


@unittest.skipUnless(os.access(HELLO, os.X_OK), f"no {HELLO}")
class InterfaceTest(JobTest):
    def test_interface_is_passed_and_node_host_left_to_the_runtime(self):
        show = 'echo "$PS_INTERFACE $DMLC_INTERFACE ${PS_NODE_HOST:-unset} $PS_SCHEDULER_URI"'
        for launcher in (["--launcher", "local"], [*SSH, "-H", self.hostfile]):
            with self.subTest(launcher=launcher[1]):
                r = self.launch(*launcher, "--interface", "lo", "-n", "2", "-s", "1", "--",
                                "sh", "-c", show, env={"PS_NODE_HOST": "10.9.9.9"})
                self.assertEqual(r.returncode, 0, r.stderr)
                lines = [l.split("] ")[1] for l in r.stdout.splitlines()]
                self.assertEqual(lines, ["lo lo unset 127.0.0.1"] * 4, r.stdout)

    def test_hello_with_interface_lo(self):
        r = self.launch(*SSH, "-H", self.hostfile, "--interface", "lo", "-n", "2",
                        "-s", "1", "--timeout", "60", "--", HELLO)
        self.assert_hello(r, 2)


@unittest.skipUnless(MPIRUN, "mpirun not found (Debian: apt-get install openmpi-bin)")
class MpirunLauncherTest(JobTest):
    MPI = ["--launcher", "mpirun"]

    @unittest.skipUnless(os.access(HELLO, os.X_OK), f"no {HELLO}")
    def test_hello_as_mpi_ranks_is_exact(self):
        r = self.launch(*self.MPI, "-n", "4", "-s", "2", "--timeout", "60", "--", HELLO)
        self.assert_hello(r, 4)

    def test_ranks_become_servers_then_workers(self):
        with open(self.hostfile, "w") as f:
            f.write("localhost slots=8\n")
        show = ('echo "{role} $PS_ROLE $DMLC_ROLE $PS_RANK $PS_NUM_WORKER $PS_NUM_SERVER '
                '${PS_NODE_HOST:-unset} $PS_SCHEDULER_URI $A"')
        r = self.launch(*self.MPI, "-H", self.hostfile, "-n", "4", "-s", "2",
                        "--workers-per-process", "2", "--env", "A=b", "--",
                        "sh", "-c", show)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(self.node_lines(r.stdout), [
            "[server 0] server server server 0 4 2 unset 127.0.0.1 b",
            "[server 1] server server server 1 4 2 unset 127.0.0.1 b",
            "[worker 0] worker worker worker 0 4 2 unset 127.0.0.1 b",
            "[worker 1] worker worker worker 1 4 2 unset 127.0.0.1 b"])

    def test_failure_of_one_rank_stops_everything(self):
        start = time.monotonic()
        r = self.launch(*self.MPI, "-n", "3", "-s", "2", "--", *self.node_cmd("fail"))
        self.assertLess(time.monotonic() - start, 15)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"launch: worker 1 on \S+ exited with code 1; "
                         r"stopping the other nodes")
        self.assertIn("[worker 0] ready", r.stdout)
        self.assert_nothing_left()

    def test_sigterm_to_the_launcher_stops_every_rank(self):
        proc = self.start(*self.MPI, "-n", "2", "-s", "1", "--", *self.node_cmd("sleep"))
        self.stop_with(proc, signal.SIGTERM, 4)
        self.assertEqual(proc.returncode, 143)
        self.assert_nothing_left()


class SrunLauncherTest(JobTest):
    SRUN = ["--launcher", "srun", "--srun-command", FAKE_SRUN]
    IN_JOB = {"SLURM_JOB_ID": "4242"}

    @unittest.skipUnless(os.access(HELLO, os.X_OK), f"no {HELLO}")
    def test_hello_as_slurm_tasks_is_exact(self):
        r = self.launch(*self.SRUN, "-n", "4", "-s", "2", "--timeout", "60", "--", HELLO,
                        env=self.IN_JOB)
        self.assert_hello(r, 4)

    def test_tasks_become_servers_then_workers(self):
        r = self.launch(*self.SRUN, "-n", "2", "-s", "2", "--", "sh", "-c",
                        'echo "{role} $PS_RANK $SLURM_PROCID ${PS_NODE_HOST:-unset}"',
                        env=self.IN_JOB)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.node_lines(r.stdout), [
            "[server 0] server 0 0 unset", "[server 1] server 1 1 unset",
            "[worker 0] worker 0 2 unset", "[worker 1] worker 1 3 unset"])

    def test_failure_of_one_task_stops_everything(self):
        start = time.monotonic()
        r = self.launch(*self.SRUN, "-n", "3", "-s", "2", "--", *self.node_cmd("fail"),
                        env=self.IN_JOB)
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"launch: worker 1 on \S+ exited with code 1; "
                         r"stopping the other nodes")
        self.assertIn("[srun] srun: error: task 3: Exited with exit code 1", r.stdout)
        self.assert_nothing_left()

    def test_sigterm_to_the_launcher_stops_every_task(self):
        proc = self.start(*self.SRUN, "-n", "2", "-s", "1", "--", *self.node_cmd("sleep"),
                          env=self.IN_JOB)
        self.stop_with(proc, signal.SIGTERM, 4)
        self.assertEqual(proc.returncode, 143)
        self.assert_nothing_left()


@unittest.skipUnless(slurm_works(), "no working Slurm (sinfo)")
@unittest.skipUnless(os.access(HELLO, os.X_OK), f"no {HELLO}")
class RealSlurmTest(JobTest):
    def test_hello_in_a_salloc_allocation_is_exact(self):
        r = subprocess.run(["salloc", "--ntasks=6", "--time=2", sys.executable, LAUNCH,
                            "--launcher", "srun", "-n", "4", "-s", "2", "--timeout", "60",
                            "--", HELLO], capture_output=True, text=True, timeout=180)
        self.assert_hello(r, 4)


class SecretTest(JobTest):
    """PS_JOB_TOKEN reaches every node but no command line of any process."""

    def check(self, args, nodes, env=None):
        token = f"herdps-secret-{uuid.uuid4().hex}"
        proc = self.start(*args, "--", *self.node_cmd("sleep"),
                          env=dict(env or {}, PS_JOB_TOKEN=token))
        try:
            self.wait_for_grandchildren(nodes)
            self.assertEqual(marker_pids(token), [])  # every /proc/*/cmdline
            tokens = set()
            for pid in marker_pids(self.marker):
                try:
                    with open(f"/proc/{pid}/environ", "rb") as f:
                        environ = f.read().split(b"\0")
                except OSError:
                    continue
                tokens.update(v for v in environ if v.startswith(b"PS_JOB_TOKEN="))
            self.assertEqual(tokens, {f"PS_JOB_TOKEN={token}".encode()})
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=LIMIT_S)
        self.assert_nothing_left()

    def test_ssh(self):
        self.check([*SSH, "-H", self.hostfile, "-n", "2", "-s", "1"], 4)

    @unittest.skipUnless(MPIRUN, "mpirun not found")
    def test_mpirun(self):
        self.check(["--launcher", "mpirun", "-n", "2", "-s", "1"], 4)

    def test_srun(self):
        self.check(["--launcher", "srun", "--srun-command", FAKE_SRUN, "-n", "2", "-s", "1"],
                   4, env={"SLURM_JOB_ID": "1"})


class UsageTest(JobTest):
    def test_usage_errors_start_nothing(self):
        flag = os.path.join(self.tmp.name, "started")
        touch = ["--", "sh", "-c", 'touch "$0"', flag]
        empty = os.path.join(self.tmp.name, "empty")
        with open(empty, "w") as f:
            f.write("# nothing\n\n")
        n1s1 = ["-n", "1", "-s", "1"]
        no_slurm = {"SLURM_JOB_ID": ""}
        cases = [
            (["--launcher", "ssh", *n1s1], "needs -H/--hostfile"),
            ([*SSH, "-H", os.path.join(self.tmp.name, "missing"), *n1s1], "cannot read"),
            ([*SSH, "-H", empty, *n1s1], "names no host"),
            (["-H", self.hostfile, *n1s1], "for the ssh and mpirun launchers"),
            ([*SSH, "-H", self.hostfile, "--scheduler-on", "first-host", *n1s1],
             "needs --port"),
            (["--scheduler-on", "first-host", "--port", "5", *n1s1], "for the ssh launcher"),
            ([*SSH, "-H", self.hostfile, "--transport", "ipc", *n1s1], "reaches only this host"),
            (["--launcher", "ssh", "--ssh-command", "herdps-no-such-ssh", "-H", self.hostfile,
              *n1s1], "not found"),
            (["--launcher", "mpirun", "--mpirun-command", "herdps-no-such-mpirun", *n1s1],
             "not found"),
            (["--launcher", "srun", "--srun-command", FAKE_SRUN, *n1s1], "SLURM_JOB_ID"),
            (["--interface", "herdps-no-such-if0", *n1s1], "no such interface"),
        ]
        for args, why in cases:
            with self.subTest(args=args):
                r = self.launch(*args, *touch, env=no_slurm)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("launch: error:", r.stderr)
                self.assertIn(why, r.stderr)
                self.assertEqual(r.stdout, "")
                self.assertFalse(os.path.exists(flag))

    def test_help_names_the_launchers_and_their_options(self):
        r = self.launch("-h")
        for word in ["ssh", "mpirun", "srun", "--hostfile", "--scheduler-on",
                     "--interface", "--ssh-command", "--mpirun-command", "--srun-command",
                     "PS_INTERFACE", "DMLC_INTERFACE"]:
            self.assertIn(word, r.stdout)


class PartsTest(unittest.TestCase):
    """The pieces of the launchers, without processes."""

    def test_host_file_takes_first_words_without_comments_or_mpich_slots(self):
        with tempfile.NamedTemporaryFile("w", suffix=".hosts", delete=False) as f:
            f.write("# cluster\nnode1 slots=4\n\n  user@node2   # spare\nnode3:8\n")
        try:
            self.assertEqual(launchers.read_host_file(f.name),
                             ["node1", "user@node2", "node3"])
        finally:
            os.unlink(f.name)

    def test_round_robin_placement(self):
        self.assertEqual(launchers.place_round_robin(5, ["a", "b"]),
                         ["a", "b", "a", "b", "a"])
        self.assertEqual(launchers.place_round_robin(3, ["a", "b", "c"], start=1),
                         ["b", "c", "a"])

    def test_ranks_map_to_servers_then_workers(self):
        env = {"PMI_RANK": "4", "OMPI_COMM_WORLD_RANK": "1"}
        names = launchers.MPI_RANK_VARS
        self.assertEqual(node_entry.rank_role(names, 2, 5, env), ("server", 1))
        self.assertEqual(node_entry.rank_role(names, 2, 5, {"PMI_RANK": "4"}), ("worker", 2))
        with self.assertRaisesRegex(ValueError, "not in 0..4"):
            node_entry.rank_role(names, 2, 5, {"PMIX_RANK": "5"})
        with self.assertRaisesRegex(ValueError, "none of"):
            node_entry.rank_role(names, 2, 5, {"SLURM_PROCID": "0"})

    def test_environment_travels_on_stdin_intact(self):
        import io
        env = {"PS_JOB_TOKEN": "s3cr=t", "EMPTY": "", "UNICODE": "ünï"}
        stream = io.BytesIO(launchers.ssh_stdin(env))
        source = stream.read(int(stream.readline()))
        self.assertIn(b"def read_stdin_env", source)
        self.assertEqual(node_entry.read_stdin_env(stream), env)

    def test_remote_command_has_no_environment_values(self):
        argv = launchers.ssh_argv(["ssh"], "h1", "/work dir", "worker 0", 1.0,
                                  ["app", "--flag", "{x}"])
        self.assertEqual(argv[:2], ["ssh", "h1"])
        self.assertEqual(len(argv), 3)
        self.assertTrue(argv[2].startswith("cd '/work dir' && exec python3 -c "))
        self.assertNotIn("PS_", argv[2])


if __name__ == "__main__":
    unittest.main()
