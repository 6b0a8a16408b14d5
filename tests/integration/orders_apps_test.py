#!/usr/bin/env python3
"""apps/linear's example orders (--order) and tracker/orders, end to end.

  orders_apps_test.py cdgrab LAUNCH LINEAR
      4 workers, 2 servers, --order cdgrab in the paper's setting (bsp, synchronous
      aggregation, a clock per step, plain SGD), 3 epochs: the job exits 0, worker 0's
      order differs in every epoch (its printed fingerprints) and every worker reports
      that it changed after each of the 2 epoch ends, the training loss falls; bad
      --order, --order_projection, --stop_after_epoch and --sync_aggregation (without
      bsp) exit 2 and say what is wrong.
  orders_apps_test.py leave LINEAR
  orders_apps_test.py kill LINEAR
      the same job with nodes started by hand (a killed node would make tracker/launch
      stop the job); worker 3 stops after epoch 1 of 3: it leaves the job
      (--stop_how leave) or is SIGKILLed halfway through epoch 2 (--stop_how kill). The
      other workers run all 3 epochs, worker 0 evaluates every one of them, and every
      other node exits 0 (1 after a kill: the job lost a node), within a bound that
      allows one heartbeat timeout.
  orders_apps_test.py tracker ORDERS LINEAR REFERENCE
      tracker/orders with tiny settings (m = 4, 1 seed, 2 epochs): the table, summary.csv,
      excess.csv, the curves and (when matplotlib is there) the PNG are written and agree.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import liveness_test as lt  # noqa: E402  (process helpers shared with the liveness tests)
from script_checks import check, failures, read_csv, run, tail  # noqa: E402

EPOCHS = 3
PAPER = ["--order", "cdgrab", "--sync_aggregation", "--clock_every", "batch", "--optimizer",
         "sgd", "--lr", "0.1", "--batch_size", "1", "--epochs", str(EPOCHS)]
FINGERPRINT = re.compile(r"^(?:\[worker 0\] )?epoch (\d+) order: slots [0-9 ]+ \.\.\. "
                         r"\(fingerprint ([0-9a-f]{16})\)$", re.M)
SUMMARY = re.compile(r"^(?:\[worker (\d+)\] )?worker (\d+): order (\S+), (\d+) slots, changed "
                     r"after (\d+) of (\d+) epochs, ([0-9.]+) ms per step", re.M)
EPOCH_LINE = re.compile(r"epoch (\d+)/\d+: train_loss ([0-9.]+)")



def check_cdgrab_run(out, metrics_rows, workers):
    prints = [(int(e), f) for e, f in FINGERPRINT.findall(out)]
    check([e for e, _ in prints] == list(range(1, EPOCHS + 1)),
          f"worker 0 prints its order in each of the {EPOCHS} epochs ({prints})")
    check(len({f for _, f in prints}) == len(prints),
          "worker 0's order differs in every epoch")
    summaries = {int(m.group(2)): m for m in SUMMARY.finditer(out)}
    check(sorted(summaries) == list(range(workers)) and
          all(m.group(3) == "cdgrab" and m.group(4) == summaries[0].group(4) and
              m.group(5) == m.group(6) == str(EPOCHS - 1) for m in summaries.values()),
          "every worker ran cdgrab over the same number of slots and its order changed "
          f"after each epoch ({[m.group(0) for m in summaries.values()]})")
    losses = [float(r["train_loss"]) for r in metrics_rows]
    check(len(losses) == EPOCHS and losses[-1] < losses[0] < 0.6931,
          f"the training loss falls ({losses})")


def test_cdgrab(launch, linear):
    tmp = tempfile.mkdtemp(prefix="herdps-orders-apps-")
    try:
        metrics = os.path.join(tmp, "m.csv")
        rc, out = run([sys.executable, launch, "-n", "4", "-s", "2", "--consistency", "bsp",
                       "--timeout", "90", "--", linear, "--metrics_csv", metrics] + PAPER)
        if not check(rc == 0, f"4 workers with --order cdgrab: the job exits 0 (got {rc})"):
            print(tail(out))
        check_cdgrab_run(out, read_csv(metrics) if os.path.exists(metrics) else [], 4)

        bad = [(["--order", "grab"], "--order must be none, rr, idgrab, cdgrab or fixed"),
               (["--order", "rr", "--order_projection", "8"], "--order_projection goes with"),
               (["--stop_after_epoch", "1"], "--stop_after_epoch must be RANK:E"),
               (["--stop_after_epoch", "1:3", "--epochs", "3"], "an epoch before the last"),
               (["--stop_how", "crash"], "--stop_how must be leave or kill")]
        for args, message in bad:
            rc, out = run([linear] + args, timeout=30)
            check(rc == 2 and message in out, f"{args} exits 2 saying '{message}' (got {rc})")
        # Checked once the job's size and model are known: every node exits 2.
        for args, message in ((["--sync_aggregation"], "--sync_aggregation needs the job to run "
                                                       "bsp"),
                              (["--consistency", "bsp", "--stop_after_epoch", "0:1"],
                               "the rank must be a worker of the job other than 0")):
            rc, out = run([sys.executable, launch, "-n", "2", "-s", "1", "--timeout", "60", "--",
                           linear] + args, timeout=90)
            check(rc == 2 and message in out, f"{args} in a job exits 2 saying '{message}' "
                                              f"(got {rc})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_stop(how, linear):
    # start_by_hand puts its --marker first on every node's command line.
    args = ["--undefok=marker"] + PAPER + ["--stop_after_epoch", "3:1", "--stop_how", how]
    with lt.Job() as job:
        nodes = job.start_by_hand(linear, 4, 2, args, {"PS_CONSISTENCY": "bsp"})
        leaver = nodes["worker 3"]
        rest = [n for name, n in nodes.items() if name != "worker 3"]
        bound = lt.START_S + lt.DETECT_S + 30
        check(lt.wait_exits(rest, bound), f"every other node exits within {bound} s")
        check(lt.wait_exits([leaver], 5), "the stopping worker stops")
        # A job that lost a node (declared dead) makes every survivor exit 1 saying so,
        # once its work is done.
        lost = how == "kill"
        for n in rest:
            check(n.proc.returncode == (1 if lost else 0),
                  f"{n.name} exits {1 if lost else 0} (got {n.proc.returncode})")
            check(("the job lost worker 3" in n.text()) == lost,
                  f"{n.name} {'says' if lost else 'does not say'} that the job lost worker 3")
        check(f"worker 3 stops after 1 epochs ({how})" in leaver.text(),
              "worker 3 says where it stopped")
        expected = -9 if how == "kill" else 0
        check(leaver.proc.returncode == expected,
              f"worker 3 exits {expected} (got {leaver.proc.returncode})")
        lead = nodes["worker 0"].text()
        epochs = [int(e) for e, _ in EPOCH_LINE.findall(lead)]
        check(epochs == list(range(1, EPOCHS + 1)) and "final: train_loss" in lead,
              f"worker 0 evaluates all {EPOCHS} epochs ({epochs})")
        for rank in (0, 1, 2):
            m = [s for s in SUMMARY.finditer(nodes[f"worker {rank}"].text())]
            check(len(m) == 1 and m[0].group(5) == str(EPOCHS - 1),
                  f"worker {rank} runs every epoch with a new order each time")
        declared = "declared dead" in nodes["scheduler"].text()
        check(declared == (how == "kill"),
              f"the scheduler {'did' if declared else 'did not'} declare a node dead")


def matplotlib_available():
    for python in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(python) and subprocess.run(
                [python, "-c", "import matplotlib"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0:
            return True
    return False


def test_tracker(orders, linear, reference):
    tmp = tempfile.mkdtemp(prefix="herdps-orders-tracker-")
    try:
        tools = ["--linear", linear, "--reference", reference]
        rc, out = run([orders, "--algorithms", "rr,grab"] + tools)
        check(rc == 2 and "--algorithms" in out, f"a bad --algorithms exits 2 (got {rc})")
        rc, out = run([orders, "--reference", os.path.join(tmp, "missing"), "--linear", linear])
        check(rc == 2 and "not an executable file" in out,
              f"a missing --reference exits 2 (got {rc})")
        rc, out = run([orders, "--help"])
        check(rc == 0 and "--seeds" in out and "Fertility" in out and "f*" in out,
              "--help documents the options")

        plots = matplotlib_available()
        out_dir = os.path.join(tmp, "out")
        cmd = [orders, "--out", out_dir, "-m", "4", "--seeds", "1", "--epochs", "2"] + tools
        rc, out = run(cmd + ([] if plots else ["--no_plots"]), timeout=120)
        if not check(rc == 0, f"tracker/orders with tiny settings exits 0 (got {rc})"):
            print(tail(out, 30))
        check(re.search(r"\[1/3\] m=4 .*; \d+ s elapsed, about [0-9a-z ]+ left", out) and
              re.search(r"\[3/3\] m=4 .*; \d+ s elapsed, all 3 runs done", out),
              "a progress line per run: runs done of all, elapsed, time left")
        results = os.path.join(out_dir, "results.md")
        table = open(results).read() if os.path.exists(results) else ""
        rows = [l for l in table.splitlines() if l.startswith("| 4 |")]
        check([r.split("|")[2].strip() for r in rows] == ["D-RR", "ID-GraB", "CD-GraB"],
              f"results.md has one row per algorithm ({rows})")
        check(bool(rows) and rows[-1] in out, "the table is printed")
        f_star = re.search(r"f\* = ([0-9.]+)", table)
        check(f_star is not None and 0.2 < float(f_star.group(1)) < 0.3,
              "the table states f* from Newton's method")
        summary = os.path.join(out_dir, "summary.csv")
        runs = read_csv(summary) if os.path.exists(summary) else []
        check(sorted(r["algorithm"] for r in runs) == ["cdgrab", "idgrab", "rr"] and
              all(r["ok"] == "1" and r["epochs"] == "2" for r in runs),
              "summary.csv has the three runs, all ok")
        for r in runs:
            excess = float(r["final_train_loss"]) - float(r["f_star"])
            check(abs(excess - float(r["excess"])) < 1e-8 and float(r["excess"]) > 0 and
                  float(r["ms_per_step"]) > 0,
                  f"{r['algorithm']}: excess = final loss - f* > 0, and the time per step")
            metrics = read_csv(os.path.join(out_dir, r["metrics_csv"]))
            check(len(metrics) == 2 and
                  abs(float(metrics[-1]["train_loss"]) - float(r["final_train_loss"])) < 1e-6,
                  f"{r['algorithm']}: the raw metrics CSV has both epochs and the final loss")
        excess = os.path.join(out_dir, "excess.csv")
        check(os.path.exists(excess) and len(read_csv(excess)) == 6,
              "excess.csv has every evaluation")
        curves = sorted(os.listdir(os.path.join(out_dir, "curves")))
        check(curves == ["m4_cdgrab_seed1.csv", "m4_idgrab_seed1.csv", "m4_rr_seed1.csv"],
              f"a curve per (m, algorithm, seed) ({curves})")
        if plots:
            png = os.path.join(out_dir, "excess_m4.png")
            ok = os.path.exists(png)
            if ok:
                with open(png, "rb") as f:
                    ok = f.read(8) == b"\x89PNG\r\n\x1a\n"
            check(ok, "excess_m4.png is a PNG")
        else:
            print("SKIP the plot: matplotlib is not installed")
        check_interrupt(orders, tools, os.path.join(tmp, "interrupted"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_interrupt(orders, tools, out_dir):
    """Ctrl-C (SIGINT) during the second of six runs: tracker/orders writes the results
    of the runs that ended, marked as interrupted, draws nothing, prints no traceback,
    exits 130 and leaves no node running."""
    cmd = [sys.executable, orders, "--out", out_dir, "-m", "4", "--seeds", "1,2", "--epochs",
           "2", "--no_plots"] + tools
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("[1/6] "):
                proc.send_signal(signal.SIGINT)
                break
        lines += proc.stdout.readlines()  # to its end
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    out = "".join(lines)
    if not check(rc == 130 and "Traceback" not in out and
                 re.search(r"interrupted after [12] of 6 runs", out),
                 f"Ctrl-C ends tracker/orders with 130, saying so, without a traceback "
                 f"(got {rc})"):
        print(tail(out, 30))
    results = os.path.join(out_dir, "results.md")
    table = open(results).read() if os.path.exists(results) else ""
    check("INTERRUPTED after" in table and "not run (interrupted)" in table and
          "| 4 | D-RR | 0." in table, "results.md has the runs that ended and marks the rest")
    summary = os.path.join(out_dir, "summary.csv")
    runs = read_csv(summary) if os.path.exists(summary) else []
    check(1 <= len(runs) <= 2, f"summary.csv lists the runs that ended ({len(runs)})")
    check(not any(os.path.exists(os.path.join(out_dir, f)) for f in ("excess_m4.png",)),
          "no plot is drawn after an interrupt")
    # Every node of a run has the run's paths under out_dir in its argv.
    gone = lt.wait_until(lambda: not lt.marked_pids(out_dir), 10)
    left = lt.marked_pids(out_dir)
    lt.kill_marked(out_dir)
    check(gone, f"no process of the interrupted run is left ({left})")


def main(argv):
    if argv[:1] == ["cdgrab"] and len(argv) == 3:
        test_cdgrab(argv[1], argv[2])
    elif argv[:1] in (["leave"], ["kill"]) and len(argv) == 2:
        try:
            test_stop(argv[0], os.path.realpath(argv[1]))
        except AssertionError as e:
            failures.append(str(e))
    elif argv[:1] == ["tracker"] and len(argv) == 4:
        test_tracker(argv[1], argv[2], argv[3])
    else:
        sys.exit(__doc__)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
