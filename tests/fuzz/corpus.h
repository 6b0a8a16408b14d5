// The corpus generator's shared pieces (make_corpus.cc, corpus_messages.cc,
// corpus_state.cc): where seeds go, and the values and frames they are made of.
#ifndef HERDPS_TESTS_FUZZ_CORPUS_H_
#define HERDPS_TESTS_FUZZ_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ps/sarray.h"

namespace ps {
namespace fuzz {

// Writes <corpus dir>/<target>/seed-<name>; exits the program if it cannot.
void WriteSeed(const std::string& target, const std::string& name, const std::string& bytes);

// n values in [-3.9, 3.9], multiples of 1/256 (exact in fp16), the same for a seed on
// every run.
std::vector<float> Gradient(size_t n, uint64_t seed);

// The frame the codec `spec_text` (CodecSpec::Parse) makes of g, without a residual.
SArray<char> Encode(const std::string& spec_text, const std::vector<float>& g, uint64_t nonce = 1);

// One spec per codec, in Codec order, and the codecs' names.
extern const char* const kCodecSpecs[6];
extern const char* const kCodecNames[6];

template <typename V>
SArray<char> Frame(const std::vector<V>& values) {
  return SArray<char>(SArray<V>(values));
}

inline std::string Bytes(const SArray<char>& frame) {
  return std::string(frame.data(), frame.size());
}

// The seeds of meta_codec, received_message, send_batch, kv_frames and round_copy
// (corpus_messages.cc).
void MessageSeeds();
// The seeds of checkpoint, order_plugin, clock_coordinator and inbound_sequencer
// (corpus_state.cc).
void StateSeeds();
// The seeds of shm_frames (corpus_shm.cc).
void ShmSeeds();

}  // namespace fuzz
}  // namespace ps

#endif  // HERDPS_TESTS_FUZZ_CORPUS_H_
