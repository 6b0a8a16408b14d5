#include "checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace ps {
namespace {

constexpr char kMagic[8] = {'H', 'E', 'R', 'D', 'P', 'S', 'C', 'K'};

uint64_t Fnv1a(const char* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

template <typename T>
void Put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Reads from a bounded buffer; every read checks the bytes are there.
class Reader {
 public:
  Reader(const char* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  bool Get(T* v) {
    if (size_ - pos_ < sizeof(T)) return false;
    std::memcpy(v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool GetFloats(size_t n, std::vector<float>* v) {
    if (n > (size_ - pos_) / sizeof(float)) return false;
    v->resize(n);
    if (n) std::memcpy(v->data(), data_ + pos_, n * sizeof(float));
    pos_ += n * sizeof(float);
    return true;
  }
  bool GetString(size_t n, std::string* s) {
    if (n > size_ - pos_) return false;
    s->assign(data_ + pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == size_; }

 private:
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

Status IoError(const std::string& what, const std::string& path) {
  return Status::Unavailable(what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

Status WriteCheckpoint(const std::string& path, const CheckpointData& data) {
  std::string buf(kMagic, sizeof(kMagic));
  Put(&buf, CheckpointData::kFormatVersion);
  Put(&buf, data.state_width);
  Put(&buf, data.pushes_taken);
  Put(&buf, static_cast<uint64_t>(data.records.size()));
  Put(&buf, static_cast<uint32_t>(data.optimizer.size()));
  buf += data.optimizer;
  Put(&buf, static_cast<uint32_t>(data.pushes_by_worker.size()));
  for (uint64_t pushes : data.pushes_by_worker) Put(&buf, pushes);
  for (const CheckpointRecord& r : data.records) {
    if (r.state.size() != r.values.size() * data.state_width) {
      return Status::InvalidArgument("checkpoint record of key " + std::to_string(r.key) +
                              " has state of the wrong size");
    }
    Put(&buf, r.key);
    Put(&buf, static_cast<uint32_t>(r.values.size()));
    Put(&buf, r.steps);
    Put(&buf, static_cast<uint32_t>(r.chunk + 1));
    if (r.chunk >= 0) {
      Put(&buf, r.chunk_offset);
      Put(&buf, r.value_len);
    }
    buf.append(reinterpret_cast<const char*>(r.values.data()), r.values.size() * sizeof(float));
    buf.append(reinterpret_cast<const char*>(r.state.data()), r.state.size() * sizeof(float));
  }
  Put(&buf, Fnv1a(buf.data(), buf.size()));

  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot create", tmp);
  size_t written = 0;
  while (written < buf.size()) {
    ssize_t n = ::write(fd, buf.data() + written, buf.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = IoError("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    Status s = IoError("cannot fsync", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = IoError("cannot rename " + tmp + " to", path);
    ::unlink(tmp.c_str());
    return s;
  }
  // The rename is durable only once the directory entry is.
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  if (dir.empty()) dir = "/";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return IoError("checkpoint written but cannot open its directory", dir);
  int synced = ::fsync(dfd);
  ::close(dfd);
  if (synced != 0) return IoError("checkpoint written but cannot fsync its directory", dir);
  return Status::OK();
}

Status ReadCheckpoint(const std::string& path, CheckpointData* out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound("no checkpoint at " + path);
    return IoError("cannot read", path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot open", path);
  std::string buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto corrupt = [&path](const std::string& why) {
    return Status::DataLoss("checkpoint " + path + " is unusable: " + why);
  };
  if (buf.size() < sizeof(kMagic) + sizeof(uint64_t) ||
      std::memcmp(buf.data(), kMagic, sizeof(kMagic)) != 0) {
    return corrupt("not a HerdPS checkpoint (bad magic or too short)");
  }
  size_t body = buf.size() - sizeof(uint64_t);
  uint64_t stored;
  std::memcpy(&stored, buf.data() + body, sizeof(stored));
  if (stored != Fnv1a(buf.data(), body)) {
    return corrupt("checksum mismatch (truncated or corrupted)");
  }
  Reader r(buf.data() + sizeof(kMagic), body - sizeof(kMagic));
  CheckpointData data;
  uint32_t version = 0, name_len = 0;
  uint64_t count = 0;
  if (!r.Get(&version)) return corrupt("header is truncated");
  if (version < 1 || version > CheckpointData::kFormatVersion) {
    return corrupt("format version " + std::to_string(version) + " (this build reads " +
                   std::to_string(CheckpointData::kFormatVersion) + ")");
  }
  if (!r.Get(&data.state_width) || !r.Get(&data.pushes_taken) || !r.Get(&count) || !r.Get(&name_len) ||
      !r.GetString(name_len, &data.optimizer)) {
    return corrupt("header is truncated");
  }
  if (version >= 3) {
    uint32_t workers = 0;
    if (!r.Get(&workers)) return corrupt("header is truncated");
    // At most PS_NUM_WORKER's bound; a count past the bytes left is a corrupt file.
    if (workers > (1u << 20)) return corrupt("it names " + std::to_string(workers) + " workers");
    data.pushes_by_worker.resize(workers);
    for (uint64_t& pushes : data.pushes_by_worker) {
      if (!r.Get(&pushes)) return corrupt("the pushes by worker are truncated");
    }
  }
  for (uint64_t i = 0; i < count; ++i) {
    CheckpointRecord rec;
    uint32_t len = 0;
    uint32_t chunk = 0;
    bool ok = r.Get(&rec.key) && r.Get(&len) && r.Get(&rec.steps);
    if (ok && version >= 2) ok = r.Get(&chunk);
    if (ok && chunk > 0) ok = r.Get(&rec.chunk_offset) && r.Get(&rec.value_len);
    if (!ok || !r.GetFloats(len, &rec.values) ||
        !r.GetFloats(static_cast<size_t>(len) * data.state_width, &rec.state)) {
      return corrupt("record " + std::to_string(i) + " of " + std::to_string(count) +
                     " is truncated");
    }
    if (chunk > static_cast<uint32_t>(INT32_MAX)) {
      return corrupt("record " + std::to_string(i) + " names chunk " + std::to_string(chunk));
    }
    rec.chunk = static_cast<int32_t>(chunk) - 1;
    if (rec.chunk >= 0 && (rec.chunk_offset >= rec.value_len || len > rec.value_len - rec.chunk_offset)) {
      return corrupt("record " + std::to_string(i) + " is a chunk that does not fit its key");
    }
    data.records.push_back(std::move(rec));
  }
  if (!r.done()) return corrupt("bytes after the last record");
  data.format = version;
  *out = std::move(data);
  return Status::OK();
}

Status CheckChunkPlacement(const std::string& path, const CheckpointData& data,
                           bool ring_placement) {
  if (!ring_placement || data.format >= 4) return Status::OK();
  for (const CheckpointRecord& r : data.records) {
    if (r.chunk < 0) continue;
    return Status::InvalidArgument(
        "checkpoint " + path + " (format " + std::to_string(data.format) + ") holds chunks "
        "of values (key " + std::to_string(r.key) + " among them) where the HerdPS that "
        "wrote it placed them, chunk c on the c-th rank after its key's; this one places "
        "each chunk at its own point of the ring, so they belong to other servers now. "
        "Resume it with the HerdPS that wrote it, or start without it");
  }
  return Status::OK();
}

}  // namespace ps
