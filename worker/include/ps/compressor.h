// Gradient compression on the worker. CodecSpec names a codec and its parameters; a
// Compressor encodes one slice of a push's values into one frame (the wire format is in
// ps/internal/codec_frame.h, which servers decode with DecodeFrame); ResidualStore keeps
// each slice's error-feedback residual between pushes.
//
//   ps::CodecSpec spec;
//   ps::Status s = ps::CodecSpec::Parse("topk:0.001", &spec);   // from the app's flags
//   std::unique_ptr<ps::Compressor> codec = ps::Compressor::Create(spec);
//   ps::ResidualStore residuals;
//   ps::SArray<char> frame;
//   codec->Encode(grad, n, residuals.Get(key, -1, n), round, &frame);
//
// Error feedback: Encode approximates v = g + residual by the decoded values d and keeps
// residual = v - d (in float), so what one push leaves out is sent by a later one: after
// any number of rounds, sum(decoded) + residual == sum(g) up to float rounding (each round
// adds at most 2^-24 * (|v| + |residual|) per value).
//
// The codecs, n values in. Every frame starts with a header of FrameHeaderBytes(n) bytes
// (marker, codec, n as a varint: 3 bytes for n < 128, 4 for n < 2^14, 5 for n < 2^21);
// the sizes below come after it, V(x) being the 1-10 bytes of x as a varint (1 below 128,
// 2 below 2^14, 3 below 2^21):
//   none       every value as float32: 4n bytes; residual becomes 0.
//   fp16       every value as IEEE half: 2n bytes; finite values beyond the half range are
//              sent as +-65504 (the excess stays in the residual) rather than as infinity.
//   topk       the k largest |v| exactly, ties to the lower index; k = the spec's k, or
//              max(1, ceil(ratio * n)), at most n. V(k) + 4k bytes plus V(gap) per index
//              (the gap to the previous one; 2 bytes when about 1 in 1000 is kept). One
//              value kept of 487: at most 11 bytes with the header (4 + 1 + 4 + 2).
//   threshold  Strom (2015): +tau where v >= tau, -tau where v <= -tau, nothing elsewhere;
//              4 + V(m) + 4m bytes for m values sent. At most 2^31 values per frame (31-bit
//              indices): Encode throws ps::Error for larger n; split such keys into chunks.
//   onebit     Seide et al. (2014): 8 + ceil(n / 8) bytes: two scales and one sign bit per
//              value; values >= 0 decode to the mean of the values >= 0, values < 0 to the
//              mean of the values < 0 (the two reconstruction values of a sign-split
//              quantiser).
//   randomk    k indices drawn without replacement from a stream seeded by (seed, nonce);
//              8 + V(k) + 4k bytes (the 8-byte draw seed, from which the server redraws the
//              indices). Not rescaled by n / k: error feedback makes it unbiased over rounds.
//
// Non-finite values: none and fp16 carry NaN and infinity as they are (what an
// uncompressed push would do), leaving a zero residual there. The other codecs keep an
// error-feedback state that a NaN or infinity would poison for good, so Encode throws
// ps::Error naming the first non-finite v, before it changes the residual or *out.
#ifndef PS_COMPRESSOR_H_
#define PS_COMPRESSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ps/base.h"
#include "ps/internal/codec_frame.h"
#include "ps/sarray.h"
#include "ps/status.h"

namespace ps {

// A codec and its parameters. Fields a codec does not use are ignored.
struct CodecSpec {
  Codec codec = Codec::kNone;
  double ratio = 0;   // topk / randomk: the fraction of values kept, in (0, 1]
  uint64_t k = 0;     // topk / randomk: instead of ratio, how many values to keep (> 0)
  float tau = 0;      // threshold: Strom's tau (finite, > 0)
  uint64_t seed = 0;  // randomk: with the call's nonce, seeds the index draw

  // Reads "none", "fp16", "onebit", "topk:<ratio>", "topk:k=<k>", "threshold:<tau>",
  // "randomk:<ratio>" or "randomk:k=<k>", the randomk forms optionally followed by
  // ":seed=<seed>" (default 0). Numbers in C form ("0.001", "1e-3"). On success replaces
  // *out; otherwise InvalidArgument quoting the text and saying what is wrong.
  static Status Parse(const std::string& text, CodecSpec* out);

  // The text Parse reads back to this spec (shortest numbers that round-trip; randomk
  // always names its seed).
  std::string ToString() const;

  // OK when the fields used by `codec` hold values Parse would accept; otherwise
  // InvalidArgument saying which field is wrong.
  Status Validate() const;
};

// Encodes slices of float values into frames. Create gives the codec that a spec names.
//
// Thread safety: Encode is const and keeps no state (the caller owns the residuals), so
// one Compressor may encode from many threads at once, each with its own residual slice.
class Compressor {
 public:
  // The compressor for `spec`. Throws ps::Error with Validate's message for an invalid
  // spec.
  static std::unique_ptr<Compressor> Create(const CodecSpec& spec);

  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;
  virtual ~Compressor() = default;

  // Encodes g[0..n) with error feedback: v = g + residual; the frame carries an
  // approximation d of v and residual[0..n) becomes v - d. residual may be nullptr: then
  // v = g and nothing is kept. `nonce` should differ between calls for one slice (randomk
  // draws its indices from seed and nonce; the other codecs ignore it). Replaces *out by
  // a fresh buffer holding exactly one frame (SArrays sharing the old buffer keep it).
  // The same inputs give the same bytes. Throws ps::Error, leaving residual and *out
  // untouched, for a non-finite v (see above) and for a threshold slice over 2^31 values.
  virtual void Encode(const float* g, size_t n, float* residual, uint64_t nonce,
                      SArray<char>* out) const = 0;

  const CodecSpec& spec() const { return spec_; }

 protected:
  explicit Compressor(const CodecSpec& spec) : spec_(spec) {}

  // topk / randomk: how many of n values a frame keeps.
  uint64_t KeptCount(size_t n) const;

  // The error for the first non-finite v, at index i of n.
  [[noreturn]] void ThrowNonFinite(size_t i, size_t n, float v) const;

 private:
  const CodecSpec spec_;
};

// The error-feedback residuals of one worker, one float vector per (key, chunk).
//
// Thread safety: none; the caller serialises every call (a mutex around the store and
// the Encode that uses a residual).
class ResidualStore {
 public:
  // The residual of (key, chunk), exactly len floats: zero-filled when the entry is new
  // or its length changed (a reset, not an error: the key was re-chunked). chunk is -1
  // for a whole key. The pointer stays valid until Clear or a Get of another length for
  // the same entry.
  float* Get(Key key, int32_t chunk, size_t len);

  // Drops every residual (the app asked to clear them, e.g. after a learning-rate change).
  void Clear();

  size_t entries() const { return residuals_.size(); }
  size_t floats() const { return floats_; }

 private:
  struct Slot {
    Key key;
    int32_t chunk;
    bool operator==(const Slot& o) const { return key == o.key && chunk == o.chunk; }
  };
  struct SlotHash {
    size_t operator()(const Slot& s) const;
  };

  std::unordered_map<Slot, std::vector<float>, SlotHash> residuals_;
  size_t floats_ = 0;  // the sum of the residuals' lengths
};

}  // namespace ps

#endif  // PS_COMPRESSOR_H_
