#!/usr/bin/env python3
"""Synthetic logistic-regression data for apps/linear scale tests.

Model: a true weight vector w (F values) and bias b; each row has
round(S*F) non-zero features (at least 1) at distinct indices drawn uniformly,
with values ~ N(0, 1) rounded to 6 significant digits; its label is
y ~ Bernoulli(sigmoid(w.x + b)), computed from the rounded values as written.
The weights are w_j ~ N(0, (signal^2) / nnz), so that w.x has standard
deviation about --signal whatever F and S are (larger: cleaner labels).

Determinism: the same arguments give the same bytes. The weights depend only on
--seed and --features (not on --rows or --sparsity), and the rows come from
their own stream, so the first N rows of a larger --rows run equal a --rows N
run with the other arguments unchanged.

Formats:
  libsvm  "label idx:value ..." with 1-based feature indices in increasing
          order, only the non-zero features; label 0 or 1.
  csv     header "f1,...,fF,label", then dense rows (zeros written as 0);
          the label is the last column and named "label".
"""

import argparse
import math
import os
import random
import sys

PROG = "synth.py"


def positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}")
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def sparsity(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}")
    if not (0.0 < v <= 1.0):
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return v


def finite_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}")
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be finite, got {text}")
    return v


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROG,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--rows", type=positive_int, required=True, help="number of rows (N >= 1)")
    p.add_argument("--features", type=positive_int, required=True,
                   help="number of features (F >= 1)")
    p.add_argument("--sparsity", type=sparsity, default=1.0,
                   help="fraction of non-zero features per row, 0 < S <= 1 (default 1: dense)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--format", choices=("libsvm", "csv"), default="libsvm",
                   help="output format (default libsvm)")
    p.add_argument("--out", required=True, help="output file; '-' for stdout")
    p.add_argument("--bias", type=finite_float, default=0.0, help="true bias b (default 0)")
    p.add_argument("--signal", type=finite_float, default=2.0,
                   help="approximate standard deviation of w.x (default 2)")
    p.add_argument("--weights_out", metavar="PATH",
                   help="also write the true model here: 'bias b' then one 'j w_j' line "
                        "per feature (j as in the data: 1-based)")
    a = p.parse_args(argv)
    if a.signal < 0:
        p.error("argument --signal: must be >= 0")
    if a.format == "csv" and a.features > 100000:
        p.error("--format csv writes dense rows; use libsvm for more than 100000 features")
    return a


def fmt(v):
    return format(v, ".6g")


def sigmoid(z):
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def generate(a, out):
    f = a.features
    nnz = max(1, min(f, round(a.sparsity * f)))
    wrng = random.Random(f"herdps-synth-weights-{a.seed}")
    sd = a.signal / math.sqrt(nnz)
    w = [wrng.gauss(0.0, 1.0) * sd for _ in range(f)]
    rng = random.Random(f"herdps-synth-rows-{a.seed}")
    dense = nnz == f
    all_idx = list(range(f))
    positives = 0
    write = out.write
    if a.format == "csv":
        write(",".join(f"f{j + 1}" for j in range(f)) + ",label\n")
    for _ in range(a.rows):
        idx = all_idx if dense else sorted(rng.sample(range(f), nnz))
        vals = [fmt(rng.gauss(0.0, 1.0)) for _ in idx]
        z = a.bias
        for j, s in zip(idx, vals):
            z += w[j] * float(s)
        y = 1 if rng.random() < sigmoid(z) else 0
        positives += y
        if a.format == "libsvm":
            write(f"{y} " + " ".join(f"{j + 1}:{s}" for j, s in zip(idx, vals)) + "\n")
        else:
            row = ["0"] * f
            for j, s in zip(idx, vals):
                row[j] = s
            write(",".join(row) + f",{y}\n")
    return nnz, w, positives


def main(argv):
    a = parse_args(argv)
    if a.out == "-":
        nnz, w, pos = generate(a, sys.stdout)
        sys.stdout.flush()
    else:
        d = os.path.dirname(os.path.abspath(a.out))
        if not os.path.isdir(d):
            print(f"{PROG}: directory does not exist: {d}", file=sys.stderr)
            return 1
        tmp = f"{a.out}.tmp{os.getpid()}"
        try:
            with open(tmp, "w", encoding="ascii", newline="\n", buffering=1 << 20) as out:
                nnz, w, pos = generate(a, out)
            os.replace(tmp, a.out)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
    if a.weights_out:
        with open(a.weights_out, "w", encoding="ascii", newline="\n") as wf:
            wf.write(f"bias {a.bias!r}\n")
            for j, v in enumerate(w):
                wf.write(f"{j + 1} {v!r}\n")
    print(f"{PROG}: wrote {a.out}: {a.rows} rows, {a.features} features, {nnz} non-zero per row, "
          f"{a.format}, label 1 in {pos} rows ({pos / a.rows:.3f})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
    except (BrokenPipeError, OSError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        sys.exit(1)
