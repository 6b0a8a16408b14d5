// herdps._core.OptimizerServer: the C++ OptimizerServer in a Python-started server
// process. Options come as keyword arguments named as OptimizerOptions',
// ValueInit's and OptimizerServerOptions' fields (server/include/ps/*.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "bindings.h"
#include "ps/optimizer_server.h"
#include "wait_interruptibly.h"

namespace herdps_python {

namespace {

using Setter = std::function<void(ps::OptimizerServerOptions*, const py::handle&)>;

template <typename T>
Setter Field(T ps::OptimizerOptions::*field) {
  return [field](ps::OptimizerServerOptions* o, const py::handle& v) {
    o->optimizer.*field = v.cast<T>();
  };
}
template <typename T>
Setter Field(T ps::OptimizerServerOptions::*field) {
  return [field](ps::OptimizerServerOptions* o, const py::handle& v) { o->*field = v.cast<T>(); };
}

// Every keyword the constructor takes, with where it goes.
const std::map<std::string, Setter>& Setters() {
  static const std::map<std::string, Setter> setters = {
      {"optimizer",
       [](ps::OptimizerServerOptions* o, const py::handle& v) {
         ThrowIfFailed(ps::ParseOptimizerKind(v.cast<std::string>(), &o->optimizer.kind));
       }},
      {"lr", Field(&ps::OptimizerOptions::lr)},
      {"momentum", Field(&ps::OptimizerOptions::momentum)},
      {"beta1", Field(&ps::OptimizerOptions::beta1)},
      {"beta2", Field(&ps::OptimizerOptions::beta2)},
      {"eps", Field(&ps::OptimizerOptions::eps)},
      {"adagrad_eps", Field(&ps::OptimizerOptions::adagrad_eps)},
      {"rmsprop_alpha", Field(&ps::OptimizerOptions::rmsprop_alpha)},
      {"ftrl_alpha", Field(&ps::OptimizerOptions::ftrl_alpha)},
      {"ftrl_beta", Field(&ps::OptimizerOptions::ftrl_beta)},
      {"ftrl_l1", Field(&ps::OptimizerOptions::ftrl_l1)},
      {"ftrl_l2", Field(&ps::OptimizerOptions::ftrl_l2)},
      {"weight_decay", Field(&ps::OptimizerOptions::weight_decay)},
      {"init",
       [](ps::OptimizerServerOptions* o, const py::handle& v) {
         ThrowIfFailed(ps::ValueInit::ParseKind(v.cast<std::string>(), &o->init.kind));
       }},
      {"init_scale",
       [](ps::OptimizerServerOptions* o, const py::handle& v) {
         o->init.scale = v.cast<double>();
       }},
      {"seed",
       [](ps::OptimizerServerOptions* o, const py::handle& v) {
         o->init.seed = v.cast<uint64_t>();
       }},
      {"threads", Field(&ps::OptimizerServerOptions::threads)},
      {"default_length", Field(&ps::OptimizerServerOptions::default_length)},
      {"sync_aggregation", Field(&ps::OptimizerServerOptions::sync_aggregation)},
      {"checkpoint_dir", Field(&ps::OptimizerServerOptions::checkpoint_dir)},
      {"resume", Field(&ps::OptimizerServerOptions::resume)},
      {"checkpoint_every_seconds", Field(&ps::OptimizerServerOptions::checkpoint_every_seconds)},
      {"checkpoint_every_pushes", Field(&ps::OptimizerServerOptions::checkpoint_every_pushes)},
  };
  return setters;
}

ps::OptimizerServerOptions OptionsFrom(const py::kwargs& kwargs) {
  ps::OptimizerServerOptions options;
  for (const auto& item : kwargs) {
    std::string name = item.first.cast<std::string>();
    auto it = Setters().find(name);
    if (it == Setters().end()) {
      std::string known;
      for (const auto& s : Setters()) known += (known.empty() ? "" : ", ") + s.first;
      throw ps::Error("OptimizerServer: unknown option '" + name + "' (known: " + known + ")");
    }
    try {
      it->second(&options, item.second);
    } catch (const py::cast_error&) {
      throw ps::Error("OptimizerServer: option '" + name + "' has the wrong type (" +
                      std::string(py::str(py::type::of(item.second))) + ")");
    }
  }
  ThrowIfFailed(options.optimizer.Validate());
  return options;
}

class PyOptimizerServer {
 public:
  PyOptimizerServer(int app_id, const py::kwargs& kwargs) {
    ps::OptimizerServerOptions options = OptionsFrom(kwargs);
    py::gil_scoped_release release;
    server_ = std::make_shared<ps::OptimizerServer>(app_id, options);
  }
  ~PyOptimizerServer() { Close(); }

  // Finishes queued work and stops serving (at once, or when a call still running on
  // another thread returns).
  void Close() { ReleaseWithoutGil(&server_); }
  size_t NumKeys() {
    std::shared_ptr<ps::OptimizerServer> s = Get();
    py::gil_scoped_release release;
    return s->NumKeys();
  }
  uint64_t PushesTaken() { return Get()->pushes_taken(); }
  void SaveCheckpoint(const std::string& path) {
    std::shared_ptr<ps::OptimizerServer> s = Get();
    ps::Status status;
    {
      py::gil_scoped_release release;
      status = path.empty() ? s->SaveCheckpoint() : s->SaveCheckpoint(path);
    }
    ThrowIfFailed(status);
  }

 private:
  // A share of the server for one call: a close() meanwhile does not destroy it under
  // the call.
  std::shared_ptr<ps::OptimizerServer> Get() {
    if (!server_) throw ps::Error("this OptimizerServer is closed");
    return server_;
  }
  std::shared_ptr<ps::OptimizerServer> server_;
};

}  // namespace

void BindOptimizerServer(py::module_& m) {
  py::class_<PyOptimizerServer>(m, "OptimizerServer")
      .def(py::init<int, const py::kwargs&>(), py::arg("app_id") = 0)
      .def("num_keys", &PyOptimizerServer::NumKeys)
      .def("pushes_taken", &PyOptimizerServer::PushesTaken)
      .def("save_checkpoint", &PyOptimizerServer::SaveCheckpoint, py::arg("path") = "")
      .def("close", &PyOptimizerServer::Close);
}

}  // namespace herdps_python
