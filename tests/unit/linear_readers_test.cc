// ReadCsv and ReadLibsvm (apps/linear): what they accept, and that every refusal names
// the file and the line.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>

#include "csv_reader.h"
#include "data_error.h"
#include "libsvm_reader.h"

namespace linear {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const auto tick = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = fs::temp_directory_path() / ("herdps_linear_" + std::to_string(std::random_device{}()) +
                                         "_" + std::to_string(tick));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& contents) const {
    const std::string file = (path_ / name).string();
    std::ofstream(file, std::ios::binary) << contents;
    return file;
  }
  std::string Path(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// Runs `read`, expecting a DataError whose message contains every one of `parts`.
void ExpectDataError(const std::function<void()>& read, std::initializer_list<std::string> parts) {
  try {
    read();
    ADD_FAILURE() << "no DataError thrown";
  } catch (const DataError& e) {
    const std::string message = e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }
}

// Owns the temp dir the readers' input files are written to.
class ReaderFixture : public ::testing::Test {
 protected:
  TempDir dir_;
};

class LinearCsv : public ReaderFixture {
 protected:
  Dataset Read(const std::string& text, const std::string& label = "y") {
    return ReadCsv(dir_.Write("d.csv", text), label);
  }
  void ExpectError(const std::string& text, const std::string& label,
                   std::initializer_list<std::string> parts) {
    const std::string file = dir_.Write("bad.csv", text);
    ExpectDataError([&] { ReadCsv(file, label); }, parts);
    ExpectDataError([&] { ReadCsv(file, label); }, {file});
  }
};

TEST_F(LinearCsv, FeaturesKeepColumnOrderWithTheLabelColumnLeftOut) {
  const Dataset d = Read("a,y,b\n1,0,2\n3,1,4\n");
  EXPECT_EQ(d.feature_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(d.num_features, 2u);
  EXPECT_EQ(d.labels, (std::vector<float>{0, 1}));
  EXPECT_EQ(d.row_offsets, (std::vector<uint64_t>{0, 2, 4}));
  EXPECT_EQ(d.indices, (std::vector<uint64_t>{0, 1, 0, 1}));
  EXPECT_EQ(d.values, (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(LinearCsv, EmptyLabelColumnNameMeansTheLastColumn) {
  const Dataset d = Read("a,b,target\n1,2,1\n", "");
  EXPECT_EQ(d.feature_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(d.labels, (std::vector<float>{1}));
  EXPECT_EQ(d.values, (std::vector<float>{1, 2}));
}

TEST_F(LinearCsv, QuotesAndSurroundingSpacesAreStripped) {
  const Dataset d =
      Read(" \"x\" , \"say \"\"hi\"\", then go\",\"y\"\r\n 1.5 , \"-2e1\" , \"1\" \r\n");
  EXPECT_EQ(d.feature_names, (std::vector<std::string>{"x", "say \"hi\", then go"}));
  EXPECT_EQ(d.values, (std::vector<float>{1.5f, -20.0f}));
  EXPECT_EQ(d.labels, (std::vector<float>{1}));
}

TEST_F(LinearCsv, ZeroFieldsAreStoredSoEveryRowIsDense) {
  const Dataset d = Read("a,b,y\n0,0,0\n0,5,1\n");
  EXPECT_EQ(d.row_offsets, (std::vector<uint64_t>{0, 2, 4}));
  EXPECT_EQ(d.values, (std::vector<float>{0, 0, 0, 5}));
}

TEST_F(LinearCsv, MinusOnePlusOneLabelsMapToZeroOne) {
  EXPECT_EQ(Read("a,y\n1,-1\n2,+1\n3,1.0\n4,-1.0\n").labels, (std::vector<float>{0, 1, 1, 0}));
  EXPECT_EQ(Read("a,y\n1,0.0\n2,1\n3,0\n").labels, (std::vector<float>{0, 1, 0}));
}

TEST_F(LinearCsv, BlankLinesAreSkippedButStillCountInLineNumbers) {
  EXPECT_EQ(Read("a,y\n\n1,0\n \t \n2,1\n\n").rows(), 2u);
  ExpectError("a,y\n\n1,0\n   \n1,x\n", "y", {"line 5", "\"x\""});
}

TEST_F(LinearCsv, HeaderWithoutRowsGivesAnEmptyDatasetThatKnowsItsFeatures) {
  const Dataset d = Read("a,b,y\n");
  EXPECT_EQ(d.rows(), 0u);
  EXPECT_EQ(d.num_features, 2u);
}

TEST_F(LinearCsv, MissingFileSaysCannotOpen) {
  const std::string missing = dir_.Path("nope.csv");
  ExpectDataError([&] { ReadCsv(missing, "y"); }, {missing, "cannot open"});
}

TEST_F(LinearCsv, EmptyFileSaysAHeaderIsExpected) {
  ExpectError("", "y", {"empty", "header"});
  ExpectError("\n  \n", "y", {"empty", "header"});
}

TEST_F(LinearCsv, UnknownLabelColumnListsTheColumns) {
  ExpectError("a,b,c\n1,2,3\n", "y", {"line 1", "\"y\" not found", "\"a\", \"b\", \"c\""});
}

TEST_F(LinearCsv, LabelColumnNamedTwiceIsRefused) {
  ExpectError("y,a,y\n1,2,1\n", "y", {"line 1", "appears 2 times"});
}

TEST_F(LinearCsv, WrongNumberOfFieldsNamesTheLineAndBothCounts) {
  ExpectError("a,b,y\n1,2,0\n1,0\n", "y", {"line 3", "expected 3", "found 2"});
  ExpectError("a,b,y\n1,2,0,\n", "y", {"line 2", "found 4"});
}

TEST_F(LinearCsv, NonNumericFieldIsQuotedWithItsColumn) {
  ExpectError("a,b,y\n1,2,0\n1,abc,1\n", "y", {"line 3", "column \"b\"", "\"abc\""});
  ExpectError("a,b,y\n1,,0\n", "y", {"line 2", "\"\" is not a number"});
  ExpectError("a,b,y\n1,nan,0\n", "y", {"line 2", "\"nan\""});
  ExpectError("a,b,y\n1,1e99,0\n", "y", {"line 2", "\"1e99\""});
}

TEST_F(LinearCsv, LabelsOutsideTheBinaryConventionsAreRefused) {
  ExpectError("a,y\n1,1\n1,2\n", "y", {"line 3", "label \"2\""});
  ExpectError("a,y\n1,0.5\n", "y", {"line 2", "label \"0.5\""});
  ExpectError("a,y\n1,yes\n", "y", {"line 2", "label \"yes\" is not a number"});
}

TEST_F(LinearCsv, FileMixingZeroAndMinusOneLabelsIsRefused) {
  ExpectError("a,y\n1,0\n1,1\n1,-1\n", "y", {"line 4", "line 2", "conventions"});
}

TEST_F(LinearCsv, UnterminatedQuoteIsRefused) {
  ExpectError("a,y\n\"1,0\n", "y", {"line 2", "closing quote"});
}

class LinearLibsvm : public ReaderFixture {
 protected:
  Dataset Read(const std::string& text, uint64_t max_features = 0) {
    return ReadLibsvm(dir_.Write("d.svm", text), max_features);
  }
  void ExpectError(const std::string& text, uint64_t max_features,
                   std::initializer_list<std::string> parts) {
    const std::string file = dir_.Write("bad.svm", text);
    ExpectDataError([&] { ReadLibsvm(file, max_features); }, parts);
    ExpectDataError([&] { ReadLibsvm(file, max_features); }, {file});
  }
};

TEST_F(LinearLibsvm, ReadsSparseRowsKeepingTheFileIndices) {
  const Dataset d = Read("1 3:0.5 10:2\n-1 1:1\n+1\n");
  EXPECT_EQ(d.labels, (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(d.row_offsets, (std::vector<uint64_t>{0, 2, 3, 3}));
  EXPECT_EQ(d.indices, (std::vector<uint64_t>{3, 10, 1}));
  EXPECT_EQ(d.values, (std::vector<float>{0.5f, 2, 1}));
  EXPECT_EQ(d.num_features, 11u);
  EXPECT_TRUE(d.feature_names.empty());
}

TEST_F(LinearLibsvm, ZeroBasedIndicesStayZeroBased) {
  const Dataset d = Read("0 0:1 2:3\n");
  EXPECT_EQ(d.indices, (std::vector<uint64_t>{0, 2}));
  EXPECT_EQ(d.num_features, 3u);
}

TEST_F(LinearLibsvm, CommentsTabsAndBlankLinesAreIgnored) {
  const Dataset d = Read("# a header comment\n1\t1:2   4:0 # note\n\n0 2:1#x\n\r\n");
  EXPECT_EQ(d.labels, (std::vector<float>{1, 0}));
  EXPECT_EQ(d.indices, (std::vector<uint64_t>{1, 4, 2}));
  EXPECT_EQ(d.values, (std::vector<float>{2, 0, 1}));
}

TEST_F(LinearLibsvm, IndicesBelowMaxFeaturesAreAccepted) {
  EXPECT_EQ(Read("1 0:1 9:1\n", 10).num_features, 10u);
  EXPECT_EQ(Read("1 0:1 4:1\n", 10).num_features, 5u);
}

TEST_F(LinearLibsvm, MissingFileSaysCannotOpen) {
  const std::string missing = dir_.Path("nope.svm");
  ExpectDataError([&] { ReadLibsvm(missing); }, {missing, "cannot open"});
}

TEST_F(LinearLibsvm, MalformedTokensAreQuotedWithTheirLine) {
  ExpectError("1 1:1\n0 3\n", 0, {"line 2", "malformed token \"3\""});
  ExpectError("1 3:\n", 0, {"line 1", "\"3:\"", "value"});
  ExpectError("1 :3\n", 0, {"line 1", "\":3\"", "index"});
  ExpectError("1 a:1\n", 0, {"line 1", "\"a:1\"", "index"});
  ExpectError("1 -1:2\n", 0, {"line 1", "\"-1:2\"", "index"});
  ExpectError("1 1:2:3\n", 0, {"line 1", "\"1:2:3\""});
  ExpectError("1 1:x\n", 0, {"line 1", "\"1:x\"", "not a number"});
  ExpectError("1 99999999999999999999:1\n", 0, {"line 1", "index"});
}

TEST_F(LinearLibsvm, IndicesMustAscendWithoutRepeatsWithinALine) {
  ExpectError("1 5:1 3:1\n", 0, {"line 1", "3 comes after 5"});
  ExpectError("1 1:1\n1 3:1 3:2\n", 0, {"line 2", "3 appears twice"});
}

TEST_F(LinearLibsvm, IndexAtOrAboveMaxFeaturesIsOutOfRange) {
  ExpectError("1 1:1\n\n0 10:1\n", 10, {"line 3", "feature index out of range", "10"});
}

TEST_F(LinearLibsvm, LabelsMustBeBinaryNumbers) {
  ExpectError("1 1:1\n2 1:1\n", 0, {"line 2", "label \"2\""});
  ExpectError("abc 1:1\n", 0, {"line 1", "label \"abc\""});
  ExpectError("1:1 2:1\n", 0, {"line 1", "label \"1:1\""});
  ExpectError("-1 1:1\n0 1:1\n", 0, {"line 2", "conventions"});
}

}  // namespace
}  // namespace linear
