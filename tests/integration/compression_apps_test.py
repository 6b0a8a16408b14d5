#!/usr/bin/env python3
"""tracker/compression, end to end, on the bundled HMDA data.

  compression_apps_test.py COMPRESSION LINEAR
      bad options exit 2 and say what is wrong; --help documents the options; a smoke
      run (2 codecs, none and topk:0.01, 1 seed, 2 epochs, sgd and adam) writes the
      table with its columns, summary.csv, evaluations.csv, the curves and (when
      matplotlib is there) the PNGs, and they agree: none's bytes ratio is 1.0, topk's
      above 1, both codecs push the same raw values and topk fewer encoded bytes; a
      --tune_tau --tune_only sweep over 2 taus writes tau_sweep.md and tau_sweep.csv and
      picks the tau of lowest loss among those that send at least --min_ratio times fewer
      value bytes than none.
"""

import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from script_checks import check, failures, read_csv, run, tail  # noqa: E402

# With 2 epochs the window of the last 3 evaluations holds 2.
COLUMNS = ["optimizer", "codec", "value bytes per epoch", "x fewer than none",
           "loss, last 2 epochs", "vs none, paired (min..max)", "accuracy, last 2", "within 1%"]


def matplotlib_available():
    for python in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(python) and subprocess.run(
                [python, "-c", "import matplotlib"], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0:
            return True
    return False


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_bad_options(tool, linear, tmp):
    base = [tool, "--data", "bundled", "--linear", linear, "--out", os.path.join(tmp, "bad")]
    for args, message in ((["--codecs", "fp16,topk:0.01"], "--codecs must include none"),
                          (["--codecs", "none,topk:lots"], "not a codec: topk:lots"),
                          (["--codecs", "none,fp16,fp16"], "listed twice"),
                          (["--optimizers", "sgd,ftrl"], "--optimizers"),
                          (["--window", "0"], "--window must be >= 1"),
                          (["--taus", "0.1,-1"], "--taus"),
                          (["--tune_only"], "--tune_only goes with --tune_tau"),
                          (["--adam_lr", "0"], "--adam_lr must be a positive number"),
                          (["--linear", os.path.join(tmp, "missing")], "not an executable file")):
        rc, out = run(base + args, timeout=30)
        check(rc == 2 and message in out, f"{args} exits 2 saying '{message}' (got {rc})")
    rc, out = run([tool, "--help"], timeout=30)
    check(rc == 0 and all(s in out for s in ("--tune_tau", "--codecs", "MNIST", "within 1%",
                                             "pull=fp16", "--window")),
          "--help documents the options")


def test_smoke(tool, linear, tmp, plots):
    out_dir = os.path.join(tmp, "out")
    cmd = [tool, "--data", "bundled", "--linear", linear, "--out", out_dir, "--codecs",
           "none,topk:0.01", "--seeds", "1", "--epochs", "2"]
    rc, out = run(cmd + ([] if plots else ["--no_plots"]), timeout=120)
    if not check(rc == 0, f"a smoke run exits 0 (got {rc})"):
        print(tail(out, 30))
    check(out.count("] ") >= 4 and "[4/4] adam topk:0.01 seed 1:" in out and
          re.search(r"\[1/4\] .*; \d+ s elapsed, about [0-9a-z ]+ left", out) and
          re.search(r"\[4/4\] .*; \d+ s elapsed, all 4 runs done", out),
          "a progress line per run: runs done of all, elapsed, time left")
    path = os.path.join(out_dir, "results.md")
    text = open(path).read() if os.path.exists(path) else ""
    lines = [l for l in text.splitlines() if l.startswith("|")]
    check(bool(lines) and cells(lines[0]) == COLUMNS, f"the table's columns ({lines[:1]})")
    rows = [cells(l) for l in lines[2:]]
    check([r[:2] for r in rows] == [["sgd", "none"], ["sgd", "topk:0.01"], ["adam", "none"],
                                    ["adam", "topk:0.01"]],
          f"one row per (optimizer, codec), none first ({[r[:2] for r in rows]})")
    check(bool(lines) and all(l in out for l in lines), "the table is printed")
    for r in rows:
        if len(r) != len(COLUMNS):
            check(False, f"a row with every column ({r})")
            continue
        ratio = float(r[3])
        if r[1] == "none":
            check(ratio == 1.0 and r[7] == "baseline", f"{r[0]} none: ratio 1.0, the baseline")
        else:
            check(ratio > 1 and r[7].startswith(("yes", "no")) and r[5].endswith("%"),
                  f"{r[0]} topk:0.01: sends fewer bytes ({ratio}x), paired difference and "
                  f"verdict ({r[5]}, {r[7]})")

    summary = os.path.join(out_dir, "summary.csv")
    runs = read_csv(summary) if os.path.exists(summary) else []
    check(len(runs) == 4 and all(r["ok"] == "1" and r["epochs"] == "2" and r["data"] == "bundled"
                                 and r["ran_compression"] == r["codec"] for r in runs),
          "summary.csv has the four runs, all ok, each ran its codec")
    by = {(r["optimizer"], r["codec"]): r for r in runs}
    for opt in ("sgd", "adam"):
        none, topk = by.get((opt, "none")), by.get((opt, "topk:0.01"))
        if not (none and topk):
            check(False, f"{opt}: both codecs are in summary.csv")
            continue
        check(none["value_bytes_per_epoch"] == none["raw_bytes_per_epoch"] ==
              topk["raw_bytes_per_epoch"] and
              float(topk["value_bytes_per_epoch"]) < float(none["value_bytes_per_epoch"]),
              f"{opt}: none sends the raw bytes, topk the same raw values in fewer bytes")
        paired = 100 * (float(topk["loss_last_window"]) / float(none["loss_last_window"]) - 1)
        check(math.isclose(paired, float(topk["loss_vs_none_pct"]), abs_tol=1e-3),
              f"{opt}: loss_vs_none_pct is the paired difference ({paired:.4f})")
        metrics = read_csv(os.path.join(out_dir, topk["metrics_csv"]))
        window = sum(float(m["train_loss"]) for m in metrics) / len(metrics) if metrics else 0
        check(len(metrics) == 2 and math.isclose(window, float(topk["loss_last_window"]),
                                                 rel_tol=1e-6),
              f"{opt}: the loss is averaged over the last epochs of the run's metrics")
    evaluations = os.path.join(out_dir, "evaluations.csv")
    check(os.path.exists(evaluations) and len(read_csv(evaluations)) == 8,
          "evaluations.csv has every evaluation")
    curves_dir = os.path.join(out_dir, "curves")
    curves = sorted(os.listdir(curves_dir)) if os.path.isdir(curves_dir) else []
    check(curves == ["adam__none__s1.csv", "adam__topk_0.01__s1.csv", "sgd__none__s1.csv",
                     "sgd__topk_0.01__s1.csv"], f"a curve per (optimizer, codec, seed) ({curves})")
    if plots:
        for opt in ("sgd", "adam"):
            png = os.path.join(out_dir, f"loss_{opt}.png")
            ok = os.path.exists(png)
            if ok:
                with open(png, "rb") as f:
                    ok = f.read(8) == b"\x89PNG\r\n\x1a\n"
            check(ok, f"loss_{opt}.png is a PNG")
    else:
        print("SKIP the plots: matplotlib is not installed")


def test_sweep(tool, linear, tmp):
    out_dir = os.path.join(tmp, "sweep")
    rc, out = run([tool, "--data", "bundled", "--linear", linear, "--out", out_dir,
                   "--tune_tau", "--tune_only", "--taus", "0.05,2", "--min_ratio", "1.5",
                   "--optimizers", "sgd", "--seeds", "1", "--epochs", "2"], timeout=120)
    if not check(rc == 0, f"a tau sweep exits 0 (got {rc})"):
        print(tail(out, 30))
    path = os.path.join(out_dir, "tau_sweep.csv")
    rows = read_csv(path) if os.path.exists(path) else []
    check([r["tau"] for r in rows] == ["", "0.05", "2"] and all(r["ok"] == "1" for r in rows),
          "tau_sweep.csv has none and both taus")
    eligible = [r for r in rows[1:] if float(r["fewer_than_none"]) >= 1.5]
    best = min(eligible, key=lambda r: float(r["loss_last_window"]))["tau"] if eligible else None
    picked = [r["tau"] for r in rows if r["picked"] == "1"]
    check(picked == ([best] if best else []), f"the pick ({picked}) is the lowest loss at >= "
                                              f"1.5x fewer bytes ({best})")
    md = os.path.join(out_dir, "tau_sweep.md")
    text = open(md).read() if os.path.exists(md) else ""
    check((f"tau = {best}" if best else "no tau reached") in text and "| 0.05 |" in text,
          "tau_sweep.md states the pick and has the table")
    check(not os.path.exists(os.path.join(out_dir, "results.md")),
          "--tune_only runs no experiment")


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    tool, linear = argv
    tmp = tempfile.mkdtemp(prefix="herdps-compression-tracker-")
    try:
        test_bad_options(tool, linear, tmp)
        test_smoke(tool, linear, tmp, matplotlib_available())
        test_sweep(tool, linear, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
