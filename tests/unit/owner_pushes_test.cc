// OwnerPushes (server/owner_pushes.h): the pushes a server took as the keys' server,
// newest kCapacity kept, listed oldest first as whole records for a catch-up to name.
#include "owner_pushes.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

AppliedCopies::Id IdOf(uint64_t request) {
  AppliedCopies::Id id;
  id.worker = 9;
  id.customer = 0;
  id.request = request;
  id.first_server = 2;
  id.first_part = 1;
  return id;
}

TEST(OwnerPushes, ListsThePushesTakenOldestFirstForEveryKey) {
  OwnerPushes pushes;
  EXPECT_TRUE(pushes.Records().empty());
  for (uint64_t r = 1; r <= 3; ++r) pushes.Add(IdOf(r));
  std::vector<AppliedCopies::Record> records = pushes.Records();
  ASSERT_EQ(records.size(), 3u);
  for (uint64_t r = 1; r <= 3; ++r) {
    EXPECT_TRUE(records[r - 1].id == IdOf(r));
    EXPECT_TRUE(records[r - 1].keys.empty());  // whole: the part's every key
  }
}

TEST(OwnerPushes, KeepsTheNewestCapacity) {
  OwnerPushes pushes;
  const uint64_t total = OwnerPushes::kCapacity + 5;
  for (uint64_t r = 1; r <= total; ++r) pushes.Add(IdOf(r));
  EXPECT_EQ(pushes.size(), OwnerPushes::kCapacity);
  std::vector<AppliedCopies::Record> records = pushes.Records();
  ASSERT_EQ(records.size(), OwnerPushes::kCapacity);
  EXPECT_EQ(records.front().id.request, 6u);  // the five oldest forgotten
  EXPECT_EQ(records.back().id.request, total);
  for (size_t i = 1; i < records.size(); ++i) {
    ASSERT_EQ(records[i].id.request, records[i - 1].id.request + 1);
  }
}

}  // namespace
}  // namespace ps
