// Checkpoint files (server/checkpoint.h): bit-exact round trips, atomic replacement, and
// every kind of damaged file refused as DataLoss without touching the caller's data.
#include "checkpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <random>
#include <string>
#include <vector>

// Records the largest single allocation while armed, to prove a hostile record count
// does not turn into a huge reservation.
static std::atomic<bool> g_track_allocs{false};
static std::atomic<size_t> g_largest_alloc{0};

// malloc/free pairs are consistent here; GCC cannot see that across the replacement.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(size_t n) {
  if (g_track_allocs.load(std::memory_order_relaxed) && n > g_largest_alloc.load()) {
    g_largest_alloc.store(n);
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace ps {
namespace {

namespace fs = std::filesystem;
using Code = Status::Code;

constexpr size_t kCountOffset = 8 + 4 + 4 + 8;  // magic, version, state width, pushes taken
constexpr size_t kVersionOffset = 8;

// Written from the format description, not from checkpoint.cc.
uint64_t Fnv1a64(const std::string& bytes, size_t n) {
  uint64_t h = 14695981039346656037ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(bytes[i]);
    h *= 1099511628211ULL;
  }
  return h;
}

// Recomputes the trailing checksum so that only the edited field is wrong.
void Reseal(std::string* file) {
  uint64_t h = Fnv1a64(*file, file->size() - 8);
  std::memcpy(&(*file)[file->size() - 8], &h, 8);
}

// Random bit patterns (every float class) with the awkward values planted up front.
std::vector<float> AwkwardFloats(size_t n, std::mt19937* rng) {
  // -0, denormals, +-inf, quiet and signalling NaNs with payloads, FLT_MAX, -1e11.
  const uint32_t special[] = {0x80000000u, 0x00000001u, 0x807fffffu, 0x7f800000u, 0xff800000u,
                              0x7fc12345u, 0xffa00001u, 0x7f7fffffu, 0xd1ba43b7u};
  std::vector<uint32_t> bits(n);
  for (size_t i = 0; i < n; ++i) bits[i] = i < std::size(special) ? special[i] : (*rng)();
  std::vector<float> v(n);
  if (n) std::memcpy(v.data(), bits.data(), n * sizeof(float));
  return v;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

void ExpectIdentical(const CheckpointData& want, const CheckpointData& got) {
  EXPECT_EQ(got.state_width, want.state_width);
  EXPECT_EQ(got.pushes_taken, want.pushes_taken);
  EXPECT_EQ(got.optimizer, want.optimizer);
  EXPECT_EQ(got.pushes_by_worker, want.pushes_by_worker);
  ASSERT_EQ(got.records.size(), want.records.size());
  for (size_t i = 0; i < want.records.size(); ++i) {
    SCOPED_TRACE("record " + std::to_string(i));
    EXPECT_EQ(got.records[i].key, want.records[i].key);
    EXPECT_EQ(got.records[i].steps, want.records[i].steps);
    EXPECT_EQ(got.records[i].chunk, want.records[i].chunk);
    EXPECT_EQ(got.records[i].chunk_offset, want.records[i].chunk_offset);
    EXPECT_EQ(got.records[i].value_len, want.records[i].value_len);
    EXPECT_TRUE(SameBits(got.records[i].values, want.records[i].values));
    EXPECT_TRUE(SameBits(got.records[i].state, want.records[i].state));
  }
}

CheckpointData RandomData(uint32_t state_width, uint32_t seed) {
  std::mt19937 rng(seed);
  CheckpointData d;
  d.state_width = state_width;
  d.pushes_taken = 0x0123456789abcdefULL + seed;
  d.optimizer = "adam lr=0.001 beta1=0.9 beta2=0.999 eps=1e-08";
  d.pushes_by_worker = {seed, 0, ~uint64_t{0}};
  const size_t lengths[] = {1, 0, 17, 9, 1000};
  const Key keys[] = {0, 7, 1ULL << 40, 12345, kMaxKey};
  for (size_t i = 0; i < std::size(lengths); ++i) {
    CheckpointRecord r;
    r.key = keys[i];
    r.steps = i % 2 ? -static_cast<int64_t>(i) : (int64_t{1} << 50) + static_cast<int64_t>(i);
    r.values = AwkwardFloats(lengths[i], &rng);
    r.state = AwkwardFloats(lengths[i] * state_width, &rng);
    if (i == 2) {  // chunk 3 of a key stored in chunks of 17 values
      r.chunk = 3;
      r.chunk_offset = 51;
      r.value_len = 100;
    }
    d.records.push_back(std::move(r));
  }
  return d;
}

// Two short records: small enough to damage every byte in turn.
CheckpointData SmallData() {
  return {/*state_width=*/1,
          /*pushes_taken=*/42,
          "sgd",
          {{3, 5, {1.5f, -2.0f}, {0.25f, 0.5f}},
           {9, 1, {7.0f}, {-1.0f}},
           {9, 2, {8.0f}, {-2.0f}, /*chunk=*/1, /*chunk_offset=*/1, /*value_len=*/2}},
          /*pushes_by_worker=*/{40, 2}};
}

// What the caller's struct holds before a failing read; it must survive the failure.
CheckpointData Sentinel() {
  return {/*state_width=*/2, /*pushes_taken=*/777, "sentinel", {{0xdeadbeef, 11, {123.0f}, {4.0f, 5.0f}}},
          /*pushes_by_worker=*/{3}};
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "herdps_checkpoint_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string PathOf(const std::string& name) const { return dir_ + "/" + name; }

  static std::string Slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  static void Spill(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }

  // Writes SmallData() as `name`, applies `edit` to its bytes, and fixes the checksum, so
  // the edit is the only thing wrong with the file. Returns the path.
  template <typename Edit>
  std::string WriteEdited(const std::string& name, Edit edit) {
    std::string path = PathOf(name);
    EXPECT_TRUE(WriteCheckpoint(path, SmallData()).ok());
    std::string bytes = Slurp(path);
    edit(&bytes);
    Reseal(&bytes);
    Spill(path, bytes);
    return path;
  }

  // Reads path into a sentinel-filled struct; expects DataLoss naming the file, with
  // `expected_text` in the message, and the sentinel untouched.
  void ExpectRejected(const std::string& path, const std::string& expected_text = "") {
    CheckpointData data = Sentinel();
    Status s = ReadCheckpoint(path, &data);
    EXPECT_EQ(s.code(), Code::kDataLoss) << s;
    EXPECT_NE(s.message().find(path), std::string::npos) << s;
    EXPECT_NE(s.message().find(expected_text), std::string::npos) << s;
    ExpectIdentical(Sentinel(), data);
  }

  std::string dir_;
};

TEST_F(CheckpointTest, RoundTripIsBitIdenticalForEveryStateWidth) {
  for (uint32_t width : {0u, 1u, 3u}) {
    SCOPED_TRACE("state width " + std::to_string(width));
    CheckpointData written = RandomData(width, 100 + width);
    std::string path = PathOf("w" + std::to_string(width));
    ASSERT_TRUE(WriteCheckpoint(path, written).ok());
    CheckpointData read = Sentinel();
    Status s = ReadCheckpoint(path, &read);
    ASSERT_TRUE(s.ok()) << s;
    ExpectIdentical(written, read);
  }
}

TEST_F(CheckpointTest, SuccessfulWriteLeavesNoTmpFileAndReplacesTheOldCheckpoint) {
  std::string path = PathOf("ckpt");
  ASSERT_TRUE(WriteCheckpoint(path, RandomData(3, 1)).ok());
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  CheckpointData newer = SmallData();
  ASSERT_TRUE(WriteCheckpoint(path, newer).ok());
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  CheckpointData read;
  ASSERT_TRUE(ReadCheckpoint(path, &read).ok());
  ExpectIdentical(newer, read);
}

TEST_F(CheckpointTest, MissingFileIsNotFound) {
  CheckpointData data = Sentinel();
  EXPECT_EQ(ReadCheckpoint(PathOf("never-written"), &data).code(), Code::kNotFound);
  ExpectIdentical(Sentinel(), data);
}

TEST_F(CheckpointTest, WriteIntoMissingDirectoryFailsNamingThePath) {
  std::string path = PathOf("no/such/dir/ckpt");
  Status s = WriteCheckpoint(path, SmallData());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path), std::string::npos) << s;
}

TEST_F(CheckpointTest, EveryTruncationIsDataLossNamingTheFileAndLeavesDataUnchanged) {
  std::string good = PathOf("good"), cut = PathOf("cut");
  ASSERT_TRUE(WriteCheckpoint(good, SmallData()).ok());
  std::string bytes = Slurp(good);
  ASSERT_GT(bytes.size(), 40u);
  for (size_t len = 0; len < bytes.size(); ++len) {
    SCOPED_TRACE("prefix of " + std::to_string(len) + " bytes");
    Spill(cut, bytes.substr(0, len));
    ExpectRejected(cut);
  }
}

TEST_F(CheckpointTest, FlippingAnySingleByteIsDataLoss) {
  std::string good = PathOf("good"), bad = PathOf("bad");
  ASSERT_TRUE(WriteCheckpoint(good, SmallData()).ok());
  std::string bytes = Slurp(good);
  for (size_t i = 0; i < bytes.size(); ++i) {
    SCOPED_TRACE("byte " + std::to_string(i));
    std::string damaged = bytes;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
    Spill(bad, damaged);
    ExpectRejected(bad);
  }
}

TEST_F(CheckpointTest, BadMagicIsRejectedAsNotACheckpoint) {
  std::string path = WriteEdited("foreign", [](std::string* b) { b->replace(0, 8, "HERDPSXX"); });
  ExpectRejected(path, "not a HerdPS checkpoint");
}

TEST_F(CheckpointTest, FutureFormatVersionWithValidChecksumIsRejected) {
  std::string path = WriteEdited("future", [](std::string* b) {
    uint32_t version = CheckpointData::kFormatVersion + 1;
    std::memcpy(&(*b)[kVersionOffset], &version, 4);
  });
  ExpectRejected(path, "format version");
}

TEST_F(CheckpointTest, ChunksOfAFormatThreeFileAreRefusedUnderTheRingPlacementOnly) {
  // Format 3 placed chunk c on the c-th rank after its key's; format 4 at its own point
  // of the ring. The layout is the same: only the version tells them apart.
  std::string old = WriteEdited("format3", [](std::string* b) {
    uint32_t version = 3;
    std::memcpy(&(*b)[kVersionOffset], &version, 4);
  });
  CheckpointData data;
  ASSERT_TRUE(ReadCheckpoint(old, &data).ok());
  EXPECT_EQ(data.format, 3u);
  Status s = CheckChunkPlacement(old, data, /*ring_placement=*/true);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(old), std::string::npos) << s;
  EXPECT_NE(s.message().find("key 9"), std::string::npos) << s;  // SmallData's chunk
  EXPECT_TRUE(CheckChunkPlacement(old, data, /*ring_placement=*/false).ok());
  // Without chunks a format-3 file is placed as before.
  data.records.pop_back();
  EXPECT_TRUE(CheckChunkPlacement(old, data, /*ring_placement=*/true).ok());
  // A file written now is of the current format and places its chunks as this build.
  std::string now = PathOf("format4");
  ASSERT_TRUE(WriteCheckpoint(now, SmallData()).ok());
  ASSERT_TRUE(ReadCheckpoint(now, &data).ok());
  EXPECT_EQ(data.format, CheckpointData::kFormatVersion);
  EXPECT_TRUE(CheckChunkPlacement(now, data, /*ring_placement=*/true).ok());
}

TEST_F(CheckpointTest, HugeRecordCountIsTruncatedWithoutHugeAllocation) {
  std::string path = WriteEdited("count", [](std::string* b) {
    uint64_t count = uint64_t{1} << 60;
    std::memcpy(&(*b)[kCountOffset], &count, 8);
  });
  g_largest_alloc = 0;
  g_track_allocs = true;
  ExpectRejected(path, "truncated");
  g_track_allocs = false;
  EXPECT_LT(g_largest_alloc.load(), size_t{1} << 20);  // the whole file is ~100 bytes
}

TEST_F(CheckpointTest, TrailingBytesAfterLastRecordAreDataLoss) {
  std::string path = WriteEdited("trailing", [](std::string* b) {
    b->insert(b->size() - 8, std::string(4, '\0'));  // one float more than the records hold
  });
  ExpectRejected(path);
}

TEST_F(CheckpointTest, WriteRefusesStateOfTheWrongSizeAndKeepsTheOldFile) {
  std::string path = PathOf("ckpt");
  CheckpointData old = SmallData();
  ASSERT_TRUE(WriteCheckpoint(path, old).ok());
  for (size_t state_size : {0u, 1u, 3u}) {  // SmallData's first record needs 2
    SCOPED_TRACE("state size " + std::to_string(state_size));
    CheckpointData bad = SmallData();
    bad.records[0].state.assign(state_size, 1.0f);
    EXPECT_FALSE(WriteCheckpoint(path, bad).ok());
    EXPECT_FALSE(fs::exists(path + ".tmp"));
    CheckpointData read;
    ASSERT_TRUE(ReadCheckpoint(path, &read).ok());
    ExpectIdentical(old, read);
  }
}

}  // namespace
}  // namespace ps

namespace ps {
namespace {

// Format 1 (before chunks): the same records without the chunk field.
TEST_F(CheckpointTest, FormatOneFilesStillRead) {
  CheckpointData written = RandomData(1, 7);
  written.pushes_by_worker.clear();  // format 3 on
  for (auto& r : written.records) r.chunk = -1, r.chunk_offset = r.value_len = 0;
  // Build the format-1 bytes by hand: header, records without the u32 chunk field.
  std::string buf("HERDPSCK", 8);
  auto put = [&buf](const auto& v) { buf.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(uint32_t{1});
  put(written.state_width);
  put(written.pushes_taken);
  put(static_cast<uint64_t>(written.records.size()));
  put(static_cast<uint32_t>(written.optimizer.size()));
  buf += written.optimizer;
  for (const auto& r : written.records) {
    put(r.key);
    put(static_cast<uint32_t>(r.values.size()));
    put(r.steps);
    buf.append(reinterpret_cast<const char*>(r.values.data()), r.values.size() * 4);
    buf.append(reinterpret_cast<const char*>(r.state.data()), r.state.size() * 4);
  }
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : buf) h = (h ^ c) * 0x100000001b3ULL;
  put(h);
  std::string path = PathOf("v1");
  std::ofstream(path, std::ios::binary) << buf;
  CheckpointData read = Sentinel();
  Status s = ReadCheckpoint(path, &read);
  ASSERT_TRUE(s.ok()) << s;
  ExpectIdentical(written, read);
}

// Format 2 (before the push counts by worker): the same file without their count.
TEST_F(CheckpointTest, FormatTwoFilesStillRead) {
  CheckpointData written = RandomData(2, 9);
  written.pushes_by_worker.clear();
  std::string path = PathOf("v2");
  ASSERT_TRUE(WriteCheckpoint(path, written).ok());
  std::string bytes = Slurp(path);
  const size_t name_end = kCountOffset + 8 + 4 + written.optimizer.size();
  bytes.erase(name_end, 4);  // the u32 worker count (0)
  const uint32_t two = 2;
  std::memcpy(&bytes[kVersionOffset], &two, 4);
  Reseal(&bytes);
  Spill(path, bytes);
  CheckpointData read = Sentinel();
  Status s = ReadCheckpoint(path, &read);
  ASSERT_TRUE(s.ok()) << s;
  ExpectIdentical(written, read);
}

TEST_F(CheckpointTest, ChunkThatDoesNotFitItsKeyIsDataLoss) {
  CheckpointData bad = SmallData();
  bad.records[2].chunk_offset = 2;  // at the key's end: no room for its value
  std::string path = PathOf("badchunk");
  ASSERT_TRUE(WriteCheckpoint(path, bad).ok());
  CheckpointData read = Sentinel();
  Status s = ReadCheckpoint(path, &read);
  EXPECT_EQ(s.code(), Status::Code::kDataLoss) << s;
  EXPECT_NE(s.message().find("chunk"), std::string::npos) << s;
}

}  // namespace
}  // namespace ps
