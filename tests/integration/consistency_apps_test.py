#!/usr/bin/env python3
"""apps/linear's clock and straggler flags, and tracker/consistency, end to end.

  consistency_apps_test.py linear LAUNCH LINEAR
      - bsp, a chosen straggler with a fixed delay, 3 workers whose blocks need 2 and 3
        steps per epoch (so they would disagree on their clocks if the app did not pad):
        the job ends, the metrics CSV has the consistency and clock columns, the loss
        falls, every worker reports its throughput and the straggler its delays;
      - ssp:1 with random stragglers: two runs with the same --seed slow the same
        clocks of the same workers;
      - --clock_every epoch under the default model (asp): one clock per epoch;
      - bad flag combinations and ranges exit with status 2 and say what is wrong.
  consistency_apps_test.py tracker CONSISTENCY LINEAR
      tracker/consistency with tiny settings (2 epochs, bsp and ssp:3 with the default
      straggler, 2 repeats): the table, summary.csv, the metrics CSVs and, when
      matplotlib is there, the plots are written and agree.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from script_checks import check, failures, read_csv, run, tail  # noqa: E402

THROUGHPUT = re.compile(
    r"^\[worker (\d+)\] worker \d+: throughput ([0-9.]+) examples/s \((\d+) examples in "
    r"([0-9.]+) s, [^)]*\), wall ([0-9.]+) s, (\S+), (\d+) clocks, slowed on (\d+) "
    r"\(([0-9.]+) s\)$", re.M)



def job(launch, linear, workers, consistency, args, tmp, name):
    """Runs linear under the launcher; returns (status, output, metrics rows, workers)."""
    metrics = os.path.join(tmp, name + ".csv")
    cmd = [sys.executable, launch, "-n", str(workers), "-s", "1", "--timeout", "90"]
    if consistency:
        cmd += ["--consistency", consistency]
    rc, out = run(cmd + ["--", linear, "--metrics_csv", metrics] + args)
    rows = read_csv(metrics) if os.path.exists(metrics) else []
    reports = {int(m.group(1)): m for m in THROUGHPUT.finditer(out)}
    if not check(rc == 0, f"{name}: the job exits 0 (got {rc})"):
        print(tail(out))
    return rc, out, rows, reports


def test_linear(launch, linear):
    tmp = tempfile.mkdtemp(prefix="herdps-consistency-apps-")
    try:
        # 1904 training rows over 3 workers: blocks of 634, 635, 635 rows, i.e. 2 or 3
        # steps of 317; every worker must end 3 clocks per epoch.
        delay_ms, epochs = 40, 3
        rc, out, rows, reports = job(
            launch, linear, 3, "bsp",
            ["--epochs", str(epochs), "--batch_size", "317", "--straggler", "1",
             "--straggler_delay_ms", str(delay_ms),
             "--save_model", os.path.join(tmp, "model.txt")], tmp, "bsp_straggler")
        if rows:
            check(list(rows[0].keys())[:8] == ["epoch", "wall_seconds", "train_loss",
                                               "test_loss", "accuracy", "auc",
                                               "consistency", "clocks"],
                  f"bsp_straggler: metrics columns {list(rows[0].keys())}")
            check([r["epoch"] for r in rows] == ["1", "2", "3"], "bsp_straggler: 3 epoch rows")
            check(all(r["consistency"] == "bsp" for r in rows),
                  "bsp_straggler: every row says bsp")
            check([r["clocks"] for r in rows] == ["3", "6", "9"],
                  f"bsp_straggler: 3 clocks per epoch ({[r['clocks'] for r in rows]})")
            losses = [float(r["train_loss"]) for r in rows]
            check(losses[0] > losses[1] > losses[2], f"bsp_straggler: the loss falls {losses}")
            walls = [float(r["wall_seconds"]) for r in rows]
            check(walls == sorted(walls) and walls[0] > 0,
                  f"bsp_straggler: wall seconds grow {walls}")
        else:
            check(False, "bsp_straggler: the metrics CSV was written")
        check(os.path.getsize(os.path.join(tmp, "model.txt")) > 0
              if os.path.exists(os.path.join(tmp, "model.txt")) else False,
              "bsp_straggler: the model was written")
        check(sorted(reports) == [0, 1, 2],
              f"bsp_straggler: all 3 workers report ({sorted(reports)})")
        for rank, m in reports.items():
            check(m.group(6) == "bsp" and m.group(7) == "9", f"bsp_straggler: worker {rank} "
                  f"ran 9 clocks under bsp ({m.group(6)}, {m.group(7)})")
            slowed, slept = int(m.group(8)), float(m.group(9))
            want = 9 if rank == 1 else 0
            check(slowed == want and abs(slept - want * delay_ms / 1000) < 1e-3,
                  f"bsp_straggler: worker {rank} slowed on {want} clocks ({slowed}, {slept} s)")
            check(float(m.group(2)) > 0 and int(m.group(3)) > 0,
                  f"bsp_straggler: worker {rank} has a throughput ({m.group(2)} examples/s)")
            # Worker 1 sleeps 9 x 40 ms; under bsp every other worker waits for it. The
            # workers start their clocks at slightly different times (after loading the
            # data), so the first sleep may overlap another worker's start: allow two.
            check(float(m.group(5)) >= (9 - 2) * delay_ms / 1000,
                  f"bsp_straggler: worker {rank}'s wall {m.group(5)} s covers the delays")

        # Random stragglers repeat with the seed.
        slowed = []
        for attempt in (1, 2):
            args = ["--epochs", "2", "--batch_size", "32", "--straggler_prob", "0.2",
                    "--straggler_factor", "3", "--seed", "7"]
            rc, out, rows, reports = job(launch, linear, 2, "ssp:1", args, tmp,
                                         f"ssp1_random_{attempt}")
            slowed.append({r: int(m.group(8)) for r, m in reports.items()})
            check(bool(rows) and all(r["consistency"] == "ssp:1" for r in rows),
                  f"ssp1_random_{attempt}: the metrics say ssp:1")
        check(len(slowed[0]) == 2 and slowed[0] == slowed[1] and sum(slowed[0].values()) > 0,
              f"ssp1_random: the same seed slows the same clocks ({slowed})")

        rc, out, rows, reports = job(launch, linear, 2, None,
                                     ["--epochs", "2", "--clock_every", "epoch"], tmp,
                                     "asp_clock_every_epoch")
        check([(r["consistency"], r["clocks"]) for r in rows] == [("asp", "1"), ("asp", "2")],
              f"asp_clock_every_epoch: one clock per epoch under asp "
              f"({[(r['consistency'], r['clocks']) for r in rows]})")

        # Bad flags: status 2 before joining a job (no launcher needed), with a message.
        bad = [
            (["--clock_every", "step"], "--clock_every must be batch or epoch"),
            (["--partition", "random"], "--partition must be blocks or label"),
            (["--straggler", "0", "--straggler_prob", "0.1", "--straggler_factor", "2"],
             "exclude each other"),
            (["--straggler_prob", "1.5", "--straggler_factor", "2"],
             "--straggler_prob must be in [0, 1]"),
            (["--straggler", "1"], "need --straggler_factor F or --straggler_delay_ms D"),
            (["--straggler_factor", "2"], "need --straggler RANK or --straggler_prob P"),
            (["--straggler", "0", "--straggler_factor", "0.5"],
             "--straggler_factor must be >= 1"),
            (["--straggler", "0", "--straggler_delay_ms", "-1"],
             "--straggler_delay_ms must be in"),
            (["--straggler", "0", "--straggler_factor", "2", "--straggler_delay_ms", "5"],
             "exclude each other"),
            (["--straggler", "-2", "--straggler_delay_ms", "5"], "--straggler must be"),
        ]
        for args, message in bad:
            rc, out = run([linear] + args, timeout=30)
            check(rc == 2 and message in out, f"linear {' '.join(args)}: status 2 and "
                  f"'{message}' (got {rc}: {out.strip()[:120]})")
        # A rank the job does not have is known only after the join: every node stops.
        rc, out = run([sys.executable, launch, "-n", "2", "-s", "1", "--timeout", "60", "--",
                       linear, "--straggler", "2", "--straggler_delay_ms", "5"])
        check(rc == 2 and "--straggler 2 names no worker" in out,
              f"--straggler 2 of 2 workers: the job exits 2 and names the flag (got {rc})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def matplotlib_available():
    for python in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(python) and subprocess.run(
                [python, "-c", "import matplotlib"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0:
            return True
    return False


def test_tracker(consistency, linear):
    tmp = tempfile.mkdtemp(prefix="herdps-consistency-tracker-")
    try:
        rc, out = run([consistency, "--modes", "bsp,ssp:3,bogus", "--linear", linear])
        check(rc == 2 and "--modes" in out, f"a bad --modes exits 2 (got {rc})")
        rc, out = run([consistency, "--linear", os.path.join(tmp, "missing")])
        check(rc == 2 and "not an executable file" in out,
              f"a missing --linear exits 2 (got {rc})")
        rc, out = run([consistency, "--help"])
        check(rc == 0 and "--target_loss" in out and "--train" in out and "Fertility" in out,
              "--help documents the options")

        plots = matplotlib_available()
        out_dir = os.path.join(tmp, "out")
        cmd = [consistency, "--linear", linear, "--out", out_dir, "--epochs", "2",
               "--modes", "bsp,ssp:3", "--no_baseline", "--target_loss", "10", "--repeats", "2",
               "--partition", "label"]
        rc, out = run(cmd + ([] if plots else ["--no_plots"]), timeout=240)
        if not check(rc == 0, f"tracker/consistency with tiny settings exits 0 (got {rc})"):
            print(tail(out, 30))
        check(re.search(r"\[1/4\] bsp, .*; \d+ s elapsed, about [0-9a-z ]+ left", out) and
              re.search(r"\[4/4\] .*; \d+ s elapsed, all 4 runs done", out),
              "a progress line per run: runs done of all, elapsed, time left")
        results = os.path.join(out_dir, "results.md")
        table = open(results).read() if os.path.exists(results) else ""
        rows = [l for l in table.splitlines() if l.startswith("| bsp") or l.startswith("| ssp")]
        check(len(rows) == 2 and all("| p=0.05 x5 |" in r for r in rows),
              f"results.md has one row per (mode, straggler): {rows}")
        check(table and table.splitlines()[-1] in out, "the table is printed")
        check("the rows partitioned by label" in table and "| final test accuracy |" in table,
              "the table's header names the partition and the test accuracy column")
        summary = os.path.join(out_dir, "summary.csv")
        runs = read_csv(summary) if os.path.exists(summary) else []
        check(sorted((r["mode"], r["repeat"]) for r in runs) ==
              [("bsp", "1"), ("bsp", "2"), ("ssp:3", "1"), ("ssp:3", "2")] and
              all(r["straggler"] == "p=0.05 x5" for r in runs),
              "summary.csv lists both repeats of both runs")
        for name in ("bsp", "ssp:3"):
            shown = [r for r in runs if r["mode"] == name and r["shown"] == "1"]
            if not check(len(shown) == 1, f"{name}: the table shows one of its runs"):
                continue
            # Throughput as median (min-max) over the repeats; the other columns are the
            # median run's (of 2: the slower).
            mine = [r for r in runs if r["mode"] == name]
            rates = sorted(float(r["throughput_examples_per_s"]) for r in mine)
            slower = min(mine, key=lambda r: float(r["throughput_examples_per_s"]))
            spread = f"| {sum(rates) / 2:.0f} ({rates[0]:.0f}-{rates[1]:.0f}) |"
            losses = sorted(float(r["final_train_loss"]) for r in mine)
            loss_spread = (f"| {sum(losses) / 2:.4f} ({losses[0]:.4f}-{losses[1]:.4f}) |")
            # The CSV holds the losses rounded: a median on a rounding edge may print
            # one unit of the last digit apart from the one computed here.
            def shows_loss(row):
                for m in re.finditer(r"\| (\d\.\d{4}) \((\d\.\d{4})-(\d\.\d{4})\)(?= \|)", row):
                    if (abs(float(m.group(1)) - sum(losses) / 2) <= 1.5e-4 and
                            m.group(2) == f"{losses[0]:.4f}" and m.group(3) == f"{losses[1]:.4f}"):
                        return True
                return False
            check(any(row.startswith(f"| {name} |") and shows_loss(row) for row in rows),
                  f"{name}: the table shows the final loss as median (min-max) {loss_spread}")
            check(shown[0] is slower and
                  any(row.startswith(f"| {name} |") and spread in row and
                      f"| {float(slower['wall_seconds']):.2f} |" in row for row in rows),
                  f"{name}: the table shows the median (min-max) throughput {spread} and "
                  f"the wall time of the run of median throughput: {rows}")
        check(re.search(r"^- straggler p=0\.05 x5: ssp:3's throughput is (above every run of "
                        r"bsp|below every run of bsp|inside the noise of bsp|"
                        r"within 0\.1% of bsp's)", table, re.M),
              "results.md sets ssp:3's throughput against bsp's spread")
        for r in runs:
            name = f"{r['mode']} run {r['repeat']}"
            check(r["ok"] == "1" and float(r["throughput_examples_per_s"]) > 0 and
                  float(r["wall_seconds"]) > 0 and r["epochs"] == "2",
                  f"{name}: throughput, wall time and epochs ({r})")
            # A target above the first epoch's loss is reached in epoch 1.
            check(r["epochs_to_target"] == "1" and float(r["seconds_to_target"]) > 0,
                  f"{name}: epochs and seconds to the target loss")
            log = os.path.join(out_dir, "logs", os.path.basename(r["metrics_csv"])[:-4] + ".log")
            check(os.path.exists(log) and
                  "(blocks of the rows sorted by label)" in open(log).read(),
                  f"{name}: --partition label reached apps/linear")
            metrics = read_csv(os.path.join(out_dir, r["metrics_csv"]))
            check(len(metrics) == 2 and all(m["consistency"] == r["mode"] for m in metrics) and
                  abs(float(metrics[-1]["train_loss"]) - float(r["final_train_loss"])) < 1e-6,
                  f"{name}: the raw metrics CSV has both epochs and the final loss")
        if plots:
            pngs = sorted(f for f in os.listdir(out_dir) if f.endswith(".png"))
            check(pngs == ["loss_vs_epoch_p=0.05_x5.png", "loss_vs_time_p=0.05_x5.png"],
                  f"the plots are written ({pngs})")
            for png in pngs:
                with open(os.path.join(out_dir, png), "rb") as f:
                    check(f.read(8) == b"\x89PNG\r\n\x1a\n", f"{png} is a PNG")
        else:
            print("SKIP the plots: matplotlib is not installed")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv):
    if len(argv) != 3 or argv[0] not in ("linear", "tracker"):
        sys.exit(__doc__)
    if argv[0] == "linear":
        test_linear(argv[1], argv[2])
    else:
        test_tracker(argv[1], argv[2])
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
