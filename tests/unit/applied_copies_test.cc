// AppliedCopies (server/applied_copies.h): a push taken as a copy or as a part sent
// again after a failover is recognised when it comes again, by its worker request and
// the server it was first sent to, key by key where pieces of a split part came, within
// a bounded memory.
#include "applied_copies.h"

#include <gtest/gtest.h>

#include <vector>

namespace ps {
namespace {

AppliedCopies::Id IdOf(uint64_t request, int32_t chunk = -1, int first_server = 0) {
  AppliedCopies::Id id;
  id.worker = 9;
  id.customer = 0;
  id.request = request;
  id.chunk = chunk;
  id.first_server = first_server;
  return id;
}

// Takes a whole copy (every key of its part) of `id` with keys {1, 2}: how many were
// taken before.
size_t TakeWhole(AppliedCopies* copies, const AppliedCopies::Id& id) {
  const std::vector<uint64_t> keys = {1, 2};
  std::vector<uint8_t> before;
  return copies->Take(id, keys.data(), keys.size(), /*whole=*/true, &before);
}

TEST(AppliedCopies, ASecondTakeOfOnePushIsRecognised) {
  AppliedCopies copies;
  std::vector<uint8_t> before;
  const std::vector<uint64_t> keys = {1, 2};
  EXPECT_EQ(copies.Covered(IdOf(7), keys.data(), 2, &before), 0u);
  EXPECT_EQ(TakeWhole(&copies, IdOf(7)), 0u);
  EXPECT_EQ(copies.Covered(IdOf(7), keys.data(), 2, &before), 2u);
  EXPECT_EQ(TakeWhole(&copies, IdOf(7)), 2u);
  // Whole: any key of the part counts as taken.
  const std::vector<uint64_t> other = {5};
  EXPECT_EQ(copies.Take(IdOf(7), other.data(), 1, /*whole=*/false, &before), 1u);
}

TEST(AppliedCopies, SaysWhenAndFromWhomAPushWasTakenBefore) {
  // A server compares this with when a catch-up's record replaced a key: a take from
  // another server before the record is not in it.
  AppliedCopies copies;
  std::vector<uint8_t> before;
  const std::vector<uint64_t> keys = {1, 2};
  EarlierTakes earlier;
  const uint64_t at_start = copies.Sequence();
  copies.Take(IdOf(7), keys.data(), 2, true, &before, nullptr, nullptr, /*from=*/20, &earlier);
  EXPECT_EQ(earlier.last, 0u) << "no take before the first";
  EXPECT_FALSE(earlier.CameFrom(20));
  const uint64_t after_first = copies.Sequence();
  EXPECT_GT(after_first, at_start);
  copies.Take(IdOf(7), keys.data(), 2, true, &before, nullptr, nullptr, /*from=*/22, &earlier);
  EXPECT_EQ(earlier.last, after_first);
  EXPECT_TRUE(earlier.CameFrom(20));
  EXPECT_FALSE(earlier.CameFrom(22));
  copies.Take(IdOf(7), keys.data(), 2, true, &before, nullptr, nullptr, /*from=*/24, &earlier);
  EXPECT_GT(earlier.last, after_first);
  EXPECT_TRUE(earlier.CameFrom(20));
  EXPECT_TRUE(earlier.CameFrom(22));
  EXPECT_FALSE(earlier.CameFrom(24));
  // Beyond two senders it cannot tell, and says every node may have sent it.
  copies.Take(IdOf(7), keys.data(), 2, true, &before, nullptr, nullptr, /*from=*/26, &earlier);
  EXPECT_TRUE(earlier.CameFrom(24));
  EXPECT_TRUE(earlier.CameFrom(99));
  // Another push: its own history.
  copies.Take(IdOf(8), keys.data(), 2, true, &before, nullptr, nullptr, /*from=*/20, &earlier);
  EXPECT_EQ(earlier.last, 0u);
}

TEST(AppliedCopies, EveryFieldTellsPushesApart) {
  AppliedCopies copies;
  ASSERT_EQ(TakeWhole(&copies, IdOf(7)), 0u);
  // Another chunk, another first server (a request's parts to two servers, each
  // copied to this one), another request, worker or customer: another push.
  EXPECT_EQ(TakeWhole(&copies, IdOf(7, 0)), 0u);
  EXPECT_EQ(TakeWhole(&copies, IdOf(7, -1, 2)), 0u);
  EXPECT_EQ(TakeWhole(&copies, IdOf(8)), 0u);
  AppliedCopies::Id other_worker = IdOf(7);
  other_worker.worker = 11;
  EXPECT_EQ(TakeWhole(&copies, other_worker), 0u);
  AppliedCopies::Id other_customer = IdOf(7);
  other_customer.customer = 1;
  EXPECT_EQ(TakeWhole(&copies, other_customer), 0u);
}

TEST(AppliedCopies, PiecesOfASplitPartCountKeyByKey) {
  // With PS_REPLICATION=3: a part's piece reached this server as another piece's copy
  // (keys 1, 4), then its own piece (keys 2, 4, 6) comes: only 4 was taken.
  AppliedCopies copies;
  std::vector<uint8_t> before;
  const std::vector<uint64_t> copy_keys = {1, 4};
  EXPECT_EQ(copies.Take(IdOf(7), copy_keys.data(), 2, /*whole=*/false, &before), 0u);
  EXPECT_TRUE(before.empty());
  const std::vector<uint64_t> piece = {2, 4, 6};
  EXPECT_EQ(copies.Take(IdOf(7), piece.data(), 3, /*whole=*/false, &before), 1u);
  EXPECT_EQ(before, (std::vector<uint8_t>{0, 1, 0}));
  // Now 1, 2, 4 and 6 are taken; 3 is not.
  const std::vector<uint64_t> probe = {1, 2, 3, 6};
  EXPECT_EQ(copies.Covered(IdOf(7), probe.data(), 4, &before), 3u);
  EXPECT_EQ(before, (std::vector<uint8_t>{1, 1, 0, 1}));
  // The dead owner's copy, late: the keys not listed yet apply; then the id is whole.
  EXPECT_EQ(copies.Take(IdOf(7), probe.data(), 4, /*whole=*/true, &before), 3u);
  EXPECT_EQ(before, (std::vector<uint8_t>{1, 1, 0, 1}));
  const std::vector<uint64_t> any = {9};
  EXPECT_EQ(copies.Covered(IdOf(7), any.data(), 1, &before), 1u);
}

TEST(AppliedCopies, RecordsCarryTheirKeysAndAddMerges) {
  AppliedCopies copies;
  std::vector<uint8_t> before;
  const std::vector<uint64_t> piece = {3, 5};
  copies.Take(IdOf(1), piece.data(), 2, /*whole=*/false, &before);
  TakeWhole(&copies, IdOf(2));
  std::vector<AppliedCopies::Record> records = copies.Records();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_TRUE(records[0].id == IdOf(1));
  EXPECT_EQ(records[0].keys, piece);
  EXPECT_TRUE(records[1].keys.empty());  // whole
  AppliedCopies other;
  other.Add(records[0]);
  other.Add(AppliedCopies::Record{IdOf(1), {4}});
  const std::vector<uint64_t> probe = {3, 4, 5, 6};
  EXPECT_EQ(other.Covered(IdOf(1), probe.data(), 4, &before), 3u);
  other.Add(records[1]);
  EXPECT_EQ(other.Covered(IdOf(2), probe.data(), 4, &before), 4u);
}

TEST(AppliedCopies, MemoryIsBoundedByForgettingTheOldest) {
  AppliedCopies copies;
  for (uint64_t r = 0; r < AppliedCopies::kCapacity + 10; ++r) {
    ASSERT_EQ(TakeWhole(&copies, IdOf(r)), 0u);
  }
  std::vector<uint8_t> before;
  const std::vector<uint64_t> keys = {1};
  EXPECT_EQ(copies.Covered(IdOf(0), keys.data(), 1, &before), 0u);
  EXPECT_EQ(copies.Covered(IdOf(9), keys.data(), 1, &before), 0u);
  EXPECT_EQ(copies.Covered(IdOf(10), keys.data(), 1, &before), 1u);
  EXPECT_EQ(copies.Covered(IdOf(AppliedCopies::kCapacity + 9), keys.data(), 1, &before), 1u);
  // Forgotten within a minute of being taken: counted, so that it can be reported.
  EXPECT_EQ(copies.evicted_young(), 10u);
}

}  // namespace
}  // namespace ps
