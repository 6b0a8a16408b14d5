// Status and ps::Error (ps/status.h): the values errors travel as.
#include "ps/status.h"

#include <gtest/gtest.h>

#include <sstream>
#include <stdexcept>
#include <string>

namespace ps {
namespace {

using Code = Status::Code;

TEST(Status, DefaultConstructedStatusIsOkWithNoMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(Status::OK().ok());
}

TEST(Status, WireCodesKeepTheirNumbers) {
  // These numbers travel in meta.status_code: renumbering breaks mixed-version jobs.
  EXPECT_EQ(static_cast<int>(Code::kOk), 0);
  EXPECT_EQ(static_cast<int>(Code::kInvalidArgument), 1);
  EXPECT_EQ(static_cast<int>(Code::kNotFound), 2);
  EXPECT_EQ(static_cast<int>(Code::kUnavailable), 3);
  EXPECT_EQ(static_cast<int>(Code::kTimeout), 4);
  EXPECT_EQ(static_cast<int>(Code::kDataLoss), 5);
  EXPECT_EQ(static_cast<int>(Code::kInternal), 6);
  EXPECT_EQ(static_cast<int>(Code::kUnimplemented), 7);
}

TEST(Status, EachFactorySetsItsCodeAndKeepsTheMessage) {
  struct Case {
    Status status;
    Code code;
  };
  const Case cases[] = {
      {Status::InvalidArgument("m"), Code::kInvalidArgument},
      {Status::NotFound("m"), Code::kNotFound},
      {Status::Unavailable("m"), Code::kUnavailable},
      {Status::Timeout("m"), Code::kTimeout},
      {Status::DataLoss("m"), Code::kDataLoss},
      {Status::Internal("m"), Code::kInternal},
      {Status::Unimplemented("m"), Code::kUnimplemented},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.message(), "m");
  }
}

TEST(Status, ToStringNamesTheCodeThenTheMessage) {
  EXPECT_EQ(Status::InvalidArgument("bad key").ToString(), "InvalidArgument: bad key");
  EXPECT_EQ(Status::NotFound("key 7").ToString(), "NotFound: key 7");
  EXPECT_EQ(Status::Unavailable("node 9").ToString(), "Unavailable: node 9");
  EXPECT_EQ(Status::Timeout("t").ToString(), "Timeout: t");
  EXPECT_EQ(Status::DataLoss("d").ToString(), "DataLoss: d");
  EXPECT_EQ(Status::Internal("i").ToString(), "Internal: i");
  EXPECT_EQ(Status::Unimplemented("u").ToString(), "Unimplemented: u");
}

TEST(Status, StreamingPrintsToString) {
  std::ostringstream os;
  os << Status::Timeout("no answer in 5 s");
  EXPECT_EQ(os.str(), "Timeout: no answer in 5 s");
}

TEST(Status, FromWireRestoresEveryKnownCode) {
  for (int code = 0; code <= static_cast<int>(Code::kUnimplemented); ++code) {
    Status s = Status::FromWire(code, "msg");
    EXPECT_EQ(static_cast<int>(s.code()), code);
    EXPECT_EQ(s.message(), "msg");
  }
}

TEST(Status, FromWireTurnsUnknownCodesIntoInternalErrors) {
  for (int code : {8, 99, -1, -1000}) {
    Status s = Status::FromWire(code, "from a newer peer");
    EXPECT_EQ(s.code(), Code::kInternal) << code;
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("unknown status code " + std::to_string(code)), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("from a newer peer"), std::string::npos) << s.message();
  }
}

TEST(Error, IsARuntimeErrorCarryingItsMessage) {
  try {
    throw Error("Push: keys must be sorted");
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "Push: keys must be sorted");
    return;
  }
  FAIL() << "ps::Error was not caught as std::runtime_error";
}

}  // namespace
}  // namespace ps
