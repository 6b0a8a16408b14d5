// SplitTrainTest: the portable shuffle and the split itself.
#include "split.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "data_error.h"

namespace linear {
namespace {

// A uniform draw from [0, bound) by rejection: values below 2^64 mod bound are redrawn so
// every residue is equally likely. mt19937_64's output sequence is fixed by the standard.
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t reject_below = (0 - bound) % bound;  // 2^64 mod bound
  while (true) {
    const uint64_t r = rng();
    if (r >= reject_below) return r % bound;
  }
}

size_t TestRows(double test_fraction, size_t rows) {
  const double exact = test_fraction * static_cast<double>(rows);
  const double nearest = std::round(exact);
  if (std::fabs(exact - nearest) <= 1e-9 * std::max(1.0, exact)) {
    return static_cast<size_t>(nearest);
  }
  return static_cast<size_t>(std::ceil(exact));
}

}  // namespace

void SplitTrainTest(const Dataset& all, double test_fraction, uint64_t seed, Dataset* train,
                    Dataset* test) {
  if (train == nullptr || test == nullptr || train == test) {
    throw std::invalid_argument("SplitTrainTest: train and test must be distinct outputs");
  }
  if (!(test_fraction >= 0 && test_fraction < 1)) {
    throw DataError("test fraction " + std::to_string(test_fraction) + " is outside [0, 1)");
  }
  const size_t rows = all.rows();
  std::vector<size_t> order(rows);
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(seed);
  for (size_t i = rows; i > 1; --i) {
    std::swap(order[i - 1], order[UniformBelow(rng, i)]);
  }
  const size_t test_rows = TestRows(test_fraction, rows);
  std::vector<size_t> test_ids(order.begin(), order.begin() + test_rows);
  std::vector<size_t> train_ids(order.begin() + test_rows, order.end());
  std::sort(test_ids.begin(), test_ids.end());
  std::sort(train_ids.begin(), train_ids.end());
  Dataset test_part = Subset(all, test_ids);    // built before either output is written,
  Dataset train_part = Subset(all, train_ids);  // since `all` may be one of them
  *test = std::move(test_part);
  *train = std::move(train_part);
}

}  // namespace linear
