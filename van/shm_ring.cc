#include "shm_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "ps/internal/page_prefault.h"

namespace ps {
namespace {

constexpr uint64_t kPageBytes = 4096;
constexpr uint64_t kMinRingBytes = uint64_t{1} << 20;

std::string Errno(const char* call) { return std::string(call) + ": " + std::strerror(errno); }

}  // namespace

std::string RandomShmToken() {
  std::random_device rd;
  std::string token(kShmTokenBytes, '\0');
  for (size_t i = 0; i < token.size(); i += 4) {
    uint32_t r = rd();
    std::memcpy(&token[i], &r, std::min<size_t>(4, token.size() - i));
  }
  return token;
}

uint64_t RandomShmRingId() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(rd()) << 32) | rd();
  return id;
}

Status ShmRing::Create(uint64_t bytes, std::unique_ptr<ShmRing>* out,
                       std::chrono::steady_clock::duration stale_after) {
  bytes = shm::AlignUp(std::max(bytes, kMinRingBytes), kPageBytes);
  int fd = memfd_create(shm::kSegmentName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Status::Unavailable(Errno("memfd_create"));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    Status s = Status::Unavailable(Errno("ftruncate"));
    close(fd);
    return s;
  }
  // Sealed: a receiver that checks the seals knows the segment can never shrink under
  // its mapping (which would turn its reads into SIGBUS).
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    Status s = Status::Unavailable(Errno("fcntl(F_ADD_SEALS)"));
    close(fd);
    return s;
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    Status s = Status::Unavailable(Errno("mmap"));
    close(fd);
    return s;
  }
  std::unique_ptr<ShmRing> ring(new ShmRing());
  ring->base_ = static_cast<char*>(base);
  ring->bytes_ = bytes;
  ring->fd_ = fd;
  ring->id_ = RandomShmRingId();
  ring->token_ = RandomShmToken();
  ring->stale_after_ = stale_after;
  auto* header = reinterpret_cast<shm::SegmentHeader*>(ring->base_);
  header->magic = shm::kSegmentMagic;
  header->version = shm::kSegmentVersion;
  header->bytes = bytes;
  header->ring = ring->id_;
  std::memcpy(header->token, ring->token_.data(), kShmTokenBytes);
  ring->free_[shm::kSegmentHeaderBytes] = bytes - shm::kSegmentHeaderBytes;
  *out = std::move(ring);
  return Status::OK();
}

ShmRing::~ShmRing() {
  munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
}

int ShmRing::fd() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fd_;
}

void ShmRing::CloseFd() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

uint64_t ShmRing::max_payload() const {
  return bytes_ - shm::kSegmentHeaderBytes - shm::kBlockHeaderBytes;
}

shm::BlockHeader* ShmRing::HeaderAt(uint64_t offset) const {
  return reinterpret_cast<shm::BlockHeader*>(base_ + offset);
}

void ShmRing::FreeExtentLocked(uint64_t offset, uint64_t bytes) {
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + bytes == next->first) {
    bytes += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += bytes;
      return;
    }
  }
  free_.emplace(offset, bytes);
}

bool ShmRing::TakeExtentLocked(uint64_t bytes, uint64_t* offset) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < bytes) continue;
    *offset = it->first;
    uint64_t rest = it->second - bytes;
    free_.erase(it);
    if (rest) free_.emplace(*offset + bytes, rest);
    return true;
  }
  return false;
}

void ShmRing::ReclaimLocked(bool take_stale_in_flight) {
  const auto now = std::chrono::steady_clock::now();
  for (auto it = used_.begin(); it != used_.end();) {
    shm::BlockHeader* h = HeaderAt(it->first);
    uint32_t state = shm::LoadState(h);
    bool back = state == shm::kFree;
    // A block whose descriptor was lost stays in flight forever. Taking it back is a
    // compare-and-swap, so it is either ours again or the peer's (claimed just now);
    // a descriptor that arrives later finds the block free or with another serial.
    if (!back && take_stale_in_flight && state == shm::kInFlight &&
        now - it->second.published >= stale_after_) {
      back = shm::SwapState(h, shm::kInFlight, shm::kFree);
    }
    if (!back) {
      ++it;
      continue;
    }
    used_bytes_ -= it->second.bytes;
    FreeExtentLocked(it->first, it->second.bytes);
    it = used_.erase(it);
  }
}

void ShmRing::Prefault(uint64_t offset, uint64_t bytes) {
  if (offset >= bytes_) return;
  PrefaultPages(base_ + offset, std::min(bytes, bytes_ - offset));
}

uint64_t ShmRing::ReleaseFreePages() {
  std::lock_guard<std::mutex> lock(mu_);
  ReclaimLocked(false);
  uint64_t released = 0;
  for (const auto& [offset, bytes] : free_) {
    // Whole pages inside the extent only: a page it shares holds a live block's bytes.
    uint64_t begin = shm::AlignUp(offset, kPageBytes);
    uint64_t end = (offset + bytes) / kPageBytes * kPageBytes;
    if (end <= begin) continue;
    // A shared memfd mapping: MADV_REMOVE frees the pages themselves, not only this
    // process's view of them. A free extent's block headers need not survive: the
    // sender writes a header whole when it hands the extent out again.
    if (madvise(base_ + begin, end - begin, MADV_REMOVE) == 0) released += end - begin;
  }
  return released;
}

bool ShmRing::Allocate(uint64_t length, Block* block) {
  if (length == 0 || length > max_payload()) return false;
  const uint64_t need = shm::BlockBytes(length);
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t offset = 0;
  // What came back first, so that the lowest (already touched) extents are reused.
  ReclaimLocked(false);
  if (!TakeExtentLocked(need, &offset)) {
    ReclaimLocked(true);
    if (!TakeExtentLocked(need, &offset)) return false;
  }
  Used& used = used_[offset];
  used.bytes = need;
  used_bytes_ += need;
  shm::BlockHeader* h = HeaderAt(offset);
  // kWriting first: until Publish, no descriptor (stale or forged) can claim it.
  shm::StoreState(h, shm::kWriting);
  h->magic = shm::kBlockMagic;
  h->serial = next_serial_++;
  h->length = length;
  block->offset = offset;
  block->serial = h->serial;
  block->length = length;
  block->payload = base_ + offset + shm::kBlockHeaderBytes;
  return true;
}

void ShmRing::Publish(const Block& block) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = used_.find(block.offset);
  if (it != used_.end()) it->second.published = std::chrono::steady_clock::now();
  shm::StoreState(HeaderAt(block.offset), shm::kInFlight);
}

void ShmRing::Unpublish(const Block& block) {
  std::lock_guard<std::mutex> lock(mu_);
  if (used_.count(block.offset)) shm::StoreState(HeaderAt(block.offset), shm::kWriting);
}

void ShmRing::Cancel(const Block& block) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = used_.find(block.offset);
  if (it == used_.end()) return;
  // Published or not, no peer has its descriptor: it is ours to take back now.
  shm::StoreState(HeaderAt(block.offset), shm::kFree);
  used_bytes_ -= it->second.bytes;
  FreeExtentLocked(it->first, it->second.bytes);
  used_.erase(it);
}

bool ShmRing::HasInFlight() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& kv : used_) {
    uint32_t state = shm::LoadState(HeaderAt(kv.first));
    if (state == shm::kInFlight || state == shm::kWriting) return true;
  }
  return false;
}

uint64_t ShmRing::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_bytes_;
}

size_t ShmRing::used_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_.size();
}

}  // namespace ps
