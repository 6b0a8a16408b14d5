// RecordSenders (server/record_senders.h): which server's record of each key a server
// catching up took last, by rounds: a sender's new round replaces its round before, and
// of two senders the later round wins.
#include "record_senders.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(RecordSenders, NamesTheSenderOfEachKeyAndNoneForOthers) {
  RecordSenders senders;
  senders.Message(8);
  senders.Sent(8, 1, -1);
  senders.Sent(8, 5, -1);
  senders.Sent(10, 3, 2);  // a chunk
  EXPECT_EQ(senders.SenderOf(1, -1), 8);
  EXPECT_EQ(senders.SenderOf(5, -1), 8);
  EXPECT_EQ(senders.SenderOf(3, 2), 10);
  EXPECT_EQ(senders.SenderOf(3, -1), -1);  // the whole key was not sent
  EXPECT_EQ(senders.SenderOf(7, -1), -1);
}

TEST(RecordSenders, KeepsWhenEachKeysLatestRecordWasTaken) {
  RecordSenders senders;
  senders.Sent(8, 1, -1, /*taken_at=*/5);
  senders.Sent(8, 3, 0, 6);
  senders.Sent(8, 2, -1, 6);  // out of order: sorted at the first lookup
  senders.Sent(8, 1, -1, 9);  // the key sent again in the same round: the later counts
  uint64_t taken_at = 0;
  EXPECT_EQ(senders.SenderOf(1, -1, &taken_at), 8);
  EXPECT_EQ(taken_at, 9u);
  EXPECT_EQ(senders.SenderOf(2, -1, &taken_at), 8);
  EXPECT_EQ(taken_at, 6u);
  EXPECT_EQ(senders.SenderOf(3, 0, &taken_at), 8);
  EXPECT_EQ(taken_at, 6u);
  taken_at = 77;
  EXPECT_EQ(senders.SenderOf(4, -1, &taken_at), -1);
  EXPECT_EQ(taken_at, 77u) << "untouched when no record names the key";
  // A later round of another sender wins, with its own time.
  senders.Sent(10, 2, -1, 12);
  EXPECT_EQ(senders.SenderOf(2, -1, &taken_at), 10);
  EXPECT_EQ(taken_at, 12u);
}

TEST(RecordSenders, AnotherRoundReplacesTheSendersRoundBeforeOnceItEnds) {
  RecordSenders senders;
  senders.Sent(8, 1, -1);
  senders.Sent(8, 2, -1);
  senders.End(8);
  senders.Message(8);  // its keys again, listed by a newer table
  EXPECT_EQ(senders.SenderOf(1, -1), 8);  // the round before holds until this one ends
  senders.Sent(8, 2, -1);
  senders.End(8);
  EXPECT_EQ(senders.SenderOf(1, -1), -1);
  EXPECT_EQ(senders.SenderOf(2, -1), 8);
  senders.End(8);  // a round of its end alone: it sent no key this time
  EXPECT_EQ(senders.SenderOf(2, -1), -1);
  EXPECT_FALSE(senders.empty());
}

TEST(RecordSenders, TheLaterRoundWinsAKeyTwoSendersSent) {
  RecordSenders senders;
  senders.Sent(14, 4, -1);  // a sender that died before its end
  senders.Sent(10, 9, -1);
  senders.End(10);
  senders.Sent(10, 4, -1);  // the key again, from the server that serves it now
  senders.Sent(10, 2, -1);  // out of order: sorted when looked up
  EXPECT_EQ(senders.SenderOf(4, -1), 10);
  EXPECT_EQ(senders.SenderOf(2, -1), 10);
  EXPECT_EQ(senders.SenderOf(9, -1), 10);  // its round before holds until this one ends
  senders.End(10);
  EXPECT_EQ(senders.SenderOf(9, -1), -1);
  senders.Clear();
  EXPECT_TRUE(senders.empty());
  EXPECT_EQ(senders.SenderOf(4, -1), -1);
}

}  // namespace
}  // namespace ps
