// CodecSpec, Compressor::Create and ResidualStore (ps/compressor.h). The encoders live in
// codec_dense.cc (none, fp16, onebit) and codec_sparse.cc (topk, threshold, randomk).
#include "ps/compressor.h"

#include <charconv>
#include <cmath>
#include <string>
#include <system_error>
#include <vector>

namespace ps {

// The encoders' factories, defined in codec_dense.cc and codec_sparse.cc.
std::unique_ptr<Compressor> NewNoneCompressor(const CodecSpec& spec);
std::unique_ptr<Compressor> NewFp16Compressor(const CodecSpec& spec);
std::unique_ptr<Compressor> NewTopkCompressor(const CodecSpec& spec);
std::unique_ptr<Compressor> NewThresholdCompressor(const CodecSpec& spec);
std::unique_ptr<Compressor> NewOneBitCompressor(const CodecSpec& spec);
std::unique_ptr<Compressor> NewRandomkCompressor(const CodecSpec& spec);

namespace {

std::vector<std::string> SplitColons(const std::string& text) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    size_t colon = text.find(':', begin);
    parts.push_back(text.substr(begin, colon - begin));
    if (colon == std::string::npos) return parts;
    begin = colon + 1;
  }
}

// The whole of `text` as a number of type T, nothing else (no spaces, no sign for
// unsigned types).
template <typename T>
bool ParseNumber(const std::string& text, T* out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

template <typename T>
std::string ShortestText(T v) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, ec == std::errc() ? ptr : buf);
}

// "<ratio>" or "k=<k>" of topk / randomk.
Status ParseKept(const std::string& text, const std::string& arg, CodecSpec* spec) {
  if (arg.rfind("k=", 0) == 0) {
    if (!ParseNumber(arg.substr(2), &spec->k) || spec->k == 0) {
      return Status::InvalidArgument("codec '" + text + "': '" + arg +
                                     "' is not a count > 0 of values to keep");
    }
    return Status::OK();
  }
  if (!ParseNumber(arg, &spec->ratio)) {
    return Status::InvalidArgument("codec '" + text + "': '" + arg +
                                   "' is neither a ratio nor k=<count>");
  }
  return Status::OK();
}

std::string Usage() {
  return "; write none, fp16, onebit, topk:<ratio>, topk:k=<count>, threshold:<tau>, "
         "randomk:<ratio>[:seed=<seed>] or randomk:k=<count>[:seed=<seed>]";
}

}  // namespace

Status CodecSpec::Parse(const std::string& text, CodecSpec* out) {
  std::vector<std::string> parts = SplitColons(text);
  const std::string& name = parts[0];
  size_t args = parts.size() - 1;
  CodecSpec spec;
  Status s;
  if (name == "none" || name == "fp16" || name == "onebit") {
    spec.codec = name == "none" ? Codec::kNone : name == "fp16" ? Codec::kFp16 : Codec::kOneBit;
    if (args != 0) {
      return Status::InvalidArgument("codec '" + text + "': " + name + " takes no parameters");
    }
  } else if (name == "topk") {
    spec.codec = Codec::kTopk;
    if (args != 1) {
      return Status::InvalidArgument("codec '" + text + "': topk takes one parameter" + Usage());
    }
    s = ParseKept(text, parts[1], &spec);
  } else if (name == "threshold") {
    spec.codec = Codec::kThreshold;
    if (args != 1 || !ParseNumber(parts[1], &spec.tau)) {
      return Status::InvalidArgument("codec '" + text + "': threshold takes one number, tau" +
                                     Usage());
    }
  } else if (name == "randomk") {
    spec.codec = Codec::kRandomk;
    if (args != 1 && args != 2) {
      return Status::InvalidArgument("codec '" + text + "': randomk takes a ratio or k=<count>" +
                                     " and optionally seed=<seed>" + Usage());
    }
    s = ParseKept(text, parts[1], &spec);
    if (s.ok() && args == 2) {
      const std::string& arg = parts[2];
      if (arg.rfind("seed=", 0) != 0 || !ParseNumber(arg.substr(5), &spec.seed)) {
        return Status::InvalidArgument("codec '" + text + "': '" + arg +
                                       "' is not seed=<unsigned 64-bit integer>");
      }
    }
  } else {
    return Status::InvalidArgument("codec '" + text + "': unknown codec '" + name + "'" + Usage());
  }
  if (!s.ok()) return s;
  s = spec.Validate();
  if (!s.ok()) return Status::InvalidArgument("codec '" + text + "': " + s.message());
  *out = spec;
  return Status::OK();
}

std::string CodecSpec::ToString() const {
  std::string name = CodecName(codec);
  switch (codec) {
    case Codec::kTopk:
    case Codec::kRandomk: {
      std::string text = name + ":" + (k > 0 ? "k=" + std::to_string(k) : ShortestText(ratio));
      if (codec == Codec::kRandomk) text += ":seed=" + std::to_string(seed);
      return text;
    }
    case Codec::kThreshold:
      return name + ":" + ShortestText(tau);
    default:
      return name;
  }
}

Status CodecSpec::Validate() const {
  switch (codec) {
    case Codec::kNone:
    case Codec::kFp16:
    case Codec::kOneBit:
      return Status::OK();
    case Codec::kTopk:
    case Codec::kRandomk:
      if (k > 0 && ratio != 0) {
        return Status::InvalidArgument(std::string(CodecName(codec)) +
                                       " has both a ratio and k; give one of them");
      }
      if (k == 0 && !(ratio > 0 && ratio <= 1)) {
        return Status::InvalidArgument(std::string(CodecName(codec)) + " ratio " +
                                       ShortestText(ratio) +
                                       " is outside (0, 1]; give the fraction of values to "
                                       "keep, or k=<count>");
      }
      return Status::OK();
    case Codec::kThreshold:
      if (!std::isfinite(tau) || !(tau > 0)) {
        return Status::InvalidArgument("threshold tau " + ShortestText(tau) +
                                       " must be finite and > 0");
      }
      return Status::OK();
  }
  return Status::InvalidArgument("unknown codec " + std::to_string(static_cast<int>(codec)));
}

std::unique_ptr<Compressor> Compressor::Create(const CodecSpec& spec) {
  Status s = spec.Validate();
  if (!s.ok()) throw Error("Compressor::Create: " + s.message());
  switch (spec.codec) {
    case Codec::kNone:
      return NewNoneCompressor(spec);
    case Codec::kFp16:
      return NewFp16Compressor(spec);
    case Codec::kTopk:
      return NewTopkCompressor(spec);
    case Codec::kThreshold:
      return NewThresholdCompressor(spec);
    case Codec::kOneBit:
      return NewOneBitCompressor(spec);
    case Codec::kRandomk:
      return NewRandomkCompressor(spec);
  }
  throw Error("Compressor::Create: unknown codec");  // Validate refused it already
}

uint64_t Compressor::KeptCount(size_t n) const {
  uint64_t k = spec_.k;
  if (k == 0) {
    double wanted = std::ceil(spec_.ratio * static_cast<double>(n));
    k = wanted < 1 ? 1 : static_cast<uint64_t>(wanted);
  }
  return k < n ? k : n;
}

void Compressor::ThrowNonFinite(size_t i, size_t n, float v) const {
  throw Error(spec_.ToString() + " Encode: value " + std::to_string(i) + " of " +
              std::to_string(n) + " (gradient + residual) is " + ShortestText(v) + "; " +
              CodecName(spec_.codec) +
              " keeps an error-feedback residual that a non-finite value would poison, so "
              "it takes finite gradients only (none and fp16 carry any value)");
}

size_t ResidualStore::SlotHash::operator()(const Slot& s) const {
  uint64_t h = s.key * 0x9e3779b97f4a7c15ULL ^ static_cast<uint32_t>(s.chunk);
  return static_cast<size_t>(h ^ (h >> 29));
}

float* ResidualStore::Get(Key key, int32_t chunk, size_t len) {
  std::vector<float>& r = residuals_[Slot{key, chunk}];
  if (r.size() != len) {
    floats_ -= r.size();
    std::vector<float>(len, 0.f).swap(r);  // frees the old length's memory too
    floats_ += len;
  }
  return r.data();
}

void ResidualStore::Clear() {
  residuals_.clear();
  floats_ = 0;
}

}  // namespace ps
