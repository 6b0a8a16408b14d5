// The wire protocol between the CD-GraB order plugin on the scheduler (ps/services/order_plugin.h)
// and the order clients on the workers (ps/order_client.h): the reserved app id, the
// commands (SimpleApp heads) and their bodies. See docs/orders.md.
//
// Bodies are binary, in host byte order (as KV values are): fixed-size fields, then an
// array whose length the fields give. Decoding checks only that the sizes add up; what
// the values mean (epochs in range, permutations) is checked by the receiver. Every body
// comes from the network: a decoder never reads past the body and never trusts a count
// before checking the body's size against it.
#ifndef PS_INTERNAL_ORDER_PROTOCOL_H_
#define PS_INTERNAL_ORDER_PROTOCOL_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ps/status.h"

namespace ps {

// The app id of the order plugin and its clients; reserved (no user plugin may take it).
constexpr int kOrderAppId = -8;

enum OrderCommand : int {
  // worker -> plugin, at the start of each epoch: OrderBegin. Answered at once.
  kOrderBegin = 1,
  // worker -> plugin: OrderPairs, `count` pair differences of the worker's current epoch.
  // Answered at once (the client does not wait for the answer before going on).
  kOrderPairs = 2,
  // plugin -> worker: OrderNext, the worker's order for the next epoch, sent as soon as
  // it is known.
  kOrderNext = 3,
  // worker -> plugin, empty body: this worker begins no more epochs; nobody waits for
  // it any more. Answered at once.
  kOrderFinish = 4,
};

// kOrderBegin: [int64 epoch][int32 num_examples][int32 dim][uint64 seed][int32 order...]
struct OrderBegin {
  int64_t epoch = 0;
  int32_t num_examples = 0;
  int32_t dim = 0;  // of the pair differences (after projection)
  uint64_t seed = 0;
  std::vector<int> order;  // num_examples entries: the worker's order this epoch
};

// kOrderPairs: [int64 epoch][int32 first_pair][int32 count][float diffs...], count * dim
// floats: pair first_pair + j is diffs[j * dim .. (j + 1) * dim).
struct OrderPairs {
  int64_t epoch = 0;
  int32_t first_pair = 0;
  int32_t count = 0;
  std::vector<float> diffs;
};

// kOrderNext: [int64 epoch][int32 num_examples][int32 order...]; `epoch` is the epoch the
// order is for.
struct OrderNext {
  int64_t epoch = 0;
  std::vector<int> order;
};

namespace order_wire {

template <typename T>
void Put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <typename T>
T Get(const std::string& in, size_t* at) {
  T v;
  std::memcpy(&v, in.data() + *at, sizeof(T));
  *at += sizeof(T);
  return v;
}

inline Status BadSize(const char* what, size_t got, const std::string& want) {
  return Status::InvalidArgument(std::string(what) + " body of " + std::to_string(got) +
                                 " bytes, expected " + want);
}

}  // namespace order_wire

inline std::string EncodeOrderBegin(const OrderBegin& b) {
  std::string out;
  out.reserve(24 + 4 * b.order.size());
  order_wire::Put(&out, b.epoch);
  order_wire::Put(&out, b.num_examples);
  order_wire::Put(&out, b.dim);
  order_wire::Put(&out, b.seed);
  out.append(reinterpret_cast<const char*>(b.order.data()), 4 * b.order.size());
  return out;
}

inline Status DecodeOrderBegin(const std::string& body, OrderBegin* b) {
  if (body.size() < 24) return order_wire::BadSize("kOrderBegin", body.size(), ">= 24");
  size_t at = 0;
  b->epoch = order_wire::Get<int64_t>(body, &at);
  b->num_examples = order_wire::Get<int32_t>(body, &at);
  b->dim = order_wire::Get<int32_t>(body, &at);
  b->seed = order_wire::Get<uint64_t>(body, &at);
  if (b->num_examples < 0 || body.size() != 24 + 4 * static_cast<size_t>(b->num_examples)) {
    return order_wire::BadSize(
        "kOrderBegin", body.size(),
        "24 + 4 * num_examples (num_examples = " + std::to_string(b->num_examples) + ")");
  }
  b->order.resize(b->num_examples);
  // memcpy from or to the null data() of an empty vector is undefined, even for 0 bytes.
  if (!b->order.empty()) std::memcpy(b->order.data(), body.data() + at, 4 * b->order.size());
  return Status::OK();
}

// diffs: count * dim floats.
inline std::string EncodeOrderPairs(int64_t epoch, int first_pair, int count, const float* diffs,
                                    size_t len) {
  std::string out;
  out.reserve(16 + 4 * len);
  order_wire::Put(&out, epoch);
  order_wire::Put(&out, static_cast<int32_t>(first_pair));
  order_wire::Put(&out, static_cast<int32_t>(count));
  out.append(reinterpret_cast<const char*>(diffs), 4 * len);
  return out;
}

// `dim`: the floats per pair the receiver expects.
inline Status DecodeOrderPairs(const std::string& body, int dim, OrderPairs* p) {
  if (body.size() < 16) return order_wire::BadSize("kOrderPairs", body.size(), ">= 16");
  size_t at = 0;
  p->epoch = order_wire::Get<int64_t>(body, &at);
  p->first_pair = order_wire::Get<int32_t>(body, &at);
  p->count = order_wire::Get<int32_t>(body, &at);
  // Without multiplying count by dim: both come from the network and could overflow.
  const size_t per_pair = 4 * static_cast<size_t>(dim < 1 ? 1 : dim);
  if (dim < 1 || p->count < 1 || (body.size() - 16) % per_pair != 0 ||
      (body.size() - 16) / per_pair != static_cast<size_t>(p->count)) {
    return order_wire::BadSize(
        "kOrderPairs", body.size(),
        "16 + 4 * count * dim with count >= 1 (count = " + std::to_string(p->count) +
            ", dim = " + std::to_string(dim) + ")");
  }
  p->diffs.resize(static_cast<size_t>(p->count) * dim);
  std::memcpy(p->diffs.data(), body.data() + at, 4 * p->diffs.size());
  return Status::OK();
}

inline std::string EncodeOrderNext(int64_t epoch, const std::vector<int>& order) {
  std::string out;
  out.reserve(12 + 4 * order.size());
  order_wire::Put(&out, epoch);
  order_wire::Put(&out, static_cast<int32_t>(order.size()));
  out.append(reinterpret_cast<const char*>(order.data()), 4 * order.size());
  return out;
}

inline Status DecodeOrderNext(const std::string& body, OrderNext* n) {
  if (body.size() < 12) return order_wire::BadSize("kOrderNext", body.size(), ">= 12");
  size_t at = 0;
  n->epoch = order_wire::Get<int64_t>(body, &at);
  const int32_t count = order_wire::Get<int32_t>(body, &at);
  if (count < 0 || body.size() != 12 + 4 * static_cast<size_t>(count)) {
    return order_wire::BadSize(
        "kOrderNext", body.size(),
        "12 + 4 * num_examples (num_examples = " + std::to_string(count) + ")");
  }
  n->order.resize(count);
  if (!n->order.empty()) std::memcpy(n->order.data(), body.data() + at, 4 * n->order.size());
  return Status::OK();
}

// Whether `order` is a permutation of 0..n-1.
inline bool IsPermutation(const std::vector<int>& order, int n) {
  if (n < 0 || order.size() != static_cast<size_t>(n)) return false;
  std::vector<char> seen(n, 0);
  for (int e : order) {
    if (e < 0 || e >= n || seen[e]) return false;
    seen[e] = 1;
  }
  return true;
}

}  // namespace ps

#endif  // PS_INTERNAL_ORDER_PROTOCOL_H_
