// How a server initialises a key's values the first time it sees the key.
#ifndef PS_VALUE_INIT_H_
#define PS_VALUE_INIT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "ps/base.h"
#include "ps/status.h"

namespace ps {

struct ValueInit {
  enum Kind { kZeros, kUniform, kNormal };
  Kind kind = kZeros;
  double scale = 0.01;  // uniform: values in [-scale, scale]; normal: stddev
  uint64_t seed = 0;

  // Fills values[0..n) of `key` with its values number first .. first+n-1 (a chunk of
  // a large value starts past 0). Value i depends only on (kind, scale, seed, key, i):
  // the same on every run, on any server, whatever order keys arrive in, and whether
  // the key is stored whole or in chunks.
  void Fill(Key key, float* values, size_t n, uint64_t first = 0) const;

  // "zeros" | "uniform" | "normal".
  static Status ParseKind(const std::string& name, Kind* kind);
};

}  // namespace ps

#endif  // PS_VALUE_INIT_H_
