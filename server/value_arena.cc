#include "value_arena.h"

#include <cstring>

namespace ps {
namespace {
constexpr size_t kBlockFloats = size_t{1} << 20;  // 4 MiB
constexpr size_t kBigFloats = kBlockFloats / 4;   // over 1 MiB: an allocation of its own
}  // namespace

float* ValueArena::Allocate(size_t floats) {
  if (floats > kBigFloats) {
    std::unique_ptr<float[]> array(new float[floats]);
    float* p = array.get();
    big_.emplace(p, std::move(array));
    big_floats_ += floats;
    return p;
  }
  floats = Rounded(floats);
  auto it = free_.find(floats);
  if (it != free_.end()) {
    float* p = it->second;
    float* next;
    std::memcpy(&next, p, sizeof(next));
    if (next) {
      it->second = next;
    } else {
      free_.erase(it);
    }
    return p;
  }
  if (blocks_.empty() || block_used_ + floats > kBlockFloats) {
    blocks_.emplace_back(new float[kBlockFloats]);
    block_used_ = 0;
  }
  float* p = blocks_.back().get() + block_used_;
  block_used_ += floats;
  return p;
}

void ValueArena::Release(float* array, size_t floats) {
  if (floats > kBigFloats) {
    big_.erase(array);
    big_floats_ -= floats;
    return;
  }
  float*& head = free_[Rounded(floats)];
  std::memcpy(array, &head, sizeof(head));
  head = array;
}

size_t ValueArena::bytes() const {
  return sizeof(float) * (blocks_.size() * kBlockFloats + big_floats_);
}

}  // namespace ps
