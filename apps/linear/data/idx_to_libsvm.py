#!/usr/bin/env python3
"""Converts IDX image and label files (the MNIST format) into binary libsvm data.

Input: an image file (magic 2051: unsigned bytes, 3 dimensions: items, rows,
columns) and a label file (magic 2049: unsigned bytes, 1 dimension: items),
each plain or gzip'd (recognised by content, not by name). The dimensions are
big-endian 32-bit integers; the pixels of an image follow row by row. Both
files are checked before anything is written: magic numbers, dimensions,
exact file sizes, equal item counts, and labels that are digits 0-9.

Output: one line per image, "label index:value ...":
  label  1 if the image's digit is one of --positive-digits, else 0
  index  1-based pixel index, row-major: pixel (r, c) is r * columns + c + 1
         (1 .. 784 for 28 x 28 images), increasing; only non-zero pixels
  value  the pixel's byte x scaled to x/255, written as the shortest decimal
         that reads back (as a double, then rounded to float) as the float
         nearest to x/255; 255 is written as 1
An image without a non-zero pixel gives a line with the label alone.

Exit status: 0 on success, 1 when an input file is malformed or cannot be read
or written (the message names the file and what is wrong), 2 on bad arguments.
"""

import argparse
import gzip
import os
import struct
import sys
import zlib

PROG = "idx_to_libsvm.py"
IMAGES_MAGIC = 2051  # 0x00000803: unsigned bytes, 3 dimensions
LABELS_MAGIC = 2049  # 0x00000801: unsigned bytes, 1 dimension
GZIP_MAGIC = b"\x1f\x8b"


class InputError(Exception):
    """A malformed or unreadable input file; the message names it."""


def float32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def pixel_texts():
    """texts[x] for x in 1..255: the shortest %g text of x/255 that round-trips as float."""
    texts = [""] * 256
    for x in range(1, 256):
        target = float32(x / 255)
        for digits in range(1, 10):  # 9 significant digits always round-trip a float
            text = "%.*g" % (digits, target)
            if float32(float(text)) == target:
                texts[x] = text
                break
    return texts


def read_bytes(path):
    """The file's contents, gunzipped when it starts with the gzip magic."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}")
    if data[:2] != GZIP_MAGIC:
        return data
    try:
        return gzip.decompress(data)
    except (EOFError, OSError, zlib.error) as e:
        raise InputError(f"{path}: broken gzip data ({e}); fetch the file again")


def parse_idx(path, magic, what):
    """(dims, payload) of an IDX file whose magic must be `magic` and whose payload
    must be exactly the product of its dims in bytes."""
    data = read_bytes(path)
    if len(data) < 4:
        raise InputError(f"{path}: {len(data)} bytes, too short for an IDX header")
    (found,) = struct.unpack(">I", data[:4])
    if found != magic:
        hint = ""
        other = {IMAGES_MAGIC: "an image file", LABELS_MAGIC: "a label file"}.get(found)
        if other:
            hint = f"; {found} is the magic of {other}: were --images and --labels swapped?"
        raise InputError(f"{path}: magic number {found} (0x{found:08x}), expected {magic} "
                         f"(0x{magic:08x}) for {what}{hint}")
    ndims = magic & 0xFF
    header = 4 + 4 * ndims
    if len(data) < header:
        raise InputError(f"{path}: truncated header: {len(data)} bytes, an IDX file with "
                         f"{ndims} dimensions needs {header}")
    dims = struct.unpack(f">{ndims}I", data[4:header])
    if 0 in dims:
        raise InputError(f"{path}: a dimension is 0 ({' x '.join(map(str, dims))}): no data")
    payload = 1
    for d in dims:
        payload *= d
    expected = header + payload
    shape = " x ".join(map(str, dims))
    if len(data) < expected:
        raise InputError(f"{path}: truncated: {len(data)} bytes, but its header ({shape}) "
                         f"needs {expected}; fetch the file again")
    if len(data) > expected:
        raise InputError(f"{path}: {len(data) - expected} bytes after the data its header "
                         f"({shape}) describes ({expected} bytes); not a single IDX file")
    return dims, memoryview(data)[header:]


def positive_digits(text):
    digits = set()
    for part in text.split(","):
        part = part.strip()
        if len(part) != 1 or part not in "0123456789":
            raise argparse.ArgumentTypeError(
                f"expected comma-separated digits 0-9, got {text!r}")
        digits.add(int(part))
    if len(digits) == 10:
        raise argparse.ArgumentTypeError("all ten digits are positive: every label would be 1")
    return frozenset(digits)


def positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}")
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROG,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--images", required=True, metavar="PATH",
                   help="IDX image file (magic 2051), plain or gzip'd")
    p.add_argument("--labels", required=True, metavar="PATH",
                   help="IDX label file (magic 2049), plain or gzip'd")
    p.add_argument("--out", required=True, metavar="PATH", help="output file; '-' for stdout")
    p.add_argument("--positive-digits", type=positive_digits, default=frozenset(range(5, 10)),
                   metavar="D,D,...",
                   help="digits whose label is 1; the others get 0 (default 5,6,7,8,9)")
    p.add_argument("--limit", type=positive_int, metavar="N",
                   help="convert only the first N images (default: all)")
    return p.parse_args(argv)


def load(a):
    """(images, rows, columns, labels, count) after checking both files."""
    (n_img, rows, cols), pixels = parse_idx(a.images, IMAGES_MAGIC, "an image file")
    (n_lab,), labels = parse_idx(a.labels, LABELS_MAGIC, "a label file")
    if n_img != n_lab:
        raise InputError(f"{a.images} holds {n_img} images but {a.labels} holds {n_lab} "
                         f"labels; they must come in pairs (train with train, test with test)")
    for i, y in enumerate(labels):
        if y > 9:
            raise InputError(f"{a.labels}: label {y} of item {i} (0-based) is not a digit 0-9")
    count = n_img if a.limit is None else min(a.limit, n_img)
    return pixels, rows, cols, labels, count


def convert(pixels, d, labels, count, positives_set, out):
    """Writes `count` rows; returns (positives, non-zeros, largest index written)."""
    texts = pixel_texts()
    cells = [None] + [":" + t for t in texts[1:]]
    label_text = ["1" if digit in positives_set else "0" for digit in range(10)]
    write = out.write
    positives = nnz = top = 0
    for i in range(count):
        image = pixels[i * d:(i + 1) * d].tobytes()
        label = label_text[labels[i]]
        positives += label == "1"
        present = [j for j, x in enumerate(image, 1) if x]
        if present:
            nnz += len(present)
            top = max(top, present[-1])
        write(label)
        write("".join([f" {j}{cells[image[j - 1]]}" for j in present]))
        write("\n")
    return positives, nnz, top


def main(argv):
    a = parse_args(argv)
    try:
        pixels, rows, cols, labels, count = load(a)
    except InputError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    d = rows * cols
    if a.out == "-":
        positives, nnz, top = convert(pixels, d, labels, count, a.positive_digits, sys.stdout)
        sys.stdout.flush()
    else:
        directory = os.path.dirname(os.path.abspath(a.out))
        if not os.path.isdir(directory):
            print(f"{PROG}: directory does not exist: {directory}", file=sys.stderr)
            return 1
        tmp = f"{a.out}.tmp{os.getpid()}"
        try:
            with open(tmp, "w", encoding="ascii", newline="\n", buffering=1 << 20) as out:
                positives, nnz, top = convert(pixels, d, labels, count, a.positive_digits, out)
            os.replace(tmp, a.out)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
    digits = ",".join(str(x) for x in sorted(a.positive_digits))
    print(f"{PROG}: wrote {a.out}: {count} rows, {rows} x {cols} = {d} features (1-based, "
          f"largest index used {top or 'none'}), {nnz / count:.1f} non-zero per row, label 1 (digits "
          f"{digits}) in {positives} rows ({positives / count:.4f})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
    except (BrokenPipeError, OSError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        sys.exit(1)
