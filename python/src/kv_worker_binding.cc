// herdps._core.KVWorkerFloat32 / KVWorkerFloat64: ps::KVWorker for Python, zero-copy.
//
// Pushed keys and values, and a pull's `out` array, are shared with the runtime (the
// runtime holds a reference until it is done with them); a pull without `out` hands
// back the received buffer itself as a numpy array. Calls into the runtime run without
// the GIL. The Python wrapper (herdps/__init__.py) turns lists and other dtypes into
// the arrays these methods take.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "bindings.h"
#include "ps/kv_worker.h"
#include "shared_arrays.h"
#include "wait_interruptibly.h"

namespace herdps_python {

namespace {

// What a pull needs until its wait: the buffers the runtime fills.
template <typename Val>
struct PendingPull {
  ps::SArray<Val> vals;
  ps::SArray<int> lens;
  bool want_lens = false;
  py::object out;  // the caller's array, or None (then `vals` receives a buffer)
};

// The worker and the pulls it fills, owned together: a call in progress on another
// thread (waiting without the GIL) keeps both alive past a close(), and the last owner
// destroys the worker before the pulls' arrays, so the runtime never writes into a
// released array. Destroyed with the GIL held (the pulls hold Python objects); the
// worker's teardown never waits for the GIL.
template <typename Val>
struct WorkerState {
  std::unique_ptr<ps::KVWorker<Val>> worker;
  // Pulls issued and not waited for, by timestamp; only touched with the GIL held.
  std::map<int, std::unique_ptr<PendingPull<Val>>> pulls;
  ~WorkerState() {
    worker.reset();
    pulls.clear();
  }
};

template <typename Val>
class PyKVWorker {
 public:
  PyKVWorker(int app_id, int customer_id) : state_(std::make_shared<WorkerState<Val>>()) {
    py::gil_scoped_release release;
    state_->worker = std::make_unique<ps::KVWorker<Val>>(app_id, customer_id);
  }
  ~PyKVWorker() { Close(); }

  // Abandons requests still in flight: the runtime stops touching their arrays before
  // the arrays are released (at once, or when a call still running on another thread
  // returns).
  void Close() {
    state_.reset();
    DropReleasedArrays();
  }

  int Push(const py::array& keys, const py::array& vals, const py::object& lens, int cmd,
           int priority) {
    std::shared_ptr<WorkerState<Val>> state = Get();
    ps::KVWorker<Val>& worker = *state->worker;
    DropReleasedArrays();
    CheckArray<ps::Key>(keys, "keys", false);
    CheckArray<Val>(vals, "vals", false);
    ps::SArray<ps::Key> k = ShareArray<ps::Key>(keys);
    ps::SArray<Val> v = ShareArray<Val>(vals);
    ps::SArray<int> l = SharedLens(lens);
    py::gil_scoped_release release;
    return worker.ZPush(k, v, l, cmd, nullptr, priority);
  }

  int Pull(const py::array& keys, const py::object& out, bool want_lens, int cmd,
           int priority) {
    return Request(false, keys, py::none(), out, want_lens, cmd, priority);
  }

  int PushPull(const py::array& keys, const py::array& vals, const py::object& out,
               bool want_lens, int cmd, int priority) {
    return Request(true, keys, vals, out, want_lens, cmd, priority);
  }

  // None for a push; for a pull its values (`out` or a new array), with their lengths
  // as a second item when asked for.
  py::object Wait(int timestamp, double timeout_seconds) {
    std::shared_ptr<WorkerState<Val>> state = Get();
    ps::KVWorker<Val>& worker = *state->worker;
    ps::Status status;
    bool done = WaitInterruptibly(
        [&](std::chrono::milliseconds slice) {
          status = worker.Wait(timestamp, slice);
          return status.code() != ps::Status::Code::kTimeout || worker.Finished(timestamp);
        },
        timeout_seconds);
    DropReleasedArrays();
    if (!done) {
      PyErr_SetString(PyExc_TimeoutError,
                      ("request " + std::to_string(timestamp) + " not finished after " +
                       std::to_string(timeout_seconds) + " s (it goes on)")
                          .c_str());
      throw py::error_already_set();
    }
    if (status.code() == ps::Status::Code::kTimeout) {
      // Finished right after a slice ran out: ask again for how it ended.
      py::gil_scoped_release release;
      status = worker.Wait(timestamp);
    }
    auto it = state->pulls.find(timestamp);
    if (it == state->pulls.end()) {
      ThrowIfFailed(status);
      return py::none();  // a push, or a pull whose values an earlier wait returned
    }
    std::unique_ptr<PendingPull<Val>> pull = std::move(it->second);
    state->pulls.erase(it);
    ThrowIfFailed(status);
    py::object vals = pull->out.is_none() ? py::object(ToNumpy(std::move(pull->vals)))
                                          : pull->out;
    if (!pull->want_lens) return vals;
    return py::make_tuple(vals, ToNumpy(std::move(pull->lens)));
  }

  bool Finished(int timestamp) { return Get()->worker->Finished(timestamp); }

  void Clock() { CallWithoutGil(&ps::KVWorker<Val>::Clock); }
  int64_t CurrentClock() { return Get()->worker->CurrentClock(); }
  void FinishClocks() { CallWithoutGil(&ps::KVWorker<Val>::FinishClocks); }

  size_t NumInFlight() { return Get()->worker->NumInFlight(); }

 private:
  // An owner's share of the state for one call; herdps.Error once closed.
  std::shared_ptr<WorkerState<Val>> Get() {
    if (!state_) throw ps::Error("this KVWorker is closed");
    return state_;
  }

  // A blocking call of the worker, run without the GIL; herdps.Error if it fails.
  void CallWithoutGil(ps::Status (ps::KVWorker<Val>::*method)()) {
    std::shared_ptr<WorkerState<Val>> state = Get();
    ps::Status status;
    {
      py::gil_scoped_release release;
      status = (state->worker.get()->*method)();
    }
    ThrowIfFailed(status);
  }

  static ps::SArray<int> SharedLens(const py::object& lens) {
    if (lens.is_none()) return {};
    py::array a = AsArray(lens, "lens");
    CheckArray<int>(a, "lens", false);
    return ShareArray<int>(a);
  }

  int Request(bool push, const py::array& keys, const py::object& vals, const py::object& out,
              bool want_lens, int cmd, int priority) {
    std::shared_ptr<WorkerState<Val>> state = Get();
    ps::KVWorker<Val>& worker = *state->worker;
    DropReleasedArrays();
    CheckArray<ps::Key>(keys, "keys", false);
    auto pull = std::make_unique<PendingPull<Val>>();
    pull->want_lens = want_lens;
    pull->out = out;
    if (!out.is_none()) {
      py::array a = AsArray(out, "out");
      CheckArray<Val>(a, "out", true);
      // An empty SArray asks the runtime for a buffer of its own: the values would not
      // reach `out`.
      if (a.size() == 0 && keys.size() > 0) {
        throw ps::Error("out: an empty array for " + std::to_string(keys.size()) +
                        " keys; pass out=None to receive a new array");
      }
      pull->vals = ShareArray<Val>(a);
    }
    ps::SArray<ps::Key> k = ShareArray<ps::Key>(keys);
    ps::SArray<Val> v;
    if (push) {
      py::array a = AsArray(vals, "vals");
      CheckArray<Val>(a, "vals", false);
      v = ShareArray<Val>(a);
    }
    ps::SArray<int>* lens = want_lens ? &pull->lens : nullptr;
    int timestamp;
    {
      py::gil_scoped_release release;
      timestamp = push ? worker.ZPushPull(k, v, &pull->vals, lens, cmd, nullptr, priority)
                       : worker.ZPull(k, &pull->vals, lens, cmd, nullptr, priority);
    }
    state->pulls[timestamp] = std::move(pull);
    return timestamp;
  }

  std::shared_ptr<WorkerState<Val>> state_;  // null once closed
};

template <typename Val>
void BindOne(py::module_& m, const char* name) {
  using W = PyKVWorker<Val>;
  py::class_<W>(m, name)
      .def(py::init<int, int>(), py::arg("app_id") = 0, py::arg("customer_id") = 0)
      .def("push", &W::Push, py::arg("keys"), py::arg("vals"), py::arg("lens") = py::none(),
           py::arg("cmd") = 0, py::arg("priority") = 0)
      .def("pull", &W::Pull, py::arg("keys"), py::arg("out") = py::none(),
           py::arg("want_lens") = false, py::arg("cmd") = 0, py::arg("priority") = 0)
      .def("pushpull", &W::PushPull, py::arg("keys"), py::arg("vals"),
           py::arg("out") = py::none(), py::arg("want_lens") = false, py::arg("cmd") = 0,
           py::arg("priority") = 0)
      .def("wait", &W::Wait, py::arg("timestamp"), py::arg("timeout") = -1.0)
      .def("finished", &W::Finished, py::arg("timestamp"))
      .def("clock", &W::Clock)
      .def("current_clock", &W::CurrentClock)
      .def("finish_clocks", &W::FinishClocks)
      .def("num_in_flight", &W::NumInFlight)
      .def("close", &W::Close);
}

}  // namespace

void BindKVWorker(py::module_& m) {
  BindOne<float>(m, "KVWorkerFloat32");
  BindOne<double>(m, "KVWorkerFloat64");
}

}  // namespace herdps_python
