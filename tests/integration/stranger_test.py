#!/usr/bin/env python3
"""What a process outside the job can make a node hold (van/connection_guard.h).

Usage: stranger_test.py BEHAVIOUR LAUNCHER APP

APP is liveness_app in --mode=workload; nodes are started by hand (1 scheduler, 1
server, 1 worker) with a job token, and the test is the stranger: it speaks ZeroMQ's
wire protocol (ZMTP 3.0, NULL mechanism) over plain TCP, as an attacker would.

  partial_frames_of_900_mib_leave_the_server_under_512_mib: four connections to the
    server's data and control endpoints each announce a 900 MiB frame and send
    (almost) all of it, never finishing it. The server's resident memory stays under
    512 MiB while they send, every stranger's connection is closed and counted in the
    server's log, and the worker's push/pull workload goes on exact throughout.
"""
import os
import re
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from liveness_test import (START_S, Failures, Job, run_behaviour,  # noqa: E402
                           wait_exits, wait_until)

MIB = 1 << 20
FRAME = 900 * MIB
RSS_LIMIT_MIB = 512


def greeting():
    """ZMTP 3.0 greeting: signature, version 3.0, mechanism NULL, as client."""
    return (b"\xff" + b"\x00" * 8 + b"\x7f" + bytes([3, 0]) + b"NULL".ljust(20, b"\x00") +
            b"\x00" + b"\x00" * 31)


def ready_command():
    def prop(name, value):
        return bytes([len(name)]) + name + struct.pack(">I", len(value)) + value
    body = b"\x05READY" + prop(b"Socket-Type", b"DEALER") + prop(b"Identity", b"")
    return bytes([0x04, len(body)]) + body  # short command frame


def recv_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def stranger(host, port, sent, errors):
    """Handshakes, announces a FRAME-byte frame and sends all of it but one byte."""
    try:
        sock = socket.create_connection((host, port), timeout=30)
        sock.sendall(greeting())
        recv_exactly(sock, 64)
        sock.sendall(ready_command())
        sock.sendall(bytes([0x02]) + struct.pack(">Q", FRAME))  # a long frame, no MORE
        block = b"\xab" * MIB
        remaining = FRAME - 1
        while remaining > 0:
            n = min(len(block), remaining)
            sock.sendall(block[:n])
            sent.append(n)
            remaining -= n
        time.sleep(2)  # hold the partial frame
        sock.close()
    except OSError as e:
        errors.append(str(e))  # expected: the node closed the connection


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def partial_frames_of_900_mib_leave_the_server_under_512_mib(launcher, app, f):
    with Job() as job:
        nodes = job.start_by_hand(app, 1, 1, ["--mode=workload", "--run_s=20"])
        server, worker = nodes["server 0"], nodes["worker 0"]
        if not wait_until(lambda: "workload running" in worker.text(), START_S):
            raise AssertionError("the workload did not start")
        m = re.search(r"server listening at tcp://([\d.]+):(\d+) \(control tcp://[\d.]+:(\d+)",
                      server.text())
        if not m:
            raise AssertionError("the server did not say where it listens")
        host, data_port, control_port = m.group(1), int(m.group(2)), int(m.group(3))
        pid = server.proc.pid
        before = rss_mib(pid)
        sent, errors, threads = [], [], []
        for port in (data_port, data_port, control_port, control_port):
            t = threading.Thread(target=stranger, args=(host, port, sent, errors), daemon=True)
            t.start()
            threads.append(t)
        peak = before
        while any(t.is_alive() for t in threads):
            peak = max(peak, rss_mib(pid))
            time.sleep(0.02)
        print(f"server RSS before {before:.0f} MiB, peak {peak:.0f} MiB while 4 strangers sent "
              f"{sum(sent) / MIB:.0f} MiB in all; {len(errors)} of 4 connections closed by it")
        f.expect(peak < RSS_LIMIT_MIB, f"the server's RSS reached {peak:.0f} MiB")
        f.expect(len(errors) == 4, f"{4 - len(errors)} stranger connections were never closed")
        f.expect(wait_exits([worker], 40), "the worker did not finish")
        f.expect("worker 0: no request failed in 20 s" in worker.text(),
                 "the worker's workload failed")
        f.expect(re.search(r"closed the connection from 127\.0\.0\.1:\d+, which has not shown "
                           r"the identity of a member of the job", server.text()) is not None,
                 "the server did not log the closed connections")
        f.expect(wait_exits(list(nodes.values()), 30), "not every node exited")
        for name, n in nodes.items():
            f.expect(n.proc.returncode == 0, f"{name} exited {n.proc.returncode}, not 0")


BEHAVIOURS = {fn.__name__: fn for fn in (
    partial_frames_of_900_mib_leave_the_server_under_512_mib,
)}

if __name__ == "__main__":
    sys.exit(run_behaviour(BEHAVIOURS, __doc__))
