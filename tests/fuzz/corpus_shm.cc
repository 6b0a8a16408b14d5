// Seeds of the shm_frames target: messages whose meta describes frames in the fixture
// ring (shm_fixture.h), good ones and ones a forger would send, with and without
// scribbles over the ring, and shared-memory answers. See make_corpus.cc.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "corpus.h"
#include "fuzz_input.h"
#include "meta_codec.h"
#include "shm_fixture.h"

namespace ps {
namespace fuzz {
namespace {

// A message of float frames of `sizes`, those listed in `refs` in the ring (empty on
// the wire), as the shm_frames target reads it: no scribbles unless `writes` has some.
std::string Input(const std::vector<size_t>& sizes, const std::vector<ShmFrameRef>& refs,
                  const std::string& writes = std::string(1, '\0'),
                  const std::string& answer = "") {
  Message msg;
  msg.meta.recipient = 8;
  msg.meta.sender = 9;
  msg.meta.push = msg.meta.request = true;
  std::vector<size_t> wire;
  for (size_t i = 0; i < sizes.size(); ++i) {
    msg.data.push_back(SArray<char>(sizes[i]));
    msg.meta.data_type.push_back(DataType::kFloat);
    bool in_ring = false;
    for (const auto& r : refs) in_ring = in_ring || r.index == i;
    wire.push_back(in_ring ? 0 : sizes[i]);
  }
  ShmFields shm;
  shm.ring = 77;
  shm.frames = refs;
  std::string meta;
  if (!EncodeMeta(msg, shm, &meta).ok()) {
    std::fprintf(stderr, "fuzz_make_corpus: a shm_frames seed does not encode\n");
    std::exit(1);
  }
  InputWriter w;
  w.PutBytes(writes);
  w.Put(static_cast<uint8_t>(sizes.size()));
  for (size_t n : wire) w.Put(static_cast<uint32_t>(n));
  w.PutChunk(meta);
  w.PutBytes(answer);
  return w.bytes();
}

ShmFrameRef Ref(uint32_t index, size_t block) {
  return {index, ShmFixtureOffset(block), ShmFixtureSerial(block), 0};
}

}  // namespace

void ShmSeeds() {
  const size_t b0 = kShmFixtureBlocks[0], b1 = kShmFixtureBlocks[1], b3 = kShmFixtureBlocks[3];
  WriteSeed("shm_frames", "one-block", Input({b1}, {Ref(0, 1)}));
  WriteSeed("shm_frames", "keys-on-the-wire-values-in-the-ring", Input({64, b3}, {Ref(1, 3)}));
  WriteSeed("shm_frames", "two-blocks", Input({b0, b1}, {Ref(0, 0), Ref(1, 1)}));
  WriteSeed("shm_frames", "same-block-twice", Input({b1, b1}, {Ref(0, 1), Ref(1, 1)}));
  WriteSeed("shm_frames", "wrong-length", Input({b1 - 4}, {Ref(0, 1)}));
  ShmFrameRef stale = Ref(0, 1);
  stale.serial = 99;
  WriteSeed("shm_frames", "stale-serial", Input({b1}, {stale}));
  ShmFrameRef outside = Ref(0, 1);
  outside.offset = kShmFixtureRingBytes - 64;
  WriteSeed("shm_frames", "outside", Input({b1}, {outside}));
  // The peer scribbles a block header (its length) and a state word.
  InputWriter scribble;
  scribble.Put(uint8_t{2});
  scribble.Put(static_cast<uint32_t>(ShmFixtureOffset(1) + 16));
  scribble.PutChunk<uint16_t>(std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8));
  scribble.Put(static_cast<uint32_t>(ShmFixtureOffset(0) + 4));
  scribble.PutChunk<uint16_t>(std::string("\x02\x00\x00\x00", 4));
  WriteSeed("shm_frames", "scribbled-headers",
            Input({b0, b1}, {Ref(0, 0), Ref(1, 1)}, scribble.bytes()));
  ShmAnswerFields answer;
  answer.ring = 77;
  answer.token = std::string(kShmTokenBytes, 't');
  answer.accepted = false;
  answer.reason = "PS_SHM=0 on the receiver";
  WriteSeed("shm_frames", "answer", Input({}, {}, std::string(1, '\0'), EncodeShmAnswer(answer)));
}

}  // namespace fuzz
}  // namespace ps
