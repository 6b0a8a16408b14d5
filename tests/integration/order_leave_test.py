#!/usr/bin/env python3
"""Nobody waits forever for a worker that stops early, with CD-GraB orders.

Usage: order_leave_test.py HOW APP

Nodes are started by hand (as on several hosts): 4 workers and 2 servers running
order_plugin_app with cdgrab for EPOCHS epochs; worker 3 stops after LEAVE_AFTER epochs,
HOW says how: `finish` (OrderClient::Finish, then waits in Finalize's closing barrier),
`finalize` (leaves the job at once) or `kill` (SIGKILL halfway through its next epoch).
The other workers must run every epoch with every order equal to the one they compute
themselves (which counts worker 3 exactly as far as it went), and every node but the
leaver exit 0 (1 when the leaver was killed: the job lost a node), within a bound that
allows one heartbeat timeout for a killed worker.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import liveness_test as lt  # noqa: E402  (process helpers shared with the liveness tests)

EPOCHS = 3
LEAVE_AFTER = 1
HOWS = ("finish", "finalize", "kill")


def run(how, app, f):
    args = ["--algorithm=cdgrab", f"--epochs={EPOCHS}", "--leave_rank=3",
            f"--leave_after={LEAVE_AFTER}", f"--leave_how={how}"]
    with lt.Job() as job:
        nodes = job.start_by_hand(app, 4, 2, args)
        leaver = nodes["worker 3"]
        rest = [n for name, n in nodes.items() if name != "worker 3"]
        bound = lt.START_S + lt.DETECT_S + 30
        f.expect(lt.wait_exits(rest, bound), f"not every other node exited within {bound} s")
        f.expect(lt.wait_exits([leaver], 5), "the leaving worker did not stop")
        # A job that lost a node (declared dead) makes every survivor exit 1 saying so,
        # once its work is done.
        lost = how == "kill"
        for n in rest:
            f.expect(n.proc.returncode == (1 if lost else 0),
                     f"{n.name} exited {n.proc.returncode}, not {1 if lost else 0}")
            f.expect(("the job lost worker 3" in n.text()) == lost,
                     f"{n.name} {'did not say' if lost else 'said'} that the job lost worker 3")
        for rank in range(3):
            text = nodes[f"worker {rank}"].text()
            f.expect(f"worker {rank}: {EPOCHS} epochs" in text and " 0 mismatches" in text,
                     f"worker {rank} did not run its {EPOCHS} epochs without mismatches")
        f.expect(f"worker 3 stops after {LEAVE_AFTER} epochs ({how})" in leaver.text(),
                 "worker 3 did not stop where it should")
        expected = -9 if how == "kill" else 0
        f.expect(leaver.proc.returncode == expected,
                 f"worker 3 exited {leaver.proc.returncode}, not {expected}")
        declared = "declared dead" in nodes["scheduler"].text()
        f.expect(declared == (how == "kill"),
                 f"the scheduler {'did' if declared else 'did not'} declare a node dead")


if __name__ == "__main__":
    sys.exit(lt.run_by_hand_test(run, HOWS, __doc__))
