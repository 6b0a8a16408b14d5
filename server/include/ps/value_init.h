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

  // Fills values[0..n) of `key`. The values depend only on (kind, scale, seed, key, i):
  // the same on every run, on any server, whatever order keys arrive in.
  void Fill(Key key, float* values, size_t n) const;

  // "zeros" | "uniform" | "normal".
  static Status ParseKind(const std::string& name, Kind* kind);
};

}  // namespace ps

#endif  // PS_VALUE_INIT_H_
