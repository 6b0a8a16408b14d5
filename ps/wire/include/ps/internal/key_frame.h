// The wire format of an encoded key list: the keys frame of a KV message whose meta says
// keys_encoded (docs/pipeline.md, "Keys on the wire"). Sorted key lists are mostly small
// steps, often the same step again and again (a dense range, a strided layout), so a
// frame carries the first key and then the steps, as LEB128 varints in their shortest
// form (codec_frame.h), in whichever of two forms is shorter; a third form says which
// keys of one strided run a part has (the share of one server when a request's keys are
// one run, spread over servers by the ring):
//
//   offset  size  field
//   0       1     marker 0xA1: key frame format 1 (any other value is refused)
//   1       1     form: 1 = steps, 2 = runs, 3 = bitmap
//   2       1-10  count varint: how many keys the frame decodes to
//   ...     1-10  first key varint (absent when count is 0)
//   steps   count - 1 varints: each key minus the one before, minus 1
//   runs    pairs of varints (step - 1, repeat - 1): the next `repeat` keys each `step`
//           after the one before; the repeats add up to count - 1
//   bitmap  a varint step - 1, then a bitmap to the frame's end: bit j (of byte j / 8,
//           from the least significant bit) says whether first + j * step is a key;
//           bit 0 is set, the last byte is not 0, and count bits are set in all
//
// Keys ascend strictly by construction (every step is at least 1); a step that would
// pass 2^64 - 1, repeats that overshoot count - 1, a bitmap whose set bits are not the
// count, a truncated or over-long varint, and trailing bytes are refused. The decoder
// treats every byte as hostile: it never reads outside the frame and allocates only
// after checking the count against its bound (and, for a bitmap, against its bits).
//
// Thread safety: every function here is pure; call from any thread.
#ifndef PS_INTERNAL_KEY_FRAME_H_
#define PS_INTERNAL_KEY_FRAME_H_

#include <cstddef>
#include <cstdint>

#include "ps/base.h"
#include "ps/sarray.h"
#include "ps/status.h"

namespace ps {

constexpr uint8_t kKeyFrameMarker = 0xA1;
enum class KeyForm : uint8_t { kSteps = 1, kRuns = 2, kBitmap = 3 };

// The frame keys[0..n) would take, and in which form; 0 when the keys do not ascend
// strictly (they cannot be a key frame). One pass over the keys, writes nothing.
struct KeyFramePlan {
  size_t bytes = 0;
  KeyForm form = KeyForm::kSteps;
};
KeyFramePlan PlanKeyFrame(const Key* keys, size_t n);

// Whether keys[0..n) ascend by one constant step (a dense range, a strided layout):
// their frame is one run, a few bytes whatever n. One pass without a branch per key,
// stopping at the first block of 1024 keys that breaks the run.
bool IsOneRun(const Key* keys, size_t n);

// What a caller already knows of a key list: IsOneRun's answer, so that EncodeKeyFrame
// does not ask again (a pass over the keys), or nothing. Anything but IsOneRun's answer
// for these very keys makes a wrong frame.
enum class KeyShape : uint8_t { kUnknown, kOneRun, kNotOneRun };

// Encodes keys[0..n) into a fresh buffer that replaces *out when they ascend strictly
// and the frame takes at most 4 bytes a key, half the raw size (a smaller gain does not
// pay for encoding and decoding on a fast link; a list whose first 1024 keys take more
// is not planned further); false, *out untouched, otherwise.
bool EncodeKeyFrame(const Key* keys, size_t n, SArray<char>* out,
                    KeyShape shape = KeyShape::kUnknown);

// The bitmap form for `count` keys among first + j * step, j in [0, span): makes *frame
// (fresh, replacing it) with the header written and returns where its (span + 7) / 8
// bitmap bytes start, all zero, for the caller to set bit j for each key (bit 0 and bit
// span - 1 among them: a frame without them, or with other than `count` bits set, is
// one the decoder refuses). Requires count >= 1, step >= 1 and first + (span - 1) *
// step within 64 bits.
char* BeginKeyBitmapFrame(uint64_t count, Key first, Key step, uint64_t span,
                          SArray<char>* frame);
// The bytes BeginKeyBitmapFrame's frame takes.
size_t KeyBitmapFrameBytes(uint64_t count, Key first, Key step, uint64_t span);

// The count a frame claims (its header only, nothing decoded); 0 for a frame too short
// or malformed to say.
uint64_t KeyFrameCount(const char* data, size_t size);

// Decodes a whole frame into a fresh array that replaces *keys. A frame may claim at
// most `max_keys` keys (a few bytes can claim billions: nodes pass what a raw message
// of PS_MAX_MESSAGE_BYTES could carry). InvalidArgument saying what is wrong and at
// which byte otherwise, *keys untouched.
Status DecodeKeyFrame(const char* data, size_t size, uint64_t max_keys, SArray<Key>* keys);

}  // namespace ps

#endif  // PS_INTERNAL_KEY_FRAME_H_
