// Standardizer: per-feature centring and scaling of dense data, fitted on the training set
// and applied unchanged to the test set (so no test statistics leak into training).
//
// Dense means every row stores every feature 0 .. num_features-1, as ReadCsv produces.
// Sparse rows are refused: scaling only the stored values would leave the implicit zeros
// uncentred. A fitted Standardizer is immutable; Apply may run from many threads on
// different data sets.
#pragma once

#include <vector>

#include "dataset.h"

namespace linear {

struct Standardizer {
  std::vector<double> mean;    // per feature, over the training rows
  std::vector<double> stddev;  // population standard deviation (divides by rows, not rows-1)

  // Computes mean and stddev of every feature over `train`. A feature whose values are
  // all equal gets stddev exactly 0 (and mean exactly that value).
  // Throws DataError if `train` has no rows or is not dense.
  static Standardizer Fit(const Dataset& train);

  // Replaces every stored value x of feature j by (x - mean[j]) / stddev[j], dividing by 1
  // instead where stddev[j] is 0 (constant features end up all 0). Throws DataError,
  // leaving *d untouched, if d is not dense or has a different num_features than the
  // fitted data; std::invalid_argument if d is null.
  void Apply(Dataset* d) const;
};

}  // namespace linear
