// A checkpoint file as a restarting server loads it (OptimizerServer::LoadCheckpoint):
// ReadCheckpoint (server/checkpoint.h), OptimizerOptions::Parse of the optimizer it
// names, and ShardStore::Restore of every record into a store of that optimizer. The
// reader takes a path, so the input goes to a file first, in /dev/shm (memory) where
// there is one.
//
// Input: u8 mode, then the file. With bit 0 of mode set, the file's last 8 bytes are
// first replaced by the checksum of the bytes before them: nearly every mutation breaks
// the checksum, and a fuzzer that had to forge it each time would never reach the
// fields behind it. With it clear, the file is read as it is (checksum checks included).
//
// Properties: nothing crashes or reads outside the file; a file ReadCheckpoint accepts
// has records whose state and chunks fit the header; written back (WriteCheckpoint), it
// reads back the same, and a file of the current format is written back byte for byte; restoring it
// either fails with a Status or leaves a store that snapshots to the records restored.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint.h"
#include "fuzz_input.h"
#include "ps/optimizer.h"
#include "ps/value_init.h"
#include "shard_store.h"

namespace {

std::string g_input_path;
std::string g_output_path;

std::string ScratchDir() {
  if (::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/tmp";
}

void WriteFile(const std::string& path, const uint8_t* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "checkpoint fuzzer: cannot write %s\n", path.c_str());
    std::abort();  // the environment's fault, but better loud than a silent no-op
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool SameRecords(const ps::CheckpointData& a, const ps::CheckpointData& b) {
  if (a.state_width != b.state_width || a.pushes_taken != b.pushes_taken ||
      a.optimizer != b.optimizer || a.pushes_by_worker != b.pushes_by_worker ||
      a.records.size() != b.records.size()) {
    return false;
  }
  for (size_t i = 0; i < a.records.size(); ++i) {
    const ps::CheckpointRecord& x = a.records[i];
    const ps::CheckpointRecord& y = b.records[i];
    if (x.key != y.key || x.steps != y.steps || x.chunk != y.chunk ||
        x.values.size() != y.values.size() || x.state.size() != y.state.size() ||
        (x.chunk >= 0 && (x.chunk_offset != y.chunk_offset || x.value_len != y.value_len))) {
      return false;
    }
    // Bitwise: NaN payloads must survive too.
    if (!x.values.empty() &&
        std::memcmp(x.values.data(), y.values.data(), 4 * x.values.size()) != 0) {
      return false;
    }
    if (!x.state.empty() && std::memcmp(x.state.data(), y.state.data(), 4 * x.state.size()) != 0) {
      return false;
    }
  }
  return true;
}

// The file's checksum (server/checkpoint.h): FNV-1a over every byte before it.
uint64_t Fnv1a(const uint8_t* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= data[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

void Restore(const ps::CheckpointData& data) {
  ps::OptimizerOptions options;
  if (!ps::OptimizerOptions::Parse(data.optimizer, &options).ok()) return;
  // What a server writes into its checkpoints reads back as the same options.
  ps::OptimizerOptions again;
  FUZZ_EXPECT(ps::OptimizerOptions::Parse(options.ToString(), &again).ok());
  FUZZ_EXPECT(again.ToString() == options.ToString());
  std::unique_ptr<ps::Optimizer> optimizer = ps::Optimizer::Create(options);
  if (data.state_width != optimizer->StateWidth()) return;  // LoadCheckpoint refuses it
  ps::ShardStore store(optimizer.get(), ps::ValueInit());
  size_t restored = 0;
  for (const ps::CheckpointRecord& r : data.records) restored += store.Restore(r).ok();
  std::vector<ps::CheckpointRecord> snapshot;
  store.Snapshot(&snapshot);
  // A record restored over an earlier one of the same key replaces it.
  FUZZ_EXPECT(snapshot.size() <= restored);
  FUZZ_EXPECT(snapshot.size() == store.num_keys());
  for (const ps::CheckpointRecord& r : snapshot) {
    FUZZ_EXPECT(!r.values.empty());
    FUZZ_EXPECT(r.state.size() == r.values.size() * data.state_width);
  }
}

// Removes an input's files as soon as it is done: libFuzzer ends a run (its time limit,
// a crash) without exit handlers, so files kept for the whole run would stay behind in
// /dev/shm. This way a crash leaves one input's files at most.
struct ScratchFiles {
  ~ScratchFiles() {
    ::unlink(g_input_path.c_str());
    ::unlink(g_output_path.c_str());
  }
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  ps::fuzz::QuietLogs();
  const std::string dir = ScratchDir();
  const std::string pid = std::to_string(::getpid());
  g_input_path = dir + "/herdps-fuzz-checkpoint-" + pid + ".in";
  g_output_path = dir + "/herdps-fuzz-checkpoint-" + pid + ".out";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  if (input_size == 0) return 0;
  std::vector<uint8_t> file(input + 1, input + input_size);
  if ((input[0] & 1) && file.size() >= sizeof(uint64_t)) {
    const size_t body = file.size() - sizeof(uint64_t);
    const uint64_t sum = Fnv1a(file.data(), body);
    std::memcpy(file.data() + body, &sum, sizeof(sum));
  }
  const uint8_t* data = file.data();
  const size_t size = file.size();
  ScratchFiles remove_when_done;
  WriteFile(g_input_path, data, size);
  ps::CheckpointData read;
  ps::Status s = ps::ReadCheckpoint(g_input_path, &read);
  if (!s.ok()) {
    FUZZ_EXPECT(s.code() == ps::Status::Code::kDataLoss);
    return 0;
  }
  for (const ps::CheckpointRecord& r : read.records) {
    FUZZ_EXPECT(r.state.size() == r.values.size() * read.state_width);
    FUZZ_EXPECT(r.chunk >= -1);
    if (r.chunk >= 0) {
      FUZZ_EXPECT(r.chunk_offset < r.value_len);
      FUZZ_EXPECT(r.values.size() <= r.value_len - r.chunk_offset);
    }
  }

  FUZZ_EXPECT(ps::WriteCheckpoint(g_output_path, read).ok());
  ps::CheckpointData again;
  FUZZ_EXPECT(ps::ReadCheckpoint(g_output_path, &again).ok());
  FUZZ_EXPECT(SameRecords(read, again));
  uint32_t version = 0;
  std::memcpy(&version, data + 8, sizeof(version));  // after the 8-byte magic
  if (version == ps::CheckpointData::kFormatVersion) {
    const std::string written = ReadFile(g_output_path);
    FUZZ_EXPECT(written.size() == size && std::memcmp(written.data(), data, size) == 0);
  }

  Restore(read);
  return 0;
}
