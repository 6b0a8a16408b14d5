// Dataset: a binary-labelled data set with sparse (CSR) features, as the readers return
// it and the trainer consumes it.
//
// Row r's features are indices[row_offsets[r] .. row_offsets[r+1]) with the matching
// values; within a row indices are strictly ascending. Labels are 0 or 1. A Dataset is a
// plain value: copy it, move it, read it from many threads; nothing is shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace linear {

struct Dataset {
  std::vector<float> labels;               // one per row, 0 or 1
  std::vector<uint64_t> row_offsets;       // rows() + 1 entries, starts with 0
  std::vector<uint64_t> indices;           // feature index per stored value
  std::vector<float> values;               // same length as indices
  uint64_t num_features = 0;               // max stored index + 1 (CSV: number of feature columns)
  std::vector<std::string> feature_names;  // CSV: header names of the feature columns

  Dataset() : row_offsets{0} {}

  size_t rows() const { return labels.size(); }
  // Number of values stored for `row` (dense CSV data stores num_features per row).
  uint64_t RowSize(size_t row) const { return row_offsets[row + 1] - row_offsets[row]; }

  // Appends one row; `row_indices` must be strictly ascending (the readers check this).
  void AddRow(float label, const std::vector<uint64_t>& row_indices,
              const std::vector<float>& row_values);
};

// The rows `rows` of `all`, in the order given (a row may appear more than once).
// num_features and feature_names are copied, so a subset keeps its parent's feature
// space. Throws std::out_of_range if a row index is >= all.rows().
Dataset Subset(const Dataset& all, const std::vector<size_t>& rows);

}  // namespace linear
