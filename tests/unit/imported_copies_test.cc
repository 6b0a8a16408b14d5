// ImportedCopies (server/imported_copies.h): the push ids a catch-up brought are kept
// by the server that sent them, so that a copy from another server is never taken for
// one of them; a new process at a sender's node starts afresh.
#include "imported_copies.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

AppliedCopies::Id IdOf(uint64_t request) {
  AppliedCopies::Id id;
  id.worker = 9;
  id.request = request;
  return id;
}

// A record of every key of its part.
AppliedCopies::Record Whole(uint64_t request) { return AppliedCopies::Record{IdOf(request), {}}; }

// Whether `sender` sent `id` as taken for key 1.
bool Holds(const ImportedCopies& imported, int sender, const AppliedCopies::Id& id) {
  std::vector<uint8_t> before;
  const uint64_t key = 1;
  return imported.Covered(sender, id, &key, 1, &before) == 1;
}

TEST(ImportedCopies, AnIdCountsForItsSenderOnly) {
  ImportedCopies imported;
  imported.Add(10, "replica", {Whole(1), Whole(2)});
  EXPECT_TRUE(Holds(imported, 10, IdOf(1)));
  EXPECT_TRUE(Holds(imported, 10, IdOf(2)));
  // The key's owner (node 8) sent no such id: a copy from it applies.
  EXPECT_FALSE(Holds(imported, 8, IdOf(1)));
  EXPECT_FALSE(Holds(imported, 10, IdOf(3)));
}

TEST(ImportedCopies, LaterRoundsAddToASendersIds) {
  ImportedCopies imported;
  imported.Add(10, "replica", {Whole(1)});
  imported.Add(10, "replica", {Whole(2)});
  EXPECT_TRUE(Holds(imported, 10, IdOf(1)));
  EXPECT_TRUE(Holds(imported, 10, IdOf(2)));
  EXPECT_EQ(imported.Records().size(), 2u);
}

TEST(ImportedCopies, ANewProcessAtASendersNodeStartsAfresh) {
  ImportedCopies imported;
  imported.Add(10, "dead", {Whole(1)});
  imported.Add(8, "owner", {Whole(5)});
  imported.KeepOnly(10, "dead");  // the same process: kept
  EXPECT_TRUE(Holds(imported, 10, IdOf(1)));
  imported.KeepOnly(10, "replacement");
  EXPECT_FALSE(Holds(imported, 10, IdOf(1)));
  EXPECT_TRUE(Holds(imported, 8, IdOf(5)));
  imported.Add(8, "owner again", {Whole(6)});
  EXPECT_FALSE(Holds(imported, 8, IdOf(5)));
  EXPECT_TRUE(Holds(imported, 8, IdOf(6)));
}

TEST(ImportedCopies, RecordsListEverySenders) {
  ImportedCopies imported;
  EXPECT_TRUE(imported.Records().empty());
  imported.Add(10, "a", {Whole(1)});
  imported.Add(12, "b", {Whole(2), Whole(1)});
  EXPECT_EQ(imported.Records().size(), 3u);  // sent on as they came (the receiver dedups)
}

TEST(ImportedCopies, ARecordOfSomeKeysCoversThoseOnly) {
  ImportedCopies imported;
  imported.Add(10, "a", {AppliedCopies::Record{IdOf(1), {4, 8}}});
  std::vector<uint8_t> before;
  const std::vector<uint64_t> keys = {4, 6, 8};
  EXPECT_EQ(imported.Covered(10, IdOf(1), keys.data(), keys.size(), &before), 2u);
  EXPECT_EQ(before, (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(imported.Covered(12, IdOf(1), keys.data(), keys.size(), &before), 0u);
}

}  // namespace
}  // namespace ps
