// Catch-up records (server/catch_up_records.h) and ShardStore's catch-up: what a live
// server sends a new server in a dead one's place travels exactly (values, state, step
// counts, chunk layouts, open rounds, the pushes taken once), malformed messages are
// refused, and the new server's store ends with the sender's state whatever copies
// reached it before, its open rounds applied as its own clock says.
#include "catch_up_records.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "ps/optimizer.h"
#include "shard_store.h"

namespace ps {
namespace {

CatchUpRecord Record(Key key, std::vector<float> values, std::vector<float> state, int64_t steps,
                     int32_t chunk = -1) {
  CatchUpRecord r;
  r.record.key = key;
  r.record.values = std::move(values);
  r.record.state = std::move(state);
  r.record.steps = steps;
  r.record.chunk = chunk;
  if (chunk >= 0) {
    r.record.chunk_offset = (uint64_t{1} << 33) + 5;  // above 32 bits on purpose
    r.record.value_len = (uint64_t{1} << 34) + 7;
  }
  return r;
}

std::vector<KVPairs<float>> EncodeCatchUp(const std::vector<CatchUpRecord>& records,
                                          size_t width, size_t max_floats) {
  std::vector<KVPairs<float>> messages;
  for (size_t next = 0; next < records.size();) {
    KVPairs<float> m;
    EXPECT_TRUE(NextCatchUpMessage(records, &next, width, max_floats, &m).ok());
    messages.push_back(m);
  }
  return messages;
}

void ExpectSame(const CatchUpRecord& a, const CatchUpRecord& b) {
  EXPECT_EQ(a.record.key, b.record.key);
  EXPECT_EQ(a.record.values, b.record.values);
  EXPECT_EQ(a.record.state, b.record.state);
  EXPECT_EQ(a.record.steps, b.record.steps);
  EXPECT_EQ(a.record.chunk, b.record.chunk);
  EXPECT_EQ(a.record.chunk_offset, b.record.chunk_offset);
  EXPECT_EQ(a.record.value_len, b.record.value_len);
  ASSERT_EQ(a.rounds.size(), b.rounds.size());
  for (size_t i = 0; i < a.rounds.size(); ++i) {
    EXPECT_EQ(a.rounds[i].clock, b.rounds[i].clock);
    EXPECT_EQ(a.rounds[i].pushes, b.rounds[i].pushes);
    EXPECT_EQ(a.rounds[i].sum, b.rounds[i].sum);
  }
}

TEST(CatchUpRecords, EveryFieldTravelsAndMessagesKeepKeysAscendingAndBounded) {
  // State width 2 (Adam): values, then 2 floats of state per value.
  std::vector<CatchUpRecord> records = {
      Record(3, {1.5f}, {0.25f, -0.5f}, 7),
      Record(9, {1, 2, 3}, {1, 2, 3, 4, 5, 6}, 4000000000LL),
      Record(9, {4, 5}, {7, 8, 9, 10}, 1, /*chunk=*/2),  // the same key: a new message
      Record(12, {-1}, {0, 0}, 0),
  };
  records[1].rounds.push_back(OpenRound{(int64_t{1} << 40) + 3, 2, {0.5f, 1, 1.5f}});
  records[1].rounds.push_back(OpenRound{(int64_t{1} << 40) + 4, 1, {1, 1, 1}});
  std::vector<KVPairs<float>> messages = EncodeCatchUp(records, 2, /*max_floats=*/12);
  // 3 (17 floats alone: over the bound), then 9 (40), then chunk 2 of 9 and 12.
  ASSERT_GE(messages.size(), 3u);
  std::vector<CatchUpRecord> read;
  for (const KVPairs<float>& m : messages) {
    for (size_t i = 1; i < m.keys.size(); ++i) EXPECT_LT(m.keys[i - 1], m.keys[i]);
    ASSERT_TRUE(DecodeCatchUp(m, 2, &read).ok());
  }
  ASSERT_EQ(read.size(), records.size());
  for (size_t i = 0; i < records.size(); ++i) ExpectSame(read[i], records[i]);
}

TEST(CatchUpRecords, MalformedMessagesAreRefused) {
  std::vector<CatchUpRecord> records = {Record(3, {1, 2}, {}, 1)};
  records[0].rounds.push_back(OpenRound{5, 1, {1, 1}});
  const KVPairs<float> good = EncodeCatchUp(records, 0, 1024).front();
  std::vector<CatchUpRecord> out;
  ASSERT_TRUE(DecodeCatchUp(good, 0, &out).ok());
  auto refused = [](KVPairs<float> m, size_t width) {
    std::vector<CatchUpRecord> ignored;
    return !DecodeCatchUp(m, width, &ignored).ok();
  };
  EXPECT_TRUE(refused(good, 1)) << "another optimizer's state width";
  KVPairs<float> longer = good;
  longer.lens[0] += 1;
  EXPECT_TRUE(refused(longer, 0)) << "a length past the values";
  KVPairs<float> extra = good;
  extra.vals.push_back(0);
  EXPECT_TRUE(refused(extra, 0)) << "values past the keys";
  KVPairs<float> no_lens = good;
  no_lens.lens.clear();
  EXPECT_TRUE(refused(no_lens, 0));
  KVPairs<float> zero_len = good;
  const uint32_t zero = 0;
  std::memcpy(&zero_len.vals[2], &zero, sizeof(zero));
  EXPECT_TRUE(refused(zero_len, 0)) << "a key of no values";
  KVPairs<float> bad_chunk = good;
  const uint32_t past = 0x80000001u;  // chunk 2^31: past what a chunk index holds
  std::memcpy(&bad_chunk.vals[1], &past, sizeof(past));
  EXPECT_TRUE(refused(bad_chunk, 0));
  // A chunk whose values run past its key's whole length.
  std::vector<CatchUpRecord> chunked = {Record(4, {1, 2}, {}, 1, /*chunk=*/0)};
  chunked[0].record.chunk_offset = 9;
  chunked[0].record.value_len = 10;
  EXPECT_TRUE(refused(EncodeCatchUp(chunked, 0, 1024).front(), 0));
}

TEST(CatchUpRecords, TheEndSaysHowManyMessagesCameBeforeAndWhichRanksWereFailedOver) {
  uint64_t before = 0;
  std::vector<int> failed_over = {7};
  ASSERT_TRUE(
      DecodeCatchUpEnd(EncodeCatchUpEnd((uint64_t{1} << 33) + 5, {}), &before, &failed_over).ok());
  EXPECT_EQ(before, (uint64_t{1} << 33) + 5);
  EXPECT_TRUE(failed_over.empty());
  ASSERT_TRUE(DecodeCatchUpEnd(EncodeCatchUpEnd(3, {0, 2}), &before, &failed_over).ok());
  EXPECT_EQ(before, 3u);
  EXPECT_EQ(failed_over, (std::vector<int>{0, 2}));
  KVPairs<float> none;
  EXPECT_FALSE(DecodeCatchUpEnd(none, &before, &failed_over).ok());
  // A length that does not say the words there are.
  KVPairs<float> wrong = EncodeCatchUpEnd(3, {0, 2});
  wrong.lens[0] = 2;
  EXPECT_FALSE(DecodeCatchUpEnd(wrong, &before, &failed_over).ok());
}

TEST(CatchUpRecords, AppliedIdsTravelExactly) {
  std::vector<AppliedCopies::Record> ids(3);
  ids[0].id = AppliedCopies::Id{9, 0, (uint64_t{1} << 40) + 1, -1, 2, 0};
  ids[1].id = AppliedCopies::Id{11, 3, 5, 4, 0, (int64_t{1} << 35) + 2};
  ids[1].keys = {3, (uint64_t{1} << 50) + 7};  // taken for these keys only
  ids[2].id = AppliedCopies::Id{13, 1, 7, -1, 1, 3};
  std::vector<AppliedCopies::Record> read;
  size_t messages = 0;
  for (const KVPairs<float>& m : EncodeAppliedIds(ids, /*max_floats=*/16)) {
    ASSERT_TRUE(DecodeAppliedIds(m, &read).ok());
    ++messages;
  }
  EXPECT_EQ(messages, 3u);  // 8 words, 12 (two keys), 8: one id each at 16 words
  ASSERT_EQ(read.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_TRUE(read[i].id == ids[i].id) << i;
    EXPECT_EQ(read[i].keys, ids[i].keys) << i;
  }
  KVPairs<float> bad = EncodeAppliedIds(ids, /*max_floats=*/64).front();
  SArray<float> fewer(bad.vals.size() - 1);  // one word short
  std::memcpy(fewer.data(), bad.vals.data(), fewer.size() * sizeof(float));
  bad.vals = fewer;
  EXPECT_FALSE(DecodeAppliedIds(bad, &read).ok());
  KVPairs<float> odd = EncodeAppliedIds(ids, /*max_floats=*/64).front();
  odd.lens[0] = 9;  // an id and half a key
  odd.lens[1] = 11;
  EXPECT_FALSE(DecodeAppliedIds(odd, &read).ok());
  KVPairs<float> negative = EncodeAppliedIds(ids, /*max_floats=*/64).front();
  negative.lens[0] = -8;
  EXPECT_FALSE(DecodeAppliedIds(negative, &read).ok());
  KVPairs<float> short_lens = EncodeAppliedIds(ids, /*max_floats=*/64).front();
  short_lens.lens.resize(short_lens.lens.size() - 1);
  EXPECT_FALSE(DecodeAppliedIds(short_lens, &read).ok());
  KVPairs<float> longer = EncodeAppliedIds(ids, /*max_floats=*/64).front();
  longer.lens[2] = 10;  // a key more than the words hold
  EXPECT_FALSE(DecodeAppliedIds(longer, &read).ok());
  KVPairs<float> unsorted = EncodeAppliedIds({ids[1]}, /*max_floats=*/64).front();
  std::swap(unsorted.vals[8], unsorted.vals[10]);
  std::swap(unsorted.vals[9], unsorted.vals[11]);
  EXPECT_FALSE(DecodeAppliedIds(unsorted, &read).ok());
}

class CatchUpStoreTest : public ::testing::Test {
 protected:
  CatchUpStoreTest() {
    OptimizerOptions options;
    options.kind = OptimizerKind::kSgd;
    options.lr = 1.0;
    optimizer_ = Optimizer::Create(options);
    sender_ = std::make_unique<ShardStore>(optimizer_.get(), ValueInit());
    receiver_ = std::make_unique<ShardStore>(optimizer_.get(), ValueInit());
  }
  static Status Push(ShardStore& store, Key key, std::vector<float> g, int64_t clock) {
    return store.Aggregate(StoreKey{key}, g.data(), static_cast<uint32_t>(g.size()), clock);
  }
  static std::vector<float> Value(ShardStore& store, Key key) {
    ShardStore::Slot slot;
    EXPECT_TRUE(store.Find(key, 0, 0, &slot).ok());
    return std::vector<float>(slot.values, slot.values + slot.len);
  }
  std::vector<CatchUpRecord> Records(const std::function<bool(const StoreKey&)>& keep) {
    std::vector<StoreKey> keys;
    sender_->KeysWhere(keep, &keys);
    std::vector<CatchUpRecord> out;
    sender_->CatchUpRecordsOf(keys.data(), keys.size(), &out);
    return out;
  }
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<ShardStore> sender_, receiver_;
};

TEST_F(CatchUpStoreTest, OnlyTheKeptKeysGoWithTheirOpenRounds) {
  ASSERT_TRUE(Push(*sender_, 1, {2}, 0).ok());
  ASSERT_TRUE(Push(*sender_, 2, {4}, 0).ok());
  ASSERT_TRUE(Push(*sender_, 2, {6}, 1).ok());
  std::vector<CatchUpRecord> records = Records([](const StoreKey& k) { return k.key == 2; });
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].record.key, 2u);
  ASSERT_EQ(records[0].rounds.size(), 2u);
  EXPECT_EQ(records[0].rounds[0].clock, 0);
  EXPECT_EQ(records[0].rounds[1].sum, std::vector<float>{6});
}

TEST_F(CatchUpStoreTest, RecordsAreTakenWhenAskedForNotWhenTheKeysWereListed) {
  // A catch-up lists its keys first and takes their records a slice at a time: a key
  // pushed in between goes with that push, one erased in between does not go.
  ASSERT_TRUE(Push(*sender_, 1, {2}, 0).ok());
  ASSERT_TRUE(Push(*sender_, 2, {4}, 0).ok());
  std::vector<StoreKey> keys;
  sender_->KeysWhere([](const StoreKey&) { return true; }, &keys);
  ASSERT_EQ(keys.size(), 2u);
  ASSERT_TRUE(Push(*sender_, 2, {6}, 0).ok());
  ASSERT_TRUE(sender_->Erase(StoreKey{1}).ok());
  std::vector<CatchUpRecord> out;
  sender_->CatchUpRecordsOf(keys.data(), keys.size(), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].record.key, 2u);
  ASSERT_EQ(out[0].rounds.size(), 1u);
  EXPECT_EQ(out[0].rounds[0].pushes, 2u);
  EXPECT_EQ(out[0].rounds[0].sum, std::vector<float>{10});
}

TEST_F(CatchUpStoreTest, TheSendersStateReplacesCopiesTakenBeforeItAndRoundsCloseOnce) {
  // Both took a push of clock 0 to key 5 (the copy came before the cut); the sender
  // also took one of clock 1, and has closed clock 0 already.
  ASSERT_TRUE(Push(*sender_, 5, {2}, 0).ok());
  ASSERT_TRUE(Push(*receiver_, 5, {2}, 0).ok());
  sender_->CloseRounds(1);
  ASSERT_TRUE(Push(*sender_, 5, {4}, 1).ok());
  for (const CatchUpRecord& r : Records([](const StoreKey&) { return true; })) {
    ASSERT_TRUE(receiver_->RestoreCatchUp(r).ok());
  }
  EXPECT_EQ(Value(*receiver_, 5), std::vector<float>{-2}) << "clock 0, applied once";
  receiver_->CloseRounds(2);
  sender_->CloseRounds(2);
  EXPECT_EQ(Value(*receiver_, 5), Value(*sender_, 5));
  EXPECT_EQ(Value(*receiver_, 5), std::vector<float>{-6});
}

TEST_F(CatchUpStoreTest, ARoundTheReceiverClosedAlreadyIsAppliedAtOnce) {
  ASSERT_TRUE(Push(*sender_, 7, {3}, 1).ok());  // open on the sender
  receiver_->CloseRounds(2);                    // the receiver is past clock 1
  for (const CatchUpRecord& r : Records([](const StoreKey&) { return true; })) {
    ASSERT_TRUE(receiver_->RestoreCatchUp(r).ok());
  }
  EXPECT_EQ(Value(*receiver_, 7), std::vector<float>{-3});
  EXPECT_EQ(receiver_->open_round_entries(), 0u);
}

}  // namespace
}  // namespace ps
