// KeyTable: a shard's index from Key to a record of fixed size (set at construction),
// laid out so that memory per key stays close to the record's own size at any number
// of keys, with keys that can be removed.
//
// Layout. Slots come in buckets of 8: the bucket's 8 tags first (64 bytes, one cache
// line), then its 8 records. A slot's tag is its key's hash, a bijection of the key
// (SplitMix64's finaliser, salted), so it identifies the key and a resize needs no
// hashing; kEmptyTag (all ones) marks a free slot, and the one key whose tag it would
// be, kAsideKey, is kept in a record of its own beside the buckets. A key may sit in
// either of two buckets of its segment, picked by independent parts of its hash
// (bucketed cuckoo hashing), so a lookup reads two buckets, without branching on which
// of them holds the key. An insert takes a free slot of the emptier one; when both are full it
// moves one of their keys to that key's other bucket, or failing that walks (moves a
// random key, which moves another...). Linear probing at these loads would read about
// 7 buckets to insert a key at 90% full.
//
// Growth. The buckets are split into segments, found through an extendible-hashing
// directory indexed by the hash's top bits. A segment is resized alone, into a new
// allocation: when an insert would make it more than 93% full it grows to 80%, and
// when an erase leaves it under 75% full it shrinks to 80%; one that would grow past
// kMaxSegmentBuckets splits into two halves at 80%. So a segment of more than a few
// buckets is 75% to 93% full (80% to 93% without erases; sizes round up to whole
// buckets), memory per key is at most 1/0.75 of a slot (tag and record) plus the
// directory, and a resize holds one segment's old and new copies at once, never the
// whole table twice. A key is moved about 7 times over the table's growth
// (1 / (1 - 0.8 / 0.93)), within one segment each time.
// Segments of 64 KiB or more are mapped from the kernel and unmapped when freed, so a
// resize never leaves freed memory to malloc; in a table of 64 segments or more the
// last one freed is kept for the next resize instead (its pages need no faulting in
// again), which adds one segment's memory to a table of at least 64.
//
// Erase empties the key's slot, which later inserts reuse, and may shrink the segment
// (above).
//
// Pointers returned by Find and Insert stay valid until the next Insert or Erase.
// Thread safety: none (owned by one shard thread).
#ifndef HERDPS_SERVER_KEY_TABLE_H_
#define HERDPS_SERVER_KEY_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_map>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <vector>

#include "ps/base.h"
#include "ps/internal/hash.h"

namespace ps {
namespace key_table_internal {

constexpr uint64_t kSalt = 0x3c6ef372fe94f82bULL;

// The key of a tag: Mix64 (SplitMix64's finaliser) undone step by step (x ^= x >> s is
// undone by xoring in x >> s, x >> 2s, ...; a multiplication by the odd constant's
// inverse mod 2^64), then the salt.
constexpr Key KeyOfTag(uint64_t tag) {
  tag ^= (tag >> 31) ^ (tag >> 62);
  tag *= 0x319642b2d24d8ec3ULL;  // 0x94d049bb133111eb^-1
  tag ^= (tag >> 27) ^ (tag >> 54);
  tag *= 0x96de1b173f119089ULL;  // 0xbf58476d1ce4e5b9^-1
  tag ^= (tag >> 30) ^ (tag >> 60);
  tag -= 0x9e3779b97f4a7c15ULL;
  return tag ^ kSalt;
}

}  // namespace key_table_internal

class KeyTable {
 public:
  static constexpr uint64_t kEmptyTag = ~uint64_t{0};
  static constexpr uint32_t kBucketSlots = 8;
  // 32 Ki slots: 768 KiB with 16-byte records.
  static constexpr uint32_t kMaxSegmentBuckets = 4096;

  // A key's tag, and back.
  static uint64_t Tag(Key key) { return Mix64(key ^ key_table_internal::kSalt); }
  static constexpr Key KeyOf(uint64_t tag) { return key_table_internal::KeyOfTag(tag); }
  // The key whose tag is kEmptyTag: stored aside.
  static constexpr Key kAsideKey = key_table_internal::KeyOfTag(~uint64_t{0});

  // record_bytes: the size of every record, a multiple of 4 and at least 4.
  // Bounds on growth (tests lower them to reach the crowded path with few keys).
  struct Limits {
    uint32_t max_segment_buckets = kMaxSegmentBuckets;  // a bigger segment splits
    uint32_t max_depth = 24;  // directory bits: 2^24 entries (128 MiB) at most
  };
  explicit KeyTable(size_t record_bytes) : KeyTable(record_bytes, Limits()) {}
  KeyTable(size_t record_bytes, Limits limits);
  ~KeyTable();
  KeyTable(const KeyTable&) = delete;
  KeyTable& operator=(const KeyTable&) = delete;

  // The record of `key`, or null if absent.
  uint8_t* Find(Key key) const {
    uint64_t tag = Tag(key);
    if (tag == kEmptyTag) return aside_present_ ? aside_.get() : nullptr;
    const Segment& s = *dir_[DirIndex(tag)];
    // Both buckets are read, and compared without a branch on what they hold: a branch
    // on data still coming from memory would be mispredicted about every other time and
    // each misprediction would wait for the miss, so lookups of successive keys could
    // not overlap their misses. (Callers that know their next keys Prefetch them.)
    uint32_t first = FirstHome(tag, s.buckets), second = SecondHome(tag, s.buckets);
    uint32_t in_first = Matches(s, first, tag), in_second = Matches(s, second, tag);
    if ((in_first | in_second) == 0) return crowded_.empty() ? nullptr : FindCrowded(tag);
    // All ones when the key is in the second bucket: a select by arithmetic, where the
    // compiler would make a branch of `in_first ? first : second`.
    uint32_t second_mask = 0u - static_cast<uint32_t>(in_first == 0);
    uint32_t b = (first & ~second_mask) | (second & second_mask);
    uint32_t mask = in_first | (in_second & second_mask);
    return RecordOf(s, b, static_cast<uint32_t>(__builtin_ctz(mask)));
  }

  // Inserts `key`, which must be absent, and returns its record, zeroed. May move
  // other records or resize one segment, so earlier pointers are invalid afterwards.
  uint8_t* Insert(Key key);

  // Removes `key`; false if it was absent. May resize one segment.
  bool Erase(Key key);

  // Asks the caches for both buckets of `key`, for a Find a little later: a caller
  // that knows its next keys prefetches some ahead, so that their misses overlap.
  void Prefetch(Key key) const {
    uint64_t tag = Tag(key);
    if (tag == kEmptyTag) return;
    const Segment& s = *dir_[DirIndex(tag)];
    LoadBucket(s, FirstHome(tag, s.buckets));
    LoadBucket(s, SecondHome(tag, s.buckets));
  }

  size_t size() const { return size_; }
  // Slots in all segments (the capacity), and bytes held: segments (the spare one
  // included), directory, aside and scratch records.
  size_t slots() const;
  size_t bytes() const;
  size_t segments() const { return segments_.size(); }
  size_t record_bytes() const { return record_bytes_; }

  // How inserts found room, and resizes (for tests and tuning).
  struct Stats {
    uint64_t direct_moves = 0;   // a key of a full pair moved to its other bucket
    uint64_t walks = 0;          // random walks started
    uint64_t walk_failures = 0;  // walks that gave up: the segment grew instead
    uint64_t resizes = 0;        // segments rebuilt at another size
    uint64_t splits = 0;         // segments split in two
    uint64_t crowded = 0;        // entries kept aside: no segment size could seat them
  };
  const Stats& stats() const { return stats_; }

  // Calls f(key, record) for every key, in no particular order. f must not insert or
  // erase.
  template <typename F>
  void ForEach(F f) const {
    for (const Segment* s : segments_) {
      for (uint32_t b = 0; b < s->buckets; ++b) {
        const uint64_t* tags = TagsOf(*s, b);
        for (uint32_t i = 0; i < kBucketSlots; ++i) {
          if (tags[i] != kEmptyTag)
            f(KeyOf(tags[i]), static_cast<const uint8_t*>(RecordOf(*s, b, i)));
        }
      }
    }
    if (aside_present_) f(kAsideKey, static_cast<const uint8_t*>(aside_.get()));
    for (const auto& kv : crowded_) f(KeyOf(kv.first), static_cast<const uint8_t*>(kv.second.get()));
  }

 private:
  static constexpr size_t kTagBytes = sizeof(uint64_t) * kBucketSlots;

  struct Segment {
    uint8_t* mem = nullptr;
    size_t mem_bytes = 0;  // allocated (rounded up)
    uint32_t buckets = 0;
    uint32_t size = 0;   // keys held
    uint32_t depth = 0;  // local depth: the segment owns the tags with these top bits
    uint32_t index = 0;  // position in segments_
  };

  // The top depth_ bits (0 bits: index 0; the first shift keeps the second below 64).
  size_t DirIndex(uint64_t tag) const { return static_cast<size_t>((tag >> 1) >> (63 - depth_)); }
  // x scaled to [0, n) (Lemire's fastrange): no power of two needed.
  static uint32_t Scale(uint32_t x, uint32_t n) {
    return static_cast<uint32_t>((uint64_t{x} * n) >> 32);
  }
  // The two buckets: from the tag's low 32 bits, and from the high half of its product
  // with an odd constant (which depends on every bit; the top ones, those the directory
  // uses, only add a constant within a segment).
  static uint32_t FirstHome(uint64_t tag, uint32_t buckets) {
    return Scale(static_cast<uint32_t>(tag), buckets);
  }
  static uint32_t SecondHome(uint64_t tag, uint32_t buckets) {
    return Scale(static_cast<uint32_t>((tag * 0x9e3779b97f4a7c15ULL) >> 32), buckets);
  }
  uint64_t* TagsOf(const Segment& s, uint32_t b) const {
    return reinterpret_cast<uint64_t*>(s.mem + size_t{b} * bucket_bytes_);
  }
  uint8_t* RecordOf(const Segment& s, uint32_t b, uint32_t i) const {
    return s.mem + size_t{b} * bucket_bytes_ + kTagBytes + i * record_bytes_;
  }
  // Bit i set when slot i of bucket b holds `tag` (kEmptyTag: the free slots).
  uint32_t Matches(const Segment& s, uint32_t b, uint64_t tag) const {
    const uint64_t* tags = TagsOf(s, b);
#if defined(__SSE2__)
    // Two tags per compare: 64-bit equality is both 32-bit halves equal.
    const __m128i want = _mm_set1_epi64x(static_cast<long long>(tag));
    uint32_t mask = 0;
    for (uint32_t i = 0; i < kBucketSlots; i += 2) {
      __m128i eq =
          _mm_cmpeq_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(tags + i)), want);
      eq = _mm_and_si128(eq, _mm_shuffle_epi32(eq, _MM_SHUFFLE(2, 3, 0, 1)));
      mask |= static_cast<uint32_t>(_mm_movemask_pd(_mm_castsi128_pd(eq))) << i;
    }
    return mask;
#else
    uint32_t mask = 0;
    for (uint32_t i = 0; i < kBucketSlots; ++i) mask |= static_cast<uint32_t>(tags[i] == tag) << i;
    return mask;
#endif
  }
  static uint32_t CountSlots(uint32_t mask) {  // popcount of 8 bits, without a libgcc call
    mask = mask - ((mask >> 1) & 0x55);
    mask = (mask & 0x33) + ((mask >> 2) & 0x33);
    return (mask + (mask >> 4)) & 0x0f;
  }
  void LoadBucket(const Segment& s, uint32_t b) const {
    const uint8_t* bucket = s.mem + size_t{b} * bucket_bytes_;
    for (size_t at = 0; at < bucket_bytes_; at += 64) PrefetchLine(bucket + at);
  }
  // While reading a segment's buckets in order: loads the bucket 8 ahead (the hardware
  // prefetcher alone leaves the scan of a cold segment waiting on memory).
  void Ahead(const Segment& s, uint32_t b) const {
    if (b + 8 < s.buckets) LoadBucket(s, b + 8);
  }
  // GCC 12 drops __builtin_prefetch of an address loaded through a member (as all of
  // these are), so the instruction is written out.
  static void PrefetchLine(const void* p) {
#if defined(__x86_64__)
    asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
    __builtin_prefetch(p);
#endif
  }
  // Records are a few 4-byte words: copied word by word, without a call to memcpy.
  void CopyRecord(uint8_t* to, const uint8_t* from) const {
    for (size_t i = 0; i < record_bytes_; i += 4) std::memcpy(to + i, from + i, 4);
  }
  // Buckets for `keys` keys at 80% load.
  static uint32_t BucketsFor(size_t keys);

  // Segment memory: *bytes rounded up to what is held.
  uint8_t* AllocateBytes(size_t* bytes);
  void FreeBytes(uint8_t* p, size_t bytes);
  Segment* NewSegment(uint32_t buckets, uint32_t depth);
  void FreeSegment(Segment* s);
  // Stores *tag (absent from s) with *record. True when done; false when a random walk
  // found no free slot: then a tag (perhaps another) and its record are left in *tag
  // and *record, not in s. `record` must not point into s. `counts`, for a segment
  // being filled (whose buckets have no holes yet): the tags in each bucket, kept up
  // to date, so that no bucket needs reading; null otherwise.
  bool Place(Segment* s, uint64_t* tag, uint8_t* record, uint8_t* counts);
  // Copies the tags of `from` (with bit `bit` equal to `half`, unless bit < 0) and the
  // carried entry (if carry_tag is not null and it matches) into the empty segment
  // `to`. False if one did not fit.
  bool Fill(const Segment& from, int bit, uint64_t half, const uint64_t* carry_tag,
            const uint8_t* carry_record, Segment* to);
  // Replaces s, the segment of `tag`, by one of at least `buckets` buckets, or by two
  // halves of one more bit of depth when that is over kMaxSegmentBuckets, holding its
  // entries and the carried one if any. False, with s and the directory untouched and
  // the carried entry not stored, when neither fits within the limits (keys chosen so
  // that many share both buckets at every size, as only a crafted key set does).
  bool Rebuild(Segment* s, uint64_t tag, uint32_t buckets, const uint64_t* carry_tag,
               const uint8_t* carry_record);
  // Entries no segment could seat, by tag: looked up after a miss in the buckets.
  uint8_t* FindCrowded(uint64_t tag) const;
  void SetCrowded(uint64_t tag, const uint8_t* record);
  // Points the directory entries of the segment of `tag` (an aligned run of
  // 2^(depth_ - depth) entries) at `lower` and `upper` (the same for a resize).
  void Redirect(uint64_t tag, uint32_t depth, Segment* lower, Segment* upper);

  // Rebuild's limits: a crafted set of keys that collide in both buckets at every
  // segment size would otherwise make a segment, or the directory, grow without end.
  const Limits limits_;
  const size_t record_bytes_;
  const size_t bucket_bytes_;
  std::vector<Segment*> dir_;       // 2^depth_ entries; a segment spans 2^(depth_ - its depth)
  std::vector<Segment*> segments_;  // each segment once, owned
  uint32_t depth_ = 0;              // global depth
  size_t size_ = 0;
  std::unique_ptr<uint8_t[]> aside_;  // the record of kAsideKey
  // Entries no segment could seat within limits_, by tag.
  std::unordered_map<uint64_t, std::unique_ptr<uint8_t[]>> crowded_;
  bool aside_present_ = false;
  std::unique_ptr<uint8_t[]> scratch_;  // three records, for moving entries around
  std::vector<uint8_t> fill_counts_;    // Fill's per-bucket counts
  uint8_t* spare_ = nullptr;            // the last freed mapped segment, reused by the next
  size_t spare_bytes_ = 0;
  uint64_t walk_state_ = 0x2545f4914f6cdd1dULL;  // random victims of Place
  Stats stats_;
};

}  // namespace ps

#endif  // HERDPS_SERVER_KEY_TABLE_H_
