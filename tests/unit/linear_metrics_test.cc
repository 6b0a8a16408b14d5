// Metrics and logistic-regression arithmetic (apps/linear): hand-computed values, and the
// gradient checked against finite differences of the loss it claims to differentiate.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "dataset.h"
#include "logistic.h"
#include "metrics.h"

namespace linear {
namespace {

TEST(LinearLogLoss, IsTheMeanNegativeLogLikelihood) {
  EXPECT_DOUBLE_EQ(LogLoss({1, 0}, {0.8, 0.4}), -(std::log(0.8) + std::log(0.6)) / 2);
  EXPECT_DOUBLE_EQ(LogLoss({1, 1, 0}, {0.5, 0.5, 0.5}), std::log(2.0));
}

TEST(LinearLogLoss, ClipsProbabilitiesSoConfidentMistakesStayFinite) {
  EXPECT_DOUBLE_EQ(LogLoss({1}, {0.0}), -std::log(1e-15));
  EXPECT_DOUBLE_EQ(LogLoss({0}, {1.0}), -std::log(1 - (1 - 1e-15)));  // 1 - 1e-15 rounds
  EXPECT_NEAR(LogLoss({0}, {1.0}), 34.5, 0.1);
  EXPECT_NEAR(LogLoss({1}, {1.0}), 0, 1e-14);
}

TEST(LinearAccuracy, PredictsPositiveFromOneHalfUp) {
  EXPECT_DOUBLE_EQ(Accuracy({1, 0, 1, 0}, {0.9, 0.2, 0.5, 0.5}), 0.75);
  EXPECT_DOUBLE_EQ(Accuracy({1, 0}, {0.1, 0.7}), 0.0);
}

TEST(LinearMetrics, MismatchedLengthsThrowAndEmptyInputIsNaN) {
  EXPECT_THROW(LogLoss({1, 0}, {0.5}), std::invalid_argument);
  EXPECT_THROW(Accuracy({1}, {}), std::invalid_argument);
  EXPECT_THROW(Auc({1, 0}, {0.5}), std::invalid_argument);
  EXPECT_TRUE(std::isnan(LogLoss({}, {})));
  EXPECT_TRUE(std::isnan(Accuracy({}, {})));
  EXPECT_TRUE(std::isnan(Auc({}, {})));
}

TEST(LinearAuc, CountsCorrectlyOrderedPositiveNegativePairs) {
  // Pairs (pos, neg): 0.35>0.1 yes, 0.35>0.4 no, 0.8>0.1 yes, 0.8>0.4 yes -> 3 of 4.
  EXPECT_DOUBLE_EQ(Auc({0, 0, 1, 1}, {0.1, 0.4, 0.35, 0.8}), 0.75);
  EXPECT_DOUBLE_EQ(Auc({1, 0, 0, 1}, {0.8, 0.4, 0.1, 0.35}), 0.75);  // order does not matter
  EXPECT_DOUBLE_EQ(Auc({0, 1}, {-3, 2}), 1.0);                       // raw margins work too
  EXPECT_DOUBLE_EQ(Auc({1, 0}, {0.2, 0.9}), 0.0);
}

TEST(LinearAuc, TiesBetweenAPositiveAndANegativeCountOneHalf) {
  // Positive 0.5 ties negative 0.5 (1/2) and beats 0.2 (1); positive 0.9 beats both (2).
  EXPECT_DOUBLE_EQ(Auc({0, 1, 0, 1}, {0.5, 0.5, 0.2, 0.9}), 3.5 / 4);
  EXPECT_DOUBLE_EQ(Auc({0, 1, 0, 1, 1}, {0.3, 0.3, 0.3, 0.3, 0.3}), 0.5);
  // Ties within a class change nothing: both positives beat both negatives.
  EXPECT_DOUBLE_EQ(Auc({0, 0, 1, 1}, {0.2, 0.2, 0.7, 0.7}), 1.0);
}

TEST(LinearAuc, IsNaNWithOnlyOneClassAndRefusesNaNScores) {
  EXPECT_TRUE(std::isnan(Auc({1, 1}, {0.2, 0.9})));
  EXPECT_TRUE(std::isnan(Auc({0}, {0.2})));
  EXPECT_THROW(Auc({0, 1}, {0.2, std::nan("")}), std::invalid_argument);
}

TEST(LinearSigmoid, IsStableAndSymmetricForLargeMargins) {
  EXPECT_EQ(Sigmoid(0), 0.5);
  EXPECT_EQ(Sigmoid(800), 1.0);
  EXPECT_EQ(Sigmoid(-800), 0.0);
  EXPECT_NEAR(Sigmoid(-30) / std::exp(-30.0), 1.0, 1e-12);  // no 1 - (1 - tiny) cancellation
  for (double z : {-5.0, -0.3, 0.7, 12.0}) {
    EXPECT_NEAR(Sigmoid(z) + Sigmoid(-z), 1.0, 1e-15);
    EXPECT_NEAR(Sigmoid(z), 1 / (1 + std::exp(-z)), 1e-15);
  }
}

// Five rows over six features, sparse, labels mixed; row 4 has no features.
Dataset SmallSparse() {
  Dataset d;
  d.AddRow(1, {0, 2, 5}, {1.5f, -0.5f, 2});
  d.AddRow(0, {1, 2}, {0.3f, 1});
  d.AddRow(1, {0, 3, 4}, {-1, 0.25f, 4});
  d.AddRow(0, {1, 5}, {2, -1});
  d.AddRow(1, {}, {});
  return d;
}

TEST(LinearPredict, IsTheSigmoidOfBiasPlusWeightedFeaturesIgnoringUnknownFeatures) {
  const Dataset d = SmallSparse();
  const std::vector<double> w = {0.5, -1, 0.25};  // features 3..5 unknown: weight 0
  std::vector<double> probs;
  Predict(d, w, 0.1, &probs);
  ASSERT_EQ(probs.size(), 5u);
  EXPECT_DOUBLE_EQ(probs[0], Sigmoid(0.1 + 0.75 - 0.125));
  EXPECT_DOUBLE_EQ(probs[1], Sigmoid(0.1 - double{0.3f} + 0.25));
  EXPECT_DOUBLE_EQ(probs[2], Sigmoid(0.1 - 0.5));
  EXPECT_DOUBLE_EQ(probs[4], Sigmoid(0.1));
}

// The objective Gradient claims to differentiate, evaluated alone.
double Objective(const Dataset& d, const std::vector<size_t>& rows, const std::vector<double>& w,
                 double bias, double reg_l2) {
  std::vector<double> unused_w;
  double unused_b;
  return Gradient(d, rows, w, bias, reg_l2, &unused_w, &unused_b);
}

bool Close(double numeric, double analytic) {
  return std::fabs(numeric - analytic) <= 1e-6 * std::fabs(analytic) + 1e-10;
}

TEST(LinearGradient, MatchesCentralFiniteDifferencesOfTheLoss) {
  const Dataset d = SmallSparse();
  const std::vector<size_t> rows = {0, 1, 2, 2, 3, 4};  // row 2 counts twice
  const std::vector<double> w = {0.4, -0.7, 0.2, 1.1, -0.3, 0.05};
  const double bias = -0.2, reg = 0.1, h = 1e-6;
  std::vector<double> grad_w;
  double grad_b = 0;
  Gradient(d, rows, w, bias, reg, &grad_w, &grad_b);
  ASSERT_EQ(grad_w.size(), w.size());
  for (size_t j = 0; j < w.size(); ++j) {
    std::vector<double> up = w, down = w;
    up[j] += h;
    down[j] -= h;
    const double numeric =
        (Objective(d, rows, up, bias, reg) - Objective(d, rows, down, bias, reg)) / (2 * h);
    EXPECT_TRUE(Close(numeric, grad_w[j])) << "w" << j << ": " << numeric << " vs " << grad_w[j];
  }
  const double numeric =
      (Objective(d, rows, w, bias + h, reg) - Objective(d, rows, w, bias - h, reg)) / (2 * h);
  EXPECT_TRUE(Close(numeric, grad_b)) << numeric << " vs " << grad_b;
}

TEST(LinearGradient, LossIsTheLogLossOfThePredictionsPlusTheL2TermOnWeightsOnly) {
  const Dataset d = SmallSparse();
  const std::vector<double> w = {0.4, -0.7, 0.2, 1.1, -0.3, 0.05};
  std::vector<double> probs, grad_w, grad_w_reg;
  Predict(d, w, 0.3, &probs);
  double grad_b = 0, grad_b_reg = 0;
  const double plain = Gradient(d, {0, 1, 2, 3, 4}, w, 0.3, 0, &grad_w, &grad_b);
  EXPECT_NEAR(plain, LogLoss(d.labels, probs), 1e-12);
  double norm2 = 0;
  for (double x : w) norm2 += x * x;
  const double reg = Gradient(d, {0, 1, 2, 3, 4}, w, 0.3, 2.0, &grad_w_reg, &grad_b_reg);
  EXPECT_NEAR(reg, plain + norm2, 1e-12);
  EXPECT_EQ(grad_b_reg, grad_b);  // the bias is not regularised
  for (size_t j = 0; j < w.size(); ++j) EXPECT_NEAR(grad_w_reg[j], grad_w[j] + 2.0 * w[j], 1e-12);
}

TEST(LinearGradient, RefusesNoRowsUnknownRowsAndTooFewWeights) {
  const Dataset d = SmallSparse();
  const std::vector<double> w(6, 0.0);
  std::vector<double> g;
  double b = 0;
  EXPECT_THROW(Gradient(d, {}, w, 0, 0, &g, &b), std::invalid_argument);
  EXPECT_THROW(Gradient(d, {5}, w, 0, 0, &g, &b), std::out_of_range);
  EXPECT_THROW(Gradient(d, {0}, std::vector<double>(5), 0, 0, &g, &b), std::invalid_argument);
  EXPECT_THROW(Gradient(d, {0}, w, 0, 0, nullptr, &b), std::invalid_argument);
}

}  // namespace
}  // namespace linear
