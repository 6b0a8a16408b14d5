// KeySet: the keys of a request built from arbitrary ids (a sparse batch's feature ids,
// an embedding lookup's rows): sorted and unique, as KVWorker requires, with the
// position of each id among them, so that pulled values can be read per id and
// gradients summed per key.
//
//   ps::KeySet set(batch_ids);                      // any order, repeats allowed
//   kv.Wait(kv.ZPull(set.keys(), &vals));           // one value per key
//   float v = vals[set.position(i)];                // the value of batch_ids[i]
//
// Construction sorts the ids' positions: O(n log n); position(i) is O(1), Find(key)
// O(log size()). At most 2^32 - 1 ids (more: ps::Error). Immutable once built: safe to
// read from several threads.
#ifndef PS_KEY_SET_H_
#define PS_KEY_SET_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "ps/base.h"
#include "ps/sarray.h"
#include "ps/status.h"

namespace ps {

class KeySet {
 public:
  KeySet() = default;
  // From `count` ids at `ids`.
  KeySet(const Key* ids, size_t count) { Build(ids, count); }
  explicit KeySet(const std::vector<Key>& ids) { Build(ids.data(), ids.size()); }

  // The distinct ids, ascending: a request's keys (shared, not copied, by Z* calls).
  const SArray<Key>& keys() const { return keys_; }
  size_t size() const { return keys_.size(); }
  // How many ids it was built from.
  size_t num_ids() const { return positions_.size(); }
  // The position in keys() of the i-th id given (i < num_ids()).
  uint32_t position(size_t i) const { return positions_[i]; }
  const std::vector<uint32_t>& positions() const { return positions_; }
  // The position of `key` in keys(), or -1 if it is not there.
  int64_t Find(Key key) const {
    const Key* begin = keys_.data();
    const Key* end = begin + keys_.size();
    const Key* it = std::lower_bound(begin, end, key);
    return it != end && *it == key ? it - begin : -1;
  }

 private:
  void Build(const Key* ids, size_t count) {
    if (count > UINT32_MAX) throw Error("KeySet: more than 2^32 - 1 ids");
    std::vector<uint32_t> order(count);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(),
                     [ids](uint32_t a, uint32_t b) { return ids[a] < ids[b]; });
    std::vector<Key> unique;
    positions_.assign(count, 0);
    for (uint32_t i : order) {
      if (unique.empty() || unique.back() != ids[i]) unique.push_back(ids[i]);
      positions_[i] = static_cast<uint32_t>(unique.size() - 1);
    }
    keys_.CopyFrom(unique.data(), unique.size());
  }

  SArray<Key> keys_;
  std::vector<uint32_t> positions_;
};

}  // namespace ps

#endif  // PS_KEY_SET_H_
