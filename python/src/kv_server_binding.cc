// herdps._core.KVServerFloat32 / KVServerFloat64: a ps::KVServer with ps-lite's default
// handle (KVServerDefaultHandle: a push adds to the key's values, a pull returns them),
// for apps whose workers only need sums, and for the float64 worker.
#include <pybind11/pybind11.h>

#include <memory>

#include "bindings.h"
#include "ps/kv_server.h"

namespace herdps_python {

namespace {

template <typename Val>
class PyKVServer {
 public:
  explicit PyKVServer(int app_id) {
    py::gil_scoped_release release;
    server_ = std::make_unique<ps::KVServer<Val>>(app_id);
    server_->set_request_handle(ps::KVServerDefaultHandle<Val>());
  }
  ~PyKVServer() { Close(); }
  // Stops taking requests.
  void Close() {
    py::gil_scoped_release release;
    server_.reset();
  }

 private:
  std::unique_ptr<ps::KVServer<Val>> server_;
};

template <typename Val>
void BindOne(py::module_& m, const char* name) {
  py::class_<PyKVServer<Val>>(m, name)
      .def(py::init<int>(), py::arg("app_id") = 0)
      .def("close", &PyKVServer<Val>::Close);
}

}  // namespace

void BindKVServer(py::module_& m) {
  BindOne<float>(m, "KVServerFloat32");
  BindOne<double>(m, "KVServerFloat64");
}

}  // namespace herdps_python
