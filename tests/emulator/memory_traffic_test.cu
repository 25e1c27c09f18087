// The emulated GPU's memory-traffic counts (cg_emu/traffic.h), on small CUDA programs whose
// access patterns have a known cost on a device: how many warp-wide requests, sectors and
// distinct sectors each launch makes. Built only in the emulated build, label "emulated"; the
// counts need the access hooks (CUDAGRAD_EMU_ACCESS_CHECKS=ON), and skip saying so without them.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mma.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cg_emu/kernel_start.h"
#include "cg_emu/traffic.h"

namespace {

#define NEED_TRAFFIC_HOOKS() \
  if (!::cg_emu::traffic_hooks_built()) GTEST_SKIP() << "this emulated GPU has no access hooks (CUDAGRAD_EMU_ACCESS_CHECKS=OFF)"

struct Buffer {
  void* ptr = nullptr;
  explicit Buffer(size_t bytes) { cudaMalloc(&ptr, bytes); }
  ~Buffer() { cudaFree(ptr); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

// The launches one callable makes, recorded.
template <typename F>
std::vector<cg_emu::LaunchTraffic> record(F&& launches) {
  cg_emu::start_traffic_recording();
  launches();
  return cg_emu::stop_traffic_recording();
}

// out[i] = in[stride * i + offset], one thread per output.
__global__ void gather(const float* in, float* out, int n, int stride, int offset) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[size_t(stride) * i + offset];
}

__global__ void copy_vectors(const float4* in, float4* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

constexpr int kN = 4096;  // 128 warps

TEST(MemoryTraffic, ACoalescedCopyUsesEveryByteOfEverySector) {
  NEED_TRAFFIC_HOOKS();
  Buffer in(kN * 4), out(kN * 4);
  const auto launches = record([&] { ::cg_emu::launch(gather, "gather", kN / 256, 256)(in.as<float>(), out.as<float>(), kN, 1, 0); });
  ASSERT_EQ(launches.size(), 1u);
  const cg_emu::LaunchTraffic& t = launches[0];
  EXPECT_EQ(t.kernel, "gather");
  EXPECT_EQ(t.blocks(), 16u);
  EXPECT_EQ(t.threads_per_block(), 256u);
  for (const cg_emu::MemoryTraffic* m : {&t.loads, &t.stores}) {
    EXPECT_EQ(m->requests, uint64_t(kN / 32));
    EXPECT_EQ(m->bytes, uint64_t(kN * 4));
    EXPECT_EQ(m->sectors, uint64_t(kN * 4 / 32));  // 4 sectors a request
    EXPECT_EQ(m->footprint_sectors, uint64_t(kN * 4 / 32));
    EXPECT_DOUBLE_EQ(m->efficiency(), 1.0);
  }
}

TEST(MemoryTraffic, AStrideOfOneSectorUsesAnEighthOfEachSector) {
  NEED_TRAFFIC_HOOKS();
  Buffer in(size_t(kN) * 32), out(kN * 4);
  const auto t = record([&] { ::cg_emu::launch(gather, "gather", kN / 256, 256)(in.as<float>(), out.as<float>(), kN, 8, 0); })[0];
  EXPECT_EQ(t.loads.requests, uint64_t(kN / 32));
  EXPECT_EQ(t.loads.sectors, uint64_t(kN));  // 32 sectors a request
  EXPECT_DOUBLE_EQ(t.loads.efficiency(), 1.0 / 8);
  EXPECT_DOUBLE_EQ(t.stores.efficiency(), 1.0);
}

TEST(MemoryTraffic, AMisalignedWarpTouchesOneSectorMore) {
  NEED_TRAFFIC_HOOKS();
  Buffer in(kN * 4 + 64), out(kN * 4);
  const auto t = record([&] { ::cg_emu::launch(gather, "gather", kN / 256, 256)(in.as<float>(), out.as<float>(), kN, 1, 1); })[0];
  EXPECT_EQ(t.loads.sectors, uint64_t(kN / 32 * 5));  // 128 bytes from a 4-byte offset span 5 sectors
  EXPECT_DOUBLE_EQ(t.loads.efficiency(), 4.0 / 5);
  EXPECT_EQ(t.loads.footprint_sectors, uint64_t(kN * 4 / 32 + 1));  // neighbours share the sectors between them
}

TEST(MemoryTraffic, SixteenByteLoadsAreOneRequestPerWarp) {
  NEED_TRAFFIC_HOOKS();
  Buffer in(kN * 16), out(kN * 16);
  const auto t = record([&] { ::cg_emu::launch(copy_vectors, "copy_vectors", kN / 256, 256)(in.as<float4>(), out.as<float4>(), kN); })[0];
  EXPECT_EQ(t.loads.requests, uint64_t(kN / 32));
  EXPECT_EQ(t.loads.bytes, uint64_t(kN * 16));
  EXPECT_EQ(t.loads.sectors, uint64_t(kN / 32 * 16));
  EXPECT_DOUBLE_EQ(t.loads.efficiency(), 1.0);
}

// Every lane reads the same float: one sector a request, the fewest it could be.
TEST(MemoryTraffic, ABroadcastIsOneSectorARequestAndCoalesced) {
  NEED_TRAFFIC_HOOKS();
  Buffer in(64), out(kN * 4);
  const auto t = record([&] { ::cg_emu::launch(gather, "gather", kN / 256, 256)(in.as<float>(), out.as<float>(), kN, 0, 3); })[0];
  EXPECT_EQ(t.loads.bytes, uint64_t(kN * 4));
  EXPECT_EQ(t.loads.distinct_bytes, uint64_t(kN / 32 * 4));
  EXPECT_EQ(t.loads.sectors, uint64_t(kN / 32));
  EXPECT_EQ(t.loads.footprint_sectors, 1u);
  EXPECT_DOUBLE_EQ(t.loads.efficiency(), 1.0);
}

// Sums a row of `width` floats per thread, the rows laid out one after another (row-major: each
// lane's k-th load is `width` floats from its neighbour's) or interleaved (column-major: lanes read
// neighbouring floats). The first is the uncoalesced pattern of a reduction written the wrong way.
__global__ void row_sums(const float* in, float* out, int rows, int width, bool interleaved) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float s = 0.f;
  for (int k = 0; k < width; ++k) s += in[interleaved ? size_t(k) * rows + r : size_t(r) * width + k];
  out[r] = s;
}

TEST(MemoryTraffic, TheKthAccessesOfAWarpsLanesFormOneRequest) {
  NEED_TRAFFIC_HOOKS();
  const int rows = 1024, width = 16;
  Buffer in(size_t(rows) * width * 4), out(rows * 4);
  const auto launches = record([&] {
    ::cg_emu::launch(row_sums, "interleaved", rows / 128, 128)(in.as<float>(), out.as<float>(), rows, width, true);
    ::cg_emu::launch(row_sums, "row_major", rows / 128, 128)(in.as<float>(), out.as<float>(), rows, width, false);
  });
  ASSERT_EQ(launches.size(), 2u);
  const cg_emu::LaunchTraffic &good = launches[0], &bad = launches[1];
  EXPECT_EQ(good.kernel, "interleaved");
  EXPECT_EQ(good.loads.requests, uint64_t(rows / 32 * width));
  EXPECT_DOUBLE_EQ(good.loads.efficiency(), 1.0);
  EXPECT_EQ(bad.loads.requests, good.loads.requests);
  EXPECT_EQ(bad.loads.bytes, good.loads.bytes);
  EXPECT_DOUBLE_EQ(bad.loads.efficiency(), 1.0 / 8);  // 64-byte rows: each lane in its own sector
  EXPECT_EQ(bad.loads.footprint_sectors, good.loads.footprint_sectors);  // the same bytes, fetched 8 times over
}

// Lanes that skip an access leave it out of their request; the others still make one.
__global__ void odd_lanes_read(const float* in, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = (i % 2) ? in[i] : 0.f;
}

TEST(MemoryTraffic, LanesThatSkipAnAccessAreLeftOutOfItsRequest) {
  NEED_TRAFFIC_HOOKS();
  Buffer in(kN * 4), out(kN * 4);
  const auto t = record([&] { ::cg_emu::launch(odd_lanes_read, "odd_lanes_read", kN / 256, 256)(in.as<float>(), out.as<float>()); })[0];
  EXPECT_EQ(t.loads.requests, uint64_t(kN / 32));
  EXPECT_EQ(t.loads.bytes, uint64_t(kN / 2 * 4));
  EXPECT_EQ(t.loads.sectors, uint64_t(kN / 32 * 4));
  EXPECT_DOUBLE_EQ(t.loads.efficiency(), 0.5);
}

// Staged through shared memory: only the global loads and stores count; the shared array is
// reported as the block's static shared memory.
__global__ void reverse_through_shared(const float* in, float* out) {
  CG_SHARED(float, tile, [256]);
  const int base = blockIdx.x * 256;
  tile[threadIdx.x] = in[base + threadIdx.x];
  __syncthreads();
  out[base + threadIdx.x] = tile[255 - threadIdx.x];
}

TEST(MemoryTraffic, SharedMemoryIsNotGlobalTrafficButIsReportedPerBlock) {
  NEED_TRAFFIC_HOOKS();
  Buffer in(kN * 4), out(kN * 4);
  const auto t = record([&] { ::cg_emu::launch(reverse_through_shared, "reverse", kN / 256, 256, 0)(in.as<float>(), out.as<float>()); })[0];
  EXPECT_EQ(t.loads.requests, uint64_t(kN / 32));
  EXPECT_EQ(t.stores.requests, uint64_t(kN / 32));
  EXPECT_DOUBLE_EQ(t.loads.efficiency(), 1.0);
  EXPECT_EQ(t.static_shared_bytes, 256u * 4);
}

__global__ void one_tile_product(const __half* a, const __half* b, float* c) {
  namespace wmma = nvcuda::wmma;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

TEST(MemoryTraffic, EachWarpsMmaCountsTwoMnkFlops) {
  NEED_TRAFFIC_HOOKS();
  Buffer a(512), b(512), c(1024 * 3);
  const auto t = record([&] { ::cg_emu::launch(one_tile_product, "mma", 3, 32)(a.as<__half>(), b.as<__half>(), c.as<float>()); })[0];
  EXPECT_EQ(t.mma_flops, uint64_t(3 * 2 * 2 * 16 * 16 * 16));
  EXPECT_EQ(t.loads.footprint_sectors, uint64_t(2 * 512 / 32));
}

TEST(MemoryTraffic, CountsDoNotDependOnTheBlockOrderOrTheHostThreads) {
  NEED_TRAFFIC_HOOKS();
  const int rows = 2048, width = 8;
  Buffer in(size_t(rows) * width * 4), out(rows * 4);
  auto run = [&] {
    return record([&] { ::cg_emu::launch(row_sums, "row_major", rows / 64, 64)(in.as<float>(), out.as<float>(), rows, width, false); })[0];
  };
  const cg_emu::LaunchTraffic forward = run();
  ::setenv("CG_EMU_BLOCK_ORDER", "reverse", 1);
  const cg_emu::LaunchTraffic reverse = run();
  ::unsetenv("CG_EMU_BLOCK_ORDER");
  for (auto [a, b] : {std::pair{forward.loads, reverse.loads}, std::pair{forward.stores, reverse.stores}}) {
    EXPECT_EQ(a.requests, b.requests);
    EXPECT_EQ(a.sectors, b.sectors);
    EXPECT_EQ(a.distinct_bytes, b.distinct_bytes);
    EXPECT_EQ(a.footprint_sectors, b.footprint_sectors);
  }
}

TEST(MemoryTraffic, NothingIsRecordedOutsideARecordingAndOneOpensAtATime) {
  NEED_TRAFFIC_HOOKS();
  Buffer in(kN * 4), out(kN * 4);
  ::cg_emu::launch(gather, "before", kN / 256, 256)(in.as<float>(), out.as<float>(), kN, 1, 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cg_emu::start_traffic_recording();
  EXPECT_THROW(cg_emu::start_traffic_recording(), std::logic_error);
  ::cg_emu::launch(gather, "queued", kN / 256, 256)(in.as<float>(), out.as<float>(), kN, 1, 0);
  const auto launches = cg_emu::stop_traffic_recording();  // runs what is queued
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].kernel, "queued");
  EXPECT_TRUE(record([] {}).empty());
}

}  // namespace
