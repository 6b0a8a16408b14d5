#!/usr/bin/env python3
"""Logistic regression in numpy on HerdPS: apps/linear's training, written in Python.

    herdps-launch -n 4 -s 2 -- python3 linear.py --optimizer adam --lr 0.01 --epochs 30

Trains on the bundled HMDA data (apps/linear/data/hmda.csv) or on --train, a CSV file
with a header line and numeric columns. It follows apps/linear step for step
(docs/linear.md), so that with the same settings both print the same losses:
  - feature i is key i, in column order without the label column; the bias is the
    key after the last feature; the servers run the C++ OptimizerServer with zero
    initial values;
  - features are standardised with the training set's mean and population standard
    deviation (a constant feature only centred);
  - worker r of W trains on rows [r*N/W, (r+1)*N/W), cut into slots of --batch_size
    rows, in order; every worker runs as many steps per epoch as the one with the most
    rows (a step past its block is empty) and ends a clock after each;
  - a step pulls the weights and bias, computes the mean log-loss gradient of its rows
    in float64 (plus --reg_l2 * w), pushes it as float32 and waits;
  - after each epoch the workers meet in a barrier, worker 0 prints the training loss
    of the whole model on the whole training set, and they meet again.
What it leaves out: the held-out test split (use --test FILE for a test loss),
example orders, compression and stragglers.
"""
import argparse
import os
import sys
import time

import numpy as np

import herdps

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = os.path.join(HERE, "..", "..", "apps", "linear", "data", "hmda.csv")


def load_csv(path, label_column):
    """(features float32 rows x columns, labels float64 of 0/1, feature names)."""
    with open(path) as f:
        header = f.readline().strip().split(",")
    if label_column not in header:
        raise SystemExit("linear.py: %s: no column '%s' (columns: %s)"
                         % (path, label_column, ", ".join(header)))
    table = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64, ndmin=2)
    label = header.index(label_column)
    labels = table[:, label]
    labels = np.where(labels == -1, 0.0, labels)
    if not np.isin(labels, (0.0, 1.0)).all():
        raise SystemExit("linear.py: %s: labels must be 0/1 or -1/+1" % path)
    features = np.delete(table, label, axis=1).astype(np.float32)
    return features, labels, [c for i, c in enumerate(header) if i != label]


def fit_standardizer(x):
    """Per-feature mean and population stddev (0 for a constant feature), in float64."""
    values = x.astype(np.float64)
    constant = (values == values[0]).all(axis=0)
    mean = np.where(constant, values[0], values.mean(axis=0))
    stddev = np.where(constant, 0.0, np.sqrt(((values - mean) ** 2).mean(axis=0)))
    return mean, stddev


def standardize(x, mean, stddev):
    scale = np.where(stddev > 0, stddev, 1.0)
    return ((x.astype(np.float64) - mean) / scale).astype(np.float32)


def log_loss(x, labels, weights):
    """Mean log-loss of the model (weights, then the bias) on rows x."""
    z = x.astype(np.float64) @ weights[:-1].astype(np.float64) + np.float64(weights[-1])
    p = np.clip(1.0 / (1.0 + np.exp(-z)), 1e-15, 1 - 1e-15)
    return float(-(labels * np.log(p) + (1 - labels) * np.log(1 - p)).mean())


def step(kv, keys, x, y, reg_l2):
    """Pull the model, push the batch's mean gradient (float32), wait for the push."""
    pulled = kv.wait(kv.pull(keys)).astype(np.float64)
    w, bias = pulled[:-1], pulled[-1]
    z = x.astype(np.float64) @ w + bias
    residual = 1.0 / (1.0 + np.exp(-z)) - y
    grad = np.empty(len(keys), dtype=np.float64)
    grad[:-1] = x.astype(np.float64).T @ residual / len(y) + reg_l2 * w
    grad[-1] = residual.sum() / len(y)
    kv.wait(kv.push(keys, grad.astype(np.float32)))


def run_worker(args):
    rank, workers = herdps.rank(), herdps.num_workers()
    x, y, _ = load_csv(args.train, args.label_column)
    mean, stddev = fit_standardizer(x)
    x = standardize(x, mean, stddev)
    test = None
    if args.test:
        tx, ty, _ = load_csv(args.test, args.label_column)
        test = (standardize(tx, mean, stddev), ty)
    rows = len(y)
    begin, end = rank * rows // workers, (rank + 1) * rows // workers
    if begin == end:
        raise SystemExit("linear.py: worker %d has no rows (%d rows, %d workers)"
                         % (rank, rows, workers))
    local = end - begin
    batch = args.batch_size or local
    most_rows = (rows + workers - 1) // workers
    steps = 1 if args.batch_size == 0 else (most_rows + batch - 1) // batch
    keys = np.arange(x.shape[1] + 1, dtype=np.uint64)  # the features, then the bias
    kv = herdps.KVWorker()
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        for slot in range(steps):
            at = begin + slot * batch
            if at < end:
                stop = min(at + batch, end)
                step(kv, keys, x[at:stop], y[at:stop], args.reg_l2)
            kv.clock()
        herdps.barrier("workers")
        if rank == 0:
            weights = kv.wait(kv.pull(keys))
            train_loss = log_loss(x, y, weights) + 0.5 * args.reg_l2 * float(
                (weights[:-1].astype(np.float64) ** 2).sum())
            test_loss = log_loss(test[0], test[1], weights) if test else float("nan")
            print("epoch %d/%d: train_loss %.6f  test_loss %.6f  (%.2f s)"
                  % (epoch, args.epochs, train_loss, test_loss, time.perf_counter() - start),
                  flush=True)
        herdps.barrier("workers")
    kv.finish_clocks()
    kv.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", default=BUNDLED, help="CSV training data")
    parser.add_argument("--test", default="", help="CSV test data (optional)")
    parser.add_argument("--label_column", default="deny")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch_size", type=int, default=64,
                        help="rows per step and worker; 0 = all local rows")
    parser.add_argument("--optimizer", default="adam")
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--reg_l2", type=float, default=0.0)
    args = parser.parse_args()
    if args.epochs < 1 or args.batch_size < 0 or args.reg_l2 < 0:
        parser.error("--epochs must be >= 1, --batch_size and --reg_l2 >= 0")
    for path in (args.train, args.test):
        if path and not os.path.isfile(path):
            parser.error("no such file: %s" % path)
    herdps.start()
    server = None
    if herdps.is_server():
        server = herdps.OptimizerServer(optimizer=args.optimizer, lr=args.lr)
    if herdps.is_worker():
        run_worker(args)
    herdps.finalize()
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main())
