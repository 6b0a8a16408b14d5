#include "ps/internal/codec_frame.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace ps {
namespace {

// The marker of frame format 1, refused with a message of its own.
constexpr uint8_t kFormat1Marker = 0xC1;
constexpr size_t kCountAt = kFrameCountAt;

// A validated frame: where its parts are, so DecodeFrame does not derive them twice.
struct FrameView {
  FrameInfo header;
  uint64_t sent = 0;  // topk / randomk: k; threshold: m
  float tau = 0;
  float positive_scale = 0;
  float negative_scale = 0;
  uint64_t draw_seed = 0;
  const char* payload = nullptr;  // values, halves, words or bits
  const char* varints = nullptr;  // topk index gaps
};

Status Bad(size_t byte, const std::string& what) {
  return Status::InvalidArgument("codec frame byte " + std::to_string(byte) + ": " + what);
}

std::string Hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%02x", v);
  return buf;
}

std::string FloatText(float f) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(f));
  return buf;
}

bool KnownCodec(uint8_t c) { return c <= static_cast<uint8_t>(Codec::kRandomk); }

// The payload of a dense codec, from byte `at` on, must hold exactly count values of
// `width` bytes. Written with a division so that a huge count cannot overflow the
// comparison.
Status CheckDensePayload(const char* name, uint64_t count, size_t width, size_t at,
                         size_t payload) {
  if (payload % width != 0 || payload / width != count) {
    return Bad(at, std::string(name) + " frame of " + std::to_string(count) + " values needs " +
                       std::to_string(width) + " bytes per value after the header, but has " +
                       std::to_string(payload) + " bytes");
  }
  return Status::OK();
}

// Sparse frames come from error-feedback encoders, which refuse non-finite values.
Status CheckFiniteValues(const char* name, const char* data, size_t offset, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    float v = LoadLE<float>(data + offset + 4 * i);
    if (!std::isfinite(v)) {
      return Bad(offset + 4 * i, std::string(name) + " value " + std::to_string(i) + " is " +
                                     FloatText(v) + "; sparse frames carry finite values only");
    }
  }
  return Status::OK();
}

// What is wrong with the varint at data[start..size), which `field` names, once
// ParseVarint has refused it.
Status VarintFault(const char* data, size_t size, size_t start, const char* field) {
  for (size_t i = 0; i < kMaxVarintBytes; ++i) {
    if (start + i >= size) {
      return Bad(start, std::string(field) + " varint runs past the end of the frame");
    }
    uint8_t byte = static_cast<uint8_t>(data[start + i]);
    if (i == kMaxVarintBytes - 1 && byte > 1) break;
    if (!(byte & 0x80)) {
      return Bad(start, std::string(field) + " varint is not in its shortest form");
    }
  }
  return Bad(start, std::string(field) + " varint overflows 64 bits");
}

// A well-formed header at the start of data[0..size): true with *h filled; false for
// any fault, which HeaderFault then names. Inline, like ParseVarint: every frame has one.
inline bool ParseHeader(const char* data, size_t size, FrameInfo* h) {
  if (data == nullptr || size < kCountAt) return false;
  uint8_t codec = static_cast<uint8_t>(data[1]);
  if (static_cast<uint8_t>(data[0]) != kFrameMarker || !KnownCodec(codec)) return false;
  size_t pos = kCountAt;
  if (!ParseVarint(data, size, &pos, &h->count)) return false;
  h->codec = static_cast<Codec>(codec);
  h->header_bytes = pos;
  return true;
}

// What is wrong with the header of data[0..size), once ParseHeader has refused it.
Status HeaderFault(const char* data, size_t size) {
  if (data == nullptr && size > 0) return Status::InvalidArgument("codec frame: null data");
  if (size < kCountAt) {
    return Status::InvalidArgument("codec frame of " + std::to_string(size) +
                                   " bytes ends before its count; a frame starts with a "
                                   "marker byte, a codec byte and a count varint");
  }
  uint8_t marker = static_cast<uint8_t>(data[0]);
  if (marker == kFormat1Marker) {
    return Bad(0, "marker " + Hex(marker) + " is frame format 1, which this build no longer reads" +
                      " (it reads format 2, " + Hex(kFrameMarker) +
                      "); run one HerdPS build on every node of a job");
  }
  if (marker != kFrameMarker) {
    return Bad(0, "marker " + Hex(marker) + " is not " + Hex(kFrameMarker) +
                      " (frame format 2); the sender writes another format");
  }
  uint8_t codec = static_cast<uint8_t>(data[1]);
  if (!KnownCodec(codec)) return Bad(1, "unknown codec " + std::to_string(codec));
  return VarintFault(data, size, kCountAt, "count");
}

// Walks the topk index gaps; calls visit(i, index) for each of the k indices.
template <typename Visit>
Status WalkTopkIndices(const char* data, size_t size, const FrameView& f, Visit visit) {
  const uint64_t count = f.header.count;
  size_t pos = static_cast<size_t>(f.varints - data);
  uint64_t index = 0;
  for (uint64_t i = 0; i < f.sent; ++i) {
    size_t at = pos;
    uint64_t gap;
    if (!ParseVarint(data, size, &pos, &gap)) return VarintFault(data, size, at, "topk index gap");
    if (i > 0 && gap == 0) {
      return Bad(at,
                 "topk index " + std::to_string(index) + " repeats; indices must ascend strictly");
    }
    // index < count holds here, so count - index cannot wrap; neither can index + gap.
    if (gap >= count - index) {
      std::string sum =
          i ? std::to_string(index) + " + " + std::to_string(gap) : std::to_string(gap);
      return Bad(at, "topk index " + std::to_string(i) + " of " + std::to_string(f.sent) + " (" +
                         sum + ") lies at or beyond count " + std::to_string(count));
    }
    index += gap;
    visit(i, index);
  }
  if (pos != size) {
    return Bad(pos, std::to_string(size - pos) + " trailing bytes after the " +
                        std::to_string(f.sent) + " topk indices");
  }
  return Status::OK();
}

// The k of topk / randomk (the m of threshold) at *pos: true with f->sent set (at most
// count) and *pos past it; false for any fault, which SentCountFault then names.
inline bool ParseSentCount(const char* data, size_t size, size_t* pos, FrameView* f) {
  return ParseVarint(data, size, pos, &f->sent) && f->sent <= f->header.count;
}

// What is wrong with the k or m varint at byte `at`, which `field` names, once
// ParseSentCount has refused it.
Status SentCountFault(const char* data, size_t size, size_t at, const char* field, uint64_t count) {
  size_t pos = at;
  uint64_t sent;
  if (!ParseVarint(data, size, &pos, &sent)) return VarintFault(data, size, at, field);
  return Bad(at, std::string(field) + " = " + std::to_string(sent) + " exceeds count " +
                     std::to_string(count));
}

Status InspectTopk(const char* data, size_t size, FrameView* f) {
  size_t pos = f->header.header_bytes;
  if (!ParseSentCount(data, size, &pos, f)) {
    return SentCountFault(data, size, f->header.header_bytes, "topk k", f->header.count);
  }
  // Each kept value takes 4 bytes plus at least one varint byte.
  if (f->sent > (size - pos) / 5) {
    return Bad(f->header.header_bytes, "topk k = " + std::to_string(f->sent) + " needs at least " +
                                           std::to_string(5 * f->sent) + " bytes after byte " +
                                           std::to_string(pos) + ", frame has " +
                                           std::to_string(size - pos));
  }
  f->payload = data + pos;
  f->varints = f->payload + 4 * f->sent;
  Status s = CheckFiniteValues("topk", data, pos, f->sent);
  if (!s.ok()) return s;
  return WalkTopkIndices(data, size, *f, [](uint64_t, uint64_t) {});
}

Status InspectThreshold(const char* data, size_t size, FrameView* f) {
  if (f->header.count > kMaxThresholdCount) {
    return Bad(kCountAt, "threshold frame of " + std::to_string(f->header.count) +
                             " values: at most 2^31 fit 31-bit indices");
  }
  size_t pos = f->header.header_bytes;
  if (size - pos < 4) return Bad(size, "threshold frame ends inside its tau");
  f->tau = LoadLE<float>(data + pos);
  if (!std::isfinite(f->tau) || !(f->tau > 0)) {
    return Bad(pos, "threshold tau is " + FloatText(f->tau) + "; it must be finite and > 0");
  }
  const size_t m_at = pos + 4;
  pos = m_at;
  if (!ParseSentCount(data, size, &pos, f)) {
    return SentCountFault(data, size, m_at, "threshold m", f->header.count);
  }
  const size_t words_at = pos;
  size_t payload = size - words_at;
  if (payload % 4 != 0 || payload / 4 != f->sent) {
    return Bad(words_at, "threshold m = " + std::to_string(f->sent) + " needs " +
                             std::to_string(4 * f->sent) + " bytes of words, frame has " +
                             std::to_string(payload));
  }
  f->payload = data + words_at;
  uint64_t prev = 0;
  for (uint64_t i = 0; i < f->sent; ++i) {
    uint64_t index = LoadLE<uint32_t>(f->payload + 4 * i) & 0x7fffffffu;
    size_t at = words_at + 4 * i;
    if (index >= f->header.count) {
      return Bad(at, "threshold index " + std::to_string(index) + " is not below count " +
                         std::to_string(f->header.count));
    }
    if (i > 0 && index <= prev) {
      return Bad(at, "threshold index " + std::to_string(index) + " follows " +
                         std::to_string(prev) + "; indices must ascend strictly");
    }
    prev = index;
  }
  return Status::OK();
}

Status CheckScale(const char* which, float scale, size_t at) {
  if (!std::isfinite(scale) || std::signbit(scale)) {
    return Bad(at, std::string("onebit ") + which + " scale is " + FloatText(scale) +
                       "; it must be finite and >= +0");
  }
  return Status::OK();
}

Status InspectOneBit(const char* data, size_t size, FrameView* f) {
  const size_t scales_at = f->header.header_bytes, bits_at = scales_at + 8;
  if (size < bits_at) return Bad(size, "onebit frame ends inside its two scales");
  f->positive_scale = LoadLE<float>(data + scales_at);
  f->negative_scale = LoadLE<float>(data + scales_at + 4);
  Status s = CheckScale("positive", f->positive_scale, scales_at);
  if (!s.ok()) return s;
  s = CheckScale("negative", f->negative_scale, scales_at + 4);
  if (!s.ok()) return s;
  const uint64_t count = f->header.count;
  uint64_t bytes = count / 8 + (count % 8 != 0);
  if (size - bits_at != bytes) {
    return Bad(bits_at, "onebit frame of " + std::to_string(count) + " values needs " +
                            std::to_string(bytes) + " bytes of bits, frame has " +
                            std::to_string(size - bits_at));
  }
  f->payload = data + bits_at;
  if (count % 8 != 0) {
    uint8_t unused = static_cast<uint8_t>(0xff << (count % 8));
    uint8_t last = static_cast<uint8_t>(f->payload[bytes - 1]);
    if (last & unused) return Bad(size - 1, "onebit padding bits are not zero");
  }
  return Status::OK();
}

Status InspectRandomk(const char* data, size_t size, FrameView* f) {
  size_t pos = f->header.header_bytes;
  if (size - pos < 8) return Bad(size, "randomk frame ends inside its 8-byte draw seed");
  f->draw_seed = LoadLE<uint64_t>(data + pos);
  const size_t k_at = pos + 8;
  pos = k_at;
  if (!ParseSentCount(data, size, &pos, f)) {
    return SentCountFault(data, size, k_at, "randomk k", f->header.count);
  }
  const size_t values_at = pos;
  size_t payload = size - values_at;
  if (payload % 4 != 0 || payload / 4 != f->sent) {
    return Bad(values_at, "randomk k = " + std::to_string(f->sent) + " needs " +
                              std::to_string(4 * f->sent) + " bytes of values, frame has " +
                              std::to_string(payload));
  }
  f->payload = data + values_at;
  return CheckFiniteValues("randomk", data, values_at, f->sent);
}

Status Inspect(const char* data, size_t size, FrameView* f) {
  if (!ParseHeader(data, size, &f->header)) return HeaderFault(data, size);
  const size_t at = f->header.header_bytes;
  switch (f->header.codec) {
    case Codec::kNone:
      f->payload = data + at;
      return CheckDensePayload("none", f->header.count, 4, at, size - at);
    case Codec::kFp16:
      f->payload = data + at;
      return CheckDensePayload("fp16", f->header.count, 2, at, size - at);
    case Codec::kTopk:
      return InspectTopk(data, size, f);
    case Codec::kThreshold:
      return InspectThreshold(data, size, f);
    case Codec::kOneBit:
      return InspectOneBit(data, size, f);
    case Codec::kRandomk:
      return InspectRandomk(data, size, f);
  }
  return Bad(1, "unknown codec " + std::to_string(static_cast<int>(f->header.codec)));
}

}  // namespace

const char* CodecName(Codec c) {
  switch (c) {
    case Codec::kNone:
      return "none";
    case Codec::kFp16:
      return "fp16";
    case Codec::kTopk:
      return "topk";
    case Codec::kThreshold:
      return "threshold";
    case Codec::kOneBit:
      return "onebit";
    case Codec::kRandomk:
      return "randomk";
  }
  return "unknown";
}

Status InspectFrame(const char* data, size_t size, FrameInfo* info) {
  FrameView f;
  Status s = Inspect(data, size, &f);
  if (!s.ok()) return s;
  *info = f.header;
  return Status::OK();
}

Status ReadFrameHeader(const char* data, size_t size, FrameInfo* info) {
  if (!ParseHeader(data, size, info)) return HeaderFault(data, size);
  return Status::OK();
}

Status DecodeFrame(const char* data, size_t size, float* out, size_t count) {
  FrameView f;
  Status s = Inspect(data, size, &f);
  if (!s.ok()) return s;
  if (f.header.count != count) {
    return Bad(kCountAt, std::string(CodecName(f.header.codec)) + " frame decodes to " +
                             std::to_string(f.header.count) + " values but " +
                             std::to_string(count) + " are expected");
  }
  switch (f.header.codec) {
    case Codec::kNone:
      if (count) std::memcpy(out, f.payload, 4 * count);
      return Status::OK();
    case Codec::kFp16:
      for (size_t i = 0; i < count; ++i) out[i] = HalfToFloat(LoadLE<uint16_t>(f.payload + 2 * i));
      return Status::OK();
    case Codec::kTopk:
      std::fill(out, out + count, 0.f);
      return WalkTopkIndices(data, size, f, [&](uint64_t i, uint64_t index) {
        out[index] = LoadLE<float>(f.payload + 4 * i);
      });
    case Codec::kThreshold:
      std::fill(out, out + count, 0.f);
      for (uint64_t i = 0; i < f.sent; ++i) {
        uint32_t word = LoadLE<uint32_t>(f.payload + 4 * i);
        out[word & 0x7fffffffu] = (word >> 31) ? -f.tau : f.tau;
      }
      return Status::OK();
    case Codec::kOneBit: {
      // Indexed rather than branched on: signs are as unpredictable as coin flips.
      const float levels[2] = {f.positive_scale, -f.negative_scale};
      for (size_t i = 0; i < count; ++i) {
        out[i] = levels[(static_cast<uint8_t>(f.payload[i / 8]) >> (i % 8)) & 1];
      }
      return Status::OK();
    }
    case Codec::kRandomk: {
      std::fill(out, out + count, 0.f);
      std::vector<uint64_t> indices;
      DrawRandomkIndices(f.draw_seed, count, f.sent, &indices);
      for (uint64_t i = 0; i < f.sent; ++i) out[indices[i]] = LoadLE<float>(f.payload + 4 * i);
      return Status::OK();
    }
  }
  return Status::Internal("codec frame: a validated frame has an unknown codec");
}

}  // namespace ps
