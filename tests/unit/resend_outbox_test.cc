// ResendOutbox (ps/internal/resend_outbox.h): numbering, keeping and resending what a
// sender has not had ACKed. Time is passed in, so nothing here sleeps.
#include "ps/internal/resend_outbox.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace ps {
namespace {

using Clock = ResendOutbox::Clock;
using std::chrono::milliseconds;

const Clock::time_point kStart = Clock::time_point() + std::chrono::hours(1);

Message To(int recipient, int head = 0) {
  Message m;
  m.meta.sender = 9;
  m.meta.recipient = recipient;
  m.meta.head = head;
  m.AddData(SArray<char>{'h', 'i'});
  return m;
}

// Tracks `m` and marks its first send done at `now`, as Postoffice::Send does for a send
// that succeeded: due for resend at `now` + timeout. Returns its sequence.
uint64_t TrackAndSend(ResendOutbox* outbox, Message* m, Clock::time_point now) {
  ResendOutbox::Unsent unsent = outbox->TrackUnsent(m);
  outbox->Sent(unsent, now);
  return unsent.seq;
}

std::vector<uint64_t> Sequences(const std::vector<Message>& msgs) {
  std::vector<uint64_t> seqs;
  for (const auto& m : msgs) seqs.push_back(m.meta.sequence);
  return seqs;
}

TEST(ResendOutboxTest, SequencesAreConsecutivePerRecipient) {
  ResendOutbox outbox(milliseconds(10), milliseconds(100));
  std::vector<int> recipients{8, 8, 5, 8, 5, 12};
  std::vector<uint64_t> expected{1, 2, 1, 3, 2, 1};
  for (size_t i = 0; i < recipients.size(); ++i) {
    Message m = To(recipients[i]);
    EXPECT_EQ(TrackAndSend(&outbox, &m, kStart), expected[i]);
    EXPECT_EQ(m.meta.sequence, expected[i]);
  }
  EXPECT_EQ(outbox.Size(), recipients.size());
}

TEST(ResendOutboxTest, AckedMessagesAreNotResent) {
  ResendOutbox outbox(milliseconds(10), milliseconds(100));
  for (int i = 0; i < 3; ++i) {
    Message m = To(8, /*head=*/i);
    TrackAndSend(&outbox, &m, kStart);
  }
  EXPECT_TRUE(outbox.Ack(8, 2));
  EXPECT_FALSE(outbox.Ack(8, 2));  // a duplicate ACK
  EXPECT_FALSE(outbox.Ack(8, 7));  // never sent
  EXPECT_FALSE(outbox.Ack(5, 1));  // unknown recipient
  EXPECT_EQ(outbox.Size(), 2u);

  EXPECT_TRUE(outbox.DueForResend(kStart + milliseconds(9)).empty());
  std::vector<Message> due = outbox.DueForResend(kStart + milliseconds(10));
  EXPECT_EQ(Sequences(due), (std::vector<uint64_t>{1, 3}));
  // The resent copy is the tracked message, payload shared rather than copied.
  ASSERT_EQ(due[1].data.size(), 1u);
  EXPECT_EQ(due[1].meta.head, 2);
  EXPECT_EQ(due[1].data[0][1], 'i');

  EXPECT_TRUE(outbox.Ack(8, 1));
  EXPECT_TRUE(outbox.Ack(8, 3));
  EXPECT_EQ(outbox.Size(), 0u);
  EXPECT_TRUE(outbox.DueForResend(kStart + std::chrono::hours(1)).empty());
  EXPECT_EQ(outbox.NextDue(), Clock::time_point::max());
}

TEST(ResendOutboxTest, ResendBacksOffUpToTheCap) {
  ResendOutbox outbox(milliseconds(10), milliseconds(40));
  EXPECT_EQ(outbox.NextDue(), Clock::time_point::max());
  Message m = To(8);
  TrackAndSend(&outbox, &m, kStart);
  // Each resend waits twice as long as the one before: 10, 20, 40, then 40 (the cap).
  Clock::time_point t = kStart;
  for (int wait_ms : {10, 20, 40, 40, 40}) {
    t += milliseconds(wait_ms);
    ASSERT_EQ(outbox.NextDue(), t);
    EXPECT_TRUE(outbox.DueForResend(t - milliseconds(1)).empty());
    EXPECT_EQ(outbox.DueForResend(t).size(), 1u);
  }
  // A late caller resends once and the next wait counts from when it did.
  t += milliseconds(500);
  EXPECT_EQ(outbox.DueForResend(t).size(), 1u);
  EXPECT_EQ(outbox.NextDue(), t + milliseconds(40));
}

TEST(ResendOutboxTest, AMessageInItsFirstSendIsNotDueUntilItLeft) {
  ResendOutbox outbox(milliseconds(10), milliseconds(100));
  Message m = To(8);
  ResendOutbox::Unsent unsent = outbox.TrackUnsent(&m);
  EXPECT_EQ(unsent.seq, 1u);
  EXPECT_EQ(unsent.recipient, 8);
  EXPECT_EQ(m.meta.sequence, 1u);
  EXPECT_EQ(outbox.Size(), 1u);
  EXPECT_TRUE(outbox.Tracked(8, 1));
  // However long the first send blocks, no resend of it goes out meanwhile.
  EXPECT_TRUE(outbox.DueForResend(kStart + std::chrono::hours(1)).empty());
  EXPECT_EQ(outbox.NextDue(), Clock::time_point::max());

  const auto left = kStart + milliseconds(500);
  outbox.Sent(unsent, left);
  EXPECT_EQ(outbox.NextDue(), left + milliseconds(10));
  EXPECT_EQ(Sequences(outbox.DueForResend(left + milliseconds(10))),
            (std::vector<uint64_t>{1}));
  outbox.Sent(unsent, left + std::chrono::hours(1));  // once scheduled, Sent changes nothing
  EXPECT_EQ(outbox.NextDue(), left + milliseconds(30));

  // ACKed before its sender saw the send return: Sent finds nothing to schedule.
  Message fast = To(8);
  ResendOutbox::Unsent fast_unsent = outbox.TrackUnsent(&fast);
  EXPECT_TRUE(outbox.Ack(8, 2));
  outbox.Sent(fast_unsent, left);
  EXPECT_EQ(outbox.Size(), 1u);
  EXPECT_TRUE(outbox.Ack(8, 1));
  EXPECT_EQ(outbox.Size(), 0u);
  EXPECT_EQ(outbox.NextDue(), Clock::time_point::max());
}

TEST(ResendOutboxTest, AMessageThatNeverLeftGoesAgainAsASkipOfItsSequence) {
  ResendOutbox outbox(milliseconds(10), milliseconds(100));
  Message first = To(8, /*head=*/1);
  first.meta.sender_incarnation = 77;
  ResendOutbox::Unsent unsent = outbox.TrackUnsent(&first);
  Message second = To(8, /*head=*/2);
  TrackAndSend(&outbox, &second, kStart);

  Message skip;
  const auto failed = kStart + milliseconds(5);
  ASSERT_TRUE(outbox.Skip(unsent, failed, &skip));
  EXPECT_EQ(skip.meta.control.cmd, Control::kSkip);
  EXPECT_EQ(skip.meta.sequence, 1u);
  EXPECT_EQ(skip.meta.sender, 9);
  EXPECT_EQ(skip.meta.sender_incarnation, 77u);
  EXPECT_EQ(skip.meta.recipient, 8);
  EXPECT_TRUE(skip.data.empty());
  EXPECT_FALSE(outbox.Skip(unsent, failed, &skip));  // a skip already
  ResendOutbox::Unsent never{8, 5, 99};
  EXPECT_FALSE(outbox.Skip(never, failed, &skip));  // never tracked
  ResendOutbox::Unsent stranger{3, 1, unsent.order};
  EXPECT_FALSE(outbox.Skip(stranger, failed, &skip));  // unknown recipient

  // Still tracked until ACKed, due a timeout after it failed: its resends are the skip,
  // the other message's are itself.
  EXPECT_EQ(outbox.Size(), 2u);
  EXPECT_EQ(Sequences(outbox.DueForResend(kStart + milliseconds(10))),
            (std::vector<uint64_t>{2}));
  std::vector<Message> due = outbox.DueForResend(failed + milliseconds(10));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].meta.control.cmd, Control::kSkip);
  EXPECT_EQ(due[0].meta.sequence, 1u);
  EXPECT_TRUE(due[0].data.empty());
  EXPECT_TRUE(outbox.Ack(8, 1));
  EXPECT_EQ(outbox.Size(), 1u);
}

TEST(ResendOutboxTest, DropPeerForgetsMessagesInTheirFirstSendAndTheirOutcomeComesToNothing) {
  ResendOutbox outbox(milliseconds(10), milliseconds(100));
  Message blocked = To(8);
  ResendOutbox::Unsent unsent = outbox.TrackUnsent(&blocked);
  Message sent = To(8);
  TrackAndSend(&outbox, &sent, kStart);
  EXPECT_EQ(outbox.DropPeer(8), 2u);
  EXPECT_EQ(outbox.Size(), 0u);

  // The peer restarted and its new link took sequence 1 again, in a first send of its
  // own, before the blocked send returned: the old send's outcome touches nothing new.
  Message fresh = To(8, /*head=*/5);
  ResendOutbox::Unsent fresh_unsent = outbox.TrackUnsent(&fresh);
  ASSERT_EQ(fresh_unsent.seq, unsent.seq);
  Message skip;
  EXPECT_FALSE(outbox.Skip(unsent, kStart, &skip));
  outbox.Sent(unsent, kStart);
  EXPECT_EQ(outbox.NextDue(), Clock::time_point::max());
  outbox.Sent(fresh_unsent, kStart);
  std::vector<Message> due = outbox.DueForResend(kStart + milliseconds(10));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].meta.control.cmd, Control::kData);
  EXPECT_EQ(due[0].meta.head, 5);
}

TEST(ResendOutboxTest, DropPeerForgetsOnlyThatPeer) {
  ResendOutbox outbox(milliseconds(10), milliseconds(100));
  for (int recipient : {8, 5, 8}) {
    Message m = To(recipient);
    TrackAndSend(&outbox, &m, kStart);
  }
  EXPECT_EQ(outbox.DropPeer(8), 2u);
  EXPECT_EQ(outbox.DropPeer(8), 0u);
  EXPECT_EQ(outbox.Size(), 1u);
  std::vector<Message> due = outbox.DueForResend(kStart + milliseconds(10));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].meta.recipient, 5);
  EXPECT_FALSE(outbox.Ack(8, 1));

  // A restarted peer 8 expects its new link to start at 1.
  Message again = To(8);
  EXPECT_EQ(TrackAndSend(&outbox, &again, kStart), 1u);
  Message next5 = To(5);
  EXPECT_EQ(TrackAndSend(&outbox, &next5, kStart), 2u);
}

TEST(ResendOutboxTest, ALimitedResendTakesTheEarliestDueAndLeavesTheRestDue) {
  ResendOutbox outbox(milliseconds(10), milliseconds(100));
  for (int i = 0; i < 5; ++i) {
    Message m = To(8);
    TrackAndSend(&outbox, &m, kStart + milliseconds(i));
  }
  const auto now = kStart + milliseconds(20);
  std::vector<Message> first = outbox.DueForResend(now, 2);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].meta.sequence, 1u);
  EXPECT_EQ(first[1].meta.sequence, 2u);
  std::vector<Message> rest = outbox.DueForResend(now, 10);
  ASSERT_EQ(rest.size(), 3u);
  EXPECT_EQ(rest[0].meta.sequence, 3u);
  EXPECT_EQ(rest[2].meta.sequence, 5u);
  EXPECT_TRUE(outbox.DueForResend(now, 10).empty());
  EXPECT_EQ(outbox.Size(), 5u);
}

TEST(ResendOutboxTest, ConcurrentTrackKeepsSequencesUnique) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  constexpr int kRecipients = 3;
  ResendOutbox outbox(milliseconds(10), milliseconds(100));
  std::vector<std::vector<std::vector<uint64_t>>> seen(
      kThreads, std::vector<std::vector<uint64_t>>(kRecipients));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        int recipient = (t + i) % kRecipients;
        Message m = To(recipient);
        seen[t][recipient].push_back(TrackAndSend(&outbox, &m, kStart));
      }
    });
  }
  for (auto& th : threads) th.join();

  for (int r = 0; r < kRecipients; ++r) {
    std::vector<int> count;
    for (int t = 0; t < kThreads; ++t) {
      // One thread's sends to a recipient are numbered in the order it made them.
      for (size_t i = 1; i < seen[t][r].size(); ++i) {
        ASSERT_LT(seen[t][r][i - 1], seen[t][r][i]);
      }
      for (uint64_t s : seen[t][r]) {
        if (s >= count.size()) count.resize(s + 1);
        ++count[s];
      }
    }
    ASSERT_GT(count.size(), 1u);
    for (size_t s = 1; s < count.size(); ++s) ASSERT_EQ(count[s], 1) << "recipient " << r;
  }
  // Each kept copy carries its own sequence, and resends of a link come in sequence order.
  std::vector<Message> all = outbox.DueForResend(kStart + milliseconds(10));
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kPerThread));
  std::vector<uint64_t> last(kRecipients, 0);
  for (const Message& m : all) {
    ASSERT_EQ(m.meta.sequence, last[m.meta.recipient] + 1);
    last[m.meta.recipient] = m.meta.sequence;
  }
}

}  // namespace
}  // namespace ps
