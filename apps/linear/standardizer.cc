// Standardizer: two-pass mean/stddev fitting and in-place scaling.
#include "standardizer.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "data_error.h"

namespace linear {
namespace {

// Throws unless row r of `d` stores exactly the features 0 .. num_features-1.
void RequireDense(const Dataset& d, const char* what) {
  for (size_t r = 0; r < d.rows(); ++r) {
    bool dense = d.RowSize(r) == d.num_features;
    for (uint64_t j = 0; dense && j < d.num_features; ++j) {
      dense = d.indices[d.row_offsets[r] + j] == j;
    }
    if (!dense) {
      throw DataError(std::string(what) + " needs dense data (every row stores all " +
                      std::to_string(d.num_features) + " features); row " + std::to_string(r) +
                      " stores " + std::to_string(d.RowSize(r)));
    }
  }
}

}  // namespace

Standardizer Standardizer::Fit(const Dataset& train) {
  if (train.rows() == 0) throw DataError("cannot fit a standardizer on 0 rows");
  RequireDense(train, "fitting a standardizer");
  const size_t n = train.rows(), f = train.num_features;
  auto value = [&](size_t r, size_t j) { return double{train.values[train.row_offsets[r] + j]}; };
  Standardizer s;
  s.mean.assign(f, 0.0);
  s.stddev.assign(f, 0.0);
  for (size_t j = 0; j < f; ++j) {
    bool constant = true;
    double sum = 0;
    for (size_t r = 0; r < n; ++r) {
      sum += value(r, j);
      constant = constant && value(r, j) == value(0, j);
    }
    if (constant) {  // exact, where sum / n might be off by an ulp and give a tiny stddev
      s.mean[j] = value(0, j);
      continue;
    }
    s.mean[j] = sum / static_cast<double>(n);
    double squares = 0;
    for (size_t r = 0; r < n; ++r) {
      const double d = value(r, j) - s.mean[j];
      squares += d * d;
    }
    s.stddev[j] = std::sqrt(squares / static_cast<double>(n));
  }
  return s;
}

void Standardizer::Apply(Dataset* d) const {
  if (d == nullptr) throw std::invalid_argument("Standardizer::Apply: null data set");
  if (d->num_features != mean.size()) {
    throw DataError("the standardizer was fitted on " + std::to_string(mean.size()) +
                    " features but the data set has " + std::to_string(d->num_features));
  }
  RequireDense(*d, "standardizing");
  for (size_t k = 0; k < d->values.size(); ++k) {
    const size_t j = d->indices[k];
    const double scale = stddev[j] > 0 ? stddev[j] : 1.0;
    d->values[k] = static_cast<float>((d->values[k] - mean[j]) / scale);
  }
}

}  // namespace linear
