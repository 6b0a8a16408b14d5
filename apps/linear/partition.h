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

}  // namespace linear
