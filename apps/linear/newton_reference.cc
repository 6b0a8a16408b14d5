// Reference for apps/linear: the exact optimum of the app's objective
//   f(w, b) = mean over training rows of [log(1 + e^z) - y z] + reg_l2 / 2 ||w||^2,
//   z = b + w.x (the bias b is not regularised),
// found by Newton's method in double precision on the same data, split and
// standardisation as the app (it parses the app's flags and loads the data with the
// app's own loader, as worker 0 of 1), and compared with the model the app saved.
//
//   linear_newton_reference --model FILE [--max_gap 0.01] [the app's data flags]
//
// Exit status: 0 if (f(model) - f*) / f* <= --max_gap and f(model) >= f* - 1e-9 (no
// model may beat the optimum); 1 if not; 2 if the data, the flags or the model file
// are unusable or Newton's method does not converge.
#include <gflags/gflags.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer.h"
#include "training_options.h"

DEFINE_string(model, "", "model file written by apps/linear --save_model");
DEFINE_double(max_gap, 0.01, "largest accepted relative gap (f(model) - f*) / f*");

namespace {

constexpr int kMaxIterations = 100;
constexpr double kStopTolerance = 1e-10;  // on the Newton decrement and on ||grad||

// Parameters: the feature weights, then the bias at index num_features.
using Vector = std::vector<double>;

// log(1 + e^z) without overflow.
double Softplus(double z) { return std::max(z, 0.0) + std::log1p(std::exp(-std::fabs(z))); }

double Margin(const linear::Dataset& d, size_t row, const Vector& x) {
  const size_t bias = x.size() - 1;
  double z = x[bias];
  for (uint64_t j = d.row_offsets[row]; j < d.row_offsets[row + 1]; ++j) {
    z += x[d.indices[j]] * static_cast<double>(d.values[j]);
  }
  return z;
}

double Objective(const linear::Dataset& d, const Vector& x, double reg_l2) {
  double loss = 0;
  for (size_t row = 0; row < d.rows(); ++row) {
    const double z = Margin(d, row, x);
    loss += Softplus(z) - d.labels[row] * z;
  }
  double penalty = 0;
  for (size_t k = 0; k + 1 < x.size(); ++k) penalty += x[k] * x[k];
  return loss / static_cast<double>(d.rows()) + 0.5 * reg_l2 * penalty;
}

// The gradient and the lower triangle of the Hessian (row-major, m x m) of Objective.
void GradientAndHessian(const linear::Dataset& d, const Vector& x, double reg_l2, Vector* grad,
                        Vector* hessian) {
  const size_t m = x.size(), bias = m - 1;
  grad->assign(m, 0.0);
  hessian->assign(m * m, 0.0);
  std::vector<size_t> index;
  Vector value;
  for (size_t row = 0; row < d.rows(); ++row) {
    const double z = Margin(d, row, x);
    const double p = z >= 0 ? 1 / (1 + std::exp(-z)) : std::exp(z) / (1 + std::exp(z));
    const double err = p - d.labels[row], curvature = p * (1 - p);
    // The row's nonzeros with the bias appended, in ascending parameter order.
    index.assign(d.indices.begin() + d.row_offsets[row],
                 d.indices.begin() + d.row_offsets[row + 1]);
    value.assign(d.values.begin() + d.row_offsets[row], d.values.begin() + d.row_offsets[row + 1]);
    index.push_back(bias);
    value.push_back(1.0);
    for (size_t a = 0; a < index.size(); ++a) {
      (*grad)[index[a]] += err * value[a];
      double* out = hessian->data() + index[a] * m;
      const double scaled = curvature * value[a];
      for (size_t c = 0; c <= a; ++c) out[index[c]] += scaled * value[c];
    }
  }
  const double n = static_cast<double>(d.rows());
  for (size_t k = 0; k < m; ++k) {
    (*grad)[k] /= n;
    for (size_t c = 0; c <= k; ++c) (*hessian)[k * m + c] /= n;
    if (k != bias) {
      (*grad)[k] += reg_l2 * x[k];
      (*hessian)[k * m + k] += reg_l2;
    }
  }
}

// Solves (A + ridge I) s = rhs for a symmetric A given by its lower triangle (row-major,
// m x m), by Cholesky factorisation L L^T. Returns false, leaving *s unspecified, if a
// pivot is not positive (A + ridge I is not numerically positive definite).
bool CholeskySolve(Vector a, size_t m, double ridge, const Vector& rhs, Vector* s) {
  for (size_t j = 0; j < m; ++j) {
    double pivot = a[j * m + j] + ridge;
    for (size_t k = 0; k < j; ++k) pivot -= a[j * m + k] * a[j * m + k];
    if (!(pivot > 0)) return false;
    const double l = std::sqrt(pivot);
    a[j * m + j] = l;
    for (size_t i = j + 1; i < m; ++i) {
      double v = a[i * m + j];
      for (size_t k = 0; k < j; ++k) v -= a[i * m + k] * a[j * m + k];
      a[i * m + j] = v / l;
    }
  }
  *s = rhs;
  for (size_t i = 0; i < m; ++i) {  // L y = rhs
    for (size_t k = 0; k < i; ++k) (*s)[i] -= a[i * m + k] * (*s)[k];
    (*s)[i] /= a[i * m + i];
  }
  for (size_t i = m; i-- > 0;) {  // L^T s = y
    for (size_t k = i + 1; k < m; ++k) (*s)[i] -= a[k * m + i] * (*s)[k];
    (*s)[i] /= a[i * m + i];
  }
  return true;
}

struct Optimum {
  Vector x;
  double f = NAN;
  int iterations = 0;
  double ridge = 0;  // largest ridge the Cholesky factorisation needed (0: none)
};

// Damped Newton's method from x = 0 with an Armijo backtracking line search. Throws
// std::runtime_error if it does not converge within kMaxIterations.
Optimum Newton(const linear::Dataset& d, size_t m, double reg_l2) {
  Optimum o;
  o.x.assign(m, 0.0);
  o.f = Objective(d, o.x, reg_l2);
  Vector grad, hessian, step;
  for (; o.iterations < kMaxIterations; ++o.iterations) {
    GradientAndHessian(d, o.x, reg_l2, &grad, &hessian);
    double grad_norm = 0;
    for (double g : grad) grad_norm += g * g;
    grad_norm = std::sqrt(grad_norm);
    // The Hessian is positive definite in exact arithmetic (reg_l2 > 0 on the weights,
    // sum p(1-p) > 0 on the bias); a tiny ridge only rescues rounding.
    double ridge = 0;
    while (!CholeskySolve(hessian, m, ridge, grad, &step)) {
      ridge = ridge == 0 ? 1e-12 : ridge * 10;
      if (ridge > 1e-3) throw std::runtime_error("the Hessian is not positive definite");
    }
    o.ridge = std::max(o.ridge, ridge);
    double decrement2 = 0;  // g^T H^-1 g
    for (size_t k = 0; k < m; ++k) decrement2 += grad[k] * step[k];
    std::printf("newton %2d: f %.15g  |grad| %.3g  decrement %.3g\n", o.iterations, o.f, grad_norm,
                std::sqrt(std::max(decrement2, 0.0)));
    if (grad_norm < kStopTolerance || std::sqrt(std::max(decrement2, 0.0)) < kStopTolerance) {
      return o;
    }
    double t = 1;
    Vector next(m);
    for (int halvings = 0;; ++halvings) {
      for (size_t k = 0; k < m; ++k) next[k] = o.x[k] - t * step[k];
      const double f = Objective(d, next, reg_l2);
      if (f <= o.f - 1e-4 * t * decrement2) {
        o.x = next;
        o.f = f;
        break;
      }
      if (halvings == 60) {
        // No decrease left to find: x is optimal up to rounding if the gradient says so.
        if (grad_norm < 1e-8) return o;
        throw std::runtime_error("the line search found no decrease");
      }
      t /= 2;
    }
  }
  throw std::runtime_error("Newton's method did not converge in " + std::to_string(kMaxIterations) +
                           " iterations");
}

// The parameters in a model file of apps/linear: exactly one `key value` line for each
// key 0..m-1. Throws std::runtime_error naming what is wrong.
Vector ReadModel(const std::string& path, size_t m) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read the model " + path);
  Vector x(m, NAN);
  std::string line;
  size_t lines = 0;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    unsigned long long key;
    double value;
    std::string rest;
    if (!(fields >> key >> value) || (fields >> rest) || key >= m || !std::isnan(x[key]) ||
        !std::isfinite(value)) {
      throw std::runtime_error(path + ":" + std::to_string(lines + 1) + ": expected a new key < " +
                               std::to_string(m) + " and a finite value, got '" + line + "'");
    }
    x[key] = value;
    ++lines;
  }
  if (lines != m) {
    throw std::runtime_error(path + ": " + std::to_string(lines) + " keys, expected " +
                             std::to_string(m));
  }
  return x;
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  try {
    if (FLAGS_model.empty()) throw std::invalid_argument("--model is required");
    linear::ValidateTrainingFlags();
    const linear::TrainingData data = linear::LoadTrainingData(0, 1);
    const linear::Dataset& d = data.train;
    const size_t m = data.num_features + 1;
    std::printf("%zu training rows, %llu features, reg_l2 %g\n", d.rows(),
                static_cast<unsigned long long>(data.num_features), FLAGS_reg_l2);
    const Optimum best = Newton(d, m, FLAGS_reg_l2);
    std::printf("optimum after %d Newton iterations: f* = %.12g", best.iterations, best.f);
    if (best.ridge > 0) std::printf(" (a ridge of up to %g was added to the Hessian)", best.ridge);
    std::printf("\n");
    const double f_model = Objective(d, ReadModel(FLAGS_model, m), FLAGS_reg_l2);
    const double gap = (f_model - best.f) / best.f;
    const bool ok = gap <= FLAGS_max_gap && f_model >= best.f - 1e-9;
    std::printf("model: f = %.12g; relative gap (f - f*) / f* = %.4g (max %g): %s\n", f_model, gap,
                FLAGS_max_gap, ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "linear_newton_reference: %s\n", e.what());
    return 2;
  }
}
