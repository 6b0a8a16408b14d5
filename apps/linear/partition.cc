// PartitionRows: balanced contiguous blocks, computed without overflow.
#include "partition.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "data_error.h"

namespace linear {
namespace {

// floor(rank * rows / workers) without forming rank * rows, which can overflow:
// rows = q * W + m, so rank * rows / W = rank * q + rank * m / W with rank * m < W^2.
size_t BlockStart(size_t rows, size_t workers, size_t rank) {
  return rank * (rows / workers) + rank * (rows % workers) / workers;
}

}  // namespace

std::vector<size_t> PartitionRows(size_t rows, int num_workers, int rank) {
  if (num_workers < 1 || rank < 0 || rank >= num_workers) {
    throw std::invalid_argument("PartitionRows: rank " + std::to_string(rank) +
                                " is not a worker of " + std::to_string(num_workers));
  }
  const size_t w = static_cast<size_t>(num_workers), r = static_cast<size_t>(rank);
  const size_t begin = BlockStart(rows, w, r), end = BlockStart(rows, w, r + 1);
  if (begin == end) {
    throw DataError("worker " + std::to_string(rank) + " of " + std::to_string(num_workers) +
                    " gets no training rows: " + std::to_string(rows) + " rows are too few" +
                    (rows > 0 ? "; use at most " + std::to_string(rows) + " workers" : ""));
  }
  std::vector<size_t> ids(end - begin);
  std::iota(ids.begin(), ids.end(), begin);
  return ids;
}

std::vector<size_t> PartitionRowsByLabel(const std::vector<float>& labels, int num_workers,
                                         int rank) {
  std::vector<size_t> by_label(labels.size());
  std::iota(by_label.begin(), by_label.end(), size_t{0});
  std::stable_sort(by_label.begin(), by_label.end(),
                   [&labels](size_t a, size_t b) { return labels[a] < labels[b]; });
  std::vector<size_t> ids;
  for (size_t position : PartitionRows(labels.size(), num_workers, rank)) {
    ids.push_back(by_label[position]);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

}  // namespace linear
