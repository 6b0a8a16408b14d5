// ConsistentHashRing (ps/internal/consistent_hash_ring.h): which server owns a key.
#include "ps/internal/consistent_hash_ring.h"
#include "ps/internal/hash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>
#include <unordered_set>
#include <vector>

namespace ps {
namespace {

constexpr int kPoints = 128;

// The owner of every key in [0, n).
std::vector<int> Owners(const ConsistentHashRing& ring, Key n) {
  std::vector<int> owners(n);
  for (Key k = 0; k < n; ++k) owners[k] = ring.ServerOf(k);
  return owners;
}

TEST(ConsistentHashRing, RingsWithTheSameServersAgreeOnEveryKey) {
  ConsistentHashRing a(5, kPoints);
  ConsistentHashRing b(5, kPoints);
  ConsistentHashRing shuffled(std::vector<int>{3, 0, 4, 1, 2}, kPoints);
  std::mt19937_64 rng(7);
  for (Key k = 0; k < 100000; ++k) {
    Key key = (k % 2) ? k / 2 : rng();  // sequential and scattered keys
    int owner = a.ServerOf(key);
    ASSERT_EQ(b.ServerOf(key), owner) << key;
    ASSERT_EQ(shuffled.ServerOf(key), owner) << key;
  }
}

TEST(ConsistentHashRing, EveryKeyMapsToOneOfTheRingsServers) {
  const std::vector<int> ranks{3, 7, 11};
  ConsistentHashRing ring(ranks, kPoints);
  EXPECT_EQ(ring.servers(), ranks);
  EXPECT_EQ(ring.virtual_nodes(), kPoints);
  std::set<int> used;
  std::mt19937_64 rng(11);
  for (int i = 0; i < 100000; ++i) {
    int owner = ring.ServerOf(rng());
    ASSERT_TRUE(owner == 3 || owner == 7 || owner == 11) << owner;
    used.insert(owner);
  }
  for (Key edge : {Key{0}, Key{1}, kMaxKey, kMaxKey - 1}) {
    int owner = ring.ServerOf(edge);
    EXPECT_TRUE(owner == 3 || owner == 7 || owner == 11) << edge;
  }
  EXPECT_EQ(used.size(), ranks.size());
}

TEST(ConsistentHashRing, FourServersWith128PointsLoadNoServerOver125PercentOfTheMean) {
  const int kServers = 4;
  const Key kKeys = 200000;
  ConsistentHashRing ring(kServers, kPoints);
  std::vector<int> load(kServers, 0);
  for (Key k = 0; k < kKeys; ++k) ++load[ring.ServerOf(k)];
  double mean = static_cast<double>(kKeys) / kServers;
  double ratio = *std::max_element(load.begin(), load.end()) / mean;
  std::printf("[ ring ] 4 servers x 128 points, 200k keys: loads %d %d %d %d, max/mean = %.3f\n",
              load[0], load[1], load[2], load[3], ratio);
  RecordProperty("max_over_mean", std::to_string(ratio));
  EXPECT_LE(ratio, 1.25);
  for (int n : load) EXPECT_GT(n, 0);
}

TEST(ConsistentHashRing, RemovingAServerMovesOnlyThatServersKeys) {
  const Key kKeys = 200000;
  std::vector<int> before = Owners(ConsistentHashRing(5, kPoints), kKeys);
  std::vector<int> after = Owners(ConsistentHashRing(std::vector<int>{0, 1, 2, 4}, kPoints), kKeys);
  size_t moved = 0;
  for (Key k = 0; k < kKeys; ++k) {
    if (before[k] == 3) {
      ASSERT_NE(after[k], 3) << k;
      ++moved;
    } else {
      ASSERT_EQ(after[k], before[k]) << "key " << k << " moved though its server stayed";
    }
  }
  double fraction = static_cast<double>(moved) / kKeys;
  std::printf("[ ring ] removing 1 of 5 servers moved %.4f of the keys (ideal 0.2)\n", fraction);
  RecordProperty("moved_on_remove", std::to_string(fraction));
  EXPECT_GE(fraction, 0.12);
  EXPECT_LE(fraction, 0.28);
}

TEST(ConsistentHashRing, AddingAServerMovesAboutOneInNPlusOneKeysAllToTheNewServer) {
  const Key kKeys = 200000;
  std::vector<int> before = Owners(ConsistentHashRing(4, kPoints), kKeys);
  std::vector<int> after = Owners(ConsistentHashRing(5, kPoints), kKeys);
  size_t moved = 0;
  for (Key k = 0; k < kKeys; ++k) {
    if (after[k] != before[k]) {
      ASSERT_EQ(after[k], 4) << "key " << k << " moved to an old server";
      ++moved;
    }
  }
  double fraction = static_cast<double>(moved) / kKeys;
  std::printf("[ ring ] adding a 5th server moved %.4f of the keys (ideal 0.2)\n", fraction);
  RecordProperty("moved_on_add", std::to_string(fraction));
  EXPECT_GE(fraction, 0.12);
  EXPECT_LE(fraction, 0.28);
}

TEST(ConsistentHashRing, SingleServerOwnsEveryKey) {
  ConsistentHashRing ring(std::vector<int>{7}, 16);
  std::mt19937_64 rng(3);
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(ring.ServerOf(rng()), 7);
  EXPECT_EQ(ring.ServerOf(0), 7);
  EXPECT_EQ(ring.ServerOf(kMaxKey), 7);
}

TEST(ConsistentHashRing, FewerThanOnePointPerServerIsRaisedToOne) {
  ConsistentHashRing ring(2, 0);
  EXPECT_EQ(ring.virtual_nodes(), 1);
  EXPECT_FALSE(ring.empty());
  int owner = ring.ServerOf(12345);
  EXPECT_TRUE(owner == 0 || owner == 1);
}

TEST(ConsistentHashRing, NoServersMakesAnEmptyRing) {
  EXPECT_TRUE(ConsistentHashRing().empty());
  EXPECT_TRUE(ConsistentHashRing(0, kPoints).empty());
  EXPECT_TRUE(ConsistentHashRing(-3, kPoints).empty());
  EXPECT_TRUE(ConsistentHashRing(std::vector<int>{}, kPoints).empty());
  EXPECT_FALSE(ConsistentHashRing(1, kPoints).empty());
}

TEST(ConsistentHashRing, HashKeyGivesConsecutiveKeysDistinctWellSpreadHashes) {
  const int kKeys = 100000;
  std::unordered_set<uint64_t> hashes;
  hashes.reserve(kKeys);
  int top_bit_set = 0;
  for (Key k = 0; k < kKeys; ++k) {
    uint64_t h = ConsistentHashRing::HashKey(k);
    hashes.insert(h);
    top_bit_set += static_cast<int>(h >> 63);
  }
  EXPECT_EQ(hashes.size(), static_cast<size_t>(kKeys));
  // Consecutive keys must not stay in one region of the ring.
  EXPECT_GT(top_bit_set, kKeys * 45 / 100);
  EXPECT_LT(top_bit_set, kKeys * 55 / 100);
  EXPECT_EQ(ConsistentHashRing::HashKey(42), ConsistentHashRing::HashKey(42));
}

// The placement's contract, computed the plain way: server `rank`'s point v sits at
// Mix64(Mix64((rank << 32) ^ v) ^ salt), and a key belongs to the first point at or
// after HashKey(key), wrapping around. Nodes of a job compute it on their own, so it
// must never change.
class ReferenceRing {
 public:
  ReferenceRing(const std::vector<int>& ranks, int points) {
    for (int rank : ranks) {
      for (int v = 0; v < points; ++v) {
        uint64_t seed = (static_cast<uint64_t>(rank) << 32) ^ static_cast<uint64_t>(v);
        points_.emplace_back(Mix64(Mix64(seed) ^ 0x485244505352494eULL), rank);
      }
    }
    std::sort(points_.begin(), points_.end());
  }
  int OwnerOf(Key key) const {
    auto it = std::lower_bound(points_.begin(), points_.end(),
                               std::make_pair(ConsistentHashRing::HashKey(key), -1));
    return it == points_.end() ? points_.front().second : it->second;
  }

 private:
  std::vector<std::pair<uint64_t, int>> points_;
};

TEST(ConsistentHashRing, OwnersAreThoseOfThePlainBinarySearchOverThePoints) {
  std::mt19937_64 rng(11);
  const std::vector<std::vector<int>> rank_sets = {{0}, {0, 1}, {2, 0, 5}, {0, 1, 2, 3, 4, 5, 6}};
  for (const std::vector<int>& ranks : rank_sets) {
    for (int points : {1, 3, 128, 2000}) {
      ConsistentHashRing ring(ranks, points);
      ReferenceRing reference(ranks, points);
      std::vector<Key> keys = {0, 1, 2, kMaxKey, kMaxKey - 1};
      for (int i = 0; i < 20000; ++i) keys.push_back(rng());
      for (Key key : keys) {
        ASSERT_EQ(ring.ServerOf(key), reference.OwnerOf(key))
            << ranks.size() << " servers, " << points << " points, key " << key;
      }
    }
  }
}

TEST(ConsistentHashRing, ServersOfAWholeRequestAreEachKeysServerOf) {
  std::mt19937_64 rng(12);
  std::vector<Key> keys = {0, 1, 2, kMaxKey, kMaxKey - 1};
  for (int i = 0; i < 20000; ++i) keys.push_back(rng());
  const std::vector<int> ranks = {2, 0, 5, 1};
  const std::vector<ConsistentHashRing> rings = {
      ConsistentHashRing(ranks, 1), ConsistentHashRing(ranks, 128),
      // More points than ServersOf's buckets (4096): few buckets have one owner.
      ConsistentHashRing(ranks, 2048), ConsistentHashRing({3}, 4),
      ConsistentHashRing::Ranges(3),
      // Failed over: each key's first live replica.
      ConsistentHashRing(ranks, 128).WithFailover(2, {5}),
      ConsistentHashRing::Ranges(3).WithFailover(2, {0})};
  for (size_t r = 0; r < rings.size(); ++r) {
    std::vector<uint16_t> servers(keys.size(), 999);
    rings[r].ServersOf(keys.data(), keys.size(), servers.data());
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_EQ(servers[i], rings[r].ServerOf(keys[i])) << "ring " << r << ", key " << keys[i];
    }
  }
}

TEST(ConsistentHashRing, ReplicasAreTheOwnerThenTheNextDistinctServersOfTheRing) {
  ConsistentHashRing ring(5, kPoints);
  ConsistentHashRing without_owner_sets[5] = {
      ConsistentHashRing({1, 2, 3, 4}, kPoints), ConsistentHashRing({0, 2, 3, 4}, kPoints),
      ConsistentHashRing({0, 1, 3, 4}, kPoints), ConsistentHashRing({0, 1, 2, 4}, kPoints),
      ConsistentHashRing({0, 1, 2, 3}, kPoints)};
  std::vector<int> replicas;
  for (Key k = 0; k < 5000; ++k) {
    ring.ReplicasOf(k, 3, &replicas);
    ASSERT_EQ(replicas.size(), 3u);
    EXPECT_EQ(replicas[0], ring.ServerOf(k));
    EXPECT_EQ(std::set<int>(replicas.begin(), replicas.end()).size(), 3u) << "key " << k;
    // The second replica is whom the key moves to once its owner is off the ring.
    EXPECT_EQ(replicas[1], without_owner_sets[replicas[0]].ServerOf(k)) << "key " << k;
  }
  ring.ReplicasOf(7, 9, &replicas);
  EXPECT_EQ(replicas.size(), 5u);  // at most every server
}

TEST(ConsistentHashRing, FailoverSendsADeadServersKeysToTheirFirstLiveReplica) {
  ConsistentHashRing ring(4, kPoints);
  ConsistentHashRing failed = ring.WithFailover(2, {1});
  std::vector<int> replicas;
  int moved = 0;
  for (Key k = 0; k < 20000; ++k) {
    ring.ReplicasOf(k, 2, &replicas);
    if (replicas[0] == 1) {
      EXPECT_EQ(failed.ServerOf(k), replicas[1]) << "key " << k;
      ++moved;
    } else {
      EXPECT_EQ(failed.ServerOf(k), replicas[0]) << "key " << k;
    }
  }
  EXPECT_GT(moved, 20000 / 4 * 8 / 10);
  // Both replicas dead: the key stays on its owner (requests fail, nothing is served
  // from a server without its history); replication 1: nothing moves.
  ConsistentHashRing both = ring.WithFailover(2, {0, 1});
  ConsistentHashRing unreplicated = ring.WithFailover(1, {1});
  for (Key k = 0; k < 2000; ++k) {
    ring.ReplicasOf(k, 2, &replicas);
    if (replicas[0] <= 1 && replicas[1] <= 1) {
      EXPECT_EQ(both.ServerOf(k), replicas[0]);
    }
    EXPECT_EQ(unreplicated.ServerOf(k), ring.ServerOf(k));
  }
}

TEST(ConsistentHashRing, ChunkReplicasAreTheNextDistinctServersFromItsPointAndFailOverThere) {
  ConsistentHashRing ring(4, kPoints);
  std::vector<int> replicas;
  for (Key k = 0; k < 200; ++k) {
    for (uint32_t c = 0; c < 6; ++c) {
      ring.ReplicasOfChunk(k, c, 3, &replicas);
      ASSERT_EQ(replicas.size(), 3u);
      EXPECT_EQ(replicas[0], ring.ServerOfChunk(k, c));
      EXPECT_NE(replicas[0], replicas[1]);
      EXPECT_NE(replicas[1], replicas[2]);
      EXPECT_NE(replicas[0], replicas[2]);
      EXPECT_EQ(ring.WithFailover(3, {replicas[0]}).ServerOfChunk(k, c), replicas[1]);
      EXPECT_EQ(ring.WithFailover(3, {replicas[0], replicas[1]}).ServerOfChunk(k, c),
                replicas[2]);
    }
    // Chunk 0 is where the key itself is.
    EXPECT_EQ(ring.ServerOfChunk(k, 0), ring.ServerOf(k));
    ring.ReplicasOf(k, 3, &replicas);
    std::vector<int> chunk_zero;
    ring.ReplicasOfChunk(k, 0, 3, &chunk_zero);
    EXPECT_EQ(chunk_zero, replicas);
  }
}

TEST(ConsistentHashRing, ChunksOfValuesSpreadOverEveryServer) {
  ConsistentHashRing ring(4, kPoints);
  std::vector<size_t> per_server(4, 0);
  const Key kKeys = 2000;
  const uint32_t kChunks = 8;
  for (Key k = 0; k < kKeys; ++k) {
    for (uint32_t c = 0; c < kChunks; ++c) ++per_server[ring.ServerOfChunk(k, c)];
  }
  for (int rank = 0; rank < 4; ++rank) {
    const double share = static_cast<double>(per_server[rank]) / (kKeys * kChunks);
    EXPECT_GE(share, 0.18) << "server " << rank;
    EXPECT_LE(share, 0.32) << "server " << rank;
  }
}

TEST(ConsistentHashRing, AddingAServerMovesAboutOneInNPlusOneChunksAllToTheNewServer) {
  ConsistentHashRing before(4, kPoints);
  ConsistentHashRing after(5, kPoints);
  size_t moved = 0, total = 0;
  for (Key k = 0; k < 20000; ++k) {
    for (uint32_t c = 1; c < 9; ++c) {
      const int was = before.ServerOfChunk(k, c);
      const int is = after.ServerOfChunk(k, c);
      ++total;
      if (is == was) continue;
      ASSERT_EQ(is, 4) << "chunk " << c << " of key " << k << " moved to an old server";
      ++moved;
    }
  }
  const double fraction = static_cast<double>(moved) / total;
  std::printf("[ ring ] adding a 5th server moved %.4f of the chunks (ideal 0.2)\n", fraction);
  EXPECT_GE(fraction, 0.12);
  EXPECT_LE(fraction, 0.28);
}

TEST(ConsistentHashRing, RangesPutChunkCOnTheCthRankAfterTheKeysOwn) {
  ConsistentHashRing ranges = ConsistentHashRing::Ranges(3);
  std::vector<int> replicas;
  const Key key = kMaxKey / 3 + 5;  // rank 1's
  for (uint32_t c = 0; c < 6; ++c) {
    EXPECT_EQ(ranges.ServerOfChunk(key, c), static_cast<int>((1 + c) % 3));
    ranges.ReplicasOfChunk(key, c, 2, &replicas);
    EXPECT_EQ(replicas, (std::vector<int>{static_cast<int>((1 + c) % 3),
                                          static_cast<int>((2 + c) % 3)}));
  }
}

TEST(ConsistentHashRing, RangeReplicasAreTheNextRanks) {
  ConsistentHashRing ranges = ConsistentHashRing::Ranges(4);
  std::vector<int> replicas;
  ranges.ReplicasOf(kMaxKey - 1, 2, &replicas);
  EXPECT_EQ(replicas, (std::vector<int>{3, 0}));
  EXPECT_EQ(ranges.WithFailover(2, {3}).ServerOf(kMaxKey - 1), 0);
}

}  // namespace
}  // namespace ps
