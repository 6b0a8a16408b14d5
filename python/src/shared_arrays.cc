#include "shared_arrays.h"

#include <mutex>
#include <vector>

namespace herdps_python {

namespace {

std::mutex released_mu;
std::vector<py::object*>* released = new std::vector<py::object*>();  // never freed

}  // namespace

void ReleaseFromAnyThread(py::object* held) {
  std::lock_guard<std::mutex> lock(released_mu);
  released->push_back(held);
}

void DropReleasedArrays() {
  std::vector<py::object*> batch;
  {
    std::lock_guard<std::mutex> lock(released_mu);
    batch.swap(*released);
  }
  for (py::object* held : batch) delete held;
}

}  // namespace herdps_python
