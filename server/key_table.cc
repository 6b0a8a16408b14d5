#include "key_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <utility>

namespace ps {
namespace {

// Segments this big or bigger are mapped, so that freeing one returns its pages at
// once; malloc serves smaller ones.
constexpr size_t kMapBytes = size_t{64} << 10;
constexpr size_t kPageBytes = 4096;
constexpr size_t kSpareAfter = 64;

// Scratch records: the entry being inserted or carried by a rebuild, the one a random
// walk is moving, and room to swap it with a victim.
enum Scratch { kCarry = 0, kMoving = 1, kSwap = 2, kScratchRecords = 3 };

// A random walk gives up after this many moves (then the segment grows); walks are
// rare, since a full pair of buckets first tries to move one of its keys directly.
constexpr int kMaxMoves = 256;

}  // namespace

KeyTable::KeyTable(size_t record_bytes, Limits limits)
    : limits_(limits),
      record_bytes_(record_bytes),
      bucket_bytes_(kTagBytes + kBucketSlots * record_bytes),
      scratch_(new uint8_t[kScratchRecords * record_bytes]) {
  dir_.push_back(NewSegment(1, 0));
}

KeyTable::~KeyTable() {
  while (!segments_.empty()) FreeSegment(segments_.back());
  if (spare_) munmap(spare_, spare_bytes_);
}

uint8_t* KeyTable::AllocateBytes(size_t* bytes) {
  if (*bytes < kMapBytes) {
    *bytes = (*bytes + 63) & ~size_t{63};
    void* p = std::aligned_alloc(64, *bytes);
    if (!p) throw std::bad_alloc();
    return static_cast<uint8_t*>(p);
  }
  *bytes = (*bytes + kPageBytes - 1) & ~(kPageBytes - 1);
  void* p;
  if (spare_) {
    // The spare's pages are already there: resized, they save the page faults of a
    // fresh mapping, a good part of a resize's cost otherwise.
    p = mremap(spare_, spare_bytes_, *bytes, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) munmap(spare_, spare_bytes_);
    spare_ = nullptr;
    spare_bytes_ = 0;
    if (p != MAP_FAILED) return static_cast<uint8_t*>(p);
  }
  p = mmap(nullptr, *bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return static_cast<uint8_t*>(p);
}

void KeyTable::FreeBytes(uint8_t* p, size_t bytes) {
  if (bytes < kMapBytes) {
    std::free(p);
    return;
  }
  // Kept for the next segment (segments are resized one after another): one at most,
  // and only in a table of kSpareAfter segments or more, so that it adds at most a few
  // percent to the table's memory.
  if (spare_) munmap(spare_, spare_bytes_);
  spare_ = nullptr;
  spare_bytes_ = 0;
  if (segments_.size() < kSpareAfter) {
    munmap(p, bytes);
    return;
  }
  spare_ = p;
  spare_bytes_ = bytes;
}

uint32_t KeyTable::BucketsFor(size_t keys) {
  // keys / (0.8 * 8) buckets, rounded up: 80% full.
  size_t buckets = (keys * 10 + 63) / 64;
  return static_cast<uint32_t>(buckets ? buckets : 1);
}

KeyTable::Segment* KeyTable::NewSegment(uint32_t buckets, uint32_t depth) {
  auto s = std::make_unique<Segment>();
  s->mem_bytes = size_t{buckets} * bucket_bytes_;
  s->mem = AllocateBytes(&s->mem_bytes);
  s->buckets = buckets;
  s->depth = depth;
  // Only the tags need setting: a record is written when its tag is placed.
  for (uint32_t b = 0; b < buckets; ++b) std::memset(TagsOf(*s, b), 0xff, kTagBytes);
  s->index = static_cast<uint32_t>(segments_.size());
  segments_.push_back(s.get());
  return s.release();
}

void KeyTable::FreeSegment(Segment* s) {
  Segment* last = segments_.back();
  segments_[s->index] = last;
  last->index = s->index;
  segments_.pop_back();
  FreeBytes(s->mem, s->mem_bytes);
  delete s;
}

size_t KeyTable::slots() const {
  size_t n = 0;
  for (const Segment* s : segments_) n += size_t{s->buckets} * kBucketSlots;
  return n;
}

size_t KeyTable::bytes() const {
  size_t n = dir_.capacity() * sizeof(Segment*) + segments_.capacity() * sizeof(Segment*);
  for (const Segment* s : segments_) n += s->mem_bytes + sizeof(Segment);
  n += spare_bytes_ + fill_counts_.capacity() + kScratchRecords * record_bytes_;
  n += crowded_.size() * (record_bytes_ + 48);  // a node and its record
  return n + (aside_ ? record_bytes_ : 0);
}

bool KeyTable::Place(Segment* s, uint64_t* tag, uint8_t* record, uint8_t* counts) {
  // The slot to fill in bucket b (*free: how many are free).
  auto free_slot = [&](uint32_t b, uint32_t* free) {
    if (counts) {
      *free = kBucketSlots - counts[b];
      return static_cast<uint32_t>(counts[b]);
    }
    uint32_t mask = Matches(*s, b, kEmptyTag);
    *free = CountSlots(mask);
    return mask ? static_cast<uint32_t>(__builtin_ctz(mask)) : kBucketSlots;
  };
  auto put = [&](uint32_t b, uint32_t i, uint64_t t) {
    TagsOf(*s, b)[i] = t;
    CopyRecord(RecordOf(*s, b, i), record);
    if (counts) ++counts[b];
  };
  uint32_t first = FirstHome(*tag, s->buckets), second = SecondHome(*tag, s->buckets);
  uint32_t free1, free2;
  uint32_t slot1 = free_slot(first, &free1), slot2 = free_slot(second, &free2);
  if (free1 | free2) {
    // The emptier bucket: keeps both choices open for later keys, so walks stay rare.
    if (free1 >= free2) {
      put(first, slot1, *tag);
    } else {
      put(second, slot2, *tag);
    }
    return true;
  }
  if (!counts) {
    // Both full: move one of their 16 entries to its other bucket if that has room.
    // The 16 other buckets are asked for together, one memory round trip where a walk
    // would take one per step.
    uint32_t other[2 * kBucketSlots];
    for (uint32_t j = 0; j < 2 * kBucketSlots; ++j) {
      uint32_t b = j < kBucketSlots ? first : second;
      uint64_t t = TagsOf(*s, b)[j % kBucketSlots];
      uint32_t one = FirstHome(t, s->buckets);
      other[j] = one == b ? SecondHome(t, s->buckets) : one;
      PrefetchLine(TagsOf(*s, other[j]));
    }
    for (uint32_t j = 0; j < 2 * kBucketSlots; ++j) {
      if (other[j] == first || other[j] == second) continue;
      uint32_t free = Matches(*s, other[j], kEmptyTag);
      if (!free) continue;
      uint32_t b = j < kBucketSlots ? first : second, i = j % kBucketSlots;
      uint32_t to = static_cast<uint32_t>(__builtin_ctz(free));
      TagsOf(*s, other[j])[to] = TagsOf(*s, b)[i];
      CopyRecord(RecordOf(*s, other[j], to), RecordOf(*s, b, i));
      put(b, i, *tag);
      ++stats_.direct_moves;
      return true;
    }
  }
  // Put the entry in place of a random victim of one of the buckets, and the victim
  // into its other bucket, and so on.
  uint8_t* swap = scratch_.get() + kSwap * record_bytes_;
  uint64_t moving = *tag;
  auto random = [this] {
    walk_state_ ^= walk_state_ >> 12;
    walk_state_ ^= walk_state_ << 25;
    walk_state_ ^= walk_state_ >> 27;
    return walk_state_ * 0x2545f4914f6cdd1dULL;
  };
  ++stats_.walks;
  uint32_t b = random() >> 63 ? first : second;
  for (int move = 0; move < kMaxMoves; ++move) {
    uint32_t victim = static_cast<uint32_t>(random() >> 61);
    uint8_t* at = RecordOf(*s, b, victim);
    std::swap(moving, TagsOf(*s, b)[victim]);
    CopyRecord(swap, at);
    CopyRecord(at, record);
    CopyRecord(record, swap);
    uint32_t one = FirstHome(moving, s->buckets);
    uint32_t next = b == one ? SecondHome(moving, s->buckets) : one;
    uint32_t free;
    uint32_t slot = free_slot(next, &free);
    if (free) {
      put(next, slot, moving);
      return true;
    }
    b = next;
  }
  ++stats_.walk_failures;
  *tag = moving;
  return false;
}

bool KeyTable::Fill(const Segment& from, int bit, uint64_t half, const uint64_t* carry_tag,
                    const uint8_t* carry_record, Segment* to) {
  uint8_t* moving = scratch_.get() + kMoving * record_bytes_;
  // `to` is empty and only gains entries: its buckets fill from slot 0 without holes,
  // so placing goes by counts and reads no tags.
  fill_counts_.assign(to->buckets, 0);
  uint8_t* counts = fill_counts_.data();
  auto put = [&](uint64_t tag, const uint8_t* record) {
    if (bit >= 0 && ((tag >> bit) & 1) != half) return true;
    ++to->size;
    uint32_t first = FirstHome(tag, to->buckets), second = SecondHome(tag, to->buckets);
    uint32_t b = counts[first] <= counts[second] ? first : second;
    if (counts[b] < kBucketSlots) {  // the emptier bucket, as Place would choose
      uint32_t i = counts[b]++;
      TagsOf(*to, b)[i] = tag;
      CopyRecord(RecordOf(*to, b, i), record);
      return true;
    }
    CopyRecord(moving, record);
    return Place(to, &tag, moving, counts);
  };
  if (carry_tag && !put(*carry_tag, carry_record)) return false;
  for (uint32_t b = 0; b < from.buckets; ++b) {
    Ahead(from, b);
    const uint64_t* tags = TagsOf(from, b);
    for (uint32_t i = 0; i < kBucketSlots; ++i) {
      if (tags[i] != kEmptyTag && !put(tags[i], RecordOf(from, b, i))) return false;
    }
  }
  return true;
}

void KeyTable::Redirect(uint64_t tag, uint32_t depth, Segment* lower, Segment* upper) {
  size_t span = size_t{1} << (depth_ - depth);
  size_t first = DirIndex(tag) & ~(span - 1);
  for (size_t i = 0; i < span; ++i) dir_[first + i] = i < span / 2 ? lower : upper;
}

uint8_t* KeyTable::FindCrowded(uint64_t tag) const {
  auto it = crowded_.find(tag);
  return it == crowded_.end() ? nullptr : it->second.get();
}

void KeyTable::SetCrowded(uint64_t tag, const uint8_t* record) {
  std::unique_ptr<uint8_t[]> copy(new uint8_t[record_bytes_]);
  std::memcpy(copy.get(), record, record_bytes_);
  crowded_[tag] = std::move(copy);
  ++stats_.crowded;
}

bool KeyTable::Rebuild(Segment* s, uint64_t tag, uint32_t buckets, const uint64_t* carry_tag,
                       const uint8_t* carry_record) {
  // A fresh segment at 80% rarely leaves an entry without a slot; if it does, the next
  // try is 1/8 bigger.
  while (buckets <= limits_.max_segment_buckets) {
    Segment* to = NewSegment(buckets, s->depth);
    if (Fill(*s, -1, 0, carry_tag, carry_record, to)) {
      ++stats_.resizes;
      Redirect(tag, s->depth, to, to);
      FreeSegment(s);
      return true;
    }
    FreeSegment(to);
    buckets += buckets / 8 + 1;
  }
  if (s->depth >= limits_.max_depth) return false;
  // An entry's half: its tag's bit just below the segment's depth.
  const int bit = 63 - static_cast<int>(s->depth);
  size_t upper = carry_tag ? (*carry_tag >> bit) & 1 : 0;
  for (uint32_t b = 0; b < s->buckets; ++b) {
    Ahead(*s, b);
    const uint64_t* tags = TagsOf(*s, b);
    for (uint32_t i = 0; i < kBucketSlots; ++i) {
      if (tags[i] != kEmptyTag) upper += (tags[i] >> bit) & 1;
    }
  }
  size_t total = s->size + (carry_tag ? 1 : 0);
  Segment* half[2] = {nullptr, nullptr};
  for (uint64_t side = 0; side < 2; ++side) {
    for (uint32_t half_buckets = BucketsFor(side ? upper : total - upper);;
         half_buckets += half_buckets / 8 + 1) {
      if (half_buckets > 2 * limits_.max_segment_buckets) {
        if (half[0]) FreeSegment(half[0]);
        return false;
      }
      half[side] = NewSegment(half_buckets, s->depth + 1);
      if (Fill(*s, bit, side, carry_tag, carry_record, half[side])) break;
      FreeSegment(half[side]);
      half[side] = nullptr;
    }
  }
  ++stats_.splits;
  if (s->depth == depth_) {
    // Double the directory: entry i becomes entries 2i and 2i+1.
    std::vector<Segment*> doubled(dir_.size() * 2);
    for (size_t i = 0; i < dir_.size(); ++i) doubled[2 * i] = doubled[2 * i + 1] = dir_[i];
    dir_.swap(doubled);
    ++depth_;
  }
  Redirect(tag, s->depth, half[0], half[1]);
  FreeSegment(s);
  return true;
}

uint8_t* KeyTable::Insert(Key key) {
  uint64_t tag = Tag(key);
  if (tag == kEmptyTag) {
    if (!aside_) aside_.reset(new uint8_t[record_bytes_]);
    std::memset(aside_.get(), 0, record_bytes_);
    aside_present_ = true;
    ++size_;
    return aside_.get();
  }
  Segment* s = dir_[DirIndex(tag)];
  // More than 93% full after this insert: grow to 80% (at least a bucket more), or split
  // when that is over the segment limit.
  if ((size_t{s->size} + 1) * 100 > size_t{s->buckets} * kBucketSlots * 93) {
    Rebuild(s, tag, std::max(s->buckets + 1, BucketsFor(size_t{s->size} + 1)), nullptr, nullptr);
    s = dir_[DirIndex(tag)];
  }
  uint8_t* carry = scratch_.get() + kCarry * record_bytes_;
  std::memset(carry, 0, record_bytes_);
  uint64_t placing = tag;
  ++size_;
  if (Place(s, &placing, carry, nullptr)) {
    ++s->size;
  } else if (!Rebuild(s, tag, s->buckets + s->buckets / 8 + 1, &placing, carry)) {
    // The walk left an entry without a slot (`placing`, maybe another key's): a bigger
    // segment takes it with the others, or, past the limits, it is kept aside.
    SetCrowded(placing, carry);
  }
  return Find(key);
}

bool KeyTable::Erase(Key key) {
  uint64_t tag = Tag(key);
  if (tag == kEmptyTag) {
    if (!aside_present_) return false;
    aside_present_ = false;
    aside_.reset();
    --size_;
    return true;
  }
  Segment* s = dir_[DirIndex(tag)];
  uint32_t b = FirstHome(tag, s->buckets);
  uint32_t mask = Matches(*s, b, tag);
  if (!mask) {
    b = SecondHome(tag, s->buckets);
    mask = Matches(*s, b, tag);
    if (!mask) {
      if (crowded_.erase(tag) == 0) return false;
      --size_;
      return true;
    }
  }
  TagsOf(*s, b)[__builtin_ctz(mask)] = kEmptyTag;
  --s->size;
  --size_;
  // Under 75% full: shrink to 80%, when that saves a bucket.
  if (size_t{s->size} * 4 < size_t{s->buckets} * kBucketSlots * 3) {
    uint32_t buckets = BucketsFor(s->size);
    if (buckets < s->buckets) Rebuild(s, tag, buckets, nullptr, nullptr);
  }
  return true;
}

}  // namespace ps
