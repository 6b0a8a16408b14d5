// The worker's part: minibatch gradients of the mean squared error on this worker's
// own synthetic rows, pushed to the servers, which step the weights.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "app.h"
#include "ps/ps.h"

namespace myapp {
namespace {

struct Data {
  std::vector<double> x;  // rows x kDim
  std::vector<double> y;
};

// Rows of this worker: x uniform in [-1, 1], y = TrueWeight . x + a little noise.
Data MakeData(int rank, int rows) {
  std::mt19937_64 gen(1234 + rank);
  std::uniform_real_distribution<double> feature(-1, 1);
  std::normal_distribution<double> noise(0, 0.01);
  Data d;
  for (int r = 0; r < rows; ++r) {
    double y = noise(gen);
    for (int j = 0; j < kDim; ++j) {
      d.x.push_back(feature(gen));
      y += TrueWeight(j) * d.x.back();
    }
    d.y.push_back(y);
  }
  return d;
}

// Mean squared error / 2 of rows [begin, end), and its gradient if `grad` is given.
double Loss(const Data& d, int begin, int end, const std::vector<float>& w,
            std::vector<float>* grad) {
  std::vector<double> g(kDim, 0.0);
  double loss = 0;
  for (int r = begin; r < end; ++r) {
    double residual = -d.y[r];
    for (int j = 0; j < kDim; ++j) residual += w[j] * d.x[r * kDim + j];
    loss += residual * residual / 2;
    for (int j = 0; j < kDim; ++j) g[j] += residual * d.x[r * kDim + j];
  }
  const int n = end - begin;
  if (grad) {
    grad->resize(kDim);
    for (int j = 0; j < kDim; ++j) (*grad)[j] = static_cast<float>(g[j] / n);
  }
  return loss / n;
}

void Check(const ps::Status& s, const char* what) {
  if (!s.ok()) throw ps::Error(std::string(what) + ": " + s.ToString());
}

}  // namespace

int RunWorker(const Settings& settings) {
  const int rank = ps::MyRank();
  const Data data = MakeData(rank, settings.rows_per_worker);
  ps::KVWorker<float> kv(/*app_id=*/0, /*customer_id=*/0);
  std::vector<ps::Key> keys(kDim);
  for (int j = 0; j < kDim; ++j) keys[j] = j;
  std::vector<float> w, grad;
  for (int epoch = 1; epoch <= settings.epochs; ++epoch) {
    for (int at = 0; at < settings.rows_per_worker; at += settings.batch) {
      const int end = std::min(at + settings.batch, settings.rows_per_worker);
      Check(kv.Wait(kv.Pull(keys, &w)), "pull");
      Loss(data, at, end, w, &grad);
      Check(kv.Wait(kv.Push(keys, grad)), "push");
    }
    // Every worker finished the epoch: worker 0 reports the model they reached.
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
    if (rank == 0) {
      Check(kv.Wait(kv.Pull(keys, &w)), "pull");
      std::printf("epoch %d: loss %.6f\n", epoch, Loss(data, 0, settings.rows_per_worker, w,
                                                       nullptr));
    }
    ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup);
  }
  if (rank == 0) {
    double distance = 0;
    for (int j = 0; j < kDim; ++j) distance += std::pow(w[j] - TrueWeight(j), 2);
    std::printf("done: %d workers, distance to the true weights %.4f\n", ps::NumWorkers(),
                std::sqrt(distance));
  }
  return 0;
}

}  // namespace myapp
