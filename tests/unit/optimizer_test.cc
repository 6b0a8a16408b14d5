// Each server-side optimizer against an independent double-precision reference over
// 1000+ steps, on dense keys and on sparse keys (a key is touched on some steps only,
// and Adam/AMSGrad count steps per key).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "ps/optimizer.h"

namespace {

using ps::Optimizer;
using ps::OptimizerKind;
using ps::OptimizerOptions;

// The textbook rules, in double, written from the formulas (not from the server code).
struct Reference {
  OptimizerOptions o;
  std::vector<double> w, a, b, c;  // per-value state; meaning depends on the optimizer
  explicit Reference(const OptimizerOptions& opt, size_t n)
      : o(opt), w(n, 0.0), a(n, 0.0), b(n, 0.0), c(n, 0.0) {}

  void Step(size_t i, double g, int64_t t) {
    if (o.kind != OptimizerKind::kFtrl) g += o.weight_decay * w[i];
    switch (o.kind) {
      case OptimizerKind::kSgd:
        w[i] -= o.lr * g;
        break;
      case OptimizerKind::kMomentum:
        a[i] = o.momentum * a[i] + g;
        w[i] -= o.lr * a[i];
        break;
      case OptimizerKind::kNesterov:
        a[i] = o.momentum * a[i] + g;
        w[i] -= o.lr * (g + o.momentum * a[i]);
        break;
      case OptimizerKind::kAdagrad:
        a[i] += g * g;
        w[i] -= o.lr * g / (std::sqrt(a[i]) + o.adagrad_eps);
        break;
      case OptimizerKind::kRmsprop:
        a[i] = o.rmsprop_alpha * a[i] + (1 - o.rmsprop_alpha) * g * g;
        w[i] -= o.lr * g / (std::sqrt(a[i]) + o.eps);
        break;
      case OptimizerKind::kAdam:
      case OptimizerKind::kAmsgrad: {
        a[i] = o.beta1 * a[i] + (1 - o.beta1) * g;
        b[i] = o.beta2 * b[i] + (1 - o.beta2) * g * g;
        double second = b[i];
        if (o.kind == OptimizerKind::kAmsgrad) second = c[i] = std::max(c[i], b[i]);
        double mhat = a[i] / (1 - std::pow(o.beta1, t));
        double vhat = second / (1 - std::pow(o.beta2, t));
        w[i] -= o.lr * mhat / (std::sqrt(vhat) + o.eps);
        break;
      }
      case OptimizerKind::kFtrl: {
        double n_new = b[i] + g * g;
        double sigma = (std::sqrt(n_new) - std::sqrt(b[i])) / o.ftrl_alpha;
        a[i] += g - sigma * w[i];
        b[i] = n_new;
        w[i] = std::fabs(a[i]) <= o.ftrl_l1
                   ? 0.0
                   : -(a[i] - (a[i] < 0 ? -1 : 1) * o.ftrl_l1) /
                         ((o.ftrl_beta + std::sqrt(b[i])) / o.ftrl_alpha + o.ftrl_l2);
        break;
      }
    }
  }
};

// Gradient of a noisy quadratic pulling value i toward a target: realistic, and it
// keeps rounding errors from growing without bound.
double Gradient(double w, size_t i, int64_t step, std::mt19937* rng) {
  std::normal_distribution<double> noise(0.0, 0.3);
  double target = std::sin(0.37 * static_cast<double>(i) + 1.0);
  (void)step;
  return 2.0 * (w - target) + noise(*rng);
}

double MaxRelativeError(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double scale = std::max(std::fabs(want[i]), 1e-2);
    worst = std::max(worst, std::fabs(got[i] - want[i]) / scale);
  }
  return worst;
}

OptimizerOptions OptionsFor(OptimizerKind kind) {
  OptimizerOptions o;
  o.kind = kind;
  o.lr = kind == OptimizerKind::kAdagrad ? 0.1 : (kind == OptimizerKind::kSgd ? 0.05 : 0.01);
  o.ftrl_alpha = 0.5;
  o.ftrl_l1 = 0.01;
  o.ftrl_l2 = 0.1;
  o.weight_decay = kind == OptimizerKind::kMomentum ? 1e-3 : 0.0;
  return o;
}

class OptimizerMatchesReference : public ::testing::TestWithParam<OptimizerKind> {};

TEST_P(OptimizerMatchesReference, OnDenseKeysOver1000Steps) {
  OptimizerOptions o = OptionsFor(GetParam());
  auto opt = Optimizer::Create(o);
  const size_t n = 64;
  std::vector<float> w(n, 0.0f), g(n), state(opt->StateWidth() * n, 0.0f);
  Reference ref(o, n);
  std::mt19937 rng(1);
  for (int64_t t = 1; t <= 1500; ++t) {
    for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>(Gradient(ref.w[i], i, t, &rng));
    opt->Update(w.data(), state.data(), g.data(), n, t);
    for (size_t i = 0; i < n; ++i) ref.Step(i, g[i], t);
  }
  double err = MaxRelativeError(w, ref.w);
  EXPECT_LE(err, 1e-5) << ps::OptimizerName(o.kind);
  // The run must have moved the weights: a no-op optimizer would "match" zeros.
  EXPECT_GT(std::fabs(ref.w[3]), 0.05);
}

TEST_P(OptimizerMatchesReference, OnSparseKeysWithPerKeyStepCounts) {
  OptimizerOptions o = OptionsFor(GetParam());
  auto opt = Optimizer::Create(o);
  const size_t keys = 40, width = 3;
  std::vector<std::vector<float>> w(keys, std::vector<float>(width, 0.0f));
  std::vector<std::vector<float>> state(keys,
                                        std::vector<float>(opt->StateWidth() * width, 0.0f));
  std::vector<int64_t> steps(keys, 0);
  Reference ref(o, keys * width);
  std::mt19937 rng(2);
  std::bernoulli_distribution touched(0.3);
  for (int step = 0; step < 1200; ++step) {
    for (size_t k = 0; k < keys; ++k) {
      // Key k is touched with its own frequency, so step counts drift apart.
      if (!touched(rng) && k % 5 != 0) continue;
      int64_t t = ++steps[k];
      std::vector<float> g(width);
      for (size_t j = 0; j < width; ++j) {
        g[j] = static_cast<float>(Gradient(ref.w[k * width + j], k * width + j, t, &rng));
      }
      opt->Update(w[k].data(), state[k].data(), g.data(), width, t);
      for (size_t j = 0; j < width; ++j) ref.Step(k * width + j, g[j], t);
    }
  }
  std::vector<float> flat;
  for (const auto& v : w) flat.insert(flat.end(), v.begin(), v.end());
  EXPECT_LE(MaxRelativeError(flat, ref.w), 1e-5) << ps::OptimizerName(o.kind);
  EXPECT_NE(*std::min_element(steps.begin(), steps.end()),
            *std::max_element(steps.begin(), steps.end()));
}

INSTANTIATE_TEST_SUITE_P(
    AllOptimizers, OptimizerMatchesReference,
    ::testing::Values(OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kNesterov,
                      OptimizerKind::kAdagrad, OptimizerKind::kRmsprop, OptimizerKind::kAdam,
                      OptimizerKind::kAmsgrad, OptimizerKind::kFtrl),
    [](const ::testing::TestParamInfo<OptimizerKind>& info) {
      return std::string(ps::OptimizerName(info.param));
    });

TEST(AdamStepCount, AKeyUntouchedInAStepDoesNotAdvance) {
  // Lazy Adam: the first update of a key uses bias correction for t = 1 however many
  // global steps passed, so its first move is exactly lr * sign(g).
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  o.lr = 0.01;
  auto opt = Optimizer::Create(o);
  float w = 0.0f, g = 0.5f;
  std::vector<float> state(2, 0.0f);
  opt->Update(&w, state.data(), &g, 1, /*step=*/1);
  EXPECT_NEAR(w, -0.01f, 1e-6);
  float w_late = 0.0f;
  std::vector<float> state_late(2, 0.0f);
  opt->Update(&w_late, state_late.data(), &g, 1, /*step=*/50);  // as if counted globally
  EXPECT_GT(std::fabs(w_late + 0.01f), 1e-3) << "step count must matter";
}

TEST(OptimizerOptions, RoundTripsThroughText) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kFtrl;
  o.lr = 0.123456789012345;
  o.ftrl_l1 = 1e-7;
  OptimizerOptions back;
  ASSERT_TRUE(OptimizerOptions::Parse(o.ToString(), &back).ok());
  EXPECT_EQ(back.kind, o.kind);
  EXPECT_EQ(back.lr, o.lr);
  EXPECT_EQ(back.ftrl_l1, o.ftrl_l1);
  EXPECT_EQ(back.ToString(), o.ToString());
}

TEST(OptimizerOptions, RejectsBadValuesWithTheFieldName) {
  OptimizerOptions o;
  o.lr = -1;
  ps::Status s = o.Validate();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("lr"), std::string::npos);
  o.lr = 0.1;
  o.beta2 = 1.0;
  EXPECT_NE(o.Validate().message().find("beta2"), std::string::npos);
  OptimizerOptions parsed;
  EXPECT_FALSE(OptimizerOptions::Parse("adamw lr=1", &parsed).ok());
  EXPECT_FALSE(OptimizerOptions::Parse("adam lr=abc", &parsed).ok());
  EXPECT_FALSE(OptimizerOptions::Parse("adam speed=1", &parsed).ok());
  EXPECT_FALSE(OptimizerOptions::Parse("", &parsed).ok());
}

}  // namespace
