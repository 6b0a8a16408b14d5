// SplitTrainTest: a seeded, platform-independent train/test split of a Dataset.
#pragma once

#include <cstdint>

#include "dataset.h"

namespace linear {

// Shuffles the row numbers of `all` with a Fisher-Yates shuffle driven by
// std::mt19937_64(seed) and its own unbiased bounded draws (std::shuffle and
// std::uniform_int_distribution are implementation-defined, and the same seed must give
// the same split on every platform). The first ceil(test_fraction * rows) rows of the
// permutation form *test and the rest *train, each kept in the original file order.
// A product within 1e-9 of an integer counts as that integer, so 0.07 of 100 rows is 7
// test rows, not 8. test_fraction 0 gives an empty test set.
// Throws DataError unless 0 <= test_fraction < 1, and std::invalid_argument if train or
// test is null or they are the same object. `all` may alias *train or *test.
void SplitTrainTest(const Dataset& all, double test_fraction, uint64_t seed, Dataset* train,
                    Dataset* test);

}  // namespace linear
