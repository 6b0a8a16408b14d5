// The parts of the herdps._core extension module, each bound in its own file.
#ifndef HERDPS_PYTHON_BINDINGS_H_
#define HERDPS_PYTHON_BINDINGS_H_

#include <pybind11/pybind11.h>

namespace herdps_python {

namespace py = pybind11;

void BindNode(py::module_& m);             // start, finalize, roles, barrier
void BindKVWorker(py::module_& m);         // KVWorkerFloat32, KVWorkerFloat64
void BindOptimizerServer(py::module_& m);  // OptimizerServer
void BindKVServer(py::module_& m);         // KVServerFloat32, KVServerFloat64
void BindOrderClient(py::module_& m);      // OrderClient

}  // namespace herdps_python

#endif  // HERDPS_PYTHON_BINDINGS_H_
