// SArray (ps/sarray.h): shared, zero-copy arrays.
#include "ps/sarray.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace ps {
namespace {

template <typename V>
std::vector<V> ToVector(const SArray<V>& a) {
  return std::vector<V>(a.begin(), a.end());
}

TEST(SArray, CopySharesTheBufferAndCountsTheReference) {
  SArray<int> a{1, 2, 3};
  EXPECT_EQ(a.ptr().use_count(), 1);
  {
    SArray<int> b = a;
    EXPECT_EQ(b.data(), a.data());
    EXPECT_EQ(b.size(), 3u);
    EXPECT_EQ(a.ptr().use_count(), 2);
    b[0] = 42;
    EXPECT_EQ(a[0], 42);  // one buffer, two handles
  }
  EXPECT_EQ(a.ptr().use_count(), 1);
}

TEST(SArray, MoveHandsOverTheBufferWithoutAnotherReference) {
  SArray<int> a{1, 2, 3};
  int* data = a.data();
  SArray<int> b = std::move(a);
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(b.ptr().use_count(), 1);
}

TEST(SArray, CopyFromMakesAnIndependentDeepCopy) {
  SArray<int> a{1, 2, 3};
  SArray<int> b;
  b.CopyFrom(a);
  EXPECT_NE(b.data(), a.data());
  EXPECT_EQ(ToVector(b), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(a.ptr().use_count(), 1);
  b[0] = 9;
  EXPECT_EQ(a[0], 1);

  SArray<int> c;
  c.CopyFrom(std::vector<int>{4, 5});
  EXPECT_EQ(ToVector(c), (std::vector<int>{4, 5}));
}

TEST(SArray, CopyFromGrowsShrinksAndReadsFromItsOwnBuffer) {
  SArray<int> a{1, 2, 3, 4, 5};
  SArray<int> small{9};
  small.CopyFrom(a);  // beyond its capacity: a fresh buffer
  EXPECT_EQ(std::vector<int>(small.begin(), small.end()), (std::vector<int>{1, 2, 3, 4, 5}));
  small.CopyFrom(std::vector<int>{7, 8});  // within its capacity: in place
  EXPECT_EQ(std::vector<int>(small.begin(), small.end()), (std::vector<int>{7, 8}));
  // A source inside the array's own buffer, shorter and longer than what it holds.
  SArray<int> self{1, 2, 3, 4};
  self.CopyFrom(self.data() + 1, 3);
  EXPECT_EQ(std::vector<int>(self.begin(), self.end()), (std::vector<int>{2, 3, 4}));
  std::vector<int> longer(100);
  for (int i = 0; i < 100; ++i) longer[i] = i;
  SArray<int> grows{5};
  grows.CopyFrom(longer.data(), longer.size());
  EXPECT_EQ(std::vector<int>(grows.begin(), grows.end()), longer);
}

TEST(SArray, ConstructionFromAVectorCopiesIt) {
  std::vector<double> v{0.5, 1.5};
  SArray<double> a(v);
  EXPECT_NE(a.data(), v.data());
  v[0] = 7;
  EXPECT_EQ(ToVector(a), (std::vector<double>{0.5, 1.5}));
  EXPECT_EQ(ToVector(SArray<int>(3, 8)), (std::vector<int>{8, 8, 8}));
}

TEST(SArray, ResizeKeepsExistingElementsAndFillsNewOnesWithTheGivenValue) {
  SArray<int> a{1, 2, 3};
  a.resize(6, 7);
  EXPECT_EQ(ToVector(a), (std::vector<int>{1, 2, 3, 7, 7, 7}));
  a.resize(2);
  EXPECT_EQ(ToVector(a), (std::vector<int>{1, 2}));
  a.resize(4, 5);
  EXPECT_EQ(ToVector(a), (std::vector<int>{1, 2, 5, 5}));
  EXPECT_GE(a.capacity(), a.size());
}

TEST(SArray, GrowingPastCapacityLeavesOtherHandlesOnTheOldBuffer) {
  SArray<int> a{1, 2, 3};
  SArray<int> b = a;
  a.resize(a.capacity() + 10, 0);
  EXPECT_NE(a.data(), b.data());
  EXPECT_EQ(ToVector(b), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(b.ptr().use_count(), 1);
  a[0] = 99;
  EXPECT_EQ(b[0], 1);
}

TEST(SArray, SegmentViewsARangeOfTheSameBuffer) {
  SArray<int> a(10);
  std::iota(a.begin(), a.end(), 0);
  SArray<int> s = a.segment(2, 5);
  EXPECT_EQ(s.data(), a.data() + 2);
  EXPECT_EQ(ToVector(s), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(a.ptr().use_count(), 2);
  s[0] = 100;
  EXPECT_EQ(a[2], 100);
  EXPECT_TRUE(a.segment(10, 10).empty());
}

TEST(SArray, SegmentKeepsTheBufferAliveAfterTheOriginalGoes) {
  SArray<int> s;
  {
    SArray<int> a{1, 2, 3, 4};
    s = a.segment(1, 3);
  }
  EXPECT_EQ(s.ptr().use_count(), 1);
  EXPECT_EQ(ToVector(s), (std::vector<int>{2, 3}));
}

TEST(SArray, SegmentOutsideTheArrayThrowsError) {
  SArray<int> a(10);
  EXPECT_THROW(a.segment(0, 11), Error);
  EXPECT_THROW(a.segment(5, 4), Error);
  EXPECT_THROW(a.segment(11, 11), Error);
  try {
    a.segment(3, 12);
    FAIL() << "no ps::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside an array of 10"), std::string::npos)
        << e.what();
  }
}

TEST(SArray, ReinterpretViewsTheSameBytesAsAnotherElementType) {
  const float floats[] = {1.5f, -2.0f, 3.25f};
  SArray<char> bytes(sizeof(floats));
  std::memcpy(bytes.data(), floats, sizeof(floats));

  SArray<float> view(bytes);
  EXPECT_EQ(view.size(), 3u);
  EXPECT_EQ(static_cast<void*>(view.data()), static_cast<void*>(bytes.data()));
  EXPECT_EQ(ToVector(view), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(bytes.ptr().use_count(), 2);  // a view, not a copy

  SArray<char> back;
  back = view;
  EXPECT_EQ(back.size(), sizeof(floats));
  EXPECT_EQ(back.data(), bytes.data());
}

TEST(SArray, ReinterpretOfBytesThatAreNotWholeElementsThrowsError) {
  SArray<char> six(6);
  EXPECT_THROW({ SArray<float> view(six); }, Error);
  SArray<float> target;
  EXPECT_THROW(target = six, Error);
  try {
    SArray<double> view(SArray<int>(3));
    FAIL() << "12 bytes became doubles";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("12 bytes"), std::string::npos) << e.what();
  }
}

TEST(SArray, CustomDeleterRunsExactlyOnceWhenTheLastReferenceGoes) {
  int calls = 0;
  int* raw = new int[4]{1, 2, 3, 4};
  {
    SArray<int> a(raw, 4, [&calls](int* p) {
      ++calls;
      delete[] p;
    });
    {
      SArray<int> copy = a;
      SArray<int> segment = a.segment(1, 3);
      SArray<char> bytes(a);
      EXPECT_EQ(a.ptr().use_count(), 4);
    }
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(a.data(), raw);  // adopted, not copied
  }
  EXPECT_EQ(calls, 1);
}

TEST(SArray, ResetReleasesThePreviousBufferOnce) {
  int first = 0, second = 0;
  SArray<int> a(new int[2], 2, [&first](int* p) {
    ++first;
    delete[] p;
  });
  a.reset(new int[3], 3, [&second](int* p) {
    ++second;
    delete[] p;
  });
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 0);
  EXPECT_EQ(a.size(), 3u);
  a.clear();
  EXPECT_EQ(second, 1);
  EXPECT_TRUE(a.empty());
}

TEST(SArray, PushBackAndAppendAddElementsAtTheEnd) {
  SArray<int> a;
  for (int i = 0; i < 100; ++i) a.push_back(i);
  ASSERT_EQ(a.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a[i], i);
  EXPECT_EQ(a.front(), 0);
  EXPECT_EQ(a.back(), 99);

  a.append(SArray<int>{100, 101});
  EXPECT_EQ(a.size(), 102u);
  EXPECT_EQ(a.back(), 101);
  a.append(SArray<int>());
  EXPECT_EQ(a.size(), 102u);

  SArray<int> b;
  b.append(SArray<int>{5, 6});
  EXPECT_EQ(ToVector(b), (std::vector<int>{5, 6}));
}

}  // namespace
}  // namespace ps

namespace ps {
namespace {

// ps-lite's forms, which its apps use.
TEST(SArrayPsLiteForms, WrapsACallersBufferWithoutCopyOrOwnership) {
  float buffer[4] = {1, 2, 3, 4};
  {
    SArray<float> view(buffer, 4, false);
    EXPECT_EQ(view.data(), buffer);
    view[0] = 10;
  }
  EXPECT_EQ(buffer[0], 10) << "the buffer is still the caller's, and was not freed";
  SArray<float> owner(new float[3]{5, 6, 7}, 3, true);  // freed with delete[] (ASan checks)
  EXPECT_EQ(owner[2], 7);
  SArray<float> two_args(buffer, 2);
  EXPECT_EQ(two_args.data(), buffer);
}

TEST(SArrayPsLiteForms, InitializerListsOfAnotherTypeConvert) {
  SArray<double> a = {1, 2, 3};  // ints
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[2], 3.0);
  a = {4, 5};
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1], 5.0);
}

TEST(SArrayPsLiteForms, PrintsAsPsLiteDoes) {
  std::ostringstream shortform, longform;
  shortform << SArray<int>({1, 2, 3});
  EXPECT_EQ(shortform.str(), "[3]: 1 2 3 ");
  SArray<int> many(12);
  for (int i = 0; i < 12; ++i) many[i] = i;
  longform << many;
  EXPECT_EQ(longform.str(), "[12]: 0 1 2 3 4 ... 7 8 9 10 11 ");
}

}  // namespace
}  // namespace ps
