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

TEST(ImportedCopies, AnIdCountsForItsSenderOnly) {
  ImportedCopies imported;
  imported.Add(10, "replica", {IdOf(1), IdOf(2)});
  EXPECT_TRUE(imported.Holds(10, IdOf(1)));
  EXPECT_TRUE(imported.Holds(10, IdOf(2)));
  // The key's owner (node 8) sent no such id: a copy from it applies.
  EXPECT_FALSE(imported.Holds(8, IdOf(1)));
  EXPECT_FALSE(imported.Holds(10, IdOf(3)));
}

TEST(ImportedCopies, LaterRoundsAddToASendersIds) {
  ImportedCopies imported;
  imported.Add(10, "replica", {IdOf(1)});
  imported.Add(10, "replica", {IdOf(2)});
  EXPECT_TRUE(imported.Holds(10, IdOf(1)));
  EXPECT_TRUE(imported.Holds(10, IdOf(2)));
  EXPECT_EQ(imported.Ids().size(), 2u);
}

TEST(ImportedCopies, ANewProcessAtASendersNodeStartsAfresh) {
  ImportedCopies imported;
  imported.Add(10, "dead", {IdOf(1)});
  imported.Add(8, "owner", {IdOf(5)});
  imported.KeepOnly(10, "dead");  // the same process: kept
  EXPECT_TRUE(imported.Holds(10, IdOf(1)));
  imported.KeepOnly(10, "replacement");
  EXPECT_FALSE(imported.Holds(10, IdOf(1)));
  EXPECT_TRUE(imported.Holds(8, IdOf(5)));
  imported.Add(8, "owner again", {IdOf(6)});
  EXPECT_FALSE(imported.Holds(8, IdOf(5)));
  EXPECT_TRUE(imported.Holds(8, IdOf(6)));
}

TEST(ImportedCopies, IdsListsEverySenders) {
  ImportedCopies imported;
  EXPECT_TRUE(imported.Ids().empty());
  imported.Add(10, "a", {IdOf(1)});
  imported.Add(12, "b", {IdOf(2), IdOf(1)});
  EXPECT_EQ(imported.Ids().size(), 3u);  // sent on as they came (the receiver dedups)
}

}  // namespace
}  // namespace ps
