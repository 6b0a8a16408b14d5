// The byte layouts the fuzz targets read their inputs in, shared with the corpus
// generator (make_corpus.cc) that writes seeds in them, so that a seed and the target
// that reads it cannot disagree. Integers and floats are little-endian and unaligned.
//
// InputReader never fails: a field that runs past the end of the input reads as zeros
// (a chunk as the bytes that are left), so every input means something and a mutation
// that shortens an input still reaches the parser.
#ifndef HERDPS_TESTS_FUZZ_FUZZ_INPUT_H_
#define HERDPS_TESTS_FUZZ_FUZZ_INPUT_H_

#include <glog/logging.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "ps/internal/codec_frame.h"
#include "ps/internal/message.h"
#include "ps/sarray.h"

namespace ps {
namespace fuzz {

class InputReader {
 public:
  InputReader(const uint8_t* data, size_t size)
      : data_(reinterpret_cast<const char*>(data)), size_(size) {}

  size_t left() const { return size_ - pos_; }
  bool empty() const { return pos_ == size_; }

  // An integer or float; zero-padded when the input ends inside it.
  template <typename T>
  T Take() {
    static_assert(std::is_arithmetic<T>::value, "Take reads numbers");
    char bytes[sizeof(T)] = {};
    size_t n = left() < sizeof(T) ? left() : sizeof(T);
    std::memcpy(bytes, data_ + pos_, n);
    pos_ += n;
    T v;
    std::memcpy(&v, bytes, sizeof(T));
    return v;
  }

  // The next n bytes, or what is left.
  std::string TakeBytes(size_t n) {
    if (n > left()) n = left();
    std::string s(data_ + pos_, n);
    pos_ += n;
    return s;
  }

  // A chunk: a length of type Len, then that many bytes (or what is left).
  template <typename Len = uint32_t>
  std::string TakeChunk() {
    return TakeBytes(static_cast<size_t>(Take<Len>()));
  }

  std::string TakeRest() { return TakeBytes(left()); }

 private:
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Writes what InputReader reads.
class InputWriter {
 public:
  template <typename T>
  InputWriter& Put(T v) {
    static_assert(std::is_arithmetic<T>::value, "Put writes numbers");
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  InputWriter& PutBytes(const std::string& s) {
    bytes_ += s;
    return *this;
  }
  template <typename Len = uint32_t>
  InputWriter& PutChunk(const std::string& s) {
    Put(static_cast<Len>(s.size()));
    return PutBytes(s);
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// A data frame as the van hands it over: its own heap buffer of exactly the frame's
// size (so AddressSanitizer sees any read past it), aligned for every element type.
inline SArray<char> FrameOf(const std::string& bytes) {
  SArray<char> frame(bytes.size());
  if (!bytes.empty()) std::memcpy(frame.data(), bytes.data(), bytes.size());
  return frame;
}

// Reads every byte of a frame view, so that a view reaching past its buffer is caught
// by AddressSanitizer even when the code under test never touches the bytes itself.
template <typename V>
void TouchAll(const SArray<V>& view) {
  const volatile char* p = reinterpret_cast<const char*>(view.data());
  char sum = 0;
  for (size_t i = 0; i < view.size() * sizeof(V); ++i) sum = static_cast<char>(sum ^ p[i]);
  (void)sum;
}

// What the targets let DecodeCompressedValues allocate (nodes pass PS_MAX_MESSAGE_BYTES):
// small enough that a frame claiming the most stays fast, large enough for every seed.
constexpr uint64_t kMaxDecodedBytes = uint64_t{1} << 26;

// glog: only FATAL (CHECK failures) reaches stderr; the library's warnings about the
// malformed input it refuses would otherwise flood the fuzzer's output.
inline void QuietLogs() { FLAGS_minloglevel = google::GLOG_FATAL; }

}  // namespace fuzz
}  // namespace ps

// A property of the code under test that an input broke: the fuzzer records the input
// as a crash. (Not CHECK: a failure should name the property, not a glog line.)
#define FUZZ_EXPECT(cond)                                                              \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: property broken: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

#endif  // HERDPS_TESTS_FUZZ_FUZZ_INPUT_H_
