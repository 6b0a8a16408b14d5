// LineReader: opening a data file and walking its non-blank lines.
#include "line_reader.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "data_error.h"

namespace linear {

LineReader::LineReader(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  const auto status = std::filesystem::status(path_, ec);
  if (!std::filesystem::exists(status)) {
    throw DataError(path_ + ": cannot open: no such file");
  }
  if (std::filesystem::is_directory(status)) {
    throw DataError(path_ + ": cannot open: it is a directory, not a file");
  }
  in_.open(path_, std::ios::binary);
  if (!in_) throw DataError(path_ + ": cannot open: check the file's permissions");
}

bool LineReader::Next(std::string* line) {
  while (std::getline(in_, *line)) {
    ++line_number_;
    if (!line->empty() && line->back() == '\r') line->pop_back();
    if (line_number_ == 1 && line->compare(0, 3, "\xEF\xBB\xBF") == 0) line->erase(0, 3);
    if (line->find_first_not_of(" \t") != std::string::npos) return true;
  }
  if (in_.bad()) {
    throw DataError::AtLine(path_, line_number_ + 1, "read error");
  }
  return false;
}

}  // namespace linear
