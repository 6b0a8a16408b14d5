"""HerdPS from Python: join a job, push and pull numpy arrays, run a server.

A process started by `herdps-launch` (or `tracker/launch`) gets its role from the
environment, as every HerdPS node does::

    import numpy as np
    import herdps

    herdps.start()
    if herdps.is_server():
        server = herdps.OptimizerServer(optimizer="sgd", lr=1.0)
    if herdps.is_worker():
        kv = herdps.KVWorker()
        keys = np.arange(10, dtype=np.uint64)
        kv.wait(kv.push(keys, np.ones(10, dtype=np.float32)))
        values = kv.wait(kv.pull(keys))
    herdps.finalize()

Arrays are shared with the runtime, not copied: keys as C-contiguous uint64, values
as C-contiguous float32 (float64 for `KVWorker(dtype=np.float64)`). Other inputs
(lists, int64 keys, float64 values for a float32 worker) are converted first, which
copies them. A pushed array must not change, and a pull's `out` array must not be
read, until `wait` returns for that request.

Every call that waits does so without the GIL, and Ctrl-C ends the wait with
KeyboardInterrupt (the request goes on; `wait` may be called again). Errors raise
`herdps.Error` (a RuntimeError) with the runtime's message; `wait(ts, timeout)` raises
TimeoutError when the request is not finished in time.
"""

import numpy as np

from ._core import (Error, OptimizerServer, OrderClient, SCHEDULER, SERVERS, WORKERS,
                    barrier, finalize, is_scheduler, is_server, is_worker, num_servers,
                    num_workers, rank)
from ._core import start as _start
from . import _core

__all__ = ["Error", "KVServer", "KVWorker", "OptimizerServer", "OrderClient", "SCHEDULER",
           "SERVERS", "WORKERS", "barrier", "finalize", "is_scheduler", "is_server", "is_worker",
           "num_servers", "num_workers", "rank", "start"]


def start(customer_id=0, wait_for_all=True):
    """Joins the job (reads PS_* from the environment).

    With wait_for_all (the default) it returns once every node has joined. Raises
    herdps.Error when the node cannot join (bad environment, the scheduler
    unreachable within PS_START_TIMEOUT seconds).
    """
    import sys
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else "python"
    _start(customer_id, argv0, wait_for_all)


def KVServer(app_id=0, dtype=np.float32):
    """A server that keeps, per key, the sum of every push to it and answers pulls
    with it (ps-lite's default handle); the first push sets a key's length."""
    dtype = np.dtype(dtype)
    if dtype == np.float32:
        return _core.KVServerFloat32(app_id)
    if dtype == np.float64:
        return _core.KVServerFloat64(app_id)
    raise Error("KVServer: dtype must be float32 or float64, not %s" % dtype)


def _as_keys(keys):
    if isinstance(keys, np.ndarray) and keys.dtype == np.uint64 and keys.flags.c_contiguous:
        return keys
    a = np.asarray(keys)
    if a.size and a.dtype.kind not in "iu":
        raise Error("keys: expected integers, got dtype %s" % a.dtype)
    if a.size and a.dtype.kind == "i" and a.min() < 0:
        raise Error("keys: negative key %d" % a.min())
    return np.ascontiguousarray(a, dtype=np.uint64).reshape(-1)


def _as_values(values, dtype):
    if isinstance(values, np.ndarray) and values.dtype == dtype and values.flags.c_contiguous:
        return values.reshape(-1)
    return np.ascontiguousarray(values, dtype=dtype).reshape(-1)


def _as_lens(lens):
    if lens is None:
        return None
    return np.ascontiguousarray(lens, dtype=np.int32).reshape(-1)


class KVWorker:
    """A worker's handle to the servers of app `app_id` (ps::KVWorker).

    push, pull and pushpull return a timestamp at once; wait(timestamp) blocks until
    the request is done and returns what it pulled. Keys of one request must be
    sorted and unique. Several threads may use one KVWorker.
    """

    def __init__(self, app_id=0, customer_id=0, dtype=np.float32):
        self.dtype = np.dtype(dtype)
        if self.dtype == np.float32:
            self._worker = _core.KVWorkerFloat32(app_id, customer_id)
        elif self.dtype == np.float64:
            self._worker = _core.KVWorkerFloat64(app_id, customer_id)
        else:
            raise Error("KVWorker: dtype must be float32 or float64, not %s" % self.dtype)

    def push(self, keys, vals, lens=None, cmd=0, priority=0):
        """Pushes vals to keys; lens[i] values belong to keys[i] (default: equal)."""
        return self._worker.push(_as_keys(keys), _as_values(vals, self.dtype),
                                 _as_lens(lens), cmd, priority)

    def pull(self, keys, out=None, want_lens=False, cmd=0, priority=0):
        """Pulls the values of keys: into `out` (a C-contiguous array of this worker's
        dtype and exactly the pulled size), or into a new array that wait() returns."""
        return self._worker.pull(_as_keys(keys), self._check_out(out), want_lens, cmd,
                                 priority)

    def pushpull(self, keys, vals, out=None, want_lens=False, cmd=0, priority=0):
        """Pushes, then pulls the values after the push was applied, in one round trip."""
        return self._worker.pushpull(_as_keys(keys), _as_values(vals, self.dtype),
                                     self._check_out(out), want_lens, cmd, priority)

    def wait(self, timestamp, timeout=None):
        """Blocks until the request is done. Returns None for a push; for a pull the
        values (`out`, or a new array), and (values, lens) with want_lens. Raises
        herdps.Error if the request failed, TimeoutError after `timeout` seconds (the
        request goes on)."""
        return self._worker.wait(timestamp, -1.0 if timeout is None else float(timeout))

    def finished(self, timestamp):
        """Whether the request is done (wait returns at once)."""
        return self._worker.finished(timestamp)

    def clock(self):
        """Ends this worker node's clock (BSP/SSP: may block until the next may begin)."""
        self._worker.clock()

    def current_clock(self):
        return self._worker.current_clock()

    def finish_clocks(self):
        """This worker ends no more clocks: the others stop waiting for it."""
        self._worker.finish_clocks()

    def num_in_flight(self):
        return self._worker.num_in_flight()

    def close(self):
        """Abandons requests in flight and releases the worker (also done on delete)."""
        self._worker.close()

    def _check_out(self, out):
        if out is None:
            return None
        if not isinstance(out, np.ndarray):
            raise Error("out: expected a numpy array, got %s" % type(out).__name__)
        return out
