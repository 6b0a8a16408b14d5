// The van under CURVE (VanOptions::curve_secret_key): vans holding the job's key talk,
// encrypted; a van without CURVE or with another key gets no connection either way,
// and nothing it sends reaches the receiver's handler.
#include <gtest/gtest.h>
#include <zmq.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ps/internal/van.h"
#include "recording_van.h"

namespace ps {
namespace {

using Clock = std::chrono::steady_clock;

std::string NewSecretKey() {
  char public_key[41], secret_key[41];
  EXPECT_EQ(zmq_curve_keypair(public_key, secret_key), 0);
  return secret_key;
}

// A started van under CURVE with `key` (empty: plain), and what its handler received.
class TestVan : public RecordingVan {
 public:
  TestVan(const std::string& key, const std::string& transport = "tcp",
          int64_t max_message_bytes = int64_t{1} << 30)
      : RecordingVan([=](VanOptions* options) {
          options->transport = transport;
          options->zmq.curve_secret_key = key;
          options->max_message_bytes = max_message_bytes;
        }) {}
};

Message MessageTo(int recipient, size_t bytes, char fill) {
  Message msg;
  msg.meta.sender = 9;
  msg.meta.recipient = recipient;
  msg.meta.head = 42;
  SArray<char> payload(bytes, fill);
  msg.AddData(payload);
  return msg;
}

// Polls `value` until it reaches `target` or `seconds` pass; returns its last value.
template <typename F>
uint64_t WaitUntilAtLeast(F value, uint64_t target, double seconds) {
  auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  uint64_t v = value();
  while (v < target && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    v = value();
  }
  return v;
}

TEST(CurveVan, VansHoldingTheJobKeyExchangeMessagesOnBothChannels) {
  for (const char* transport : {"tcp", "ipc"}) {
    SCOPED_TRACE(transport);
    std::string key = NewSecretKey();
    TestVan a(key, transport), b(key, transport);
    ASSERT_TRUE(a.status().ok()) << a.status().message();
    ASSERT_TRUE(b.status().ok()) << b.status().message();
    a.Reach(2, b);
    ASSERT_TRUE(a->Send(MessageTo(2, 1 << 20, 'x'), SendMode::kBlocking, Channel::kData).ok());
    ASSERT_TRUE(a->Send(MessageTo(2, 10, 'y'), SendMode::kBlocking, Channel::kControl).ok());
    b.WaitFor(2, 20);
    auto got = b.Received();
    ASSERT_EQ(got.size(), 2u);
    for (auto& [msg, channel] : got) {
      ASSERT_EQ(msg.data.size(), 1u);
      char fill = channel == Channel::kData ? 'x' : 'y';
      size_t size = channel == Channel::kData ? (1u << 20) : 10u;
      ASSERT_EQ(msg.data[0].size(), size);
      for (size_t i = 0; i < size; ++i) ASSERT_EQ(msg.data[0][i], fill) << "byte " << i;
      EXPECT_EQ(msg.meta.head, 42);
    }
    EXPECT_EQ(b->stats().refused_handshakes, 0u);
    EXPECT_EQ(a->stats().failed_handshakes, 0u);
  }
}

TEST(CurveVan, VanWithoutCurveIsRefusedAndNothingItSendsArrives) {
  TestVan secure(NewSecretKey()), plain("");
  ASSERT_TRUE(secure.status().ok());
  ASSERT_TRUE(plain.status().ok());
  plain.Reach(2, secure);
  for (int i = 0; i < 5; ++i) {
    plain->Send(MessageTo(2, 100, 'f'), SendMode::kNonBlocking, Channel::kData);
    plain->Send(MessageTo(2, 100, 'f'), SendMode::kNonBlocking, Channel::kControl);
  }
  // One refused handshake per channel.
  EXPECT_GE(WaitUntilAtLeast([&] { return secure->stats().refused_handshakes; }, 2, 20), 2u);
  EXPECT_EQ(secure.WaitFor(1, 1), 0u);
  EXPECT_EQ(secure->stats().received_messages, 0u);
  EXPECT_EQ(secure->stats().dropped_messages, 0u);
}

TEST(CurveVan, VanWithAnotherKeyIsRefusedAndLearnsWhy) {
  TestVan job(NewSecretKey()), stranger(NewSecretKey());
  ASSERT_TRUE(job.status().ok());
  ASSERT_TRUE(stranger.status().ok());
  stranger.Reach(2, job);
  stranger->Send(MessageTo(2, 100, 'f'), SendMode::kNonBlocking, Channel::kData);
  EXPECT_GE(WaitUntilAtLeast([&] { return job->stats().refused_handshakes; }, 1, 20), 1u);
  EXPECT_GE(WaitUntilAtLeast([&] { return stranger->stats().failed_handshakes; }, 1, 20), 1u);
  EXPECT_EQ(job.WaitFor(1, 1), 0u);
  EXPECT_EQ(job->stats().received_messages, 0u);
}

TEST(CurveVan, SecureVanGetsNoConnectionToAPlainOne) {
  TestVan secure(NewSecretKey()), plain("");
  ASSERT_TRUE(secure.status().ok());
  ASSERT_TRUE(plain.status().ok());
  secure.Reach(2, plain);
  secure->Send(MessageTo(2, 100, 'f'), SendMode::kNonBlocking, Channel::kData);
  EXPECT_GE(WaitUntilAtLeast([&] { return secure->stats().failed_handshakes; }, 1, 20), 1u);
  EXPECT_EQ(plain.WaitFor(1, 1), 0u);
}

TEST(CurveVan, MalformedKeyFailsStartWithoutNamingTheKey) {
  const std::string overflow(40, '%');  // Z85 digits, but 5 of them exceed 32 bits
  for (const std::string& key : {std::string("not-a-key"), overflow}) {
    TestVan van(key);
    EXPECT_EQ(van.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(van.status().message().find(key), std::string::npos) << van.status().message();
  }
}

// ZeroMQ's frame limit counts the encrypted frame, a few bytes longer than the plain
// one: the largest message the van accepts must still arrive.
TEST(CurveVan, LargestAcceptedMessageStillArrivesUnderCurve) {
  const int64_t limit = 1 << 20;
  std::string key = NewSecretKey();
  TestVan a(key, "tcp", limit), b(key, "tcp", limit);
  ASSERT_TRUE(a.status().ok());
  ASSERT_TRUE(b.status().ok());
  a.Reach(2, b);
  // The smallest meta there is, so that the data frame comes closer to the limit than
  // CURVE's 33 bytes per frame.
  auto tiny = [](size_t bytes) {
    Message msg = MessageTo(2, bytes, 'z');
    msg.meta.head = msg.meta.app_id = msg.meta.customer_id = msg.meta.timestamp = 0;
    msg.meta.clock = 0;
    return msg;
  };
  size_t bytes = static_cast<size_t>(limit);
  Status s;
  do {
    s = a->Send(tiny(--bytes), SendMode::kBlocking, Channel::kData);
  } while (s.code() == Status::Code::kInvalidArgument && bytes > 0);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_LT(static_cast<size_t>(limit) - bytes, 33u) << "the meta is too large for this test";
  b.WaitFor(1, 20);
  auto got = b.Received();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first.data[0].size(), bytes);
}

}  // namespace
}  // namespace ps
