// Log loss, accuracy and tie-aware AUC.
#include "metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace linear {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void RequireSameSize(const char* metric, size_t labels, size_t predictions) {
  if (labels != predictions) {
    throw std::invalid_argument(std::string(metric) + ": " + std::to_string(labels) +
                                " labels but " + std::to_string(predictions) + " predictions");
  }
}

bool Positive(float label) { return label >= 0.5f; }

}  // namespace

double LogLoss(const std::vector<float>& labels, const std::vector<double>& probs) {
  RequireSameSize("LogLoss", labels.size(), probs.size());
  if (labels.empty()) return kNaN;
  constexpr double kEps = 1e-15;
  double total = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const double p = std::clamp(probs[i], kEps, 1 - kEps);
    const double y = labels[i];
    total -= y * std::log(p) + (1 - y) * std::log(1 - p);
  }
  return total / static_cast<double>(labels.size());
}

double Accuracy(const std::vector<float>& labels, const std::vector<double>& probs) {
  RequireSameSize("Accuracy", labels.size(), probs.size());
  if (labels.empty()) return kNaN;
  size_t correct = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    correct += (probs[i] >= 0.5) == Positive(labels[i]);
  }
  return static_cast<double>(correct) / static_cast<double>(labels.size());
}

double Auc(const std::vector<float>& labels, const std::vector<double>& scores) {
  RequireSameSize("Auc", labels.size(), scores.size());
  for (double s : scores) {
    if (std::isnan(s)) throw std::invalid_argument("Auc: a score is NaN");
  }
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });

  // Walk groups of equal score from lowest to highest. Each positive beats every negative
  // in lower groups and ties with the negatives in its own group; counting in halves keeps
  // the sum an exact integer.
  uint64_t negatives_below = 0, positives = 0, half_wins = 0;
  for (size_t i = 0; i < order.size();) {
    uint64_t group_pos = 0, group_neg = 0;
    size_t j = i;
    for (; j < order.size() && scores[order[j]] == scores[order[i]]; ++j) {
      if (Positive(labels[order[j]])) {
        ++group_pos;
      } else {
        ++group_neg;
      }
    }
    half_wins += group_pos * (2 * negatives_below + group_neg);
    negatives_below += group_neg;
    positives += group_pos;
    i = j;
  }
  if (positives == 0 || negatives_below == 0) return kNaN;
  return static_cast<double>(half_wins) /
         (2.0 * static_cast<double>(positives) * static_cast<double>(negatives_below));
}

}  // namespace linear
