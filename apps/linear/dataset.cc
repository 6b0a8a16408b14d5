// Dataset row appending and row subsets.
#include "dataset.h"

#include <stdexcept>

namespace linear {

void Dataset::AddRow(float label, const std::vector<uint64_t>& row_indices,
                     const std::vector<float>& row_values) {
  labels.push_back(label);
  indices.insert(indices.end(), row_indices.begin(), row_indices.end());
  values.insert(values.end(), row_values.begin(), row_values.end());
  row_offsets.push_back(indices.size());
  if (!row_indices.empty() && row_indices.back() + 1 > num_features) {
    num_features = row_indices.back() + 1;
  }
}

Dataset Subset(const Dataset& all, const std::vector<size_t>& rows) {
  Dataset out;
  out.num_features = all.num_features;
  out.feature_names = all.feature_names;
  out.labels.reserve(rows.size());
  out.row_offsets.reserve(rows.size() + 1);
  for (size_t r : rows) {
    if (r >= all.rows()) {
      throw std::out_of_range("Subset: row " + std::to_string(r) + " of a data set with " +
                              std::to_string(all.rows()) + " rows");
    }
    out.labels.push_back(all.labels[r]);
    const auto begin = all.row_offsets[r], end = all.row_offsets[r + 1];
    out.indices.insert(out.indices.end(), all.indices.begin() + begin, all.indices.begin() + end);
    out.values.insert(out.values.end(), all.values.begin() + begin, all.values.begin() + end);
    out.row_offsets.push_back(out.indices.size());
  }
  return out;
}

}  // namespace linear
