// The restore report's body (ps/internal/restore_report.h): what a server that took a
// dead one's place tells a worker, written and read back exactly, and anything else
// (an app's own answer to the head) refused.
#include "ps/internal/restore_report.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace ps {
namespace {

TEST(RestoreReport, RoundTripsEveryField) {
  for (const RestoreReport& written :
       {RestoreReport{true, 123, "/data/ckpt/server-1.ckpt"}, RestoreReport{false, 0, ""},
        RestoreReport{true, UINT64_MAX, "a file with spaces and = signs"},
        RestoreReport{false, 0, "", /*from_replicas=*/true}}) {
    RestoreReport read;
    ASSERT_TRUE(ParseRestoreReport(FormatRestoreReport(written), &read))
        << FormatRestoreReport(written);
    EXPECT_EQ(read.from_checkpoint, written.from_checkpoint);
    EXPECT_EQ(read.from_replicas, written.from_replicas);
    EXPECT_EQ(read.pushes, written.pushes);
    EXPECT_EQ(read.file, written.file);
  }
}

TEST(RestoreReport, OtherBodiesAreNotReportsAndLeaveTheReportAlone) {
  for (const std::string body :
       {"", "ok", "checkpoint=3 pushes=1 file=", "checkpoint=1 pushes= file=x",
        "checkpoint=1 pushes=12x file=x", "checkpoint=1 pushes=5", "checkpoint=1  pushes=5 file=",
        "checkpoint=1 pushes=123456789012345678901 file="}) {
    RestoreReport report{true, 7, "untouched"};
    EXPECT_FALSE(ParseRestoreReport(body, &report)) << body;
    EXPECT_EQ(report.pushes, 7u);
    EXPECT_EQ(report.file, "untouched");
  }
}

}  // namespace
}  // namespace ps
