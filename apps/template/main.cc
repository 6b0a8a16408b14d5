// myapp: a HerdPS app from the template. Every node of the job runs this program; the
// launcher tells each whether it is the scheduler, a server or a worker.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "app.h"
#include "ps/ps.h"

namespace myapp {

Settings ParseSettings(int argc, char* argv[]) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--epochs") {
      s.epochs = std::stoi(value);
    } else if (flag == "--rows") {
      s.rows_per_worker = std::stoi(value);
    } else if (flag == "--batch") {
      s.batch = std::stoi(value);
    } else if (flag == "--lr") {
      s.lr = std::stod(value);
    } else {
      throw std::invalid_argument("unknown flag " + flag + " (--epochs, --rows, --batch, --lr)");
    }
  }
  if (s.epochs < 1 || s.rows_per_worker < 1 || s.batch < 1 || !(s.lr > 0)) {
    throw std::invalid_argument("--epochs, --rows and --batch must be >= 1, --lr > 0");
  }
  return s;
}

}  // namespace myapp

int main(int argc, char* argv[]) {
  myapp::Settings settings;
  try {
    settings = myapp::ParseSettings(argc, argv);
  } catch (const std::exception& e) {  // std::invalid_argument, or stoi's own errors
    std::fprintf(stderr, "myapp: %s\n", e.what());
    return 2;
  }
  try {
    ps::Start(0, argv[0]);  // joins the job: PS_* from the launcher
    std::unique_ptr<ps::OptimizerServer> server;
    if (ps::IsServer()) server = myapp::StartServer(settings);
    int rc = ps::IsWorker() ? myapp::RunWorker(settings) : 0;
    ps::Finalize(0, true);  // a barrier with every node, then leave
    return rc;
  } catch (const std::exception& e) {
    // Stop this node at once; the launcher then stops the others.
    std::fprintf(stderr, "myapp: %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
}
