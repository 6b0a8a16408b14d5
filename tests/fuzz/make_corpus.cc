// Writes the seed corpus of the fuzz targets: <dir>/<target>/seed-<name>, made with
// HerdPS's own encoders (EncodeMeta, the codecs, WriteCheckpoint, the order protocol)
// so that the fuzzers start from valid structure, plus a few edge cases each and the
// inputs of the bugs the fuzzers found (seed-regress-*). The output is the same on every
// run; files the fuzzers added (named by their hash) are left alone.
//
//   fuzz_make_corpus tests/fuzz/corpus     (tests/fuzz/run --make-corpus does this)
//
// This file: the shared pieces (corpus.h) and the codec frames' seeds; the messages' in
// corpus_messages.cc, the checkpoints' and the protocol state machines' in
// corpus_state.cc, the shared-memory frames' in corpus_shm.cc.
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "corpus.h"
#include "fuzz_input.h"
#include "ps/compressor.h"
#include "ps/internal/codec_frame.h"
#include "ps/internal/key_frame.h"
#include "ps/status.h"

namespace ps {
namespace fuzz {
namespace {

std::string g_root;
int g_files = 0;

}  // namespace

void WriteSeed(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::string dir = g_root + "/" + target;
  ::mkdir(g_root.c_str(), 0755);
  ::mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/seed-" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "fuzz_make_corpus: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  ++g_files;
}

std::vector<float> Gradient(size_t n, uint64_t seed) {
  std::vector<float> g(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    g[i] = static_cast<float>(static_cast<int64_t>(x % 2001) - 1000) / 256.f;
  }
  return g;
}

SArray<char> Encode(const std::string& spec_text, const std::vector<float>& g, uint64_t nonce) {
  CodecSpec spec;
  Status s = CodecSpec::Parse(spec_text, &spec);
  if (!s.ok()) {
    std::fprintf(stderr, "fuzz_make_corpus: %s\n", s.ToString().c_str());
    std::exit(1);
  }
  SArray<char> frame;
  Compressor::Create(spec)->Encode(g.data(), g.size(), nullptr, nonce, &frame);
  return frame;
}

const char* const kCodecSpecs[6] = {"none",          "fp16",   "topk:0.25",
                                    "threshold:1.5", "onebit", "randomk:k=3:seed=7"};
const char* const kCodecNames[6] = {"none", "fp16", "topk", "threshold", "onebit", "randomk"};

}  // namespace fuzz
}  // namespace ps

namespace {

using ps::fuzz::Bytes;
using ps::fuzz::Encode;
using ps::fuzz::Gradient;
using ps::fuzz::InputWriter;
using ps::fuzz::kCodecNames;
using ps::fuzz::kCodecSpecs;
using ps::fuzz::WriteSeed;

// ---- codec frames -------------------------------------------------------------------

void CodecFrameSeeds() {
  for (int c = 0; c < 6; ++c) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{64}, size_t{300}}) {
      std::vector<float> g = Gradient(n, n + c);
      if (n == 64) g[5] = g[6] = 1.5f;  // ties and values at tau
      WriteSeed("codec_frame", std::string(kCodecNames[c]) + "-" + std::to_string(n),
                Bytes(Encode(kCodecSpecs[c], g, n)));
    }
  }
  std::vector<float> special = {std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::quiet_NaN(),
                                65520.f,
                                65519.f,
                                5.9604645e-8f,
                                1e-40f,
                                -0.f,
                                0.f};
  WriteSeed("codec_frame", "fp16-special", Bytes(Encode("fp16", special)));
  WriteSeed("codec_frame", "none-special", Bytes(Encode("none", special)));
  // A sparse frame that sends nothing, and a topk index gap that needs two bytes.
  std::vector<float> one_big(200, 0.f);
  one_big[150] = 9.f;
  WriteSeed("codec_frame", "topk-far-index", Bytes(Encode("topk:k=1", one_big)));
  WriteSeed("codec_frame", "threshold-empty", Bytes(Encode("threshold:100", Gradient(9, 1))));
  // A topk header whose count varint is cut short.
  WriteSeed("codec_frame", "edge-cut-count",
            std::string{static_cast<char>(ps::kFrameMarker), '\x02', '\x80'});
}

// ---- key frames -----------------------------------------------------------------------

void KeyFrameSeeds() {
  auto write = [](const std::string& name, const std::vector<ps::Key>& keys) {
    ps::SArray<char> frame;
    if (!ps::EncodeKeyFrame(keys.data(), keys.size(), &frame)) {
      std::fprintf(stderr, "fuzz_make_corpus: key frame seed %s does not encode\n", name.c_str());
      std::exit(1);
    }
    WriteSeed("key_frame", name, Bytes(frame));
  };
  std::vector<ps::Key> dense, strided, sparse, mixed;
  for (ps::Key k = 0; k < 300; ++k) dense.push_back(k + 7);
  for (ps::Key k = 0; k < 50; ++k) strided.push_back(UINT64_MAX / 64 * k + 1);
  ps::Key at = 0;
  for (int i = 0; i < 200; ++i) sparse.push_back(at += 1 + (i * 37) % 300);
  for (ps::Key k = 0; k < 40; ++k) mixed.push_back(k < 20 ? k : 1000 + 3 * k);
  write("dense", dense);
  write("strided", strided);
  write("sparse", sparse);
  write("mixed", mixed);
  WriteSeed("key_frame", "edge-empty", std::string{static_cast<char>(ps::kKeyFrameMarker), 1, 0});
  // A bitmap frame: keys 5 + 3j for j in {0, 2, 3, 9, 63, 64, 70} (one server's share
  // of a run split over servers).
  ps::SArray<char> bitmap;
  char* bits = ps::BeginKeyBitmapFrame(7, 5, 3, 71, &bitmap);
  for (int j : {0, 2, 3, 9, 63, 64, 70}) {
    bits[j / 8] = static_cast<char>(bits[j / 8] | (1 << (j % 8)));
  }
  WriteSeed("key_frame", "bitmap", Bytes(bitmap));
  // A runs frame whose repeat overshoots the count by one.
  WriteSeed("key_frame", "edge-overshoot",
            std::string{static_cast<char>(ps::kKeyFrameMarker), 2, 3, 5, 0, 2});
}

void CodecEncoderSeeds() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Seed {
    std::string name;
    uint8_t codec, flags;
    uint64_t k;
    double ratio;
    float tau;
    uint8_t tiling;
    std::vector<float> g, residual;
  };
  const std::vector<float> g = Gradient(16, 3);
  const std::vector<float> r = Gradient(16, 4);
  std::vector<Seed> seeds = {
      {"none", 0, 2, 0, 0, 0, 0, g, r},
      {"none-special", 0, 0, 0, 0, 0, 0, {nan, inf, -inf, 1e-42f}, {}},
      {"fp16", 1, 2, 0, 0, 0, 0, g, r},
      {"fp16-saturate", 1, 2, 0, 0, 0, 0, {70000.f, -1e9f, 65519.f, nan}, {0, 0, 0, 1}},
      {"topk-ratio", 2, 2, 0, 0.25, 0, 0, g, r},
      {"topk-k-ties", 2, 3, 3, 0, 0, 0, {1, -1, 1, -1, 1, 2}, {0, 0, 0, 0, 0, 0}},
      {"topk-large", 2, 0, 0, 0.001, 0, 252, g, {}},
      {"topk-nan", 2, 2, 0, 0.5, 0, 0, {1, nan, 2}, {0, 0, 0}},
      {"threshold", 3, 2, 0, 0, 1.f, 0, g, r},
      {"threshold-none-sent", 3, 0, 0, 0, 1e30f, 0, g, {}},
      {"onebit", 4, 2, 0, 0, 0, 0, g, r},
      {"onebit-odd", 4, 0, 0, 0, 0, 0, {-0.f, 0.f, 1e-45f, -3, 2}, {}},
      {"randomk", 5, 3, 5, 0, 0, 0, g, r},
      {"randomk-all", 5, 2, 0, 1.0, 0, 0, g, r},
  };
  for (const Seed& s : seeds) {
    InputWriter w;
    w.Put(s.codec).Put(s.flags).Put(s.k).Put(s.ratio).Put(s.tau).Put(uint64_t{11});
    w.Put(uint64_t{3}).Put(s.tiling);
    for (float v : s.g) w.Put(v);
    for (float v : s.residual) w.Put(v);
    WriteSeed("codec_encoders", s.name, w.bytes());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus dir>\n", argv[0]);
    return 2;
  }
  ps::fuzz::QuietLogs();
  ps::fuzz::g_root = argv[1];
  ps::fuzz::MessageSeeds();
  CodecFrameSeeds();
  CodecEncoderSeeds();
  KeyFrameSeeds();
  ps::fuzz::StateSeeds();
  ps::fuzz::ShmSeeds();
  std::printf("fuzz_make_corpus: wrote %d seed files under %s\n", ps::fuzz::g_files,
              ps::fuzz::g_root.c_str());
  return 0;
}
