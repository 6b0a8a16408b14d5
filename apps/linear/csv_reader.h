// ReadCsv: loads a dense, comma-separated data file with a header line into a Dataset.
//
// Format: the first non-blank line is the header, naming every column. Fields are
// separated by commas; spaces and tabs around a field are ignored; a field may be wrapped
// in double quotes (then commas inside it are data and "" stands for one quote). Blank
// lines are skipped. Every line must have as many fields as the header.
//
// One column is the label, chosen by name; it must hold numbers equal to 0 or 1, or -1
// or +1 (-1 is read as 0; one file must not mix 0 and -1). Words such as "yes" are
// refused on purpose: a label column that is not numeric is usually the wrong column.
// Every other column is a numeric feature: feature i is the i-th non-label column, in
// header order, and feature_names holds their header names. Every field is stored, zeros
// included, so each row has num_features values and standardisation stays exact.
#pragma once

#include <string>

#include "dataset.h"

namespace linear {

// Reads `path`, taking the column named `label_column` (the last column when empty) as
// the label. A header with no data rows gives a Dataset with zero rows.
// Throws DataError, naming the file and the line, when the file cannot be opened, has no
// header, has no column `label_column` (the message lists the columns) or has it twice,
// when a line has the wrong number of fields or an unterminated quote, when a feature
// field is not a finite number (the field is quoted in the message), or when a label is
// not 0/1/-1/+1.
Dataset ReadCsv(const std::string& path, const std::string& label_column);

}  // namespace linear
