// LineReader: reads a text data file line by line, numbering lines the way an editor
// does, so reader errors can point at "<path>: line <n>". Not thread-safe; one reader
// per file per thread.
#pragma once

#include <cstddef>
#include <fstream>
#include <string>

namespace linear {

class LineReader {
 public:
  // Opens `path`; throws DataError("<path>: cannot open: ...") if it is missing, is a
  // directory or cannot be read.
  explicit LineReader(std::string path);

  // Stores the next line that is not blank (spaces and tabs only) in *line, without its
  // '\r\n' or '\n' ending and without a UTF-8 byte-order mark on line 1. Returns false at
  // the end of the file; throws DataError on a read error.
  bool Next(std::string* line);

  // The 1-based number of the line Next returned last (0 before the first call).
  size_t line_number() const { return line_number_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ifstream in_;
  size_t line_number_ = 0;
};

}  // namespace linear
