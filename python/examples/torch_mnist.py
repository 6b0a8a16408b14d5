#!/usr/bin/env python3
"""A PyTorch MLP on MNIST, trained through HerdPS: server-side Adam, synchronous SGD.

    apps/linear/data/fetch-mnist          # once: writes build/data/mnist-idx/
    tracker/launch -n 4 -s 1 --consistency bsp -- python3 python/examples/torch_mnist.py

Needs PyTorch (Debian's python3-torch) on the workers. The model is a 784-H-10 MLP
(H = --hidden) with ReLU. Every parameter tensor is one key, values float32; the
servers run the C++ OptimizerServer with Adam and synchronous aggregation: each
clock, every worker pushes its minibatch gradient of every parameter, and the servers
apply Adam once with their mean, so all workers train one model, as synchronous SGD
on a batch of workers x --batch examples.

All workers build the model from the same seed; the servers hold each parameter's
change from that start (they begin at zero and apply Adam's steps, which do not
depend on the weights), and a worker's weights are start + pulled change. Worker r
of W trains on training rows r, r+W, r+2W, ... in a per-epoch shuffled order; after
each epoch worker 0 prints the training loss over its last epoch and the accuracy of
the model on MNIST's 10,000 test images, and writes them to --metrics_csv; --plot
draws them (needs matplotlib).
"""
import argparse
import csv
import os
import sys
import time

import numpy as np

import herdps

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DATA = os.path.join(HERE, "..", "..", "build", "data", "mnist-idx")


def read_idx(path, magic, dims):
    """An IDX file's payload as uint8, shaped (items, *dims)."""
    with open(path, "rb") as f:
        raw = f.read()
    if int.from_bytes(raw[:4], "big") != magic:
        raise SystemExit("torch_mnist.py: %s is not an IDX file of magic %d" % (path, magic))
    items = int.from_bytes(raw[4:8], "big")
    header = 8 + 4 * len(dims)
    data = np.frombuffer(raw, dtype=np.uint8, offset=header)
    if data.size != items * int(np.prod(dims or [1])):
        raise SystemExit("torch_mnist.py: %s: wrong size" % path)
    return data.reshape((items,) + tuple(dims))


def load(data_dir, split):
    images = read_idx(os.path.join(data_dir, "%s-images-idx3-ubyte" % split), 2051, [28, 28])
    labels = read_idx(os.path.join(data_dir, "%s-labels-idx1-ubyte" % split), 2049, [])
    return images.reshape(len(images), 784).astype(np.float32) / 255.0, labels.astype(np.int64)


def make_model(torch, hidden, seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(784, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, 10))


def run_worker(args, torch):
    rank, workers = herdps.rank(), herdps.num_workers()
    torch.set_num_threads(1)  # several workers share the machine's cores
    x, y = load(args.data, "train")
    test_x, test_y = load(args.data, "t10k")
    mine = np.arange(rank, len(y), workers)
    model = make_model(torch, args.hidden, args.seed)
    params = list(model.parameters())
    start = [p.detach().clone() for p in params]
    sizes = [p.numel() for p in params]
    keys = np.arange(len(params), dtype=np.uint64)
    lens = np.array(sizes, dtype=np.int32)
    flat = np.zeros(sum(sizes), dtype=np.float32)  # pulled changes, then gradients
    offsets = np.cumsum([0] + sizes)
    kv = herdps.KVWorker()
    # Every worker runs the same number of steps per epoch (the clocks must match).
    steps = (len(y) // workers) // args.batch
    rng = np.random.default_rng(args.seed + 1000 * rank)
    loss_fn = torch.nn.CrossEntropyLoss()
    metrics = []
    began = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(mine)
        total = 0.0
        for step in range(steps):
            # Before the first push the change is 0 (flat starts at zero), and the keys
            # do not exist yet: a push creates them with their lengths.
            if epoch > 1 or step > 0:
                kv.wait(kv.pull(keys, out=flat))
            with torch.no_grad():
                for i, p in enumerate(params):
                    change = torch.from_numpy(flat[offsets[i]:offsets[i + 1]])
                    p.copy_(start[i] + change.view_as(p))
            rows = order[step * args.batch:(step + 1) * args.batch]
            model.zero_grad()
            loss = loss_fn(model(torch.from_numpy(x[rows])), torch.from_numpy(y[rows]))
            loss.backward()
            total += loss.item()
            for i, p in enumerate(params):
                flat[offsets[i]:offsets[i + 1]] = p.grad.numpy().reshape(-1)
            kv.wait(kv.push(keys, flat, lens=lens))
            kv.clock()
        herdps.barrier("workers")
        if rank == 0:
            kv.wait(kv.pull(keys, out=flat))
            with torch.no_grad():
                for i, p in enumerate(params):
                    p.copy_(start[i] + torch.from_numpy(flat[offsets[i]:offsets[i + 1]]).view_as(p))
                predicted = model(torch.from_numpy(test_x)).argmax(dim=1).numpy()
            accuracy = float((predicted == test_y).mean())
            wall = time.perf_counter() - began
            metrics.append((epoch, wall, total / steps, accuracy))
            print("epoch %d/%d: train_loss %.4f  test_accuracy %.4f  (%.1f s)"
                  % (epoch, args.epochs, total / steps, accuracy, wall), flush=True)
        herdps.barrier("workers")
    kv.finish_clocks()
    if rank == 0:
        write_outputs(args, metrics)


def write_outputs(args, metrics):
    if args.metrics_csv:
        with open(args.metrics_csv, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["epoch", "wall_seconds", "train_loss", "test_accuracy"])
            out.writerows(metrics)
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        epochs = [m[0] for m in metrics]
        fig, left = plt.subplots(figsize=(6, 4))
        left.plot(epochs, [m[2] for m in metrics], "o-", color="tab:blue")
        left.set_xlabel("epoch")
        left.set_ylabel("training loss (mean over the epoch)", color="tab:blue")
        right = left.twinx()
        right.plot(epochs, [m[3] for m in metrics], "s-", color="tab:red")
        right.set_ylabel("test accuracy", color="tab:red")
        left.set_title("MLP on MNIST: %d workers, server-side Adam, BSP" % herdps.num_workers())
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print("wrote %s" % args.plot, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=DEFAULT_DATA,
                        help="folder of MNIST's IDX files (apps/linear/data/fetch-mnist)")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32, help="examples per step and worker")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.001, help="Adam's step size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metrics_csv", default="")
    parser.add_argument("--plot", default="", help="PNG of loss and accuracy per epoch")
    args = parser.parse_args()
    if args.epochs < 1 or args.batch < 1 or args.hidden < 1 or not args.lr > 0:
        parser.error("--epochs, --batch and --hidden must be >= 1, --lr > 0")
    herdps.start()
    server = None
    if herdps.is_server():
        server = herdps.OptimizerServer(optimizer="adam", lr=args.lr, sync_aggregation=True)
    if herdps.is_worker():
        if not os.path.isfile(os.path.join(args.data, "train-images-idx3-ubyte")):
            raise SystemExit("torch_mnist.py: no MNIST in %s (run apps/linear/data/fetch-mnist)"
                             % args.data)
        import torch
        run_worker(args, torch)
    herdps.finalize()
    del server
    return 0


if __name__ == "__main__":
    sys.exit(main())
