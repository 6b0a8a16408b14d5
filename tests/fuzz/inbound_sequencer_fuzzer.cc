// InboundSequencer (ps/internal/reorder_window.h), the receiver side of reliable delivery:
// the sender id, incarnation and sequence of every message come from the network, and
// the network may drop, duplicate and reorder; senders restart and are forgotten.
//
// Input: u8 window (mod 9), then up to 512 steps, each a u8 step kind:
//   kind mod 8 < 7  a message: u8 sender (mod 4, a worker id), u8 incarnation (mod 4, one
//                   of four values, 0 among them), u8 sequence (below 0x80: itself; else a
//                   u64 sequence follows);
//   kind mod 8 = 7  u8 sender (mod 4) is forgotten (it died or left).
//
// Properties: each message of a sender's incarnation is delivered at most once, and in
// sequence order without gaps from 1; kAccepted only for a new message within the
// window, kDuplicate only for one accepted before, kRefused only for sequence 0, a
// retired incarnation (replaced by another, or of a forgotten sender) or a message beyond
// the window; a message that is not accepted is left as it was; the held messages stay
// within the documented bound.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "fuzz_input.h"
#include "ps/internal/message.h"
#include "ps/internal/reorder_window.h"

namespace {

constexpr int kMaxSteps = 512;
constexpr uint64_t kIncarnations[] = {0x5eed, 0x5eed + 1, 0, ~uint64_t{0}};

using Stream = std::pair<int, uint64_t>;  // sender, incarnation

// The message's identity, in fields the sequencer never reads.
std::string Tag(int sender, uint64_t incarnation, uint64_t seq) {
  return std::to_string(sender) + "/" + std::to_string(incarnation) + "/" + std::to_string(seq);
}

class Model {
 public:
  explicit Model(size_t window) : sequencer_(window), window_(window < 1 ? 1 : window) {}

  void Message(int sender, uint64_t incarnation, uint64_t seq) {
    // What the sequencer must do, from what it was given before: a sender's incarnation
    // is retired when another one arrives or the sender is forgotten, and with four
    // values none is ever retired twice, so none leaves the retired list.
    const bool retired = retired_.count({sender, incarnation}) > 0;
    const bool must_refuse = seq == 0 || retired;
    if (!must_refuse) {
      auto it = current_.find(sender);
      if (it != current_.end() && it->second != incarnation) retired_.insert(*it);
      current_[sender] = incarnation;
    }
    const uint64_t next = delivered_[{sender, incarnation}] + 1;

    ps::Message msg;
    msg.meta.sender = sender;
    msg.meta.body = Tag(sender, incarnation, seq);
    msg.meta.sequence = seq;
    msg.meta.sender_incarnation = incarnation;
    std::vector<ps::Message> ready;
    const auto key = std::make_tuple(sender, incarnation, seq);
    const bool seen = accepted_.count(key) > 0;
    auto verdict = sequencer_.Accept(sender, incarnation, seq, std::move(msg), &ready);
    switch (verdict) {
      case ps::InboundSequencer::Verdict::kAccepted:
        FUZZ_EXPECT(!must_refuse && !seen && seq >= next && seq - next < window_);
        accepted_.insert(key);
        break;
      case ps::InboundSequencer::Verdict::kDuplicate:
        FUZZ_EXPECT(!must_refuse && seen);
        FUZZ_EXPECT(ready.empty());
        break;
      case ps::InboundSequencer::Verdict::kRefused:
        FUZZ_EXPECT(must_refuse || (seq >= next && seq - next >= window_));
        FUZZ_EXPECT(ready.empty());
        break;
    }
    if (verdict != ps::InboundSequencer::Verdict::kAccepted) {
      FUZZ_EXPECT(msg.meta.body == Tag(sender, incarnation, seq));  // not moved from
    }
    for (const ps::Message& m : ready) {
      const Stream stream{m.meta.sender, m.meta.sender_incarnation};
      FUZZ_EXPECT(stream == Stream(sender, incarnation));
      uint64_t& last = delivered_[stream];
      FUZZ_EXPECT(m.meta.sequence == last + 1);
      FUZZ_EXPECT(m.meta.body == Tag(stream.first, stream.second, m.meta.sequence));
      last = m.meta.sequence;
    }
    CheckBound();
  }

  void Forget(int sender) {
    sequencer_.Forget(sender);
    auto it = current_.find(sender);
    if (it != current_.end()) {
      retired_.insert(*it);
      current_.erase(it);
    }
    CheckBound();
  }

 private:
  void CheckBound() {
    FUZZ_EXPECT(sequencer_.HeldMessages() <= (window_ - 1) * sequencer_.TrackedSenders());
  }

  ps::InboundSequencer sequencer_;
  const size_t window_;
  std::set<std::tuple<int, uint64_t, uint64_t>> accepted_;
  std::map<Stream, uint64_t> delivered_;  // the last sequence delivered
  std::map<int, uint64_t> current_;       // each sender's current incarnation
  std::set<Stream> retired_;
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ps::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::fuzz::InputReader in(data, size);
  Model model(in.Take<uint8_t>() % 9);
  for (int step = 0; step < kMaxSteps && !in.empty(); ++step) {
    const uint8_t kind = in.Take<uint8_t>();
    const int sender = 9 + 2 * (in.Take<uint8_t>() % 4);
    if (kind % 8 == 7) {
      model.Forget(sender);
      continue;
    }
    const uint64_t incarnation = kIncarnations[in.Take<uint8_t>() % 4];
    const uint8_t small = in.Take<uint8_t>();
    const uint64_t seq = small < 0x80 ? small : in.Take<uint64_t>();
    model.Message(sender, incarnation, seq);
  }
  return 0;
}
