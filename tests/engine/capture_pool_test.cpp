// Private pools of the caching allocator (what a CUDA graph's capture allocates from), over a
// counting fake backend: a pool's blocks are never handed to allocations outside it, its freed
// blocks serve the next capture into it, releasing it returns them, and nothing reaches the
// backend's release while a capture is in progress.
#include <gtest/gtest.h>

#include <set>

#include "engine/capture_pool.h"
#include "support/fake_device.h"
#include "util/check.h"

namespace cg {
namespace {

using test::FakeDevice;

constexpr uint64_t kCaptureStream = 7, kOtherStream = 9;

TEST(CapturePool, BlocksOfAPoolAreNeverReusedOutsideIt) {
  FakeDevice dev{size_t(1) << 30};
  CachingAllocator a(dev.backend(), size_t(1) << 30);
  void* warm = a.allocate(4096, kCaptureStream);  // an eager block, cached on the capture stream
  a.free(warm);
  CapturePool pool(a);
  std::set<void*> captured;
  {
    CaptureScope scope(pool, kCaptureStream);
    void* p = a.allocate(4096, kCaptureStream);
    EXPECT_NE(p, warm) << "a capture must not take a block from the shared cache";
    void* q = a.allocate(1 << 20, kCaptureStream);
    void* other = a.allocate(4096, kOtherStream);  // another stream during the capture: shared
    EXPECT_EQ(a.pool_stats(pool.id()).in_use_bytes, 4096u + (2u << 20));
    captured = {p, q};
    a.free(p);
    a.free(q);
    a.free(other);
  }
  // After the capture, the same sizes on the same stream (evaluation, the next batch) get
  // shared or new blocks, never the pool's.
  for (int i = 0; i < 3; ++i) {
    void* p = a.allocate(4096, kCaptureStream);
    void* q = a.allocate(1 << 20, kCaptureStream);
    EXPECT_FALSE(captured.count(p) || captured.count(q));
    a.free(p);
    a.free(q);
  }
  const PoolStats s = pool.stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.reserved_bytes, 4096u + (2u << 20));  // kept for the graph while it exists
}

TEST(CapturePool, FreedPoolBlocksServeTheNextCaptureIntoThePool) {
  FakeDevice dev{size_t(1) << 30};
  CachingAllocator a(dev.backend(), size_t(1) << 30);
  CapturePool pool(a);
  void* first = nullptr;
  {
    CaptureScope scope(pool, kCaptureStream);
    first = a.allocate(3000, kCaptureStream);
    a.free(first);
    void* again = a.allocate(3000, kCaptureStream);  // inside one capture, in stream order
    EXPECT_EQ(again, first);
    a.free(again);
  }
  const size_t backend_calls = a.stats().backend_allocations;
  {
    CaptureScope scope(pool, kCaptureStream);
    void* p = a.allocate(3000, kCaptureStream);
    EXPECT_EQ(p, first);
    a.free(p);
  }
  EXPECT_EQ(a.stats().backend_allocations, backend_calls);
}

TEST(CapturePool, ReleasingThePoolReturnsItsBlocks) {
  FakeDevice dev{size_t(1) << 30};
  CachingAllocator a(dev.backend(), size_t(1) << 30);
  void* escaped = nullptr;  // allocated in capture, still alive when the graph goes (an output)
  PoolId id = 0;
  {
    CapturePool pool(a);
    id = pool.id();
    CaptureScope scope(pool, kCaptureStream);
    void* temp = a.allocate(8192, kCaptureStream);
    escaped = a.allocate(512, kCaptureStream);
    a.free(temp);
  }  // scope, then pool: the cached block goes back to the backend
  EXPECT_EQ(a.stats().backend_releases, 1u);
  EXPECT_EQ(dev.live.size(), 1u);
  EXPECT_EQ(a.pool_stats(id).reserved_bytes, 512u);
  a.free(escaped);  // the pool is gone: the block joins the shared cache of its stream
  EXPECT_EQ(a.pool_stats(id).reserved_bytes, 0u);
  void* again = a.allocate(512, kCaptureStream);
  EXPECT_EQ(again, escaped);
  a.free(again);  // handed back, so the allocator releases it when it goes (LeakSanitizer checks)
}

TEST(CapturePool, NothingIsReturnedToTheBackendDuringCapture) {
  FakeDevice dev{16384};
  CachingAllocator a(dev.backend(), size_t(1) << 30);
  void* cached = a.allocate(8192, kOtherStream);
  a.free(cached);  // the shared cache holds 8 KB of the 16 KB device
  CapturePool pool(a);
  CaptureScope scope(pool, kCaptureStream);
  EXPECT_THROW(a.empty_cache(), Error);
  try {
    a.allocate(12288, kCaptureStream);  // would fit only after releasing the cache
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("during CUDA graph capture"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.stats().backend_releases, 0u);
  EXPECT_THROW(a.release_pool(pool.id()), Error);  // still routed: the capture is running
}

TEST(CapturePool, OneRoutePerStream) {
  FakeDevice dev{size_t(1) << 30};
  CachingAllocator a(dev.backend(), size_t(1) << 30);
  CapturePool first(a), second(a);
  CaptureScope scope(first, kCaptureStream);
  EXPECT_THROW(CaptureScope(second, kCaptureStream), Error);
  CaptureScope other(second, kOtherStream);  // a second capture on another stream is fine
  void* p = a.allocate(100, kOtherStream);
  EXPECT_EQ(second.stats().in_use_bytes, 512u);
  EXPECT_EQ(first.stats().in_use_bytes, 0u);
  a.free(p);
}

}  // namespace
}  // namespace cg
