// engine/runtime.h on a machine without a GPU (and the parts that need none): what upper layers
// get instead of kernels/ headers.
#include "engine/runtime.h"

#include <gtest/gtest.h>

#include "engine/tensor.h"
#include "support/messages.h"

namespace cg {
namespace {

TEST(Runtime, CpuCallsAreNoOps) {
  runtime::set_device(Device::cpu());
  runtime::synchronize(Device::cpu());
  EXPECT_FALSE(runtime::is_capturing(Stream()));
  EXPECT_GE(runtime::device_count(), 0);
  EXPECT_FALSE(runtime::describe_device(0).empty());
}

TEST(Runtime, MemoryStatsFollowTheHostAllocator) {
  runtime::reset_peak_memory(Device::cpu());
  const size_t before = runtime::memory_stats(Device::cpu()).in_use_bytes;
  {
    Tensor t = Tensor::empty({1 << 16}, DType::f32);
    EXPECT_GE(runtime::memory_stats(Device::cpu()).in_use_bytes, before + (size_t(1) << 18));
  }
  EXPECT_EQ(runtime::memory_stats(Device::cpu()).in_use_bytes, before);
  EXPECT_GE(runtime::memory_stats(Device::cpu()).peak_in_use_bytes, before + (size_t(1) << 18));
}

TEST(Runtime, SpinNeedsACudaStream) {
  try {
    runtime::spin(Stream(), 1.0);
    FAIL() << "spin on the CPU stream did not throw";
  } catch (const Error& e) {
    test::expect_mentions(e.what(), {"spin", "cpu"});
  }
}

TEST(PinnedBuffer, EmptyBufferRefusesAccessNamingTheUser) {
  runtime::PinnedBuffer empty;
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_NO_THROW(empty.span<float>(0));
  try {
    empty.span<float>(4, "bucket 3");
    FAIL() << "16 bytes fit in an empty pinned buffer";
  } catch (const Error& e) {
    test::expect_mentions(e.what(), {"bucket 3", "16 bytes", "0 bytes"});
  }
  runtime::PinnedBuffer moved = std::move(empty);
  EXPECT_EQ(moved.size(), 0u);
  moved.reserve(0);  // nothing to allocate: works without a GPU
  EXPECT_EQ(moved.size(), 0u);
}

TEST(PinnedBuffer, AllocatesWhereTheRuntimeCan) {
  if (runtime::device_count() == 0) GTEST_SKIP() << "no CUDA device: pinned memory needs the CUDA runtime";
  runtime::PinnedBuffer b(256);
  EXPECT_EQ(b.size(), 256u);
  float* f = b.span<float>(64);
  f[63] = 1.f;
  EXPECT_THROW(b.span<float>(65), Error);
  b.reserve(128);  // smaller: kept
  EXPECT_EQ(b.size(), 256u);
  b.reserve(1024);
  EXPECT_EQ(b.size(), 1024u);
  runtime::PinnedBuffer c = std::move(b);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(c.size(), 1024u);
}

}  // namespace
}  // namespace cg
