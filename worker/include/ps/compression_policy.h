// CompressionPolicy: which codec a KVWorker<float> uses for the values it pushes, per
// job (one codec for every key) or per key range, and whether pull answers may come
// back as fp16. See docs/pipeline.md ("Compression") for the codecs and the wire.
//
//   ps::CompressionPolicy policy;
//   ps::Status s = ps::CompressionPolicy::Parse("topk:0.001", &policy);
//   policy.ranges.push_back({ps::Range(0, 1000), fp16_spec});  // keys [0, 1000): fp16
//   kv.set_compression(policy);
#ifndef PS_COMPRESSION_POLICY_H_
#define PS_COMPRESSION_POLICY_H_

#include <string>
#include <utility>
#include <vector>

#include "ps/base.h"
#include "ps/compressor.h"
#include "ps/range.h"
#include "ps/status.h"

namespace ps {

struct CompressionPolicy {
  // The codec of pushed values (none: raw floats, the default).
  CodecSpec push;
  // Key ranges with a codec of their own; the first range holding a key wins.
  std::vector<std::pair<Range, CodecSpec>> ranges;
  // Pull answers encoded as fp16 by the server (half the bytes; values rounded to the
  // nearest half, finite values beyond +-65504 clamped there). Off: raw floats.
  bool pull_fp16 = false;

  const CodecSpec& For(Key key) const {
    for (const auto& r : ranges) {
      if (key >= r.first.begin() && key < r.first.end()) return r.second;
    }
    return push;
  }
  bool compresses() const {
    if (push.codec != Codec::kNone || pull_fp16) return true;
    for (const auto& r : ranges) {
      if (r.second.codec != Codec::kNone) return true;
    }
    return false;
  }
  // Reads the push codec (CodecSpec::Parse's forms), optionally followed by
  // ",pull=fp16": e.g. "topk:0.001", "onebit,pull=fp16", "none". InvalidArgument
  // quoting the text otherwise; *out is unchanged then.
  static Status Parse(const std::string& text, CompressionPolicy* out) {
    CompressionPolicy p;
    std::string codec = text;
    const std::string suffix = ",pull=fp16";
    if (codec.size() >= suffix.size() &&
        codec.compare(codec.size() - suffix.size(), suffix.size(), suffix) == 0) {
      p.pull_fp16 = true;
      codec.resize(codec.size() - suffix.size());
    }
    Status s = CodecSpec::Parse(codec, &p.push);
    if (!s.ok()) return s;
    *out = p;
    return Status::OK();
  }
  std::string ToString() const { return push.ToString() + (pull_fp16 ? ",pull=fp16" : ""); }
};

}  // namespace ps

#endif  // PS_COMPRESSION_POLICY_H_
