// The receiving side of the van's shared-memory path (van/shm_mapping.h, the shm fields
// of DecodeMeta, DecodeShmAnswer): a message whose meta describes frames in a peer's
// ring, checked and claimed against a real mapped ring (shm_fixture.h) whose bytes the
// "peer" has scribbled over first, as a hostile sender can at any time.
//
// Input: u8 count of writes, each a u32 offset into the ring and a u16-length chunk of
// bytes written there (clipped to the ring); then u8 data frame count (at most 64),
// that many u32 frame sizes and a u32-length chunk of meta; then the rest, read as a
// shared-memory answer.
//
// Properties: nothing crashes or reads outside the ring; a block is claimed only inside
// the ring and with the length its frame declares, and only once per input (a second
// descriptor of the same block fails); after every claimed block is released the
// mapping holds nothing.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "meta_codec.h"
#include "shm_fixture.h"
#include "shm_mapping.h"
#include "shm_ring.h"

namespace {

struct Fixture {
  std::unique_ptr<ps::ShmRing> ring;
  std::shared_ptr<ps::ShmMapping> mapping;
  char* writable = nullptr;  // the "peer's" own view of the segment
  std::string pristine;      // the segment as set up, restored before every input
};

Fixture* MakeFixture() {
  auto* f = new Fixture();
  FUZZ_EXPECT(ps::ShmRing::Create(ps::fuzz::kShmFixtureRingBytes, &f->ring).ok());
  for (size_t i = 0; i < ps::fuzz::kShmFixtureBlockCount; ++i) {
    ps::ShmRing::Block b;
    FUZZ_EXPECT(f->ring->Allocate(ps::fuzz::kShmFixtureBlocks[i], &b));
    FUZZ_EXPECT(b.offset == ps::fuzz::ShmFixtureOffset(i) &&
                b.serial == ps::fuzz::ShmFixtureSerial(i));
    std::memset(b.payload, 'a' + static_cast<int>(i), b.length);
    f->ring->Publish(b);
  }
  ps::ShmOfferFields offer{f->ring->id(), static_cast<int>(getpid()), f->ring->fd(),
                           f->ring->bytes(), f->ring->token()};
  FUZZ_EXPECT(ps::ShmMapping::OpenFd(f->ring->fd(), offer, &f->mapping).ok());
  void* base =
      mmap(nullptr, f->ring->bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, f->ring->fd(), 0);
  FUZZ_EXPECT(base != MAP_FAILED);
  f->writable = static_cast<char*>(base);
  f->pristine.assign(f->writable, f->ring->bytes());
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ps::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture* fixture = MakeFixture();
  const uint64_t ring_bytes = fixture->ring->bytes();
  std::memcpy(fixture->writable, fixture->pristine.data(), ring_bytes);

  ps::fuzz::InputReader in(data, size);
  const size_t writes = in.Take<uint8_t>();
  for (size_t i = 0; i < writes; ++i) {
    const uint64_t offset = in.Take<uint32_t>() % ring_bytes;
    std::string bytes = in.TakeChunk<uint16_t>();
    const size_t n = std::min<uint64_t>(bytes.size(), ring_bytes - offset);
    std::memcpy(fixture->writable + offset, bytes.data(), n);
  }
  const size_t frames = in.Take<uint8_t>();
  if (frames > 64) return 0;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < frames; ++i) sizes.push_back(in.Take<uint32_t>());
  const std::string meta_bytes = in.TakeChunk();
  std::vector<char> meta_frame(meta_bytes.begin(), meta_bytes.end());

  ps::Meta meta;
  ps::ShmFields shm;
  if (ps::DecodeMeta(meta_frame.data(), meta_frame.size(), sizes, &meta, &shm).ok()) {
    FUZZ_EXPECT(meta.data_type.size() == frames);
    std::vector<const ps::ShmFrameRef*> claimed;
    std::set<uint64_t> offsets;
    for (const ps::ShmFrameRef& ref : shm.frames) {
      FUZZ_EXPECT(ref.index < frames && sizes[ref.index] == 0);
      char* payload = nullptr;
      if (!fixture->mapping->Claim(ref, ref.length, &payload).ok()) continue;
      FUZZ_EXPECT(ref.offset + ps::shm::kBlockHeaderBytes + ref.length <= ring_bytes);
      FUZZ_EXPECT(offsets.insert(ref.offset).second);  // a block is claimed once
      const volatile char* p = payload;
      char sum = 0;
      for (uint64_t j = 0; j < ref.length; ++j) sum = static_cast<char>(sum ^ p[j]);
      (void)sum;
      claimed.push_back(&ref);
    }
    for (const ps::ShmFrameRef* ref : claimed) fixture->mapping->Release(ref->offset, ref->length);
    FUZZ_EXPECT(fixture->mapping->held_bytes() == 0);
  }
  const std::string answer_bytes = in.TakeRest();
  ps::ShmAnswerFields answer;
  if (ps::DecodeShmAnswer(answer_bytes.data(), answer_bytes.size(), &answer).ok()) {
    FUZZ_EXPECT(answer.ring != 0 && answer.token.size() == ps::kShmTokenBytes);
    FUZZ_EXPECT(DecodeShmAnswer(ps::EncodeShmAnswer(answer).data(),
                                ps::EncodeShmAnswer(answer).size(), &answer)
                    .ok());
  }
  return 0;
}
