#include "shm_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ps {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

}  // namespace

Status ShmMapping::Open(const ShmOfferFields& offer, std::shared_ptr<ShmMapping>* out) {
  // A peer's number: no ring is larger than PS_SHM_BYTES allows (2^36), and a larger
  // one would only cost this process address space.
  if (offer.bytes > shm::kMaxRingBytes) {
    return Status::InvalidArgument("the offered ring has " + std::to_string(offer.bytes) +
                                   " bytes, more than any node makes");
  }
  const std::string path = "/proc/" + std::to_string(offer.pid) + "/fd/" + std::to_string(offer.fd);
  // Only the segment a HerdPS van made: never open whatever else a peer names (a
  // FIFO would block, a device could act on open). The peer could swap its fd between
  // a check of the link and an open of it, so the file is first held without being
  // opened (O_PATH), checked through that handle, and only then opened for use.
  int held = open(path.c_str(), O_PATH | O_CLOEXEC);
  if (held < 0) return Status::Unavailable(Errno("cannot reach " + path));
  const std::string held_path = "/proc/self/fd/" + std::to_string(held);
  char target[256];
  ssize_t n = readlink(held_path.c_str(), target, sizeof(target) - 1);
  struct stat st;
  const std::string expected = std::string("/memfd:") + shm::kSegmentName;
  bool ring = n >= 0 && fstat(held, &st) == 0 && S_ISREG(st.st_mode);
  if (ring) {
    target[n] = '\0';
    ring = std::strncmp(target, expected.c_str(), expected.size()) == 0 &&
           (target[expected.size()] == '\0' || target[expected.size()] == ' ');
  }
  if (!ring) {
    close(held);
    return Status::InvalidArgument(path + " is not a HerdPS ring segment");
  }
  int fd = open(held_path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  close(held);
  if (fd < 0) return Status::Unavailable(Errno("cannot open " + path));
  Status s = OpenFd(fd, offer, out);
  close(fd);  // the mapping keeps the memory
  return s;
}

Status ShmMapping::OpenFd(int fd, const ShmOfferFields& offer, std::shared_ptr<ShmMapping>* out) {
  struct stat st;
  if (fstat(fd, &st) != 0) return Status::Unavailable(Errno("fstat of the ring"));
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("the ring is not a memory file");
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
    // A segment that may shrink could turn any read of it into SIGBUS.
    return Status::InvalidArgument("the ring is not sealed against shrinking");
  }
  if (offer.bytes < shm::kSegmentHeaderBytes + shm::kBlockHeaderBytes ||
      static_cast<uint64_t>(st.st_size) != offer.bytes) {
    return Status::InvalidArgument("the ring has " + std::to_string(st.st_size) +
                                   " bytes, the offer says " + std::to_string(offer.bytes));
  }
  void* base = mmap(nullptr, offer.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return Status::Unavailable(Errno("mmap of the ring"));
  std::shared_ptr<ShmMapping> mapping(new ShmMapping());
  mapping->base_ = static_cast<char*>(base);
  mapping->bytes_ = offer.bytes;
  mapping->ring_ = offer.ring;
  shm::SegmentHeader header;
  std::memcpy(&header, base, sizeof(header));
  if (header.magic != shm::kSegmentMagic || header.version != shm::kSegmentVersion ||
      header.bytes != offer.bytes || header.ring != offer.ring ||
      offer.token.size() != kShmTokenBytes ||
      std::memcmp(header.token, offer.token.data(), kShmTokenBytes) != 0) {
    return Status::InvalidArgument(
        "the ring's header does not match the offer (another process, or a stale offer)");
  }
  *out = std::move(mapping);
  return Status::OK();
}

ShmMapping::~ShmMapping() {
  if (base_) munmap(base_, bytes_);
}

Status ShmMapping::Claim(const ShmFrameRef& frame, uint64_t length, char** payload) {
  const uint64_t offset = frame.offset;
  // Overflow-free: offset is checked first, then length against what is left.
  if (offset < shm::kSegmentHeaderBytes || offset % shm::kBlockAlign != 0 ||
      offset > bytes_ - shm::kBlockHeaderBytes ||
      length > bytes_ - shm::kBlockHeaderBytes - offset || length == 0) {
    return Status::InvalidArgument("shared-memory descriptor of " + std::to_string(length) +
                                   " bytes at offset " + std::to_string(offset) +
                                   " is outside the ring of " + std::to_string(bytes_));
  }
  auto* h = reinterpret_cast<shm::BlockHeader*>(base_ + offset);
  // Claim first, then check: once held, an honest sender leaves the block alone, so
  // what is checked stays as checked.
  if (!shm::SwapState(h, shm::kInFlight, shm::kHeld)) {
    return Status::InvalidArgument("shared-memory block at offset " + std::to_string(offset) +
                                   " is not in flight (used twice, stale or forged)");
  }
  const uint32_t magic = __atomic_load_n(&h->magic, __ATOMIC_RELAXED);
  const uint64_t serial = __atomic_load_n(&h->serial, __ATOMIC_RELAXED);
  const uint64_t declared = __atomic_load_n(&h->length, __ATOMIC_RELAXED);
  if (magic != shm::kBlockMagic || serial != frame.serial || declared != length) {
    // Not the block the descriptor names: leave it to its own descriptor.
    shm::SwapState(h, shm::kHeld, shm::kInFlight);
    return Status::InvalidArgument("shared-memory block at offset " + std::to_string(offset) +
                                   " does not match its descriptor (serial " +
                                   std::to_string(frame.serial) + ", " + std::to_string(length) +
                                   " bytes)");
  }
  held_bytes_.fetch_add(length, std::memory_order_relaxed);
  *payload = base_ + offset + shm::kBlockHeaderBytes;
  return Status::OK();
}

void ShmMapping::Release(uint64_t offset, uint64_t length) {
  held_bytes_.fetch_sub(length, std::memory_order_relaxed);
  shm::StoreState(reinterpret_cast<shm::BlockHeader*>(base_ + offset), shm::kFree);
}

}  // namespace ps
