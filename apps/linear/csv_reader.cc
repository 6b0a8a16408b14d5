// ReadCsv: header handling, field splitting and row conversion for dense CSV files.
#include "csv_reader.h"

#include <string_view>
#include <vector>

#include "data_error.h"
#include "field_parse.h"
#include "line_reader.h"

namespace linear {
namespace {

std::string_view Trim(std::string_view s) {
  const size_t first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const size_t last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Splits `line` into trimmed, unquoted fields. Returns an empty string on success, else
// what is wrong with the line.
std::string SplitFields(std::string_view line, std::vector<std::string>* fields) {
  fields->clear();
  size_t i = 0;
  const size_t n = line.size();
  while (true) {
    while (i < n && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i < n && line[i] == '"') {
      std::string field;
      bool closed = false;
      for (++i; i < n; ++i) {
        if (line[i] != '"') {
          field += line[i];
        } else if (i + 1 < n && line[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          closed = true;
          ++i;
          break;
        }
      }
      if (!closed) return "field " + std::to_string(fields->size() + 1) + " has no closing quote";
      while (i < n && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i < n && line[i] != ',') {
        return "text after the closing quote of field " + std::to_string(fields->size() + 1);
      }
      fields->push_back(std::string(Trim(field)));
    } else {
      const size_t start = i;
      while (i < n && line[i] != ',') ++i;
      fields->push_back(std::string(Trim(line.substr(start, i - start))));
    }
    if (i >= n) return {};
    ++i;  // the comma
  }
}

// The index of the label column in `header`; throws DataError unless exactly one matches.
size_t FindLabelColumn(const std::vector<std::string>& header, const std::string& label_column,
                       const LineReader& reader) {
  if (label_column.empty()) return header.size() - 1;
  std::vector<size_t> matches;
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c] == label_column) matches.push_back(c);
  }
  if (matches.size() == 1) return matches[0];
  if (matches.empty()) {
    std::string columns;
    for (const std::string& name : header) columns += (columns.empty() ? "" : ", ") + Quote(name);
    throw DataError::AtLine(
        reader.path(), reader.line_number(),
        "label column " + Quote(label_column) + " not found; the columns are: " + columns);
  }
  throw DataError::AtLine(reader.path(), reader.line_number(),
                          "label column " + Quote(label_column) + " appears " +
                              std::to_string(matches.size()) + " times in the header");
}

}  // namespace

Dataset ReadCsv(const std::string& path, const std::string& label_column) {
  LineReader reader(path);
  std::string line;
  if (!reader.Next(&line)) throw DataError(path + ": empty file; expected a header line");

  std::vector<std::string> header;
  std::string problem = SplitFields(line, &header);
  if (!problem.empty()) throw DataError::AtLine(path, reader.line_number(), problem);
  const size_t label = FindLabelColumn(header, label_column, reader);

  Dataset data;
  for (size_t c = 0; c < header.size(); ++c) {
    if (c != label) data.feature_names.push_back(header[c]);
  }
  data.num_features = data.feature_names.size();

  BinaryLabelParser labels(path);
  std::vector<std::string> fields;
  std::vector<uint64_t> row_indices;
  for (uint64_t f = 0; f < data.num_features; ++f) row_indices.push_back(f);
  std::vector<float> row_values(data.num_features);
  while (reader.Next(&line)) {
    problem = SplitFields(line, &fields);
    if (!problem.empty()) throw DataError::AtLine(path, reader.line_number(), problem);
    if (fields.size() != header.size()) {
      throw DataError::AtLine(path, reader.line_number(),
                              "expected " + std::to_string(header.size()) +
                                  " fields (as in the header), found " +
                                  std::to_string(fields.size()));
    }
    size_t f = 0;
    for (size_t c = 0; c < fields.size(); ++c) {
      if (c == label) continue;
      double value = 0;
      if (!ParseValue(fields[c], &value)) {
        throw DataError::AtLine(
            path, reader.line_number(),
            "column " + Quote(header[c]) + ": " + Quote(fields[c]) + " is not a number");
      }
      row_values[f++] = static_cast<float>(value);
    }
    data.AddRow(labels.Parse(fields[label], reader.line_number()), row_indices, row_values);
  }
  return data;
}

}  // namespace linear
