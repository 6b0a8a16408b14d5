#include "ps/value_init.h"

#include <cmath>

#include "ps/internal/hash.h"

namespace ps {
namespace {

// A uniform double in (0, 1) from the counter (seed, key, i).
double Uniform01(uint64_t seed, Key key, uint64_t i) {
  uint64_t bits = Mix64(Mix64(seed ^ 0x5eed5eed5eed5eedULL) ^ Mix64(key) ^ (i * 0x9e3779b97f4a7c15ULL));
  return (static_cast<double>(bits >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

}  // namespace

void ValueInit::Fill(Key key, float* values, size_t n, uint64_t first) const {
  const double kTwoPi = 6.283185307179586;
  for (size_t i = 0; i < n; ++i) {
    switch (kind) {
      case kZeros:
        values[i] = 0.0f;
        break;
      case kUniform:
        values[i] = static_cast<float>(scale * (2.0 * Uniform01(seed, key, first + i) - 1.0));
        break;
      case kNormal: {
        // Box-Muller from two independent counters.
        double u1 = Uniform01(seed, key, 2 * (first + i)),
               u2 = Uniform01(seed, key, 2 * (first + i) + 1);
        values[i] = static_cast<float>(scale * std::sqrt(-2.0 * std::log(u1)) *
                                       std::cos(kTwoPi * u2));
        break;
      }
    }
  }
}

Status ValueInit::ParseKind(const std::string& name, Kind* kind) {
  if (name == "zeros") {
    *kind = kZeros;
  } else if (name == "uniform") {
    *kind = kUniform;
  } else if (name == "normal") {
    *kind = kNormal;
  } else {
    return Status::InvalidArgument("unknown initialisation '" + name +
                                   "' (zeros, uniform, normal)");
  }
  return Status::OK();
}

}  // namespace ps
