// ValueArena: float arrays for the values and optimizer state a shard keeps outside
// its key table (keys of more than one value, and chunks).
//
// Small arrays are carved from 4 MiB blocks, so a key costs no malloc of its own. A
// released small array goes to a free list of its exact size and is handed out again
// by the next Allocate of that size (the keys of one model share a few lengths); the
// blocks are freed with the arena. Arrays over 1 MiB get an allocation of their own,
// freed when released.
//
// Thread safety: none (owned by one shard thread).
#ifndef HERDPS_SERVER_VALUE_ARENA_H_
#define HERDPS_SERVER_VALUE_ARENA_H_

#include <cstddef>
#include <memory>
#include <unordered_map>
#include <vector>

namespace ps {

class ValueArena {
 public:
  // An uninitialised array of `floats` floats (>= 1).
  float* Allocate(size_t floats);
  // Gives back an array from Allocate with the same `floats`.
  void Release(float* array, size_t floats);

  // Bytes held from the system: blocks and big arrays.
  size_t bytes() const;

 private:
  // A free array keeps the next free array of its size in its first 8 bytes, so small
  // arrays are at least this many floats.
  static constexpr size_t kMinFloats = 2;
  static_assert(sizeof(float*) <= kMinFloats * sizeof(float), "a free link must fit");
  static size_t Rounded(size_t floats) { return floats < kMinFloats ? kMinFloats : floats; }

  std::vector<std::unique_ptr<float[]>> blocks_;
  size_t block_used_ = 0;                    // floats carved from the last block
  std::unordered_map<size_t, float*> free_;  // by size in floats: the last released
  std::unordered_map<const float*, std::unique_ptr<float[]>> big_;
  size_t big_floats_ = 0;
};

}  // namespace ps

#endif  // HERDPS_SERVER_VALUE_ARENA_H_
