// Test helpers for the van's shared-memory path: messages whose every byte is known,
// and waiting for a condition or for a van's first frame through a ring.
#ifndef HERDPS_TESTS_VAN_SHM_FRAMES_H_
#define HERDPS_TESTS_VAN_SHM_FRAMES_H_

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "ps/internal/van.h"
#include "recording_van.h"

namespace ps {

using TestVan = RecordingVan;

// A message to `recipient` whose frames have the sizes and types given, each byte of
// frame i equal to (seed + i) and (for typed frames) whole elements.
inline Message Frames(int recipient, const std::vector<std::pair<size_t, DataType>>& frames,
                      int seed) {
  Message msg;
  msg.meta.sender = 9;
  msg.meta.recipient = recipient;
  msg.meta.head = seed;
  for (size_t i = 0; i < frames.size(); ++i) {
    SArray<char> bytes(frames[i].first, static_cast<char>(seed + i));
    msg.data.push_back(bytes);
    msg.meta.data_type.push_back(frames[i].second);
  }
  return msg;
}

// Whether `msg` is what Frames(_, frames, msg.meta.head) made.
inline bool Exact(const Message& msg, const std::vector<std::pair<size_t, DataType>>& frames) {
  if (msg.data.size() != frames.size()) return false;
  for (size_t i = 0; i < frames.size(); ++i) {
    const SArray<char>& d = msg.data[i];
    if (d.size() != frames[i].first || msg.meta.data_type[i] != frames[i].second) return false;
    const char want = static_cast<char>(msg.meta.head + i);
    for (size_t j = 0; j < d.size(); ++j) {
      if (d[j] != want) return false;
    }
  }
  return true;
}

// Calls `done` (once per try) until it returns true or `seconds` pass.
template <typename F>
bool WaitUntil(F done, double seconds = 20) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Sends messages of `frames` from a to node 2 until a's van has sent one through shared
// memory (the offer goes alone ahead of the first, which waits a little for the answer;
// without it in time, a later send reads it). Returns how many it sent.
inline int SendUntilShm(TestVan& a, const std::vector<std::pair<size_t, DataType>>& frames) {
  int sent = 0;
  bool ok = WaitUntil([&] {
    EXPECT_TRUE(a->Send(Frames(2, frames, 40 + sent), SendMode::kBlocking, Channel::kData).ok());
    ++sent;
    return a->stats().shm_sent_frames > 0;
  });
  EXPECT_TRUE(ok) << "no frame went through shared memory";
  return sent;
}

}  // namespace ps

#endif  // HERDPS_TESTS_VAN_SHM_FRAMES_H_
