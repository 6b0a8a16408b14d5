// The update rules of the server-side optimizers (see ps/optimizer.h for the maths).
#include <algorithm>
#include <cmath>
#include <vector>

#include "optimizer_rules.h"

namespace ps {
namespace {

// Gradient with weight decay folded in.
inline double Grad(const OptimizerOptions& o, float w, float g) {
  return o.weight_decay != 0 ? g + o.weight_decay * w : g;
}

class Sgd : public Optimizer {
 public:
  explicit Sgd(const OptimizerOptions& o) : Optimizer(o) {}
  size_t StateWidth() const override { return 0; }
  void Update(float* w, float*, const float* g, size_t n, int64_t) const override {
    for (size_t i = 0; i < n; ++i) {
      w[i] = static_cast<float>(w[i] - options_.lr * Grad(options_, w[i], g[i]));
    }
  }
};

class Momentum : public Optimizer {
 public:
  Momentum(const OptimizerOptions& o, bool nesterov) : Optimizer(o), nesterov_(nesterov) {}
  size_t StateWidth() const override { return 1; }
  void Update(float* w, float* state, const float* g, size_t n, int64_t) const override {
    const double mu = options_.momentum;
    for (size_t i = 0; i < n; ++i) {
      double grad = Grad(options_, w[i], g[i]);
      double b = mu * state[i] + grad;
      state[i] = static_cast<float>(b);
      double dir = nesterov_ ? grad + mu * b : b;
      w[i] = static_cast<float>(w[i] - options_.lr * dir);
    }
  }

 private:
  bool nesterov_;
};

class Adagrad : public Optimizer {
 public:
  explicit Adagrad(const OptimizerOptions& o) : Optimizer(o) {}
  size_t StateWidth() const override { return 1; }
  void Update(float* w, float* sum, const float* g, size_t n, int64_t) const override {
    for (size_t i = 0; i < n; ++i) {
      double grad = Grad(options_, w[i], g[i]);
      double s = sum[i] + grad * grad;
      sum[i] = static_cast<float>(s);
      w[i] = static_cast<float>(w[i] - options_.lr * grad / (std::sqrt(s) + options_.adagrad_eps));
    }
  }
};

class Rmsprop : public Optimizer {
 public:
  explicit Rmsprop(const OptimizerOptions& o) : Optimizer(o) {}
  size_t StateWidth() const override { return 1; }
  void Update(float* w, float* sq, const float* g, size_t n, int64_t) const override {
    const double a = options_.rmsprop_alpha;
    for (size_t i = 0; i < n; ++i) {
      double grad = Grad(options_, w[i], g[i]);
      double v = a * sq[i] + (1 - a) * grad * grad;
      sq[i] = static_cast<float>(v);
      w[i] = static_cast<float>(w[i] - options_.lr * grad / (std::sqrt(v) + options_.eps));
    }
  }
};

class Adam : public Optimizer {
 public:
  Adam(const OptimizerOptions& o, bool amsgrad) : Optimizer(o), amsgrad_(amsgrad) {
    // Sparse keys each have their own step count, so the bias corrections are needed
    // per key and per update; a table of the first steps spares two pow() calls each.
    for (int64_t t = 1; t <= kTableSteps; ++t) {
      bias1_.push_back(1 - std::pow(o.beta1, static_cast<double>(t)));
      bias2_sqrt_.push_back(std::sqrt(1 - std::pow(o.beta2, static_cast<double>(t))));
    }
  }
  size_t StateWidth() const override { return amsgrad_ ? 3 : 2; }
  void Update(float* w, float* state, const float* g, size_t n, int64_t step) const override {
    const double b1 = options_.beta1, b2 = options_.beta2;
    const bool tabled = step >= 1 && step <= kTableSteps;
    const double t = static_cast<double>(step);
    const double bias1 = tabled ? bias1_[step - 1] : 1 - std::pow(b1, t);
    const double bias2_sqrt = tabled ? bias2_sqrt_[step - 1] : std::sqrt(1 - std::pow(b2, t));
    const double step_size = options_.lr / bias1;
    float* m = state;
    float* v = state + n;
    float* vmax = amsgrad_ ? state + 2 * n : nullptr;
    for (size_t i = 0; i < n; ++i) {
      double grad = Grad(options_, w[i], g[i]);
      double mi = b1 * m[i] + (1 - b1) * grad;
      double vi = b2 * v[i] + (1 - b2) * grad * grad;
      m[i] = static_cast<float>(mi);
      v[i] = static_cast<float>(vi);
      double second = vi;
      if (amsgrad_) {
        second = std::max(static_cast<double>(vmax[i]), vi);
        vmax[i] = static_cast<float>(second);
      }
      double denom = std::sqrt(second) / bias2_sqrt + options_.eps;
      w[i] = static_cast<float>(w[i] - step_size * mi / denom);
    }
  }

 private:
  static constexpr int64_t kTableSteps = 4096;
  bool amsgrad_;
  std::vector<double> bias1_, bias2_sqrt_;  // index t - 1
};

class Ftrl : public Optimizer {
 public:
  explicit Ftrl(const OptimizerOptions& o) : Optimizer(o) {}
  size_t StateWidth() const override { return 2; }
  void Update(float* w, float* state, const float* g, size_t n, int64_t) const override {
    const double alpha = options_.ftrl_alpha, beta = options_.ftrl_beta;
    const double l1 = options_.ftrl_l1, l2 = options_.ftrl_l2;
    float* z = state;
    float* nsum = state + n;
    for (size_t i = 0; i < n; ++i) {
      double grad = g[i];
      double n_old = nsum[i];
      double n_new = n_old + grad * grad;
      double sigma = (std::sqrt(n_new) - std::sqrt(n_old)) / alpha;
      double zi = z[i] + grad - sigma * w[i];
      z[i] = static_cast<float>(zi);
      nsum[i] = static_cast<float>(n_new);
      if (std::fabs(zi) <= l1) {
        w[i] = 0.0f;
      } else {
        double sign = zi < 0 ? -1.0 : 1.0;
        w[i] = static_cast<float>(-(zi - sign * l1) / ((beta + std::sqrt(n_new)) / alpha + l2));
      }
    }
  }
};

}  // namespace

std::unique_ptr<Optimizer> CreateOptimizer(const OptimizerOptions& o) {
  switch (o.kind) {
    case OptimizerKind::kSgd:
      return std::make_unique<Sgd>(o);
    case OptimizerKind::kMomentum:
      return std::make_unique<Momentum>(o, false);
    case OptimizerKind::kNesterov:
      return std::make_unique<Momentum>(o, true);
    case OptimizerKind::kAdagrad:
      return std::make_unique<Adagrad>(o);
    case OptimizerKind::kRmsprop:
      return std::make_unique<Rmsprop>(o);
    case OptimizerKind::kAdam:
      return std::make_unique<Adam>(o, false);
    case OptimizerKind::kAmsgrad:
      return std::make_unique<Adam>(o, true);
    case OptimizerKind::kFtrl:
      return std::make_unique<Ftrl>(o);
  }
  return nullptr;
}

}  // namespace ps
