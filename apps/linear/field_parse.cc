// Number, index and label parsing for the data readers.
#include "field_parse.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

#include "data_error.h"

namespace linear {

bool ParseValue(std::string_view text, double* out) {
  // from_chars refuses a leading '+', which labels like "+1" need; "+-1" stays refused.
  if (!text.empty() && text.front() == '+') {
    text.remove_prefix(1);
    if (!text.empty() && text.front() == '-') return false;
  }
  if (text.empty()) return false;
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || !std::isfinite(value)) return false;
  if (std::fabs(value) > std::numeric_limits<float>::max()) return false;
  *out = value;
  return true;
}

bool ParseIndex(std::string_view text, uint64_t* out) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return false;
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) return false;
  *out = value;
  return true;
}

float BinaryLabelParser::Parse(std::string_view text, size_t line) {
  const std::string quoted = "\"" + std::string(text) + "\"";
  double value = 0;
  if (!ParseValue(text, &value)) {
    throw DataError::AtLine(path_, line, "label " + quoted + " is not a number");
  }
  if (value == 1) return 1;
  if (value != 0 && value != -1) {
    throw DataError::AtLine(path_, line, "label " + quoted + " is not binary: use 0/1 or -1/+1");
  }
  if (negative_ == 1) {
    negative_ = value;
    negative_line_ = line;
  } else if (negative_ != value) {
    throw DataError::AtLine(path_, line,
                            "label " + quoted + " mixes the 0/1 and -1/+1 conventions (line " +
                                std::to_string(negative_line_) + " has a " +
                                (negative_ == 0 ? "0" : "-1") +
                                " label); is this a multi-class file?");
  }
  return 0;
}

}  // namespace linear
