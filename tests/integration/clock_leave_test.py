#!/usr/bin/env python3
"""Nobody waits forever for a worker that stops early, under BSP.

Usage: clock_leave_test.py HOW APP

Nodes are started by hand (as on several hosts): 4 workers and 2 servers, every node
with PS_CONSISTENCY=bsp; worker 3 stops after LEAVE_AT of CLOCKS clocks, HOW says how:
`finish` (FinishClocks, then idles until the closing barrier), `finalize` (leaves the
job), `exit` (exits 0 without Finalize) or `kill` (SIGKILL). The other workers must
end all their clocks with every guarantee checked (see clock_guarantees.cc), and every
node but the leaver exit 0 (1 when the leaver vanished and was declared dead: the job
lost a node), within a bound that allows one heartbeat timeout for a worker that
vanished.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import liveness_test as lt  # noqa: E402  (process helpers shared with the liveness tests)

CLOCKS = 400
LEAVE_AT = 100
HOWS = ("finish", "finalize", "exit", "kill")


def run(how, app, f):
    args = ["--staleness=0", f"--clocks={CLOCKS}", "--leave_rank=3", f"--leave_at={LEAVE_AT}",
            f"--leave_how={how}"]
    with lt.Job() as job:
        nodes = job.start_by_hand(app, 4, 2, args, {"PS_CONSISTENCY": "bsp"})
        leaver = nodes["worker 3"]
        rest = [n for name, n in nodes.items() if name != "worker 3"]
        bound = lt.START_S + lt.DETECT_S + 30
        f.expect(lt.wait_exits(rest, bound), f"not every other node exited within {bound} s")
        f.expect(lt.wait_exits([leaver], 5), "the leaving worker did not stop")
        # A job that lost a node (declared dead) makes every survivor exit 1 saying so,
        # once its work is done.
        lost = how in ("exit", "kill")
        for n in rest:
            f.expect(n.proc.returncode == (1 if lost else 0),
                     f"{n.name} exited {n.proc.returncode}, not {1 if lost else 0}")
            f.expect(("the job lost worker 3" in n.text()) == lost,
                     f"{n.name} {'did not say' if lost else 'said'} that the job lost worker 3")
        for rank in range(3):
            text = nodes[f"worker {rank}"].text()
            f.expect(f"worker {rank}: {CLOCKS} clocks" in text and " 0 violations" in text,
                     f"worker {rank} did not end its {CLOCKS} clocks without violations")
        text = leaver.text()
        f.expect(f"worker 3 stops after {LEAVE_AT} clocks ({how})" in text,
                 "worker 3 did not stop where it should")
        expected = -9 if how == "kill" else 0
        f.expect(leaver.proc.returncode == expected,
                 f"worker 3 exited {leaver.proc.returncode}, not {expected}")
        declared = "declared dead" in nodes["scheduler"].text()
        f.expect(declared == (how in ("exit", "kill")),
                 f"the scheduler {'did' if declared else 'did not'} declare a node dead")


if __name__ == "__main__":
    sys.exit(lt.run_by_hand_test(run, HOWS, __doc__))
