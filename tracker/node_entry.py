#!/usr/bin/env python3
"""Runs one HerdPS node on the node's own host, for tracker/launch's ssh, mpirun and
srun launchers.

The entry leads a process group, starts the node command in it, copies the node's
output to the entry's stdout and ends every other process of the group, the node's
descendants included, when the job stops; so nothing outlives the job on any host,
also where the launcher reaches the node only through ssh, mpirun or srun (mpirun
and Slurm signal the whole group themselves). It exits with the node's status
(128+SIG when a signal killed it).

Two ways to learn who the node is and what its environment holds:

  --env-on-stdin   (ssh) The launcher writes the job's variables on stdin, as a
                   decimal byte count, a newline and that many bytes of KEY=VALUE
                   records each ended by a NUL, so no secret (PS_JOB_TOKEN) is ever
                   on a command line. The launcher then keeps stdin open: its end,
                   when the launcher stops the job, dies or loses the connection,
                   stops the node. The launcher sends this file itself on stdin too
                   (see tracker/launchers.py), so the host needs only python3.
  --rank-vars A,B  (mpirun, srun) The job's variables are already in the
                   environment; the first of the variables A, B, ... that is set
                   holds the process's rank R: R < --servers makes server R, the
                   others worker R - servers. The entry sets PS_ROLE, PS_RANK and
                   DMLC_ROLE, replaces "{role}" in the command, and prefixes each
                   output line with "[server R] " / "[worker R] ", since mpirun and
                   srun bring every rank's output back on one stream.

Stop signals: SIGTERM, SIGINT and SIGHUP to the entry stop the group (SIGTERM, then
SIGKILL after --grace seconds) and the entry exits 128+SIG; the entry also gets
SIGTERM when the process that started it dies. When the node fails on its own, the
entry writes one line to stderr, "herdps-entry: exit=N LABEL on HOST exited with
code N" (or "was killed by signal ..."), which the launcher turns into its message.

Linux (/proc, prctl), Python 3.6 or newer, standard library only: it runs on hosts
the launcher does not control.
"""

import argparse
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time

NOTICE = "herdps-entry:"
POLL_S = 0.05
DRAIN_S = 1.0  # silence on the node's pipe, once its group is gone, before giving up
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def parse_args(argv):
    p = argparse.ArgumentParser(prog="herdps-node-entry",
                                usage="%(prog)s (--env-on-stdin | --rank-vars A,B) "
                                "[options] -- CMD [ARGS...]")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--env-on-stdin", action="store_true",
                     help="read the job's variables from stdin; stop on its end")
    how.add_argument("--rank-vars", metavar="A,B",
                     help="the variables that may hold this process's rank")
    p.add_argument("--servers", type=int, default=0, metavar="S",
                   help="with --rank-vars: ranks below S are servers")
    p.add_argument("--processes", type=int, default=0, metavar="N",
                   help="with --rank-vars: the number of ranks the launcher started")
    p.add_argument("--label", default="node",
                   help="the node's name in messages, e.g. 'worker 1' (--env-on-stdin)")
    p.add_argument("--host-label", default=None,
                   help="the host's name in messages (default: its hostname)")
    p.add_argument("--grace", type=float, default=1.0,
                   help="seconds between SIGTERM and SIGKILL")
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        p.error("missing '-- CMD'")
    cut = argv.index("--")
    args = p.parse_args(argv[:cut])
    args.command = argv[cut + 1:]
    return args


def read_stdin_env(stream):
    """Reads the launcher's byte count and KEY=VALUE\\0 records from stream."""
    count = int(stream.readline())
    blob = stream.read(count)
    if len(blob) != count:
        raise ValueError(f"stdin ended after {len(blob)} of {count} bytes of environment")
    env = {}
    for record in blob.split(b"\0"):
        if record:
            key, _, value = record.partition(b"=")
            env[key.decode()] = value.decode("utf-8", "surrogateescape")
    return env


def rank_role(names, servers, processes, environ):
    """(role, rank) of this process, from the first variable of names that is set."""
    for name in names:
        text = environ.get(name)
        if text is not None:
            rank = int(text)
            if not 0 <= rank < processes:
                raise ValueError(f"{name}={text} is not in 0..{processes - 1}: the "
                                 f"launcher started {processes} processes")
            if rank < servers:
                return "server", rank
            return "worker", rank - servers
    raise ValueError(f"none of {', '.join(names)} is set: not started by the launcher's "
                     "mpirun / srun?")


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent():
    """SIGTERM to this process when its parent (sshd's session, mpirun's daemon,
    slurmstepd) dies, so that a vanished launcher side still stops the node."""
    prctl, parent = _prctl(), os.getppid()
    if prctl is not None:
        prctl(ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGTERM))
        prctl(ctypes.c_int(PR_SET_CHILD_SUBREAPER), ctypes.c_ulong(1))
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)


def lead_own_group():
    """Makes the entry's process group the node's too. mpirun signals a rank's whole
    group and sends SIGKILL very soon after SIGTERM, and Slurm ends a step's every
    process: the node and its descendants must be in the group those reach, not in
    one the entry would have to tidy up after the fact."""
    if os.getpgrp() != os.getpid():
        try:
            os.setpgid(0, 0)
        except OSError:
            pass  # a session leader already leads its group
    return os.getpgrp()


def node_setup():
    """preexec_fn of the node: SIGKILL should the entry itself be SIGKILLed by
    someone who does not signal the whole group."""
    prctl, entry = _prctl(), os.getpid()

    def setup():
        if prctl is not None:
            prctl(ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL))
            if os.getppid() != entry:
                os._exit(1)
    return setup


def group_members(pgid):
    """The live processes of group pgid other than the entry (from /proc)."""
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            found.append(int(name))
    return found


def stop_group(node, pgid, grace):
    """SIGTERM to every other process of the group (the node and its descendants),
    SIGKILL to those left after grace seconds. Returns once none is left, or gives
    up 2 s after the SIGKILL (a process stuck in the kernel)."""
    signalled = set()
    kill_at = time.monotonic() + grace
    while True:
        if node.poll() is not None:
            # Reaps adopted orphans of the group (the entry is their subreaper);
            # only now, so that Popen keeps the node's own status.
            try:
                while os.waitid(os.P_PGID, pgid, os.WEXITED | os.WNOHANG) is not None:
                    pass
            except ChildProcessError:
                pass
        members = group_members(pgid)
        now = time.monotonic()
        if not members or now > kill_at + 2.0:
            return
        for pid in members:
            sig = signal.SIGKILL if now >= kill_at else signal.SIGTERM
            if sig == signal.SIGKILL or pid not in signalled:
                signalled.add(pid)
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        time.sleep(0.02)


def write_all(fd, data):
    while data:
        try:
            data = data[os.write(fd, data):]
        except BrokenPipeError:
            return  # nobody reads us any more; keep draining the node


def copy_output(node, prefix, state):
    for raw in iter(node.stdout.readline, b""):
        state["last_output"] = time.monotonic()
        if prefix:
            raw = prefix + raw.rstrip(b"\r\n") + b"\n"
        write_all(1, raw)


def describe(rc):
    if rc < 0:
        try:
            name = f" ({signal.Signals(-rc).name})"
        except ValueError:
            name = ""
        return f"was killed by signal {-rc}{name}", 128 - rc
    return f"exited with code {rc}", rc


def notice(code, sentence):
    write_all(2, f"{NOTICE} exit={code} {sentence}\n".encode("utf-8", "replace"))


def main(argv):
    args = parse_args(argv)
    host = args.host_label or socket.gethostname()
    env = dict(os.environ)
    command, label, prefix = args.command, args.label, b""
    stop = []  # the reason to stop: a signal number, or 0 for the end of stdin
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: stop.append(s))
    die_with_parent()
    pgid = lead_own_group()
    try:
        if args.env_on_stdin:
            env.update(read_stdin_env(sys.stdin.buffer))
        else:
            role, rank = rank_role(args.rank_vars.split(","), args.servers,
                                   args.processes, env)
            label = f"{role} {rank}"
            prefix = f"[{label}] ".encode()
            env.update({"PS_ROLE": role, "PS_RANK": str(rank), "DMLC_ROLE": role})
            command = [a.replace("{role}", role) for a in command]
    except ValueError as e:
        notice(1, f"{label} on {host} could not start: {e}")
        return 1
    try:
        node = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                preexec_fn=node_setup())
    except OSError as e:
        notice(127, f"{label} on {host} could not start {command[0]}: {e.strerror}")
        return 127
    # Threads only after the fork: preexec_fn is unsafe in a threaded process.
    state = {"last_output": time.monotonic()}
    reader = threading.Thread(target=copy_output, args=(node, prefix, state), daemon=True)
    reader.start()
    if args.env_on_stdin:
        def watch_stdin():
            # Straight from the descriptor: the launcher sends nothing after the
            # environment, and a thread blocked in sys.stdin's buffer would hold its
            # lock when the interpreter exits.
            while os.read(0, 65536):
                pass
            stop.append(0)
        threading.Thread(target=watch_stdin, daemon=True).start()

    while not stop and node.poll() is None:
        time.sleep(POLL_S)
    if stop:
        stop_group(node, pgid, args.grace)
        code = 128 + (stop[0] or signal.SIGTERM)
    else:
        what, code = describe(node.returncode)
        stop_group(node, pgid, args.grace)  # descendants the node left behind
    stopped = time.monotonic()
    # A descendant that left the group may hold the pipe open for ever: give up once
    # it has been silent for DRAIN_S, never while output still flows.
    while reader.is_alive() and time.monotonic() - max(state["last_output"],
                                                       stopped) < DRAIN_S:
        reader.join(0.02)
    if not stop and code != 0:
        notice(code, f"{label} on {host} {what}")
    return code


if __name__ == "__main__":
    status = main(sys.argv[1:])
    # Without the interpreter's shutdown, which could wait on the daemon threads
    # still blocked in a read.
    os._exit(status)
