// DataError: the one exception the linear app's data code throws for bad input.
//
// A DataError says what was wrong with a data file or a data set and, for file errors,
// where: the message starts with "<path>: line <n>: " so a user can open the file at the
// offending line. Programming errors (null output pointers, row indices out of range,
// mismatched vector sizes) are not DataErrors; they throw std::invalid_argument or
// std::out_of_range instead, so a CLI can report DataErrors to the user and let the rest
// surface as bugs.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace linear {

class DataError : public std::runtime_error {
 public:
  explicit DataError(const std::string& message) : std::runtime_error(message) {}

  // "<path>: line <line>: <what>": the form every reader uses for errors tied to a line.
  static DataError AtLine(const std::string& path, size_t line, const std::string& what) {
    return DataError(path + ": line " + std::to_string(line) + ": " + what);
  }
};

}  // namespace linear
