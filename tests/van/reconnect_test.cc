// Van::Reconnect (van/include/ps/internal/van.h): a new process at a node's endpoints
// gets fresh connections. What was queued for the old process and not delivered never
// reaches the new one (Connect keeps the old connection, which would deliver it once the
// new process listens), and sends that run while the connections are replaced never find
// the node unconnected (Disconnect then Connect would fail them in between).
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <string>
#include <thread>

#include "ps/internal/van.h"
#include "recording_van.h"

namespace ps {
namespace {

TEST(Reconnect, WhatWasQueuedForTheOldProcessNeverReachesTheNewOne) {
  RecordingVan sender;
  ASSERT_TRUE(sender.status().ok());
  int port = 0, control_port = 0;
  std::string endpoint, control_endpoint;
  {
    RecordingVan old_process;
    ASSERT_TRUE(old_process.status().ok());
    port = old_process->port();
    control_port = old_process->control_port();
    endpoint = old_process->endpoint();
    control_endpoint = old_process->control_endpoint();
    sender.Reach(1, old_process);
    ASSERT_TRUE(sender->Send(Numbered(1), SendMode::kBlocking, Channel::kData).ok());
    ASSERT_EQ(old_process.WaitFor(1), 1u);
  }
  // The old process is gone; these wait in the old connection's queue.
  for (int i = 0; i < 5; ++i) {
    sender->Send(Numbered(100 + i), SendMode::kNonBlocking, Channel::kData);
  }
  // Replaced before the new process listens: no connection can have reached it yet.
  ASSERT_TRUE(sender->Reconnect(1, endpoint, control_endpoint).ok());
  RecordingVan new_process([&](VanOptions* o) {
    o->port = port;
    o->control_port = control_port;
  });
  ASSERT_TRUE(new_process.status().ok()) << new_process.status();
  ASSERT_EQ(new_process->endpoint(), endpoint);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(sender->Send(Numbered(200 + i), SendMode::kBlocking, Channel::kData).ok());
  }
  ASSERT_GE(new_process.WaitFor(5), 5u);
  new_process.WaitFor(10, 0.5);  // anything more that would come
  std::set<int> heads;
  for (const auto& got : new_process.Received()) heads.insert(got.first.meta.head);
  EXPECT_EQ(heads, (std::set<int>{200, 201, 202, 203, 204}))
      << "a message queued for the old process reached the new one";
}

TEST(Reconnect, SendsMeanwhileNeverFindTheNodeUnconnected) {
  RecordingVan peer;
  RecordingVan sender;
  ASSERT_TRUE(peer.status().ok());
  ASSERT_TRUE(sender.status().ok());
  sender.Reach(1, peer);
  std::atomic<bool> stop{false};
  std::atomic<int> failed{0}, sent{0};
  std::string first_failure;
  std::thread sending([&] {
    for (int i = 0; !stop.load(); ++i) {
      Status s = sender->Send(Numbered(i), SendMode::kBlocking, Channel::kData);
      if (s.ok()) {
        ++sent;
      } else if (failed++ == 0) {
        first_failure = s.ToString();
      }
    }
  });
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(sender->Reconnect(1, peer->endpoint(), peer->control_endpoint()).ok());
  }
  stop = true;
  sending.join();
  EXPECT_EQ(failed.load(), 0) << first_failure;
  EXPECT_GT(sent.load(), 0);
}

}  // namespace
}  // namespace ps
