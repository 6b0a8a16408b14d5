// DecodeKeyFrame (ps/internal/key_frame.h): one encoded key list, as a server receives
// it in a request (or a worker in an answer).
//
// Input: the frame.
//
// Properties: the decoder never crashes or reads outside the frame; a frame it accepts
// decodes to strictly ascending keys, no more than the bound; re-encoding them gives a
// frame that decodes to the same keys, no longer than the input unless that was a
// bitmap frame (the encoder picks the shorter of steps and runs; a bitmap may be
// shorter than both), or, for up to 1024 keys, none only when the frame would take
// over half the raw size (longer lists may be given up on early).
#include <cstdint>

#include "fuzz_input.h"
#include "ps/internal/key_frame.h"

namespace {

// Frames that claim more keys are refused: decoding them would test the allocator.
constexpr uint64_t kMaxKeys = 1 << 20;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ps::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* frame = reinterpret_cast<const char*>(data);
  ps::SArray<ps::Key> keys;
  if (!ps::DecodeKeyFrame(frame, size, kMaxKeys, &keys).ok()) {
    FUZZ_EXPECT(keys.empty());
    return 0;
  }
  FUZZ_EXPECT(keys.size() <= kMaxKeys);
  for (size_t i = 1; i < keys.size(); ++i) FUZZ_EXPECT(keys[i - 1] < keys[i]);
  ps::SArray<char> again;
  if (!ps::EncodeKeyFrame(keys.data(), keys.size(), &again)) {
    FUZZ_EXPECT(keys.size() > 1024 ||
                ps::PlanKeyFrame(keys.data(), keys.size()).bytes > keys.size() * 4);
    return 0;
  }
  // Steps and runs frames are the shorter of the two: never longer when written again.
  // A bitmap frame (a bit a position) may be shorter than both.
  if (static_cast<uint8_t>(frame[1]) != static_cast<uint8_t>(ps::KeyForm::kBitmap)) {
    FUZZ_EXPECT(again.size() <= size);
  }
  ps::SArray<ps::Key> back;
  FUZZ_EXPECT(ps::DecodeKeyFrame(again.data(), again.size(), kMaxKeys, &back).ok());
  FUZZ_EXPECT(back.size() == keys.size());
  for (size_t i = 0; i < keys.size() && back.size() == keys.size(); ++i) {
    FUZZ_EXPECT(back[i] == keys[i]);
  }
  return 0;
}
