// Checkpoint files: a server's whole state (values, optimizer state, step counts, and
// the progress it reached) in one file, written atomically and checked on reading.
//
// Layout (host byte order: little-endian on x86-64 and ARM64):
//   "HERDPSCK"  u32 format version  u32 state width  u64 pushes taken  u64 key count
//   u32 length + bytes of the optimizer description (OptimizerOptions::ToString)
//   [format 3 on: u32 worker count W, u64[W] push requests taken from each worker rank]
//   per key: u64 key  u32 len  i64 steps  u32 chunk (1 + the chunk's index, 0: whole
//            value; format 2 on)  [if chunk: u64 offset  u64 whole length]
//            f32[len] values  f32[len * state width] state
//   u64 FNV-1a checksum of everything before it
//
// Writing goes to "<path>.tmp", is fsync'ed, renamed over <path>, and the directory is
// fsync'ed, so a crash leaves either the old file or the new one, never half of one.
#ifndef HERDPS_SERVER_CHECKPOINT_H_
#define HERDPS_SERVER_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ps/base.h"
#include "ps/status.h"

namespace ps {

struct CheckpointRecord {
  Key key = 0;
  int64_t steps = 0;
  std::vector<float> values;
  std::vector<float> state;  // state_width * values.size()
  // A chunk of a value stored in chunks (docs/pipeline.md): its index, the position of
  // its first value within the key, and the key's whole length; chunk -1: whole.
  int32_t chunk = -1;
  uint64_t chunk_offset = 0;
  uint64_t value_len = 0;
};

struct CheckpointData {
  // Written: 4. Read: 1 to 4 (2: records say whether they hold a chunk; 3: push counts
  // by worker; 4: the layout of 3, written by a HerdPS that places each chunk at its own
  // point of the ring, where 1 to 3 placed chunk c on the c-th rank after its key's).
  static constexpr uint32_t kFormatVersion = 4;
  uint32_t state_width = 0;
  uint64_t pushes_taken = 0;  // progress the server reached (push requests taken)
  std::string optimizer;  // OptimizerOptions::ToString() of the writer
  std::vector<CheckpointRecord> records;
  // Push requests taken from each worker, by rank (format 3 on; empty before): what a
  // worker compares with the pushes it saw acknowledged to tell what a restart lost.
  std::vector<uint64_t> pushes_by_worker;
  // The format version the file was written in (set by ReadCheckpoint).
  uint32_t format = kFormatVersion;
};

// Writes data to path atomically. Errors name the file and the failing step.
Status WriteCheckpoint(const std::string& path, const CheckpointData& data);

// Reads and verifies a checkpoint. A missing file is NotFound; a truncated, corrupt
// or foreign file, or one of an unknown format version, is DataLoss naming the file
// and what is wrong; `data` is then left unchanged.
Status ReadCheckpoint(const std::string& path, CheckpointData* data);

// Whether `data`, read from `path`, holds its chunks where a job of this HerdPS places
// them: a file of format 3 or below with chunks, loaded under the ring placement
// (ring_placement), is InvalidArgument naming the file (its chunks belong to other
// servers now); anything else is OK.
Status CheckChunkPlacement(const std::string& path, const CheckpointData& data,
                           bool ring_placement);

}  // namespace ps

#endif  // HERDPS_SERVER_CHECKPOINT_H_
