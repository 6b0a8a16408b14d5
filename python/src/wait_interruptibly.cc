#include "wait_interruptibly.h"

#include <algorithm>

#include "ps/status.h"

namespace herdps_python {

bool WaitInterruptibly(const std::function<bool(std::chrono::milliseconds)>& wait_slice,
                       double seconds) {
  using Clock = std::chrono::steady_clock;
  // Beyond a century is forever: the deadline's arithmetic would overflow.
  const bool forever = seconds < 0 || !(seconds < 3.2e9);
  const Clock::time_point deadline =
      forever ? Clock::time_point::max()
              : Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(seconds));
  for (;;) {
    std::chrono::milliseconds slice = kWaitSlice;
    if (!forever) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      slice = std::max(std::chrono::milliseconds(0), std::min(slice, left));
    }
    bool done;
    {
      py::gil_scoped_release release;
      done = wait_slice(slice);
    }
    if (done) return true;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (!forever && Clock::now() >= deadline) return false;
  }
}

void ThrowIfFailed(const ps::Status& status) {
  if (!status.ok()) throw ps::Error(status.ToString());
}

}  // namespace herdps_python
