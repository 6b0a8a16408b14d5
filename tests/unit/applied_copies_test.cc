// AppliedCopies (server/applied_copies.h): a push taken as a copy or as a part sent
// again after a failover is recognised when it comes again, by its worker request and
// the server it was first sent to, within a bounded memory.
#include "applied_copies.h"

#include <gtest/gtest.h>

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

TEST(AppliedCopies, ASecondTakeOfOnePushIsRecognised) {
  AppliedCopies copies;
  EXPECT_FALSE(copies.Contains(IdOf(7)));
  EXPECT_TRUE(copies.Insert(IdOf(7)));
  EXPECT_TRUE(copies.Contains(IdOf(7)));
  EXPECT_FALSE(copies.Insert(IdOf(7)));
}

TEST(AppliedCopies, EveryFieldTellsPushesApart) {
  AppliedCopies copies;
  ASSERT_TRUE(copies.Insert(IdOf(7)));
  // Another chunk, another first server (a request's parts to two servers, each
  // copied to this one), another request, worker or customer: another push.
  EXPECT_TRUE(copies.Insert(IdOf(7, 0)));
  EXPECT_TRUE(copies.Insert(IdOf(7, -1, 2)));
  EXPECT_TRUE(copies.Insert(IdOf(8)));
  AppliedCopies::Id other_worker = IdOf(7);
  other_worker.worker = 11;
  EXPECT_TRUE(copies.Insert(other_worker));
  AppliedCopies::Id other_customer = IdOf(7);
  other_customer.customer = 1;
  EXPECT_TRUE(copies.Insert(other_customer));
}

TEST(AppliedCopies, MemoryIsBoundedByForgettingTheOldest) {
  AppliedCopies copies;
  for (uint64_t r = 0; r < AppliedCopies::kCapacity + 10; ++r) ASSERT_TRUE(copies.Insert(IdOf(r)));
  EXPECT_FALSE(copies.Contains(IdOf(0)));
  EXPECT_FALSE(copies.Contains(IdOf(9)));
  EXPECT_TRUE(copies.Contains(IdOf(10)));
  EXPECT_TRUE(copies.Contains(IdOf(AppliedCopies::kCapacity + 9)));
  // Forgotten within a minute of being taken: counted, so that it can be reported.
  EXPECT_EQ(copies.evicted_young(), 10u);
}

}  // namespace
}  // namespace ps
