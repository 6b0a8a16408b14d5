#!/usr/bin/env python3
"""A HerdPS job written in Python whose every pulled value is known in advance.

Run under the launcher, e.g. `herdps-launch -n 2 -s 1 -- python3 kv_app.py DIR`.
Servers run the C++ OptimizerServer (app 0, sgd with lr 1: a key holds minus the sum
of its pushes) and a summing KVServer of float64 (app 1). Every worker checks:
  - pushes of float32 arrays and pulls into new arrays and into `out`, exact;
  - variable lengths (lens) on the float64 app, exact;
  - errors: unsorted keys, a wrong `out`, a key never pushed;
  - two idgrab OrderClients, one fed dense gradients and one the same sparse, agree;
and worker 0, with the server SIGSTOPped (its pid from DIR/server-<rank>.pid):
  - wait(ts, timeout) raises TimeoutError while the pull cannot finish;
  - SIGINT during wait raises KeyboardInterrupt (the GIL is free: a thread sends it);
  - close() while another thread waits in the same worker: that wait still returns;
  - after SIGCONT, waiting again gives the exact values.
Prints "worker R: OK (herdps from FOLDER)" and exits 0, or names the first failed check and exits 1.
"""
import glob
import os
import signal
import sys
import threading
import time

import numpy as np

import herdps

NUM_KEYS = 1000


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def expect_error(kind, call, what):
    try:
        call()
    except kind as e:
        return str(e)
    raise AssertionError("%s: no %s raised" % (what, kind.__name__))


def the_keys():
    rng = np.random.default_rng(7)  # the same keys on every worker, spread on the ring
    return np.unique(rng.integers(0, 2**63, size=NUM_KEYS, dtype=np.uint64))


def pattern(n):
    return (np.arange(n) % 7 + 1).astype(np.float32)


def run_worker(pid_dir):
    rank, workers = herdps.rank(), herdps.num_workers()
    sgd = herdps.KVWorker(app_id=0)
    sums = herdps.KVWorker(app_id=1, dtype=np.float64)
    keys = the_keys()
    n = len(keys)
    sgd.wait(sgd.push(keys, (rank + 1) * pattern(n)))
    # lens: key 1 has 1 value, key 5 three, key 9 two.
    lens = np.array([1, 3, 2], dtype=np.int32)
    sums.wait(sums.push(np.array([1, 5, 9], dtype=np.uint64),
                        np.arange(6, dtype=np.float64) + rank, lens=lens))
    herdps.barrier("workers")

    total = workers * (workers + 1) / 2
    want = -total * pattern(n)
    got = sgd.wait(sgd.pull(keys))
    check(got.dtype == np.float32 and np.array_equal(got, want), "pull into a new array")
    out = np.zeros(n, dtype=np.float32)
    ts = sgd.pull(keys, out=out)
    check(sgd.wait(ts) is out, "pull(out=...) returns out")
    check(np.array_equal(out, want), "pull into out")
    check(sgd.wait(ts) is None, "a pull's second wait returns None")
    values, got_lens = sums.wait(sums.pull([1, 5, 9], want_lens=True))
    want_sums = workers * np.arange(6, dtype=np.float64) + workers * (workers - 1) / 2
    check(np.array_equal(got_lens, lens), "lens pulled: %s" % got_lens)
    check(values.dtype == np.float64 and np.array_equal(values, want_sums), "float64 sums")

    message = expect_error(herdps.Error, lambda: sgd.push(keys[::-1].copy(), pattern(n)),
                           "unsorted keys")
    check("sort" in message, "unsorted keys: %s" % message)
    expect_error(herdps.Error, lambda: sgd.pull(keys, out=np.zeros(n, dtype=np.float64)),
                 "out of the wrong dtype")
    expect_error(herdps.Error, lambda: sgd.pull(keys, out=np.zeros(0, dtype=np.float32)),
                 "an empty out")
    message = expect_error(herdps.Error, lambda: sums.wait(sums.pull([12345])),
                           "a pull of a key never pushed")
    check("12345" in message, "the error names the key: %s" % message)

    check_order_clients()
    if rank == 0:
        check_waits_interruptibly(sgd, keys, want, pid_dir)
    herdps.barrier("workers")
    print("worker %d: OK (herdps from %s)" % (rank, os.path.dirname(herdps.__file__)),
          flush=True)


def check_order_clients():
    """idgrab balances this worker's gradients locally: reported dense and reported
    sparse (the nonzero entries only), the same gradients give the same next order."""
    n, dim = 10, 6
    rng = np.random.default_rng(11)
    grads = rng.normal(size=(n, dim)).astype(np.float32)
    grads[rng.random(size=(n, dim)) < 0.5] = 0
    dense = herdps.OrderClient("idgrab", n, dim, seed=3)
    sparse = herdps.OrderClient("idgrab", n, dim, seed=3)
    check(sorted(dense.order) == list(range(n)), "an order is a permutation")
    check(list(dense.order) == list(sparse.order), "the same epoch-0 order")
    for position in range(n):
        g = grads[dense.order[position]]
        dense.report(position, g)
        nonzero = np.flatnonzero(g).astype(np.uint64)
        sparse.report_sparse(position, nonzero, g[nonzero])
    dense.next_epoch()
    sparse.next_epoch()
    check(dense.epoch == 1 and sparse.epoch == 1, "next_epoch counts")
    check(list(dense.order) == list(sparse.order), "sparse reports give the dense order")
    expect_error(herdps.Error, lambda: sparse.report(1, grads[0]), "a position out of turn")
    dense.finish()
    sparse.finish()


def wait_stopped(pid):
    """Returns once every thread of `pid` is stopped: a loaded machine may run a thread
    of it for a while after kill(SIGSTOP) returned."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        states = []
        for stat in glob.glob("/proc/%d/task/*/stat" % pid):
            try:
                with open(stat) as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass  # a thread that ended meanwhile
        if states and all(state == "T" for state in states):
            return
        time.sleep(0.01)
    raise AssertionError("server %d did not stop within 10 s of SIGSTOP" % pid)


def check_waits_interruptibly(sgd, keys, want, pid_dir):
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with open(os.path.join(pid_dir, "server-0.pid")) as f:
        server = int(f.read())
    os.kill(server, signal.SIGSTOP)
    wait_stopped(server)
    try:
        ts = sgd.pull(keys)
        expect_error(TimeoutError, lambda: sgd.wait(ts, timeout=0.3), "wait with a timeout")
        check(not sgd.finished(ts), "the pull goes on after the timeout")
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        expect_error(KeyboardInterrupt, lambda: sgd.wait(ts), "SIGINT during wait")
        # close() while another thread waits in the same worker: the worker goes once
        # that wait returns, which then gives the values.
        other = herdps.KVWorker(app_id=0, customer_id=1)
        other_ts = other.pull(keys)
        got = []
        waiter = threading.Thread(target=lambda: got.append(other.wait(other_ts)))
        waiter.start()
        time.sleep(0.2)
        other.close()
        expect_error(herdps.Error, lambda: other.pull(keys), "a pull after close")
    finally:
        os.kill(server, signal.SIGCONT)
    check(np.array_equal(sgd.wait(ts), want), "the pull after SIGCONT")
    waiter.join(30)
    check(not waiter.is_alive() and len(got) == 1 and np.array_equal(got[0], want),
          "a wait running through another thread's close()")


def main():
    pid_dir = sys.argv[1]
    herdps.start()
    server = sums = None
    if herdps.is_server():
        with open(os.path.join(pid_dir, "server-%d.pid" % herdps.rank()), "w") as f:
            f.write(str(os.getpid()))
        server = herdps.OptimizerServer(app_id=0, optimizer="sgd", lr=1.0)
        sums = herdps.KVServer(app_id=1, dtype=np.float64)
    if herdps.is_worker():
        try:
            run_worker(pid_dir)
        except AssertionError as e:
            # At once: the others would wait for this worker at the next barrier; the
            # launcher stops them when a node exits with an error.
            print("worker %d: FAILED: %s" % (herdps.rank(), e), flush=True)
            os._exit(1)
    herdps.finalize()
    del server, sums
    return 0


if __name__ == "__main__":
    sys.exit(main())
