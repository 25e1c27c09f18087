// The caching allocator over a counting fake backend: steady-state reuse without backend calls,
// stream separation, statistics, and out-of-memory recovery and reporting.
#include <gtest/gtest.h>


#include "engine/caching_allocator.h"
#include "support/fake_device.h"
#include "util/check.h"

namespace cg {
namespace {

using test::FakeDevice;

TEST(CachingAllocator, SteadyStateStepsNeverReachTheBackend) {
  FakeDevice dev{size_t(1) << 30};
  CachingAllocator a(dev.backend(), size_t(1) << 30);
  for (int step = 0; step < 5; ++step) {
    std::vector<void*> activations;
    for (size_t sz : {1000u, 4096u, 3u << 20, 700u}) activations.push_back(a.allocate(sz));
    for (void* p : activations) a.free(p);
  }
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.backend_allocations, 4u);  // the first step only
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.peak_in_use_bytes, 1024u + 4096u + (4u << 20) + 1024u);  // rounded sizes
  EXPECT_GT(s.cached_bytes, 0u);
}

TEST(CachingAllocator, BlocksAreReusedOnlyOnTheirStream) {
  FakeDevice dev{size_t(1) << 30};
  CachingAllocator a(dev.backend(), size_t(1) << 30);
  void* p = a.allocate(2048, /*stream=*/1);
  a.free(p);
  void* q = a.allocate(2048, /*stream=*/2);
  EXPECT_NE(p, q);
  void* r = a.allocate(2048, /*stream=*/1);
  EXPECT_EQ(p, r);
  a.free(q);
  a.free(r);
}

TEST(CachingAllocator, OutOfMemoryEmptiesTheCacheThenFailsWithDetails) {
  FakeDevice dev{8192};
  CachingAllocator a(dev.backend(), size_t(1) << 30);
  void* p = a.allocate(4096);
  a.free(p);  // cached: the fake device still counts it as used
  void* q = a.allocate(6000);  // needs the cache emptied first
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(a.stats().backend_releases, 1u);
  try {
    a.allocate(1 << 20);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of fake memory"), std::string::npos) << e.what();
  }
  a.free(q);
  EXPECT_THROW(a.free(reinterpret_cast<void*>(0x1234)), Error);
}

TEST(CachingAllocator, RoundsSmallAndLargeRequests) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size((1u << 20) + 1), 2u << 20);
}

}  // namespace
}  // namespace cg
