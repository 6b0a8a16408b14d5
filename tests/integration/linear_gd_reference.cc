// Reference for apps/linear: full-batch gradient descent in double precision on the
// same data, the same split and the same standardisation (it parses the same flags
// and loads the data with the app's own loader, as worker 0 of 1), compared with the
// model the app saved. Prints the error and exits 1 above the tolerance.
//
//   linear_gd_reference --model FILE --epochs E --lr LR [the app's data flags]
#include <gflags/gflags.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <vector>

#include "logistic.h"
#include "trainer.h"
#include "training_options.h"

DEFINE_string(model, "", "model file written by apps/linear --save_model");
DEFINE_double(tolerance, 1e-5, "largest accepted max|w - ref| / max|ref|");

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  linear::TrainingData data = linear::LoadTrainingData(0, 1);
  const linear::Dataset& d = data.train;
  const size_t f = data.num_features, n = d.rows();
  std::vector<double> w(f, 0.0);
  double b = 0.0;
  for (int epoch = 0; epoch < FLAGS_epochs; ++epoch) {
    std::vector<double> grad(f, 0.0);
    double grad_b = 0.0;
    for (size_t row = 0; row < n; ++row) {
      double z = b;
      for (uint64_t j = d.row_offsets[row]; j < d.row_offsets[row + 1]; ++j) {
        z += w[d.indices[j]] * d.values[j];
      }
      double err = 1.0 / (1.0 + std::exp(-z)) - d.labels[row];
      for (uint64_t j = d.row_offsets[row]; j < d.row_offsets[row + 1]; ++j) {
        grad[d.indices[j]] += err * d.values[j];
      }
      grad_b += err;
    }
    for (size_t k = 0; k < f; ++k) w[k] -= FLAGS_lr * (grad[k] / n + FLAGS_reg_l2 * w[k]);
    b -= FLAGS_lr * grad_b / n;
  }
  std::ifstream in(FLAGS_model);
  std::vector<double> got(f + 1, NAN);
  unsigned long long key;
  double value;
  size_t lines = 0;
  while (in >> key >> value) {
    if (key <= f) got[key] = value;
    ++lines;
  }
  double worst = 0, scale = std::fabs(b);
  for (size_t k = 0; k < f; ++k) scale = std::max(scale, std::fabs(w[k]));
  for (size_t k = 0; k <= f; ++k) {
    double ref = k < f ? w[k] : b;
    worst = std::max(worst, std::isnan(got[k]) ? INFINITY : std::fabs(got[k] - ref));
  }
  double rel = worst / scale;
  std::printf("%zu keys in the model (expected %zu); max |w - ref| = %.3g, relative %.3g "
              "(tolerance %.1g); |ref|max = %.4g, bias ref %.6g got %.6g\n",
              lines, f + 1, worst, rel, FLAGS_tolerance, scale, b, got[f]);
  return lines == f + 1 && rel <= FLAGS_tolerance && scale > 1e-3 ? 0 : 1;
}
