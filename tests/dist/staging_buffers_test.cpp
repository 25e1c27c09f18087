// StagedGlooComm's host buffers (dist/staging_buffers.h) with plain host memory: one per device
// address, reused while large enough; a larger region at a recycled address (a rebuilt bucket)
// gets a new buffer that holds all of it, and the old one is retired, not freed under the work
// that may still use it; everything is freed at the end.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "dist/staging_buffers.h"

namespace cg::dist {
namespace {

// Counts what is allocated, freed and retired; remembers each buffer's size.
struct Ledger {
  std::map<void*, size_t> live;
  std::vector<void*> freed, retired;
  StagingBuffers make() {
    return StagingBuffers(
        [this](size_t n) {
          void* p = std::malloc(n);
          live[p] = n;
          return p;
        },
        [this](void* p) { release(p, freed); }, [this](void* p) { release(p, retired); });
  }
  void release(void* p, std::vector<void*>& into) {
    ASSERT_EQ(live.count(p), 1u) << "released twice or never allocated";
    live.erase(p);
    into.push_back(p);
    std::free(p);
  }
};

TEST(StagingBuffers, ALargerRegionAtARecycledAddressGetsABufferThatHoldsIt) {
  Ledger ledger;
  alignas(8) static char device_a[1], device_b[1];  // stand-ins for device addresses
  {
    StagingBuffers buffers = ledger.make();
    void* first = buffers.get(device_a, 100);
    ASSERT_EQ(ledger.live.at(first), 100u);
    EXPECT_EQ(buffers.get(device_a, 100), first) << "the same region reuses its buffer";
    EXPECT_EQ(buffers.get(device_a, 60), first) << "a smaller region fits the buffer it has";
    void* other = buffers.get(device_b, 10);
    EXPECT_NE(other, first);
    EXPECT_EQ(ledger.live.size(), 2u);

    // The bucket at device_a is rebuilt with 4000 bytes: the old 100-byte buffer would overrun.
    void* grown = buffers.get(device_a, 4000);
    ASSERT_EQ(ledger.live.count(grown), 1u);
    EXPECT_GE(ledger.live.at(grown), 4000u);
    std::memset(grown, 1, 4000);  // all of it is ours
    EXPECT_EQ(ledger.retired, std::vector<void*>{first}) << "the replaced buffer goes through retire";
    EXPECT_TRUE(ledger.freed.empty());
    EXPECT_EQ(buffers.get(device_a, 4000), grown);
    EXPECT_EQ(buffers.size(), 2u);
  }
  EXPECT_TRUE(ledger.live.empty()) << "every buffer is freed with the cache";
  EXPECT_EQ(ledger.freed.size(), 2u);
}

}  // namespace
}  // namespace cg::dist
