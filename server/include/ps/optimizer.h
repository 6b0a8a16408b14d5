// Server-side optimizers: the update rules a server applies to a key's values when a
// worker pushes a gradient, with the per-value state kept beside the values.
//
// Conventions (documented in docs/optimizers.md):
//   sgd       w -= lr * g
//   momentum  b = mu * b + g;            w -= lr * b            (dampening 0)
//   nesterov  b = mu * b + g;            w -= lr * (g + mu * b)
//   adagrad   s += g^2;                  w -= lr * g / (sqrt(s) + eps)   (eps 1e-10)
//   rmsprop   v = a * v + (1 - a) * g^2; w -= lr * g / (sqrt(v) + eps)   (a 0.99, eps 1e-8)
//   adam      m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//             w -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//   amsgrad   as adam, with vmax = max(vmax, v) in place of v in the denominator
//   ftrl      FTRL-Proximal (McMahan et al. 2013), per coordinate:
//             sigma = (sqrt(n + g^2) - sqrt(n)) / alpha; z += g - sigma * w; n += g^2;
//             w = |z| <= l1 ? 0 : -(z - sign(z) l1) / ((beta + sqrt(n)) / alpha + l2)
// Optional weight decay adds wd * w to g first (not for ftrl, which has l2).
// Arithmetic is done in double and stored in float32.
//
// Adam and AMSGrad count steps per key ("lazy" Adam): a key that a push does not
// touch does not advance its step count, so bias correction stays right for sparse
// keys.
//
// Thread safety: an Optimizer is immutable after construction and may be shared;
// Update touches only the arrays passed in.
#ifndef PS_OPTIMIZER_H_
#define PS_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ps/status.h"

namespace ps {

enum class OptimizerKind { kSgd, kMomentum, kNesterov, kAdagrad, kRmsprop, kAdam, kAmsgrad, kFtrl };

// Hyper-parameters of every optimizer, with PyTorch's defaults where it has them. An
// app fills this (typically from its flags); every server must use the same values.
struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 0.01;
  double momentum = 0.9;       // momentum, nesterov
  double beta1 = 0.9;          // adam, amsgrad
  double beta2 = 0.999;        // adam, amsgrad
  double eps = 1e-8;           // adam, amsgrad, rmsprop
  double adagrad_eps = 1e-10;  // adagrad
  double rmsprop_alpha = 0.99;
  double ftrl_alpha = 0.1;
  double ftrl_beta = 1.0;
  double ftrl_l1 = 0.0;
  double ftrl_l2 = 0.0;
  double weight_decay = 0.0;  // all but ftrl

  // InvalidArgument naming the offending field when a value is out of range.
  Status Validate() const;
  // Compact text form ("adam lr=0.001 beta1=0.9 ..."), for logs and for handing the
  // options to every server; Parse reads it back exactly (round trip).
  std::string ToString() const;
  static Status Parse(const std::string& text, OptimizerOptions* out);
};

// "sgd", "momentum", ... <-> OptimizerKind. ParseOptimizerKind lists the valid names
// in its error.
const char* OptimizerName(OptimizerKind kind);
Status ParseOptimizerKind(const std::string& name, OptimizerKind* kind);

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // Floats of state kept per value (0 for sgd, 1 for momentum, ..., 3 for amsgrad).
  virtual size_t StateWidth() const = 0;

  // Applies one step to n values `w` with gradient `g`. `state` holds StateWidth() * n
  // floats laid out as StateWidth() arrays of n (zeros before the first step). `step`
  // is the 1-based step count of this key (this update included).
  virtual void Update(float* w, float* state, const float* g, size_t n, int64_t step) const = 0;

  const OptimizerOptions& options() const { return options_; }

  // The optimizer for options.kind. options must be valid (see Validate).
  static std::unique_ptr<Optimizer> Create(const OptimizerOptions& options);

 protected:
  explicit Optimizer(const OptimizerOptions& options) : options_(options) {}
  OptimizerOptions options_;
};

}  // namespace ps

#endif  // PS_OPTIMIZER_H_
