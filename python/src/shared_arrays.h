// Numpy arrays and ps::SArray sharing one buffer, without copies, in both directions.
//
// ShareArray: an SArray over a numpy array's memory that keeps the array alive until
// the runtime drops its last reference. That may happen on any thread (a receive
// thread, ZeroMQ's I/O thread), which must never wait for the GIL (a Python thread
// may hold it for milliseconds, and a stalled I/O thread stalls every transfer): the
// reference is queued instead, and dropped by DropReleasedArrays, which the binding
// calls with the GIL held on its way into and out of the runtime.
//
// ToNumpy: a numpy array over an SArray's buffer, owning a reference to it.
//
// CheckArray throws ps::Error (herdps.Error in Python) naming `what` when the array is
// not of element type T, not C-contiguous, or (for outputs) not writeable.
#ifndef HERDPS_PYTHON_SHARED_ARRAYS_H_
#define HERDPS_PYTHON_SHARED_ARRAYS_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <utility>

#include "ps/sarray.h"
#include "ps/status.h"

namespace herdps_python {

namespace py = pybind11;

// Queues `held` (owned) for DropReleasedArrays; any thread, GIL or not.
void ReleaseFromAnyThread(py::object* held);
// Deletes the queued references. Call with the GIL held.
void DropReleasedArrays();

// `object` as an array; ps::Error naming `what` if it is not one.
inline py::array AsArray(const py::object& object, const char* what) {
  if (!py::isinstance<py::array>(object)) {
    throw ps::Error(std::string(what) + ": expected a numpy array, got " +
                    std::string(py::str(py::type::of(object))));
  }
  return py::reinterpret_borrow<py::array>(object);
}

template <typename T>
void CheckArray(const py::array& a, const char* what, bool writeable) {
  if (!py::isinstance<py::array_t<T>>(a)) {
    throw ps::Error(std::string(what) + ": expected dtype " +
                    std::string(py::str(py::dtype::of<T>())) + ", got " +
                    std::string(py::str(a.dtype())));
  }
  if (!(a.flags() & py::array::c_style)) {
    throw ps::Error(std::string(what) + ": the array must be C-contiguous");
  }
  if (writeable && !a.writeable()) {
    throw ps::Error(std::string(what) + ": the array is read-only");
  }
}

template <typename T>
ps::SArray<T> ShareArray(const py::array& a) {
  auto* held = new py::object(a);
  T* data = static_cast<T*>(const_cast<void*>(a.data()));
  return ps::SArray<T>(data, static_cast<size_t>(a.size()),
                       [held](T*) { ReleaseFromAnyThread(held); });
}

template <typename T>
py::array_t<T> ToNumpy(ps::SArray<T> values) {
  auto* kept = new ps::SArray<T>(std::move(values));
  py::capsule owner(kept, [](void* p) { delete static_cast<ps::SArray<T>*>(p); });
  return py::array_t<T>(static_cast<py::ssize_t>(kept->size()), kept->data(), owner);
}

}  // namespace herdps_python

#endif  // HERDPS_PYTHON_SHARED_ARRAYS_H_
