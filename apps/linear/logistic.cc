// Sigmoid, prediction and the log-loss gradient.
#include "logistic.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace linear {
namespace {

// bias + w.x for row r; features beyond w weigh 0.
double Margin(const Dataset& d, size_t r, const std::vector<double>& w, double bias) {
  double z = bias;
  for (uint64_t k = d.row_offsets[r]; k < d.row_offsets[r + 1]; ++k) {
    if (d.indices[k] < w.size()) z += w[d.indices[k]] * d.values[k];
  }
  return z;
}

// log(1 + e^z), stable for large |z|.
double Softplus(double z) { return std::max(z, 0.0) + std::log1p(std::exp(-std::fabs(z))); }

}  // namespace

double Sigmoid(double z) {
  if (z >= 0) return 1 / (1 + std::exp(-z));
  const double e = std::exp(z);  // e^z underflows gracefully to 0 instead of e^-z overflowing
  return e / (1 + e);
}

void Predict(const Dataset& d, const std::vector<double>& w, double bias,
             std::vector<double>* probs) {
  if (probs == nullptr) throw std::invalid_argument("Predict: null output");
  probs->resize(d.rows());
  for (size_t r = 0; r < d.rows(); ++r) (*probs)[r] = Sigmoid(Margin(d, r, w, bias));
}

double AccumulateGradient(const Dataset& d, const size_t* rows, size_t n, const int64_t* slot,
                          const double* w, double bias, double* grad, double* grad_b) {
  double loss = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t r = rows[i];
    const uint64_t begin = d.row_offsets[r], end = d.row_offsets[r + 1];
    double z = bias;
    for (uint64_t k = begin; k < end; ++k) {
      const uint64_t f = d.indices[k];
      z += w[slot ? slot[f] : static_cast<int64_t>(f)] * d.values[k];
    }
    const double y = d.labels[r];
    loss += Softplus(z) - y * z;
    const double residual = Sigmoid(z) - y;
    *grad_b += residual;
    for (uint64_t k = begin; k < end; ++k) {
      const uint64_t f = d.indices[k];
      grad[slot ? slot[f] : static_cast<int64_t>(f)] += residual * d.values[k];
    }
  }
  return loss;
}

double Gradient(const Dataset& d, const std::vector<size_t>& rows, const std::vector<double>& w,
                double bias, double reg_l2, std::vector<double>* grad_w, double* grad_b) {
  if (grad_w == nullptr || grad_b == nullptr) {
    throw std::invalid_argument("Gradient: null output");
  }
  if (rows.empty()) throw std::invalid_argument("Gradient: no rows");
  if (d.num_features > w.size()) {
    throw std::invalid_argument("Gradient: the data has " + std::to_string(d.num_features) +
                                " features but w has " + std::to_string(w.size()));
  }
  for (size_t r : rows) {
    if (r >= d.rows()) {
      throw std::out_of_range("Gradient: row " + std::to_string(r) + " of " +
                              std::to_string(d.rows()));
    }
  }
  grad_w->assign(w.size(), 0.0);
  double gb = 0;
  const double loss =
      AccumulateGradient(d, rows.data(), rows.size(), nullptr, w.data(), bias, grad_w->data(), &gb);
  const double n = static_cast<double>(rows.size());
  double norm2 = 0;
  for (size_t j = 0; j < w.size(); ++j) {
    (*grad_w)[j] = (*grad_w)[j] / n + reg_l2 * w[j];
    norm2 += w[j] * w[j];
  }
  *grad_b = gb / n;
  return loss / n + 0.5 * reg_l2 * norm2;
}

}  // namespace linear
