// SArray<V>: a shared, zero-copy array.
//
// Copying an SArray shares the underlying buffer (like std::shared_ptr); use CopyFrom
// for a deep copy. The buffer is freed when the last SArray referring to it goes away,
// which is what lets HerdPS hand a user's values to the network without copying them
// and hand received bytes to the user without copying them either.
//
// Thread safety: like std::shared_ptr: distinct SArray objects sharing one buffer may
// be used from different threads; the bytes themselves are not synchronised.
#ifndef PS_SARRAY_H_
#define PS_SARRAY_H_

#include <algorithm>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <sstream>
#include <type_traits>
#include <vector>

#include "ps/status.h"

namespace ps {

template <typename V>
class SArray {
 public:
  static_assert(std::is_trivially_copyable<V>::value || std::is_void<V>::value,
                "SArray holds trivially copyable values only (they travel as raw bytes)");

  SArray() = default;
  ~SArray() = default;

  // n copies of val.
  explicit SArray(size_t size, V val = V()) { resize(size, val); }

  // Deep copy of a vector.
  explicit SArray(const std::vector<V>& vec) { CopyFrom(vec.data(), vec.size()); }
  SArray(std::initializer_list<V> list) { CopyFrom(list.begin(), list.size()); }
  // ps-lite's forms: from a list of another element type, converted element by element.
  template <typename W, typename = std::enable_if_t<!std::is_same<W, V>::value>>
  SArray(const std::initializer_list<W>& list) {
    resize(list.size());
    std::copy(list.begin(), list.end(), begin());
  }
  template <typename W>
  SArray& operator=(const std::initializer_list<W>& list) {
    resize(list.size());
    std::copy(list.begin(), list.end(), begin());
    return *this;
  }

  // Takes ownership of data: `deleter` is called on it when the last reference goes.
  SArray(V* data, size_t size, std::function<void(V*)> deleter) { reset(data, size, deleter); }

  // ps-lite's form: wraps `data` without a copy. deletable: the SArray owns it and
  // frees it with delete[] when the last reference goes; false (the default): the
  // caller keeps ownership and must keep it alive while any SArray refers to it (for a
  // Z* request: until the request finishes); ptr() then owns nothing (its use_count()
  // is 0). A template so that only a bool selects it (a deleter never converts to it).
  template <typename B, typename = std::enable_if_t<std::is_same<B, bool>::value>>
  SArray(V* data, size_t size, B deletable) {
    if (deletable) {
      reset(data, size, [](V* p) { delete[] p; });
    } else {
      // A pointer with no owner (aliasing an empty shared_ptr): nothing to free, so no
      // control block either, which saves an allocation per view of an app's array.
      size_ = size;
      capacity_ = size;
      ptr_ = std::shared_ptr<V>(std::shared_ptr<V>(), data);
    }
  }
  SArray(V* data, size_t size) : SArray(data, size, false) {}

  // Reinterprets another SArray's bytes as V (shares, no copy). The byte size must be
  // a multiple of sizeof(V); otherwise ps::Error is thrown.
  template <typename W>
  explicit SArray(const SArray<W>& arr) {
    *this = arr;
  }
  template <typename W>
  SArray& operator=(const SArray<W>& arr) {
    size_t bytes = arr.size() * sizeof(W);
    if (bytes % sizeof(V) != 0) {
      throw Error("SArray: cannot view " + std::to_string(bytes) + " bytes as elements of " +
                  std::to_string(sizeof(V)) + " bytes");
    }
    size_ = bytes / sizeof(V);
    capacity_ = arr.capacity() * sizeof(W) / sizeof(V);
    ptr_ = std::shared_ptr<V>(arr.ptr(), reinterpret_cast<V*>(arr.data()));
    return *this;
  }

  SArray(const SArray&) = default;
  SArray(SArray&&) noexcept = default;
  SArray& operator=(const SArray&) = default;
  SArray& operator=(SArray&&) noexcept = default;

  // Deep copies.
  void CopyFrom(const V* data, size_t size) {
    if (size > capacity_) {
      // A fresh buffer, not zero-filled first: every element is copied over. `data`
      // is read before the old buffer is let go, in case it points into it.
      V* fresh = new V[size];
      std::memcpy(fresh, data, size * sizeof(V));
      reset(fresh, size, [](V* p) { delete[] p; });
      return;
    }
    size_ = size;
    if (size) std::memmove(this->data(), data, size * sizeof(V));
  }
  void CopyFrom(const SArray<V>& other) {
    if (this != &other) CopyFrom(other.data(), other.size());
  }
  void CopyFrom(const std::vector<V>& vec) { CopyFrom(vec.data(), vec.size()); }

  // Replaces the buffer with `data`, freed by `deleter` when no longer referenced.
  void reset(V* data, size_t size, std::function<void(V*)> deleter) {
    size_ = size;
    capacity_ = size;
    ptr_.reset(data, deleter);
  }

  // Grows or shrinks. Growth beyond capacity reallocates (and copies the old elements);
  // other SArrays sharing the old buffer keep it.
  void resize(size_t size, V val = V()) {
    size_t old = size_;
    if (size > capacity_) reserve(std::max(size, capacity_ + capacity_ / 2));
    size_ = size;
    if (size > old) std::fill(data() + old, data() + size, val);
  }

  void reserve(size_t size) {
    if (capacity_ >= size) return;
    V* fresh = new V[size];
    if (size_) std::memcpy(fresh, data(), size_ * sizeof(V));
    reset(fresh, size_, [](V* p) { delete[] p; });
    capacity_ = size;
  }

  void clear() {
    size_ = 0;
    capacity_ = 0;
    ptr_.reset();
  }

  void push_back(const V& val) {
    if (size_ == capacity_) reserve(size_ * 2 + 5);
    data()[size_++] = val;
  }

  void append(const SArray<V>& arr) {
    if (arr.empty()) return;
    size_t old = size_;
    resize(size_ + arr.size());
    std::memcpy(data() + old, arr.data(), arr.size() * sizeof(V));
  }

  // The elements [begin, end) as a new SArray sharing this buffer (no copy).
  SArray<V> segment(size_t begin, size_t end) const {
    if (begin > end || end > size_) {
      throw Error("SArray::segment: [" + std::to_string(begin) + ", " + std::to_string(end) +
                  ") is outside an array of " + std::to_string(size_));
    }
    SArray<V> ret;
    ret.ptr_ = std::shared_ptr<V>(ptr_, data() + begin);
    ret.size_ = end - begin;
    ret.capacity_ = end - begin;
    return ret;
  }

  V* data() const { return ptr_.get(); }
  V* begin() { return data(); }
  const V* begin() const { return data(); }
  V* end() { return data() + size_; }
  const V* end() const { return data() + size_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  V& back() { return data()[size_ - 1]; }
  const V& back() const { return data()[size_ - 1]; }
  V& front() { return data()[0]; }
  const V& front() const { return data()[0]; }
  V& operator[](size_t i) { return data()[i]; }
  const V& operator[](size_t i) const { return data()[i]; }
  const std::shared_ptr<V>& ptr() const { return ptr_; }

 private:
  size_t size_ = 0;
  size_t capacity_ = 0;
  std::shared_ptr<V> ptr_;
};

// ps-lite's short form: "[n]: " and the values (the first and last m, with "..." between,
// when there are 2m or more), each followed by a space.
template <typename V>
std::string DebugStr(const V* data, int n, int m = 5) {
  std::ostringstream os;
  os << "[" << n << "]: ";
  if (n < 2 * m) {
    for (int i = 0; i < n; ++i) os << data[i] << " ";
  } else {
    for (int i = 0; i < m; ++i) os << data[i] << " ";
    os << "... ";
    for (int i = n - m; i < n; ++i) os << data[i] << " ";
  }
  return os.str();
}

// Prints DebugStr, as ps-lite does.
template <typename V>
std::ostream& operator<<(std::ostream& os, const SArray<V>& arr) {
  return os << DebugStr(arr.data(), static_cast<int>(arr.size()));
}

}  // namespace ps

#endif  // PS_SARRAY_H_
