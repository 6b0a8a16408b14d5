// 64-bit integer mixing shared by everything that spreads keys: the ring, the shard
// choice inside a server, reproducible initial values.
#ifndef PS_INTERNAL_HASH_H_
#define PS_INTERNAL_HASH_H_

#include <cstdint>

namespace ps {

// SplitMix64's finaliser: a bijection on 64-bit values with good avalanche, so
// consecutive keys land far apart. Callers that need independent placements (ring vs
// shard) mix in different salts first.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace ps

#endif  // PS_INTERNAL_HASH_H_
