// myapp: what its parts share. The model is a linear least-squares fit of kDim weights,
// weight j under key j, trained by the workers on synthetic data with the optimizer
// running on the servers. Replace the model, the data and the loss with your own.
#ifndef MYAPP_APP_H_
#define MYAPP_APP_H_

#include <memory>

#include "ps/optimizer_server.h"

namespace myapp {

constexpr int kDim = 10;
// The weights the synthetic data comes from: what training should find.
inline double TrueWeight(int j) { return j - 4.5; }

struct Settings {
  int epochs = 20;
  int rows_per_worker = 1000;
  int batch = 50;
  double lr = 0.05;  // Adam's step size, on the servers
};

// --epochs N, --rows N, --batch N, --lr X (main.cc). Throws std::invalid_argument for
// an unknown flag or a value out of range.
Settings ParseSettings(int argc, char* argv[]);

// The server's part (server.cc): an OptimizerServer running Adam, serving until it is
// destroyed (after ps::Finalize).
std::unique_ptr<ps::OptimizerServer> StartServer(const Settings& settings);

// The worker's part (worker.cc): trains, prints each epoch's loss (worker 0), returns
// the process' exit status.
int RunWorker(const Settings& settings);

}  // namespace myapp

#endif  // MYAPP_APP_H_
