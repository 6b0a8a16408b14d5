#!/usr/bin/env python3
"""Push/pull goodput and memory of the herdps Python package.

Run under the launcher with one worker, e.g.
    herdps-launch -n 1 -s 1 -- python3 bench.py --sizes 1048576,16777216

The servers keep sums (herdps.KVServer: ps-lite's default handle), as apps/bench does
with --server_handle add, so that the two print comparable figures: run
    herdps-launch -n 1 -s 1 -- apps/bench --server_handle add --ops push,pull \\
        --sizes 1048576,16777216 --windows 1,8
in the same sitting and divide.

For each op, size and window it keeps `window` requests in flight for --seconds,
--rounds times, and prints the median goodput in MB/s (10^6 bytes of values per
second). A pull receives a new array per request (no `out`), as apps/bench's pulls
receive the answer's buffer.

--rss_mib M instead pushes an M MiB float32 array, drops it, pulls it back into a new
array, and prints how much the worker's peak RSS grew, over the array's size: with no
copy on either way the figure stays near 1 (one array at a time). A pull into `out`
costs one more array for a moment: a socket's answer arrives in a buffer of its own
and is copied into `out`.
"""
import argparse
import resource
import statistics
import sys
import time

import numpy as np

import herdps


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure(kv, op, keys, vals, window, seconds):
    """Goodput in MB/s of `op` with `window` requests in flight for `seconds`."""
    in_flight = []
    done = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        now = time.perf_counter()
        if now >= deadline and not in_flight:
            break
        if now < deadline and len(in_flight) < window:
            in_flight.append(kv.push(keys, vals) if op == "push" else kv.pull(keys))
            continue
        kv.wait(in_flight.pop(0))
        done += 1
    elapsed = time.perf_counter() - start
    return done * vals.nbytes / elapsed / 1e6


def goodput(kv, args):
    print("op,size,window,mbps", flush=True)
    for op in args.ops.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            keys = np.array([size], dtype=np.uint64)  # a key per size, as apps/bench
            vals = np.ones(size // 4, dtype=np.float32)
            kv.wait(kv.push(keys, vals))
            for window in (int(w) for w in args.windows.split(",")):
                rounds = [measure(kv, op, keys, vals, window, args.seconds)
                          for _ in range(args.rounds)]
                print("%s,%d,%d,%.1f" % (op, size, window, statistics.median(rounds)),
                      flush=True)


def rss(kv, mib):
    before = peak_rss_mib()
    n = mib * 1024 * 1024 // 4
    values = np.ones(n, dtype=np.float32)
    keys = np.array([1], dtype=np.uint64)
    kv.wait(kv.push(keys, values))
    # The pushed array is released once pushed; the pull's answer becomes the new
    # array itself. A copy on either way would show as a second array at the peak.
    del values
    pulled = kv.wait(kv.pull(keys))
    assert pulled.size == n and pulled[0] == 1.0 and pulled[-1] == 1.0
    growth = peak_rss_mib() - before
    print("rss: array %d MiB, peak RSS grew %.1f MiB (%.2fx the array)"
          % (mib, growth, growth / mib), flush=True)
    return growth / mib


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", default="push,pull")
    parser.add_argument("--sizes", default="1048576,16777216")
    parser.add_argument("--windows", default="1,8")
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rss_mib", type=int, default=0)
    parser.add_argument("--rss_max_ratio", type=float, default=0,
                        help="with --rss_mib: exit 1 when the peak RSS grew by more than "
                             "this many times the array (0: no check)")
    args = parser.parse_args()
    if args.rss_mib < 0 or args.rss_max_ratio < 0 or args.rounds < 1 or args.seconds <= 0:
        parser.error("--rss_mib and --rss_max_ratio must be >= 0, --rounds >= 1, "
                     "--seconds > 0")
    herdps.start()
    server = None
    rc = 0
    if herdps.is_server():
        server = herdps.KVServer()
    if herdps.is_worker() and herdps.rank() == 0:
        kv = herdps.KVWorker()
        if args.rss_mib:
            ratio = rss(kv, args.rss_mib)
            if args.rss_max_ratio and ratio > args.rss_max_ratio:
                print("rss: above --rss_max_ratio %g" % args.rss_max_ratio, flush=True)
                rc = 1
        else:
            goodput(kv, args)
        kv.close()
    herdps.finalize()
    del server
    return rc


if __name__ == "__main__":
    sys.exit(main())
