// The ring the shm_frames target claims from, shared with the corpus generator so that
// seeds describe its real blocks: a fresh ShmRing of kShmFixtureRingBytes with one
// published block per entry of kShmFixtureBlocks, in that order. A fresh ring places
// blocks first fit from the end of the segment header, with serials 1, 2, ...
#ifndef HERDPS_TESTS_FUZZ_SHM_FIXTURE_H_
#define HERDPS_TESTS_FUZZ_SHM_FIXTURE_H_

#include <cstddef>
#include <cstdint>

#include "shm_segment.h"

namespace ps {
namespace fuzz {

constexpr uint64_t kShmFixtureRingBytes = uint64_t{1} << 20;
constexpr uint64_t kShmFixtureBlocks[] = {4096, 65536, 100, 200000};
constexpr size_t kShmFixtureBlockCount = sizeof(kShmFixtureBlocks) / sizeof(uint64_t);

inline uint64_t ShmFixtureOffset(size_t block) {
  uint64_t offset = shm::kSegmentHeaderBytes;
  for (size_t i = 0; i < block; ++i) offset += shm::BlockBytes(kShmFixtureBlocks[i]);
  return offset;
}
inline uint64_t ShmFixtureSerial(size_t block) { return block + 1; }

}  // namespace fuzz
}  // namespace ps

#endif  // HERDPS_TESTS_FUZZ_SHM_FIXTURE_H_
