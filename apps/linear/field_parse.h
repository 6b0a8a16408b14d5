// Field parsing shared by the CSV and libsvm readers: numbers, feature indices and
// binary labels, all locale-independent so a file reads the same on every machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace linear {

// Parses all of `text` as a finite number that fits a float: decimal or scientific
// notation with an optional leading '+' or '-'. Returns false for anything else,
// including "", "1.5x", "nan", "inf" and "1e60".
bool ParseValue(std::string_view text, double* out);

// Parses all of `text` as an unsigned decimal integer (digits only) that fits uint64_t.
bool ParseIndex(std::string_view text, uint64_t* out);

// Maps each line's label to 0 or 1 for one file. Accepted labels are numbers equal to 0,
// 1 or -1 ("0", "1", "+1", "-1", "1.0", "0.0", ...); -1 and 0 both mean the negative
// class, but one file must use one convention: a file that has both 0 and -1 labels is
// more likely a three-class file than a binary one, so the second convention is refused.
class BinaryLabelParser {
 public:
  explicit BinaryLabelParser(std::string path) : path_(std::move(path)) {}

  // Returns 0 or 1 for the label `text` found on line `line`. Throws DataError
  // ("<path>: line <n>: ...") when `text` is not a number, is not 0/1/-1, or mixes the
  // {0,1} and {-1,+1} conventions with an earlier line.
  float Parse(std::string_view text, size_t line);

 private:
  std::string path_;
  double negative_ = 1;  // the negative label seen first (0 or -1); 1 while none seen
  size_t negative_line_ = 0;
};

}  // namespace linear
