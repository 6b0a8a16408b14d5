#!/usr/bin/env python3
"""apps/linear/data/idx_to_libsvm.py on tiny synthetic IDX files, plain and gzip'd.

  idx_to_libsvm_test.py [PATH/TO/idx_to_libsvm.py]

Well-formed input must give exactly the lines written out below; every malformed input
must exit 1 with a message that names the file and what is wrong, and leave no output.
"""
import gzip
import math
import os
import struct
import subprocess
import sys
import tempfile
import unittest
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "apps", "linear", "data", "idx_to_libsvm.py")

# Four 2 x 3 images, row-major; pixel (r, c) is feature r * 3 + c + 1.
IMAGES = [
    [0, 255, 0,
     1, 0, 0],
    [0, 0, 0,
     0, 0, 0],
    [128, 0, 0,
     0, 0, 254],
    [51, 2, 3,
     7, 100, 200],
]
DIGITS = [5, 0, 9, 4]
# x/255 as the nearest float, in the fewest digits that read back as that float:
# 1 -> 0.003921569, 2 -> 0.007843138, 3 -> 0.011764706, 7 -> 0.02745098, 51 -> 0.2,
# 100 -> 0.39215687, 128 -> 0.5019608, 200 -> 0.78431374, 254 -> 0.99607843, 255 -> 1.
EXPECTED = [
    "1 2:1 4:0.003921569",
    "0",
    "1 1:0.5019608 6:0.99607843",
    "0 1:0.2 2:0.007843138 3:0.011764706 4:0.02745098 5:0.39215687 6:0.78431374",
]


def images_idx(images, rows=2, cols=3, magic=2051, count=None):
    n = len(images) if count is None else count
    return struct.pack(">IIII", magic, n, rows, cols) + bytes(p for im in images for p in im)


def labels_idx(digits, magic=2049, count=None):
    n = len(digits) if count is None else count
    return struct.pack(">II", magic, n) + bytes(digits)


def nearest_float32(q):
    """The float32 nearest to the rational 0 < q < 2 (ties to even), as a Python float."""
    e = 0  # 2**e <= q < 2**(e + 1)
    while q < Fraction(2) ** e:
        e -= 1
    while q >= Fraction(2) ** (e + 1):
        e += 1
    scale = Fraction(2) ** (23 - e)  # 24 significant bits
    return float(Fraction(round(q * scale)) / scale)  # round() on a Fraction: half to even


def as_float32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


class IdxToLibsvm(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data, gz=False):
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(gzip.compress(data) if gz else data)
        return path

    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                              timeout=60)

    def convert(self, images, labels, *extra):
        out = os.path.join(self.dir, "out.libsvm")
        r = self.run_script("--images", images, "--labels", labels, "--out", out, *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out, "rb") as f:
            return f.read().decode("ascii"), r.stderr

    def assert_refused(self, images, labels, *phrases, status=1):
        out = os.path.join(self.dir, "refused.libsvm")
        r = self.run_script("--images", images, "--labels", labels, "--out", out)
        self.assertEqual(r.returncode, status, r.stderr)
        self.assertEqual(r.stdout, "")
        for phrase in phrases:
            self.assertIn(phrase, r.stderr)
        self.assertEqual([n for n in os.listdir(self.dir) if "refused" in n], [],
                         "a refused conversion must leave no output or temporary file")
        return r.stderr

    def plain_pair(self):
        return (self.write("img", images_idx(IMAGES)), self.write("lab", labels_idx(DIGITS)))

    # Well-formed input.

    def test_plain_files_give_the_exact_lines_with_digits_5_to_9_positive(self):
        text, err = self.convert(*self.plain_pair())
        self.assertEqual(text, "\n".join(EXPECTED) + "\n")
        self.assertIn("4 rows, 2 x 3 = 6 features", err)
        self.assertIn("label 1 (digits 5,6,7,8,9) in 2 rows", err)

    def test_gzipped_files_are_recognised_by_content_and_give_the_same_bytes(self):
        plain, _ = self.convert(*self.plain_pair())
        gz_images = self.write("img.bin", images_idx(IMAGES), gz=True)
        gz_labels = self.write("lab.bin", labels_idx(DIGITS), gz=True)
        self.assertEqual(self.convert(gz_images, gz_labels)[0], plain)
        self.assertEqual(self.convert(gz_images, self.plain_pair()[1])[0], plain)

    def test_positive_digits_choose_which_digits_are_labelled_1(self):
        text, _ = self.convert(*self.plain_pair(), "--positive-digits", "0,4")
        labels = [line.split(" ")[0] for line in text.splitlines()]
        self.assertEqual(labels, ["0", "1", "0", "1"])

    def test_limit_keeps_the_first_n_rows_and_a_larger_limit_keeps_all(self):
        self.assertEqual(self.convert(*self.plain_pair(), "--limit", "2")[0],
                         "\n".join(EXPECTED[:2]) + "\n")
        self.assertEqual(self.convert(*self.plain_pair(), "--limit", "99")[0],
                         "\n".join(EXPECTED) + "\n")

    def test_dash_writes_to_stdout(self):
        images, labels = self.plain_pair()
        r = self.run_script("--images", images, "--labels", labels, "--out", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "\n".join(EXPECTED) + "\n")

    def test_every_byte_value_reads_back_as_the_float_nearest_to_x_over_255(self):
        # One 1 x 255 image holding every non-zero byte once.
        images = self.write("all", images_idx([list(range(1, 256))], rows=1, cols=255))
        labels = self.write("one", labels_idx([7]))
        (line,) = self.convert(images, labels)[0].splitlines()
        tokens = line.split(" ")
        self.assertEqual(tokens[0], "1")
        self.assertEqual(len(tokens), 256)
        for x, token in enumerate(tokens[1:], 1):
            index, _, text = token.partition(":")
            self.assertEqual(index, str(x))
            self.assertNotIn("e", text, "no scientific notation")
            want = nearest_float32(Fraction(x, 255))
            # apps/linear parses a double, then rounds it to float.
            self.assertEqual(as_float32(float(text)), want, f"x = {x}: {text}")
            digits = len(text.replace("0.", "", 1).lstrip("0").replace(".", ""))
            if digits > 1:
                shorter = "%.*g" % (digits - 1, want)
                self.assertNotEqual(as_float32(float(shorter)), want,
                                    f"x = {x}: {shorter} is shorter than {text}")
            self.assertTrue(math.isclose(float(text), x / 255, rel_tol=1e-7), text)

    # Malformed input: exit 1, a message naming the file, no output.

    def test_a_wrong_magic_number_is_refused(self):
        images, labels = self.plain_pair()
        bad = self.write("bad", images_idx(IMAGES, magic=1234))
        self.assert_refused(bad, labels, bad, "magic number 1234", "expected 2051")

    def test_swapped_files_are_refused_with_a_hint(self):
        images, labels = self.plain_pair()
        self.assert_refused(labels, images, labels, "magic number 2049", "swapped")

    def test_truncated_pixels_are_refused(self):
        _, labels = self.plain_pair()
        short = self.write("short", images_idx(IMAGES)[:-1])
        self.assert_refused(short, labels, short, "truncated", "needs 40")

    def test_a_truncated_header_is_refused(self):
        images, _ = self.plain_pair()
        short = self.write("short", labels_idx(DIGITS)[:6])
        self.assert_refused(images, short, short, "truncated header")

    def test_trailing_bytes_are_refused(self):
        _, labels = self.plain_pair()
        long = self.write("long", images_idx(IMAGES) + b"\0")
        self.assert_refused(long, labels, long, "1 bytes after the data")

    def test_a_header_count_that_the_data_does_not_match_is_refused(self):
        _, labels = self.plain_pair()
        lying = self.write("lying", images_idx(IMAGES, count=5))
        self.assert_refused(lying, labels, lying, "truncated")

    def test_image_and_label_counts_must_be_equal(self):
        images, _ = self.plain_pair()
        three = self.write("three", labels_idx(DIGITS[:3]))
        self.assert_refused(images, three, "holds 4 images", "holds 3 labels")

    def test_a_label_that_is_not_a_digit_is_refused(self):
        images, _ = self.plain_pair()
        ten = self.write("ten", labels_idx([5, 0, 10, 4]))
        self.assert_refused(images, ten, ten, "label 10 of item 2")

    def test_broken_gzip_data_is_refused(self):
        _, labels = self.plain_pair()
        broken = self.write("broken", gzip.compress(images_idx(IMAGES))[:-6])
        self.assert_refused(broken, labels, broken, "broken gzip data")

    def test_a_missing_file_is_refused(self):
        _, labels = self.plain_pair()
        missing = os.path.join(self.dir, "missing")
        self.assert_refused(missing, labels, missing, "cannot read")

    def test_bad_options_exit_2(self):
        images, labels = self.plain_pair()
        out = os.path.join(self.dir, "x.libsvm")
        for extra, phrase in ((["--positive-digits", "0,1,2,3,4,5,6,7,8,9"], "every label"),
                              (["--positive-digits", "5,x"], "digits 0-9"),
                              (["--limit", "0"], "must be >= 1")):
            r = self.run_script("--images", images, "--labels", labels, "--out", out, *extra)
            self.assertEqual(r.returncode, 2, extra)
            self.assertIn(phrase, r.stderr)
            self.assertFalse(os.path.exists(out))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        SCRIPT = sys.argv.pop(1)
    unittest.main(verbosity=2)
