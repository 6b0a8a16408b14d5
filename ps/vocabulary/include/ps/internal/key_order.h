// FirstUnsortedKey: where a key list stops ascending strictly. Every request's keys are
// checked with it, on the worker before they are sent and on the server before any is
// used, so it must cost little next to the copy of the keys: it checks blocks without a
// branch per key (a loop the compiler vectorizes) and looks inside a block only when
// that block holds the fault.
//
// Thread safety: a pure function.
#ifndef PS_INTERNAL_KEY_ORDER_H_
#define PS_INTERNAL_KEY_ORDER_H_

#include <algorithm>
#include <cstddef>

#include "ps/base.h"

namespace ps {

// The first i >= 1 with keys[i] <= keys[i - 1], or n when keys ascend strictly (n < 2
// included).
inline size_t FirstUnsortedKey(const Key* keys, size_t n) {
  constexpr size_t kBlock = 1024;
  for (size_t begin = 1; begin < n; begin += kBlock) {
    const size_t end = std::min(n, begin + kBlock);
    bool fault = false;
    for (size_t i = begin; i < end; ++i) fault |= keys[i] <= keys[i - 1];
    if (!fault) continue;
    for (size_t i = begin; i < end; ++i) {
      if (keys[i] <= keys[i - 1]) return i;
    }
  }
  return n;
}

}  // namespace ps

#endif  // PS_INTERNAL_KEY_ORDER_H_
