// The wire format of one compressed frame (a push's values encoded by a gradient codec)
// and its validating decoder. Workers write frames (worker/include/ps/compressor.h),
// servers and fuzzers read them with InspectFrame / DecodeFrame, which treat every byte
// as hostile: they never read outside the frame, never allocate from a header field
// before checking it against the frame's size, and answer a malformed frame with
// InvalidArgument naming what is wrong and at which byte.
//
// Layout, little-endian throughout. Counts are LEB128 varints (7 bits a byte, low bits
// first, the top bit set on every byte but the last) in their shortest form; floats are
// IEEE float32 at whatever offset they fall (frames are read and written with memcpy, so
// nothing is aligned):
//
//   offset  size  field
//   0       1     marker 0xC2: frame format version 2 (any other value is refused)
//   1       1     codec (enum Codec)
//   2       1-10  count varint: how many floats the frame decodes to
//   h       ...   codec fields, then payload (h = FrameHeaderBytes(count): 3 bytes for a
//                 count below 128, 4 below 2^14, 5 below 2^21, at most 12):
//
//   none       count x float32
//   fp16       count x IEEE binary16
//   topk       varint k; k x float32 values; k varints: the first index, then the gap to
//              each next index (>= 1, so indices ascend strictly)
//   threshold  float32 tau (finite, > 0); varint m; m x u32 words, index in bits 0..30
//              and the sign in bit 31 (set: -tau, clear: +tau), indices strictly
//              ascending; count <= 2^31 so that every index fits in 31 bits
//   onebit     float32 positive scale; float32 negative scale (both finite, >= +0);
//              ceil(count / 8) bytes of bits, value i in bit i % 8 of byte i / 8
//              (clear: +positive scale, set: -negative scale); unused bits zero
//   randomk    u64 draw seed (8 bytes: it is random, a varint would not shorten it);
//              varint k; k x float32 values at DrawRandomkIndices(draw seed, count, k),
//              in ascending index order
//
// Every count travels as a varint because frames are often tiny: a sparse push part of a
// few hundred values keeps one or two of them, and a fixed 12-byte header would cost more
// than the values. Format 1 (marker 0xC1, a fixed 12-byte header and u64 counts) is
// refused: frames only travel between the nodes of one job, which run one build.
// Sparse codecs decode to zero where the frame sends nothing.
//
// Thread safety: every function here is pure; call from any thread.
#ifndef PS_INTERNAL_CODEC_FRAME_H_
#define PS_INTERNAL_CODEC_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ps/sarray.h"
#include "ps/status.h"

namespace ps {

// Wire values: append only, never renumber.
enum class Codec : uint8_t {
  kNone = 0,
  kFp16 = 1,
  kTopk = 2,
  kThreshold = 3,
  kOneBit = 4,
  kRandomk = 5,
};

// "none", "fp16", "topk", "threshold", "onebit", "randomk"; "unknown" for other values.
const char* CodecName(Codec c);

// What a valid frame holds.
struct FrameInfo {
  Codec codec = Codec::kNone;
  uint64_t count = 0;       // decoded floats
  size_t header_bytes = 0;  // where the codec fields start: FrameHeaderBytes(count)
};

// Frame geometry, shared by the encoders and the decoder.
constexpr uint8_t kFrameMarker = 0xC2;
// The byte where the count varint starts (after the marker and the codec byte).
constexpr size_t kFrameCountAt = 2;
// Threshold words hold 31-bit indices.
constexpr uint64_t kMaxThresholdCount = uint64_t{1} << 31;
// The longest LEB128 varint of a uint64.
constexpr size_t kMaxVarintBytes = 10;

// Validates a whole frame of `size` bytes: marker, codec, count, the codec fields (k <= count,
// finite scales and tau), payload size, index ranges and order, and no trailing bytes. On success
// fills *info and returns OK; otherwise InvalidArgument saying what is wrong and at which byte,
// *info unspecified. Allocates nothing.
Status InspectFrame(const char* data, size_t size, FrameInfo* info);

// Validates the frame as InspectFrame does, checks that it decodes to exactly `count`
// floats, and writes them to out[0..count) (zeros where a sparse codec sent nothing).
// On error returns InvalidArgument and out holds unspecified values. Besides out, only
// randomk allocates: count bits and k indices to redraw the indices.
Status DecodeFrame(const char* data, size_t size, float* out, size_t count);

// Reads only the header at the start of data[0..size): the marker, a known codec and the
// count varint (shortest form). On success fills *info (codec, count, header_bytes) and
// returns OK, whether or not the rest of the frame is valid; otherwise InvalidArgument
// as InspectFrame gives it. For callers that want the count a frame claims even when
// InspectFrame refuses the frame.
Status ReadFrameHeader(const char* data, size_t size, FrameInfo* info);

// The bytes of a frame header for `count` values: 2 + VarintBytes(count), 3 to 12.
size_t FrameHeaderBytes(uint64_t count);

// Writes a frame header for `count` values of `codec` into a fresh buffer of
// FrameHeaderBytes(count) + body_bytes bytes that replaces *out (other SArrays sharing
// the old buffer keep it), and returns where the body starts: right after the count
// varint, at no particular alignment (store with StoreLE). The body is uninitialised.
char* BeginFrame(Codec codec, uint64_t count, size_t body_bytes, SArray<char>* out);

// Stores and loads of frame fields at any alignment. HerdPS runs on little-endian hosts
// only (values travel as raw bytes everywhere), so these are plain copies.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "frames are little-endian");
template <typename T>
inline void StoreLE(T v, char* p) {
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
inline T LoadLE(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// LEB128: the bytes VarintBytes(v) says StoreVarint writes at p; returns p past them.
size_t VarintBytes(uint64_t v);
char* StoreVarint(uint64_t v, char* p);

// The shortest-form LEB128 varint at data[*pos..size): true with *v set and *pos moved
// past it (so *pos <= size); false, changing neither, for any fault, which the caller
// then names. Builds no Status: the hot paths call it once per index or key.
inline bool ParseVarint(const char* data, size_t size, size_t* pos, uint64_t* v) {
  const size_t start = *pos;
  uint64_t result = 0;
  for (size_t i = 0; i < kMaxVarintBytes && start + i < size; ++i) {
    uint8_t byte = static_cast<uint8_t>(data[start + i]);
    result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if (!(byte & 0x80)) {
      if (i > 0 && byte == 0) return false;                    // not the shortest form
      if (i == kMaxVarintBytes - 1 && byte > 1) return false;  // over 64 bits
      *pos = start + i + 1;
      *v = result;
      return true;
    }
  }
  return false;  // past the end, or an 11th byte
}

// The k distinct indices in [0, count) that a randomk frame with `draw_seed` covers, in
// ascending order, replacing *indices. Part of the wire format: Floyd's sampling over a
// SplitMix64 stream whose state starts at SplitMix64's output function of draw_seed, each
// draw made uniform by multiply-shift with rejection, so every platform draws the same
// set. Requires k <= count. Uses count bits of scratch memory.
void DrawRandomkIndices(uint64_t draw_seed, uint64_t count, uint64_t k,
                        std::vector<uint64_t>* indices);

// IEEE binary16 conversions, used by the fp16 codec and for pulls. FloatToHalf rounds to
// nearest, ties to even; magnitudes from 65520 up become infinity; NaN stays NaN (quiet,
// sign and top payload bits kept). HalfToFloat is exact. Neither depends on the FPU's
// rounding or flush-to-zero modes (integer arithmetic, and one exact product of normal
// floats). Inline: the codecs convert one value at a time.
inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t a = x & 0x7fffffff;
  uint32_t h;
  if (a >= 0x38800000) {  // 2^-14 and up: a half normal, infinity or NaN
    // Rebias the exponent and drop 13 mantissa bits, rounding to nearest even: the carry
    // of rest + 0xfff + (lowest kept bit) is the rounding.
    uint32_t r = a - 0x38000000;
    h = (r + 0xfff + ((r >> 13) & 1)) >> 13;
    // 65520 lies halfway between 65504 (odd mantissa) and 2^16: it rounds to infinity.
    if (a >= 0x477ff000) h = a > 0x7f800000 ? 0x7e00 | ((a >> 13) & 0x3ff) : 0x7c00;
  } else if (a >= 0x33000000) {  // [2^-25, 2^-14): a half subnormal in units of 2^-24
    uint32_t mantissa = (a & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - (a >> 23);  // 14..24
    uint32_t rest = mantissa & ((1u << shift) - 1), half = 1u << (shift - 1);
    h = mantissa >> shift;
    h += rest > half || (rest == half && (h & 1));  // may carry into the smallest normal
  } else {
    h = 0;  // below 2^-25: nearer to zero than to 2^-24
  }
  return static_cast<uint16_t>(sign | h);
}

inline float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t magnitude = h & 0x7fff;
  uint32_t bits;
  if (magnitude >= 0x7c00) {  // infinity or NaN, payload kept
    bits = 0x7f800000 | ((magnitude & 0x3ff) << 13);
  } else if (magnitude >= 0x400) {  // normal: rebias the exponent
    bits = (magnitude << 13) + 0x38000000;
  } else {  // subnormal or zero: mantissa * 2^-24, exact, and a normal float (or 0)
    float value = static_cast<float>(magnitude) * 0x1p-24f;
    std::memcpy(&bits, &value, 4);
  }
  bits |= sign;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The same over arrays (in and out must not overlap).
void FloatsToHalves(const float* in, size_t n, uint16_t* out);
void HalvesToFloats(const uint16_t* in, size_t n, float* out);

}  // namespace ps

#endif  // PS_INTERNAL_CODEC_FRAME_H_
