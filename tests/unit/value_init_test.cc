// ValueInit (ps/value_init.h): first values of a key, by kind, and reproducible from
// (seed, key, index) alone.
#include "ps/value_init.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace ps {
namespace {

ValueInit Init(ValueInit::Kind kind, double scale, uint64_t seed) {
  ValueInit init;
  init.kind = kind;
  init.scale = scale;
  init.seed = seed;
  return init;
}

std::vector<float> Filled(const ValueInit& init, Key key, size_t n) {
  std::vector<float> v(n, 12345.0f);  // anything Fill does not write shows up
  init.Fill(key, v.data(), n);
  return v;
}

TEST(ValueInit, ZerosFillsEveryValueWithZero) {
  for (Key key : {Key{0}, Key{17}, kMaxKey}) {
    for (float v : Filled(Init(ValueInit::kZeros, 0.5, 3), key, 1000)) {
      ASSERT_EQ(v, 0.0f);
      ASSERT_FALSE(std::signbit(v));
    }
  }
}

TEST(ValueInit, UniformValuesLieWithinScaleAndSpreadOverTheRange) {
  for (double scale : {0.5, 0.01, 3.0}) {
    SCOPED_TRACE("scale " + std::to_string(scale));
    ValueInit init = Init(ValueInit::kUniform, scale, 11);
    double lo = 0, hi = 0, sum = 0;
    size_t n = 0;
    for (Key key = 0; key < 100; ++key) {
      for (float v : Filled(init, key, 1000)) {
        ASSERT_TRUE(std::isfinite(v));
        ASSERT_GE(v, -static_cast<float>(scale)) << "key " << key;
        ASSERT_LE(v, static_cast<float>(scale)) << "key " << key;
        lo = std::min(lo, double{v});
        hi = std::max(hi, double{v});
        sum += v;
        ++n;
      }
    }
    // 100k draws: the extremes come within 1% of the bounds, the mean near 0.
    EXPECT_LT(lo, -0.99 * scale);
    EXPECT_GT(hi, 0.99 * scale);
    EXPECT_NEAR(sum / n, 0.0, 0.01 * scale);
  }
}

TEST(ValueInit, NormalHasMeanZeroAndStddevScaleOverOneHundredThousandValues) {
  for (double scale : {1.0, 0.01, 2.5}) {
    SCOPED_TRACE("scale " + std::to_string(scale));
    ValueInit init = Init(ValueInit::kNormal, scale, 5);
    std::vector<float> all;
    for (Key key = 1000; key < 1100; ++key) {
      std::vector<float> v = Filled(init, key, 1000);
      all.insert(all.end(), v.begin(), v.end());
    }
    ASSERT_EQ(all.size(), 100000u);
    double mean = std::accumulate(all.begin(), all.end(), 0.0) / all.size();
    double var = 0;
    for (float v : all) {
      ASSERT_TRUE(std::isfinite(v));
      var += (v - mean) * (v - mean);
    }
    double stddev = std::sqrt(var / (all.size() - 1));
    EXPECT_NEAR(mean, 0.0, 0.05 * scale);
    EXPECT_NEAR(stddev, scale, 0.05 * scale);
    // Tails: about 4.55% of a normal lies beyond 2 sigma (a uniform would have none).
    size_t beyond =
        std::count_if(all.begin(), all.end(), [&](float v) { return std::fabs(v) > 2 * scale; });
    EXPECT_NEAR(beyond / 100000.0, 0.0455, 0.005);
  }
}

TEST(ValueInit, SameSeedKeyAndIndexGiveTheSameValuesWhateverTheKeyOrder) {
  for (ValueInit::Kind kind : {ValueInit::kUniform, ValueInit::kNormal}) {
    SCOPED_TRACE("kind " + std::to_string(kind));
    std::vector<Key> keys(200);
    std::iota(keys.begin(), keys.end(), Key{1} << 33);
    ValueInit first = Init(kind, 0.1, 99);
    std::vector<std::vector<float>> in_order;
    for (Key key : keys) in_order.push_back(Filled(first, key, 64));

    // Another instance, keys shuffled, and the same key filled twice.
    ValueInit second = Init(kind, 0.1, 99);
    std::vector<size_t> order(keys.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(4));
    for (size_t i : order) {
      ASSERT_EQ(Filled(second, keys[i], 64), in_order[i]) << "key " << keys[i];
      ASSERT_EQ(Filled(second, keys[i], 64), in_order[i]) << "key " << keys[i];
    }
    // A prefix is the same as the start of a longer fill: value i depends on i only.
    std::vector<float> longer = Filled(first, keys[0], 1000);
    EXPECT_TRUE(std::equal(in_order[0].begin(), in_order[0].end(), longer.begin()));
  }
}

// Counts positions where two equal-length fills agree; independent streams share almost none.
size_t Agreements(const std::vector<float>& a, const std::vector<float>& b) {
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  return same;
}

TEST(ValueInit, DifferentSeedGivesDifferentValues) {
  for (ValueInit::Kind kind : {ValueInit::kUniform, ValueInit::kNormal}) {
    SCOPED_TRACE("kind " + std::to_string(kind));
    for (uint64_t seed : {1ULL, 2ULL, 1ULL << 63, ~0ULL}) {
      std::vector<float> base = Filled(Init(kind, 1.0, 0), 42, 256);
      std::vector<float> other = Filled(Init(kind, 1.0, seed), 42, 256);
      EXPECT_LE(Agreements(base, other), 2u) << "seed " << seed;
    }
  }
}

TEST(ValueInit, DifferentKeyGivesDifferentValues) {
  for (ValueInit::Kind kind : {ValueInit::kUniform, ValueInit::kNormal}) {
    SCOPED_TRACE("kind " + std::to_string(kind));
    ValueInit init = Init(kind, 1.0, 7);
    const Key keys[] = {0, 1, 2, 3, 1ULL << 32, (1ULL << 32) + 1, 1ULL << 63, kMaxKey};
    for (Key a : keys) {
      for (Key b : keys) {
        if (a == b) continue;
        EXPECT_LE(Agreements(Filled(init, a, 256), Filled(init, b, 256)), 2u)
            << "keys " << a << " and " << b;
      }
    }
    // Neighbouring keys are not the same stream shifted by one index either.
    std::vector<float> k5 = Filled(init, 5, 257), k6 = Filled(init, 6, 257);
    EXPECT_LE(Agreements(std::vector<float>(k5.begin() + 1, k5.end()),
                         std::vector<float>(k6.begin(), k6.end() - 1)),
              2u);
  }
}

TEST(ValueInit, ParseKindAcceptsZerosUniformAndNormal) {
  const std::pair<const char*, ValueInit::Kind> cases[] = {{"zeros", ValueInit::kZeros},
                                                           {"uniform", ValueInit::kUniform},
                                                           {"normal", ValueInit::kNormal}};
  for (const auto& [name, want] : cases) {
    ValueInit::Kind kind = want == ValueInit::kZeros ? ValueInit::kNormal : ValueInit::kZeros;
    Status s = ValueInit::ParseKind(name, &kind);
    ASSERT_TRUE(s.ok()) << name << ": " << s;
    EXPECT_EQ(kind, want) << name;
  }
}

TEST(ValueInit, ParseKindRejectsOtherNamesListingTheAcceptedOnes) {
  for (const char* name : {"", "Normal", "gaussian", "zero", "uniform ", "xavier"}) {
    SCOPED_TRACE(std::string("'") + name + "'");
    ValueInit::Kind kind = ValueInit::kUniform;
    Status s = ValueInit::ParseKind(name, &kind);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s;
    for (const char* accepted : {"zeros", "uniform", "normal"}) {
      EXPECT_NE(s.message().find(accepted), std::string::npos) << s;
    }
    EXPECT_EQ(kind, ValueInit::kUniform);  // untouched on failure
  }
}

}  // namespace
}  // namespace ps
