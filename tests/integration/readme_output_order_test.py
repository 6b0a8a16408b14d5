#!/usr/bin/env python3
"""README's main job (tracker/launch -n 4 -s 2 -- apps/linear ...) prints its lines in
the order README's sample shows: worker 0's "training on" line, every worker's
"training rows" line well before worker 0's final figures (the rows come in the first
epoch, the final figures 30 epochs later), the epochs in order, then worker 0's final
figures and its throughput line, and every worker's throughput line. Before the
launcher gave nodes a terminal, workers 1.. printed their rows only when they exited,
after worker 0's last line.

Lines of different nodes are read by different threads of the launcher, so on a busy
machine one node's line may come a few epochs (tens of milliseconds each) after another
node's later one: the test checks the order across nodes only where the margin is the
whole run, and the order of each node's own lines exactly.

Usage: readme_output_order_test.py LAUNCHER LINEAR
"""
import os
import re
import subprocess
import sys
import tempfile

WORKERS, EPOCHS = 4, 30
JOB_TIMEOUT_S = 120


def main():
    launcher, linear = sys.argv[1], sys.argv[2]
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [launcher, "-n", str(WORKERS), "-s", "2", "--timeout", str(JOB_TIMEOUT_S),
               "--", linear, "--optimizer", "adam", "--lr", "0.01", "--epochs", str(EPOCHS),
               "--metrics_csv", os.path.join(tmp, "metrics.csv"),
               "--save_model", os.path.join(tmp, "model.txt")]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=JOB_TIMEOUT_S + 30)
    lines = r.stdout.splitlines()

    def index(pattern):
        for i, line in enumerate(lines):
            if re.match(pattern, line):
                return i
        problems.append(f"no line matches {pattern!r}")
        return None

    if r.returncode != 0:
        problems.append(f"the job exited {r.returncode}")
    training_on = index(r"\[worker 0\] training on \d+ examples")
    rows = [index(rf"\[worker {w}\] worker {w}: training rows ") for w in range(WORKERS)]
    epochs = [index(rf"\[worker 0\] epoch {e}/{EPOCHS}: train_loss ") for e in (1, 2, EPOCHS)]
    final = index(r"\[worker 0\] final: train_loss ")
    throughput = [index(rf"\[worker {w}\] worker {w}: throughput ") for w in range(WORKERS)]
    if not problems:
        if not training_on < rows[0]:
            problems.append("worker 0's rows line came before its 'training on' line")
        for w, i in enumerate(rows):
            if i > final:
                problems.append(f"worker {w}'s rows line came after worker 0's final line")
            if i > throughput[w]:
                problems.append(f"worker {w}'s rows line came after its throughput line")
        if not epochs[0] < epochs[1] < epochs[2] < final < throughput[0]:
            problems.append("worker 0's epoch, final and throughput lines are out of order")
    for p in problems:
        print(f"FAILED: {p}")
    if problems:
        print("----- the job's output -----")
        print(r.stdout)
        return 1
    print(f"the README sample's order holds ({len(lines)} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
