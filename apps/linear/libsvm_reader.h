// ReadLibsvm: loads a sparse data file in libsvm/svmlight text format into a Dataset.
//
// Format: one row per line, "label index:value index:value ...", tokens separated by
// spaces or tabs. A '#' starts a comment that runs to the end of the line; blank and
// comment-only lines are skipped. Indices are kept exactly as written, 0-based or
// 1-based alike (feature key = file index), and must be strictly ascending within a line.
// Labels must be numbers equal to 0 or 1, or -1 or +1 (-1 is read as 0; one file must not
// mix 0 and -1). Values are stored as written, explicit zeros included.
#pragma once

#include <cstdint>
#include <string>

#include "dataset.h"

namespace linear {

// Reads `path`. When max_features > 0 every index must be < max_features. The result's
// num_features is the largest index in the file + 1 (0 for a file without features),
// whatever max_features is. Throws DataError, naming the file and the line, when the file
// cannot be opened, a token is not "index:value", an index is not a non-negative integer
// or is not above the previous one on its line, an index is >= max_features ("feature
// index out of range"), a value is not a finite number, or a label is not 0/1/-1/+1.
Dataset ReadLibsvm(const std::string& path, uint64_t max_features = 0);

}  // namespace linear
