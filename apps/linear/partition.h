// PartitionRows: which training rows each data-parallel worker owns.
#pragma once

#include <cstddef>
#include <vector>

namespace linear {

// Returns the row numbers of worker `rank` out of `num_workers`: the contiguous block
// [floor(rank * rows / W), floor((rank + 1) * rows / W)), W = num_workers. The blocks of
// all ranks cover every row exactly once and their sizes differ by at most one.
// Throws DataError("worker r of W gets no training rows: N rows are too few ...") when
// the block is empty (rows < W), and std::invalid_argument unless num_workers >= 1 and
// 0 <= rank < num_workers.
std::vector<size_t> PartitionRows(size_t rows, int num_workers, int rank);

// Like PartitionRows, but the blocks are cut from the rows in the order of their labels
// (a stable sort: label 0 rows, then label 1 rows, each in row order), so that a
// worker holds mostly one class: data that is not identically distributed across the
// workers, as when each holds its own users' data. The block comes back in increasing
// row order, so that a worker visits its rows as the file has them. Throws as
// PartitionRows does, with rows = labels.size().
std::vector<size_t> PartitionRowsByLabel(const std::vector<float>& labels, int num_workers,
                                         int rank);

}  // namespace linear
