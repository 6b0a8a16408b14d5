#!/usr/bin/env python3
"""Tests for tracker/plot: repeats of a series (files sharing a label) become their
median with a min-max band, row by row; series keep apart in style and markers.

The summaries are checked without matplotlib; drawing is checked where matplotlib
imports (Debian's python3-matplotlib, which tracker/plot installs when it runs).
"""
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PLOT = os.path.normpath(os.path.join(HERE, "..", "..", "tracker", "plot"))


def load_plot():
    loader = importlib.machinery.SourceFileLoader("herdps_plot", PLOT)
    spec = importlib.util.spec_from_loader("herdps_plot", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


plot = load_plot()


def matplotlib_imports():
    for python in (sys.executable, "/usr/bin/python3"):
        if os.path.exists(python) and subprocess.run(
                [python, "-c", "import matplotlib"], capture_output=True).returncode == 0:
            return True
    return False


class SummaryTest(unittest.TestCase):
    def test_median_and_band_row_by_row_up_to_the_shortest_repeat(self):
        repeats = [([1, 2, 3], [0.9, 0.5, 0.3]),
                   ([1.2, 2.2, 3.4, 4.0], [1.0, 0.6, 0.2, 0.1]),
                   ([0.8, 1.8, 2.6], [0.8, 0.7, 0.4])]
        x, mid, lo, hi = plot.summarize(repeats)
        self.assertEqual(x, [1, 2, 3])           # median x of each row
        self.assertEqual(mid, [0.9, 0.6, 0.3])   # median y
        self.assertEqual(lo, [0.8, 0.5, 0.2])
        self.assertEqual(hi, [1.0, 0.7, 0.4])

    def test_the_spread_of_x_is_kept_for_wall_time_axes(self):
        _, _, _, _, x_lo, x_hi = plot.summarize_both([([1, 2], [3, 2]), ([1.5, 2.5], [3, 2]),
                                                      ([0.5, 3], [3, 2])])
        self.assertEqual((x_lo, x_hi), ([0.5, 2], [1.5, 3]))

    def test_an_even_count_takes_the_mean_of_the_middle_two(self):
        x, mid, lo, hi = plot.summarize([([1], [1.0]), ([3], [2.0])])
        self.assertEqual((x, mid, lo, hi), ([2], [1.5], [1.0], [2.0]))

    def test_a_single_run_is_its_own_median_and_empty_repeats_are_left_out(self):
        x, mid, lo, hi = plot.summarize([([1, 2], [5.0, 4.0]), ([], [])])
        self.assertEqual((x, mid, lo, hi), ([1, 2], [5.0, 4.0], [5.0, 4.0], [5.0, 4.0]))
        self.assertEqual(plot.summarize([([], [])]), ([], [], [], []))

    def test_files_sharing_a_label_form_one_series_in_first_appearance_order(self):
        groups = plot.group_by_label(["a1", "b1", "a2", "c1", "b2"],
                                     ["bsp", "asp", "bsp", "ssp:1", "asp"])
        self.assertEqual(groups, [("bsp", ["a1", "a2"]), ("asp", ["b1", "b2"]),
                                  ("ssp:1", ["c1"])])

    def test_markers_of_coinciding_series_are_shifted(self):
        self.assertEqual(plot.markevery(0, 120), (0, 10))
        self.assertEqual(plot.markevery(1, 120), (1, 10))
        self.assertEqual(plot.markevery(3, 5), (0, 1))


class DrawTest(unittest.TestCase):
    @unittest.skipUnless(matplotlib_imports(), "matplotlib is not installed")
    def test_repeats_draw_one_series_each(self):
        with tempfile.TemporaryDirectory() as tmp:
            files, labels = [], []
            for mode, scale in (("bsp", 1.0), ("asp", 0.8)):
                for rep in range(3):
                    path = os.path.join(tmp, f"{mode}-{rep}.csv")
                    with open(path, "w") as f:
                        f.write("epoch,wall_seconds,train_loss\n")
                        for e in range(1, 11):
                            f.write(f"{e},{scale * e * (1 + rep / 10)},{1 / e + rep / 100}\n")
                    files.append(path)
                    labels.append(mode)
            out = os.path.join(tmp, "loss.png")
            r = subprocess.run([sys.executable, PLOT, *files, "--out", out, "--labels",
                                ",".join(labels), "--logx"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("2 series from 6 files", r.stdout)
            with open(out, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    unittest.main()
