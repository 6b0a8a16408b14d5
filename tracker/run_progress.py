"""Progress of an experiment that runs its jobs one after another (tracker/orders,
tracker/compression, tracker/consistency): runs done of all, time elapsed, and an
estimate of the time left from the mean time per run so far."""

import signal
import time


def duration(seconds):
    """45 s, 12 min 03 s, 1 h 02 min."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class RunProgress:
    """Counts from its creation. Not thread-safe (one experiment loop uses it)."""

    def __init__(self, total):
        self.total = total
        self.started = time.monotonic()
        self.stopped_after = None  # runs ended when Ctrl-C came (interrupted), else None

    def after(self, done):
        """What to print after `done` runs of the total have ended."""
        elapsed = time.monotonic() - self.started
        if done >= self.total:
            return f"{duration(elapsed)} elapsed, all {self.total} runs done"
        left = elapsed / max(done, 1) * (self.total - done)
        return f"{duration(elapsed)} elapsed, about {duration(left)} left"

    def interrupted(self, prog, done):
        """After Ctrl-C (KeyboardInterrupt) between or during runs: says so and ignores
        further Ctrl-C while the caller writes the results of the `done` runs that ended
        (an interrupted run's job is stopped by its launcher, or killed with it)."""
        self.stopped_after = done
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print(f"\n{prog}: interrupted after {done} of {self.total} runs; writing the results "
              f"of those (no plots)", flush=True)

    def note(self):
        """For a results header: "; INTERRUPTED after k of n runs", or nothing."""
        if self.stopped_after is None:
            return ""
        return f"; INTERRUPTED after {self.stopped_after} of {self.total} runs"
