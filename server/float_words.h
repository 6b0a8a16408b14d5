// Counts carried in a float values frame (catch-up records, round copies): each
// 32-bit count travels as the float with the same bits, and a 64-bit one as two such
// words, low first. Private to server/.
#ifndef HERDPS_SERVER_FLOAT_WORDS_H_
#define HERDPS_SERVER_FLOAT_WORDS_H_

#include <cstdint>
#include <cstring>

namespace ps {

// The float whose bits are `w`.
inline float Word(uint32_t w) {
  float f;
  std::memcpy(&f, &w, sizeof(f));
  return f;
}

// The bits of `f`.
inline uint32_t WordOf(float f) {
  uint32_t w;
  std::memcpy(&w, &f, sizeof(w));
  return w;
}

// Writes `v` as two words at `out`; returns the position after them.
inline float* AppendWide(uint64_t v, float* out) {
  *out++ = Word(static_cast<uint32_t>(v));
  *out++ = Word(static_cast<uint32_t>(v >> 32));
  return out;
}

// The 64-bit count of the two words at `at`.
inline uint64_t WideAt(const float* at) {
  return uint64_t{WordOf(at[0])} | (uint64_t{WordOf(at[1])} << 32);
}

}  // namespace ps

#endif  // HERDPS_SERVER_FLOAT_WORDS_H_
