// Evaluation metrics for binary classifiers: log loss, accuracy and ROC AUC.
//
// Labels are 0 or 1 (a label >= 0.5 counts as positive). Every function throws
// std::invalid_argument when the two vectors differ in length, and returns NaN for empty
// input, where the mean is undefined.
#pragma once

#include <vector>

namespace linear {

// Mean negative log-likelihood, -[y log p + (1 - y) log(1 - p)], with every probability
// clipped to [1e-15, 1 - 1e-15] so a confident mistake costs about 34.5, not infinity.
double LogLoss(const std::vector<float>& labels, const std::vector<double>& probs);

// Fraction of rows whose predicted class (1 when p >= 0.5, else 0) equals the label.
double Accuracy(const std::vector<float>& labels, const std::vector<double>& probs);

// Area under the ROC curve: the probability that a random positive scores above a random
// negative, ties counting one half (the Mann-Whitney statistic). Scores may be
// probabilities or raw margins. Returns NaN when the labels hold only one class, since
// the AUC is undefined there; callers should print it as "n/a" rather than guess 0.5.
// Throws std::invalid_argument if a score is NaN.
double Auc(const std::vector<float>& labels, const std::vector<double>& scores);

}  // namespace linear
