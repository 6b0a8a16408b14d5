// The parts of the herdps._core extension module, each bound in its own file.
#ifndef HERDPS_PYTHON_BINDINGS_H_
#define HERDPS_PYTHON_BINDINGS_H_

#include <pybind11/pybind11.h>

#include <memory>

namespace herdps_python {

namespace py = pybind11;

// A bound object's close(): drops its share of the runtime object `*owner` (null
// afterwards) without the GIL, since the teardown may wait for the runtime's threads.
// A call still running on another thread holds its own share and ends the object when
// it returns. Called with the GIL held.
template <typename T>
void ReleaseWithoutGil(std::shared_ptr<T>* owner) {
  std::shared_ptr<T> gone;
  gone.swap(*owner);
  py::gil_scoped_release release;
  gone.reset();
}

void BindNode(py::module_& m);             // start, finalize, roles, barrier
void BindKVWorker(py::module_& m);         // KVWorkerFloat32, KVWorkerFloat64
void BindOptimizerServer(py::module_& m);  // OptimizerServer
void BindKVServer(py::module_& m);         // KVServerFloat32, KVServerFloat64
void BindOrderClient(py::module_& m);      // OrderClient

}  // namespace herdps_python

#endif  // HERDPS_PYTHON_BINDINGS_H_
