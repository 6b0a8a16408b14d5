// herdps._core.OrderClient: the data-order client (worker/include/ps/order_client.h).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "bindings.h"
#include "ps/order_client.h"
#include "shared_arrays.h"
#include "wait_interruptibly.h"

namespace herdps_python {

namespace {

class PyOrderClient {
 public:
  PyOrderClient(const std::string& algorithm, int num_examples, int dim, uint64_t seed,
                int batch_pairs, int projection_dim) {
    ps::OrderOptions options;
    ThrowIfFailed(ps::ParseOrderAlgorithm(algorithm, &options.algorithm));
    options.num_examples = num_examples;
    options.dim = dim;
    options.seed = seed;
    options.batch_pairs = batch_pairs;
    options.projection_dim = projection_dim;
    py::gil_scoped_release release;
    client_ = std::make_shared<ps::OrderClient>(options);
  }
  ~PyOrderClient() { Close(); }

  // Stops the client (at once, or when a call still running on another thread returns).
  void Close() { ReleaseWithoutGil(&client_); }

  // A copy: the order changes at NextEpoch.
  py::array_t<int> Order() {
    const std::vector<int>& order = Get()->order();
    py::array_t<int> out(static_cast<py::ssize_t>(order.size()));
    std::copy(order.begin(), order.end(), out.mutable_data());
    return out;
  }
  int64_t Epoch() { return Get()->epoch(); }

  void Report(int position, const py::object& grad) {
    std::shared_ptr<ps::OrderClient> client = Get();
    py::array a = AsArray(grad, "grad");
    CheckArray<float>(a, "grad", false);
    const float* data = static_cast<const float*>(a.data());
    size_t len = static_cast<size_t>(a.size());
    ps::Status status;
    {
      py::gil_scoped_release release;  // `grad` stays referenced by the caller's frame
      status = client->Report(position, data, len);
    }
    ThrowIfFailed(status);
  }
  // A sparse gradient: values[i] at index indices[i] (uint64), 0 elsewhere.
  void ReportSparse(int position, const py::object& indices, const py::object& values) {
    std::shared_ptr<ps::OrderClient> client = Get();
    py::array i = AsArray(indices, "indices");
    py::array v = AsArray(values, "values");
    CheckArray<uint64_t>(i, "indices", false);
    CheckArray<float>(v, "values", false);
    if (i.size() != v.size()) {
      throw ps::Error("report_sparse: " + std::to_string(i.size()) + " indices but " +
                      std::to_string(v.size()) + " values");
    }
    ps::Status status;
    {
      py::gil_scoped_release release;  // both stay referenced by the caller's frame
      status = client->ReportSparse(position, static_cast<const uint64_t*>(i.data()),
                                   static_cast<const float*>(v.data()),
                                   static_cast<size_t>(i.size()));
    }
    ThrowIfFailed(status);
  }
  void NextEpoch() { Call(&ps::OrderClient::NextEpoch); }
  void Finish() { Call(&ps::OrderClient::Finish); }

 private:
  // A share of the client for one call: a close() meanwhile does not destroy it under
  // the call.
  std::shared_ptr<ps::OrderClient> Get() {
    if (!client_) throw ps::Error("this OrderClient is closed");
    return client_;
  }
  void Call(ps::Status (ps::OrderClient::*method)()) {
    std::shared_ptr<ps::OrderClient> client = Get();
    ps::Status status;
    {
      py::gil_scoped_release release;
      status = (client.get()->*method)();
    }
    ThrowIfFailed(status);
  }
  std::shared_ptr<ps::OrderClient> client_;
};

}  // namespace

void BindOrderClient(py::module_& m) {
  py::class_<PyOrderClient>(m, "OrderClient")
      .def(py::init<const std::string&, int, int, uint64_t, int, int>(),
           py::arg("algorithm"), py::arg("num_examples"), py::arg("dim"),
           py::arg("seed") = 0, py::arg("batch_pairs") = 64, py::arg("projection_dim") = 0)
      .def_property_readonly("order", &PyOrderClient::Order)
      .def_property_readonly("epoch", &PyOrderClient::Epoch)
      .def("report", &PyOrderClient::Report, py::arg("position"), py::arg("grad"))
      .def("report_sparse", &PyOrderClient::ReportSparse, py::arg("position"),
           py::arg("indices"), py::arg("values"))
      .def("next_epoch", &PyOrderClient::NextEpoch)
      .def("finish", &PyOrderClient::Finish)
      .def("close", &PyOrderClient::Close);
}

}  // namespace herdps_python
