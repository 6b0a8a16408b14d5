// InboundSequencer (ps/internal/reorder_window.h): exactly-once, in-order delivery per
// sender out of a lossy, duplicating, reordering link.
#include "ps/internal/reorder_window.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <vector>

#include "ps/internal/resend_outbox.h"

namespace ps {
namespace {

using Verdict = InboundSequencer::Verdict;

constexpr int kSender = 9;
constexpr int kReceiver = 8;

// A message carrying `id` in its one data frame, so a test can tell deliveries apart.
Message Numbered(uint64_t id) {
  Message m;
  m.meta.sender = kSender;
  m.meta.recipient = kReceiver;
  m.AddData(SArray<uint64_t>{id});
  return m;
}

uint64_t IdOf(const Message& m) { return SArray<uint64_t>(m.data.at(0))[0]; }

std::vector<uint64_t> Ids(const std::vector<Message>& msgs) {
  std::vector<uint64_t> ids;
  for (const auto& m : msgs) ids.push_back(IdOf(m));
  return ids;
}

TEST(InboundSequencerTest, InOrderMessagesAreDeliveredAtOnce) {
  InboundSequencer seq(8);
  for (uint64_t s = 1; s <= 20; ++s) {
    std::vector<Message> ready;
    ASSERT_EQ(seq.Accept(kSender, 1, s, Numbered(s), &ready), Verdict::kAccepted);
    EXPECT_EQ(Ids(ready), std::vector<uint64_t>{s});
  }
  EXPECT_EQ(seq.HeldMessages(), 0u);
  EXPECT_EQ(seq.TrackedSenders(), 1u);
}

TEST(InboundSequencerTest, GapIsHeldUntilFilledThenDeliveredInOrder) {
  InboundSequencer seq(8);
  std::vector<Message> ready;
  EXPECT_EQ(seq.Accept(kSender, 1, 1, Numbered(1), &ready), Verdict::kAccepted);
  EXPECT_EQ(seq.Accept(kSender, 1, 4, Numbered(4), &ready), Verdict::kAccepted);
  EXPECT_EQ(seq.Accept(kSender, 1, 3, Numbered(3), &ready), Verdict::kAccepted);
  // Another sender's stream is independent of this one's gap.
  EXPECT_EQ(seq.Accept(kSender + 1, 1, 1, Numbered(100), &ready), Verdict::kAccepted);
  EXPECT_EQ(Ids(ready), (std::vector<uint64_t>{1, 100}));
  EXPECT_EQ(seq.HeldMessages(), 2u);

  ready.clear();
  EXPECT_EQ(seq.Accept(kSender, 1, 2, Numbered(2), &ready), Verdict::kAccepted);
  EXPECT_EQ(Ids(ready), (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(seq.HeldMessages(), 0u);
}

TEST(InboundSequencerTest, DuplicatesAreReportedAndNeverDeliveredTwice) {
  InboundSequencer seq(8);
  std::vector<Message> ready;
  seq.Accept(kSender, 1, 1, Numbered(1), &ready);
  seq.Accept(kSender, 1, 3, Numbered(3), &ready);
  ready.clear();
  EXPECT_EQ(seq.Accept(kSender, 1, 1, Numbered(1), &ready), Verdict::kDuplicate);  // delivered
  EXPECT_EQ(seq.Accept(kSender, 1, 3, Numbered(3), &ready), Verdict::kDuplicate);  // held
  EXPECT_TRUE(ready.empty());
  EXPECT_EQ(seq.HeldMessages(), 1u);

  EXPECT_EQ(seq.Accept(kSender, 1, 2, Numbered(2), &ready), Verdict::kAccepted);
  EXPECT_EQ(Ids(ready), (std::vector<uint64_t>{2, 3}));
}

TEST(InboundSequencerTest, BeyondWindowIsRefused) {
  InboundSequencer seq(4);
  std::vector<Message> ready;
  EXPECT_EQ(seq.Accept(kSender, 1, 5, Numbered(5), &ready), Verdict::kRefused);
  EXPECT_EQ(seq.Accept(kSender, 1, UINT64_MAX, Numbered(0), &ready), Verdict::kRefused);
  EXPECT_EQ(seq.Accept(kSender, 1, 0, Numbered(0), &ready), Verdict::kRefused);
  EXPECT_EQ(seq.Accept(kSender, 1, 4, Numbered(4), &ready), Verdict::kAccepted);  // held
  EXPECT_TRUE(ready.empty());

  // Delivering 1 slides the window, so the resent 5 now fits.
  EXPECT_EQ(seq.Accept(kSender, 1, 1, Numbered(1), &ready), Verdict::kAccepted);
  EXPECT_EQ(seq.Accept(kSender, 1, 5, Numbered(5), &ready), Verdict::kAccepted);
  EXPECT_EQ(Ids(ready), std::vector<uint64_t>{1});
  EXPECT_EQ(seq.HeldMessages(), 2u);
}

TEST(InboundSequencerTest, NewIncarnationResetsTheSender) {
  // Incarnations are random per process start: the new one may well be the smaller.
  constexpr uint64_t kOld = 0x9e3779b97f4a7c15, kNew = 0x1234;
  InboundSequencer seq(8);
  std::vector<Message> ready;
  seq.Accept(kSender, kOld, 1, Numbered(1), &ready);
  seq.Accept(kSender, kOld, 2, Numbered(2), &ready);
  seq.Accept(kSender, kOld, 4, Numbered(4), &ready);
  ASSERT_EQ(seq.HeldMessages(), 1u);

  // The restarted process numbers from 1 again; the dead one's held message is dropped.
  ready.clear();
  EXPECT_EQ(seq.Accept(kSender, kNew, 1, Numbered(11), &ready), Verdict::kAccepted);
  EXPECT_EQ(Ids(ready), std::vector<uint64_t>{11});
  EXPECT_EQ(seq.HeldMessages(), 0u);
  EXPECT_EQ(seq.TrackedSenders(), 1u);
  // A straggler from the old process must neither reset the new stream nor join it.
  EXPECT_EQ(seq.Accept(kSender, kOld, 3, Numbered(3), &ready), Verdict::kRefused);
  EXPECT_EQ(seq.Accept(kSender, kOld, 1, Numbered(1), &ready), Verdict::kRefused);
  EXPECT_EQ(seq.Accept(kSender, kNew, 1, Numbered(11), &ready), Verdict::kDuplicate);
  EXPECT_EQ(seq.Accept(kSender, kNew, 2, Numbered(12), &ready), Verdict::kAccepted);
  EXPECT_EQ(Ids(ready), (std::vector<uint64_t>{11, 12}));
}

TEST(InboundSequencerTest, ForgetFreesTheSenderAndRefusesItsLateResends) {
  InboundSequencer seq(8);
  std::vector<Message> ready;
  seq.Accept(kSender, 1, 1, Numbered(1), &ready);
  seq.Accept(kSender, 1, 3, Numbered(3), &ready);
  seq.Accept(kSender + 1, 1, 2, Numbered(2), &ready);
  seq.Forget(kSender);
  EXPECT_EQ(seq.TrackedSenders(), 1u);
  EXPECT_EQ(seq.HeldMessages(), 1u);

  ready.clear();
  EXPECT_EQ(seq.Accept(kSender, 1, 1, Numbered(1), &ready), Verdict::kRefused);
  EXPECT_EQ(seq.Accept(kSender, 1, 2, Numbered(2), &ready), Verdict::kRefused);
  EXPECT_TRUE(ready.empty());
  EXPECT_EQ(seq.Accept(kSender, 2, 1, Numbered(21), &ready), Verdict::kAccepted);
  EXPECT_EQ(Ids(ready), std::vector<uint64_t>{21});
}

TEST(InboundSequencerTest, OnlyTheLastFewIncarnationsOfASenderAreRemembered) {
  InboundSequencer seq(8);
  std::vector<Message> ready;
  constexpr uint64_t kRestarts = 1000;
  for (uint64_t inc = 1; inc <= kRestarts; ++inc) {
    ASSERT_EQ(seq.Accept(kSender, inc, 1, Numbered(inc), &ready), Verdict::kAccepted);
  }
  EXPECT_EQ(ready.size(), kRestarts);
  // The previous kRetiredPerSender incarnations are refused; older ones are long gone.
  for (uint64_t back = 1; back <= InboundSequencer::kRetiredPerSender; ++back) {
    EXPECT_EQ(seq.Accept(kSender, kRestarts - back, 2, Numbered(0), &ready), Verdict::kRefused);
  }
  EXPECT_EQ(seq.Accept(kSender, kRestarts, 1, Numbered(0), &ready), Verdict::kDuplicate);
}

// One sender (a ResendOutbox) and one receiver over a link that loses 10% of the messages
// and 10% of the ACKs, duplicates some messages and reorders all of them with random
// delays. The fake clock advances 1 ms per step.
TEST(InboundSequencerTest, MemoryStaysUnderTheBoundOver100000MessagesWithRandomDropsAndDuplicates) {
  using Clock = ResendOutbox::Clock;
  constexpr uint64_t kMessages = 100000;
  constexpr size_t kWindow = 32;
  constexpr int kMaxDelayMs = 6;
  struct InFlight {
    Clock::time_point arrives;
    Message msg;  // a data message, or an ACK carrying meta.sequence
  };
  std::mt19937_64 rng(20240607);
  std::bernoulli_distribution lost(0.10), duplicated(0.02);
  std::uniform_int_distribution<int> delay(0, kMaxDelayMs);
  ResendOutbox outbox(std::chrono::milliseconds(10), std::chrono::milliseconds(80));
  InboundSequencer sequencer(kWindow);
  std::vector<InFlight> to_receiver, to_sender;
  auto now = Clock::time_point();
  auto put = [&](std::vector<InFlight>* wire, const Message& m) {
    wire->push_back({now + std::chrono::milliseconds(delay(rng)), m});
    if (duplicated(rng)) wire->push_back({now + std::chrono::milliseconds(delay(rng)), m});
  };
  // Removes and returns, in random order, what has arrived and was not lost.
  auto arrived = [&](std::vector<InFlight>* wire) {
    auto split = std::partition(wire->begin(), wire->end(),
                                [&](const InFlight& f) { return f.arrives > now; });
    std::vector<Message> out;
    for (auto it = split; it != wire->end(); ++it) {
      if (!lost(rng)) out.push_back(it->msg);
    }
    wire->erase(split, wire->end());
    std::shuffle(out.begin(), out.end(), rng);
    return out;
  };

  uint64_t sent = 0, delivered = 0, refused = 0, duplicates = 0;
  size_t max_held = 0;
  for (int step = 0; delivered < kMessages || outbox.Size() > 0; ++step) {
    ASSERT_LT(step, 20 * static_cast<int>(kMessages)) << "the link stopped making progress";
    now += std::chrono::milliseconds(1);
    // The sender runs up to twice the window ahead, so some messages get refused.
    for (int i = 0; i < 2 && sent < kMessages && outbox.Size() < 2 * kWindow; ++i) {
      Message m = Numbered(++sent);
      outbox.Sent(outbox.TrackUnsent(&m), now);
      put(&to_receiver, m);
    }
    for (const Message& m : outbox.DueForResend(now)) put(&to_receiver, m);

    for (Message& m : arrived(&to_receiver)) {
      uint64_t s = m.meta.sequence;
      std::vector<Message> ready;
      Verdict v = sequencer.Accept(kSender, 1, s, std::move(m), &ready);
      if (v == Verdict::kRefused) {
        ++refused;
        continue;
      }
      if (v == Verdict::kDuplicate) ++duplicates;
      Message ack;
      ack.meta.sender = kReceiver;
      ack.meta.recipient = kSender;
      ack.meta.sequence = s;
      put(&to_sender, ack);
      for (const Message& r : ready) {
        ++delivered;
        ASSERT_EQ(IdOf(r), delivered) << "at step " << step;
      }
      ASSERT_LE(sequencer.HeldMessages(), kWindow);
      max_held = std::max(max_held, sequencer.HeldMessages());
    }
    for (const Message& ack : arrived(&to_sender)) outbox.Ack(kReceiver, ack.meta.sequence);
  }
  EXPECT_EQ(delivered, kMessages);
  EXPECT_EQ(sequencer.HeldMessages(), 0u);
  EXPECT_EQ(sequencer.TrackedSenders(), 1u);
  // The run must have exercised every path, or it proves less than it claims.
  EXPECT_GT(refused, 0u);
  EXPECT_GT(duplicates, 0u);
  EXPECT_GT(max_held, 0u);
}

}  // namespace
}  // namespace ps
