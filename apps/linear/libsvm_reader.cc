// ReadLibsvm: tokenising and validating libsvm lines.
#include "libsvm_reader.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "data_error.h"
#include "field_parse.h"
#include "line_reader.h"

namespace linear {
namespace {

// Splits `line` on spaces and tabs, dropping empty tokens.
void SplitTokens(std::string_view line, std::vector<std::string_view>* tokens) {
  tokens->clear();
  size_t i = 0;
  while (true) {
    i = line.find_first_not_of(" \t", i);
    if (i == std::string_view::npos) return;
    const size_t end = std::min(line.find_first_of(" \t", i), line.size());
    tokens->push_back(line.substr(i, end - i));
    i = end;
  }
}

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

}  // namespace

Dataset ReadLibsvm(const std::string& path, uint64_t max_features) {
  LineReader reader(path);
  BinaryLabelParser labels(path);
  Dataset data;
  std::string line;
  std::vector<std::string_view> tokens;
  std::vector<uint64_t> row_indices;
  std::vector<float> row_values;
  while (reader.Next(&line)) {
    const size_t n = reader.line_number();
    SplitTokens(std::string_view(line).substr(0, line.find('#')), &tokens);
    if (tokens.empty()) continue;  // a comment-only line
    const float label = labels.Parse(tokens[0], n);
    row_indices.clear();
    row_values.clear();
    for (size_t t = 1; t < tokens.size(); ++t) {
      const std::string_view token = tokens[t];
      const size_t colon = token.find(':');
      if (colon == std::string_view::npos || token.find(':', colon + 1) != token.npos) {
        throw DataError::AtLine(path, n,
                                "malformed token " + Quote(token) + ": expected index:value");
      }
      uint64_t index = 0;
      double value = 0;
      if (!ParseIndex(token.substr(0, colon), &index)) {
        throw DataError::AtLine(
            path, n,
            "malformed token " + Quote(token) + ": the index is not a non-negative integer");
      }
      if (!ParseValue(token.substr(colon + 1), &value)) {
        throw DataError::AtLine(path, n,
                                "malformed token " + Quote(token) + ": the value is not a number");
      }
      if (max_features > 0 && index >= max_features) {
        throw DataError::AtLine(path, n,
                                "feature index out of range: " + std::to_string(index) +
                                    " >= max_features " + std::to_string(max_features));
      }
      if (!row_indices.empty() && index <= row_indices.back()) {
        throw DataError::AtLine(path, n,
                                "feature index " + std::to_string(index) +
                                    (index == row_indices.back()
                                         ? " appears twice"
                                         : " comes after " + std::to_string(row_indices.back())) +
                                    ": indices must be unique and ascending within a line");
      }
      row_indices.push_back(index);
      row_values.push_back(static_cast<float>(value));
    }
    data.AddRow(label, row_indices, row_values);
  }
  return data;
}

}  // namespace linear
