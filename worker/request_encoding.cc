// RequestPipeline's codecs: the compression policy, the error-feedback residuals, and
// the encoding of push parts (docs/pipeline.md, "Compression").
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ps/internal/request_pipeline.h"
#include "request_parts.h"

namespace ps {

void RequestPipeline::set_compression(const CompressionPolicy& policy) {
  if (policy.compresses() && type_ != DataType::kFloat) {
    throw Error(std::string("compression needs float values; this KVWorker's are ") +
                DataTypeName(type_));
  }
  std::vector<std::unique_ptr<Compressor>> compressors;
  auto make = [&compressors](const CodecSpec& spec) {
    compressors.push_back(spec.codec == Codec::kNone ? nullptr : Compressor::Create(spec));
  };
  make(policy.push);
  for (const auto& r : policy.ranges) make(r.second);
  policy_ = policy;
  compressors_ = std::move(compressors);
  compress_pushes_ = false;
  for (const auto& c : compressors_) compress_pushes_ |= c != nullptr;
}

void RequestPipeline::ClearResiduals() {
  std::lock_guard<std::mutex> lock(residual_mu_);
  residuals_.Clear();
}

size_t RequestPipeline::residual_floats() {
  std::lock_guard<std::mutex> lock(residual_mu_);
  return residuals_.floats();
}

size_t RequestPipeline::CodecIndex(Key key) const {
  for (size_t i = 0; i < policy_.ranges.size(); ++i) {
    const Range& r = policy_.ranges[i].first;
    if (key >= r.begin() && key < r.end()) return i + 1;
  }
  return 0;
}

void RequestPipeline::Encode(const PipelineRequest& req, const Pending& p,
                             std::vector<Message>* messages) {
  const size_t n = req.keys.size();
  const size_t width = req.lens.empty() && n ? req.vals.size() / elem_size_ / n : 0;
  auto len_of = [&](size_t i) -> size_t {
    return req.lens.empty() ? width : static_cast<size_t>(req.lens[i]);
  };
  std::vector<SArray<char>> frames(messages->size());
  std::vector<Codec> used(messages->size(), Codec::kNone);
  std::vector<float> gathered;
  std::lock_guard<std::mutex> lock(residual_mu_);
  // A value a codec refuses (not finite) throws: the residuals already moved are put
  // back, and nothing is sent.
  std::vector<std::pair<float*, std::vector<float>>> undo;
  try {
    for (size_t m = 0; m < messages->size(); ++m) {
      const Part& part = p.parts[m];
      const Key first = req.keys[part.positions.empty() ? 0 : part.positions[0]];
      const Compressor* codec = compressors_[CodecIndex(first)].get();
      if (!codec) continue;
      SArray<float> g((*messages)[m].data[1]);
      float* residual = nullptr;
      const bool one_slice = part.chunk >= 0 || part.positions.size() == 1 ||
                             (part.positions.empty() && n == 1);
      if (one_slice) {
        residual = residuals_.Get(first, part.chunk, g.size());
        undo.emplace_back(residual, std::vector<float>(residual, residual + g.size()));
      } else {
        // Several keys in one frame: their residuals side by side, as the values are.
        gathered.resize(g.size());
        size_t at = 0;
        const size_t keys = part.positions.empty() ? n : part.positions.size();
        for (size_t j = 0; j < keys; ++j) {
          const size_t i = part.positions.empty() ? j : part.positions[j];
          const size_t len = len_of(i);
          const float* r = residuals_.Get(req.keys[i], -1, len);
          std::copy(r, r + len, gathered.data() + at);
          at += len;
        }
        residual = gathered.data();
      }
      codec->Encode(g.data(), g.size(), residual, nonce_.fetch_add(1), &frames[m]);
      used[m] = codec->spec().codec;
      if (!one_slice) {
        size_t at = 0;
        const size_t keys = part.positions.empty() ? n : part.positions.size();
        for (size_t j = 0; j < keys; ++j) {
          const size_t i = part.positions.empty() ? j : part.positions[j];
          const size_t len = len_of(i);
          float* r = residuals_.Get(req.keys[i], -1, len);
          undo.emplace_back(r, std::vector<float>(r, r + len));
          std::copy(gathered.data() + at, gathered.data() + at + len, r);
          at += len;
        }
      }
    }
  } catch (...) {
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
      std::copy(it->second.begin(), it->second.end(), it->first);
    }
    throw;
  }
  for (size_t m = 0; m < messages->size(); ++m) {
    if (frames[m].empty()) continue;
    Message& msg = (*messages)[m];
    msg.data[1] = frames[m];
    msg.meta.data_type[1] = DataType::kChar;
    msg.meta.compression = static_cast<int>(used[m]);
  }
}

}  // namespace ps
