// Waiting for the runtime from Python: without the GIL, in slices, so that Ctrl-C
// (and any other Python signal handler) runs while a call waits.
#ifndef HERDPS_PYTHON_WAIT_INTERRUPTIBLY_H_
#define HERDPS_PYTHON_WAIT_INTERRUPTIBLY_H_

#include <pybind11/pybind11.h>

#include <chrono>
#include <functional>

#include "ps/status.h"

namespace herdps_python {

namespace py = pybind11;

// How long one slice of a wait lasts: the delay before Ctrl-C is seen.
constexpr std::chrono::milliseconds kWaitSlice{100};

// Calls wait_slice(slice) without the GIL until it reports done; between slices runs
// Python's signal handlers with the GIL (a handler that raises, as SIGINT's does,
// throws py::error_already_set out of here). `seconds` < 0 waits without end; else
// returns false once that long has passed without done. Called with the GIL held.
bool WaitInterruptibly(const std::function<bool(std::chrono::milliseconds)>& wait_slice,
                       double seconds);

// Raises herdps.Error with the status' text unless it is OK.
void ThrowIfFailed(const ps::Status& status);

}  // namespace herdps_python

#endif  // HERDPS_PYTHON_WAIT_INTERRUPTIBLY_H_
