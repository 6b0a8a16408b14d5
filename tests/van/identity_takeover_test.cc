// A second connection that presents the routing identity of a connected peer changes
// nothing for that peer (van/zmq_van.cc: ZMQ_ROUTER_HANDOVER off): the peer's messages
// all arrive, in order, under its identity, and nothing the second connection sends
// arrives under it. Also: a probe (ZMQ_PROBE_ROUTER's empty first message) is neither
// delivered nor counted as malformed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ps/internal/van.h"
#include "recording_van.h"

namespace ps {
namespace {

constexpr char kMemberIdentity[] = "hmember00000001";

TEST(IdentityTakeover, ASecondConnectionWithAMembersIdentityChangesNothingForTheMember) {
  RecordingVan server;
  RecordingVan member([](VanOptions* o) { o->identity = kMemberIdentity; });
  ASSERT_TRUE(server.status().ok());
  ASSERT_TRUE(member.status().ok());
  member.Reach(1, server);
  const int kEach = 200;
  for (int i = 1; i <= kEach; ++i) {
    ASSERT_TRUE(member->Send(Numbered(i), SendMode::kBlocking, Channel::kData).ok());
  }
  ASSERT_EQ(server.WaitFor(kEach), static_cast<size_t>(kEach));

  // Another process (a van of its own) connects presenting the member's identity and
  // sends, while the member goes on sending.
  RecordingVan intruder([](VanOptions* o) { o->identity = kMemberIdentity; });
  ASSERT_TRUE(intruder.status().ok());
  intruder.Reach(1, server);
  const int kIntruder = 50;
  for (int i = 0; i < kIntruder; ++i) {
    ASSERT_TRUE(intruder->Send(Numbered(100000 + i), SendMode::kBlocking, Channel::kData).ok());
    ASSERT_TRUE(member->Send(Numbered(kEach + 1 + i), SendMode::kBlocking, Channel::kData).ok());
  }
  for (int i = kEach + kIntruder + 1; i <= 2 * kEach; ++i) {
    ASSERT_TRUE(member->Send(Numbered(i), SendMode::kBlocking, Channel::kData).ok());
  }
  // Every message of the member arrives; the intruder's may or may not.
  std::vector<int> from_member;
  for (int tries = 0; tries < 200 && from_member.size() < static_cast<size_t>(2 * kEach); ++tries) {
    server.WaitFor(2 * kEach + kIntruder, 0.1);
    from_member.clear();
    for (const auto& got : server.Received()) {
      if (got.first.peer_identity == kMemberIdentity) from_member.push_back(got.first.meta.head);
    }
  }
  ASSERT_EQ(from_member.size(), static_cast<size_t>(2 * kEach))
      << "messages under the member's identity: the member's were lost, or another's "
         "arrived in its name";
  for (int i = 0; i < 2 * kEach; ++i) {
    EXPECT_EQ(from_member[i], i + 1) << "message " << i << " under the member's identity";
  }
  EXPECT_EQ(server->stats().dropped_messages, 0u) << "a probe was taken for a malformed message";
}

}  // namespace
}  // namespace ps
