// herdps._core: the extension module; herdps/__init__.py is its public face.
#include <pybind11/pybind11.h>

#include <string>

#include "bindings.h"
#include "ps/ps.h"
#include "wait_interruptibly.h"

namespace herdps_python {

namespace {

int GroupOf(const py::object& group) {
  if (py::isinstance<py::int_>(group)) {
    int g = group.cast<int>();
    if (g < 1 || g > ps::kScheduler + ps::kServerGroup + ps::kWorkerGroup) {
      throw ps::Error("barrier: group " + std::to_string(g) + " is not a node group");
    }
    return g;
  }
  std::string name = group.cast<std::string>();
  if (name == "workers") return ps::kWorkerGroup;
  if (name == "servers") return ps::kServerGroup;
  if (name == "all") return ps::kScheduler + ps::kServerGroup + ps::kWorkerGroup;
  throw ps::Error("barrier: group '" + name + "' is none of workers, servers, all");
}

void Start(int customer_id, const std::string& argv0, bool wait_for_all) {
  // glog keeps the pointer it is given: the name must outlive the node.
  static std::string program;
  program = argv0;
  py::gil_scoped_release release;
  if (wait_for_all) {
    ps::Start(customer_id, program.c_str());
  } else {
    ps::StartAsync(customer_id, program.c_str());
  }
}

void Finalize(int customer_id, bool barrier) {
  py::gil_scoped_release release;
  ps::Finalize(customer_id, barrier);
}

void Barrier(const py::object& group, int customer_id) {
  int g = GroupOf(group);
  py::gil_scoped_release release;
  ps::Postoffice::Get()->Barrier(customer_id, g);
}

}  // namespace

void BindNode(py::module_& m) {
  m.def("start", &Start, py::arg("customer_id") = 0, py::arg("argv0") = "python",
        py::arg("wait_for_all") = true);
  m.def("finalize", &Finalize, py::arg("customer_id") = 0, py::arg("barrier") = true);
  m.def("is_worker", [] { return ps::IsWorker(); });
  m.def("is_server", [] { return ps::IsServer(); });
  m.def("is_scheduler", [] { return ps::IsScheduler(); });
  m.def("rank", [] { return ps::MyRank(); });
  m.def("num_workers", [] { return ps::NumWorkers(); });
  m.def("num_servers", [] { return ps::NumServers(); });
  m.def("barrier", &Barrier, py::arg("group") = "all", py::arg("customer_id") = 0);
  m.attr("SCHEDULER") = ps::kScheduler;
  m.attr("SERVERS") = ps::kServerGroup;
  m.attr("WORKERS") = ps::kWorkerGroup;
}

}  // namespace herdps_python

PYBIND11_MODULE(_core, m) {
  m.doc() = "HerdPS: the C++ runtime behind the herdps package";
  pybind11::register_exception<ps::Error>(m, "Error", PyExc_RuntimeError);
  herdps_python::BindNode(m);
  herdps_python::BindKVWorker(m);
  herdps_python::BindOptimizerServer(m);
  herdps_python::BindKVServer(m);
  herdps_python::BindOrderClient(m);
}
