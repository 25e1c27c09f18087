// The emulated GPU itself (emulator/), tested through the CUDA it stands in for: each test is a
// small CUDA program whose answer is known, so the same program would give the same answer on a
// real device. Its launches are the emulator's own call, ::cg_emu::launch(kernel, "name", grid,
// block, shared_bytes, stream)(args), which a device spells kernel<<<grid, block, ...>>>(args),
// and its poisoned shared arrays the emulated CG_SHARED (cg_emu/kernel_start.h).
// Built only in the emulated build (-DCUDAGRAD_GPU_EMULATION=ON), label "emulated".
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cg_emu/kernel_start.h"

namespace {

#define CHECK_CUDA(expr) ASSERT_EQ((expr), cudaSuccess) << #expr << ": " << cudaGetErrorString(cudaGetLastError())

template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t n;
  explicit DeviceArray(size_t count) : n(count) { cudaMalloc(reinterpret_cast<void**>(&ptr), n * sizeof(T)); }
  ~DeviceArray() { cudaFree(ptr); }
  std::vector<T> download() const {
    std::vector<T> h(n);
    cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
    return h;
  }
  void upload(const std::vector<T>& h) { cudaMemcpy(ptr, h.data(), n * sizeof(T), cudaMemcpyHostToDevice); }
};

// --- barriers -------------------------------------------------------------------------------

// A launch that faults while some of a block's threads have not finished ends them by unwinding
// their fiber stacks, which AddressSanitizer cannot follow (scripts/sanitize.sh emu): it reports a
// stack overflow that is not there (google/sanitizers#189), more or less often with the layout.
#if defined(__SANITIZE_ADDRESS__)
#define NEED_UNWINDABLE_FIBERS() GTEST_SKIP() << "ASan misreads the unwinding of a faulted block's fiber stacks"
#else
#define NEED_UNWINDABLE_FIBERS()
#endif

// Under one CG_EMU_SCHEDULE value, restoring the previous one.
class Schedule {
 public:
  explicit Schedule(const char* order) {
    if (const char* v = std::getenv("CG_EMU_SCHEDULE")) saved_ = v;
    ::setenv("CG_EMU_SCHEDULE", order, 1);
  }
  ~Schedule() {
    if (saved_.empty()) ::unsetenv("CG_EMU_SCHEDULE");
    else ::setenv("CG_EMU_SCHEDULE", saved_.c_str(), 1);
  }

 private:
  std::string saved_;
};


__global__ void rotate_through_shared(int* out, bool with_barrier) {
  __shared__ int slots[256];
  const int t = threadIdx.x;
  slots[t] = t + 1000 * blockIdx.x;
  if (with_barrier) __syncthreads();
  out[blockIdx.x * blockDim.x + t] = slots[(t + 1) % blockDim.x];
}

TEST(EmulatedDevice, BarrierOrdersSharedMemoryWritesBeforeReads) {
  DeviceArray<int> out(4 * 256);
  ::cg_emu::launch(rotate_through_shared, "rotate_through_shared", 4, 256)(out.ptr, true);
  CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<int> h = out.download();
  for (int b = 0; b < 4; ++b)
    for (int t = 0; t < 256; ++t) ASSERT_EQ(h[size_t(b * 256 + t)], (t + 1) % 256 + 1000 * b) << b << " " << t;
}

TEST(EmulatedDevice, AMissingBarrierReadsWhatIsNotWrittenYet) {
  // Thread t runs until it exits, before thread t + 1 starts: without the barrier thread 0 reads
  // slot 1 before thread 1 has written it. (On a GPU the result is a race; here it is always wrong.)
  Schedule forward("forward");
  DeviceArray<int> out(2 * 256);
  ::cg_emu::launch(rotate_through_shared, "rotate_through_shared", 2, 256)(out.ptr, false);
  CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<int> h = out.download();
  int wrong = 0;
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 255; ++t) wrong += h[size_t(b * 256 + t)] != (t + 1) % 256 + 1000 * b;
  EXPECT_GT(wrong, 0);
}

// Each block's thread 0 reads its cell before any thread of the block wrote it, then writes it; after
// the barrier the last thread reads what thread 0 wrote.
__global__ void read_before_write(int* first_read, int* after_barrier) {
  CG_SHARED(int, cell, [1]);
  if (threadIdx.x == 0) {
    first_read[blockIdx.x] = cell[0];
    cell[0] = 100 + int(blockIdx.x);
  }
  __syncthreads();
  if (threadIdx.x == blockDim.x - 1) after_barrier[blockIdx.x] = cell[0];
}

TEST(EmulatedDevice, SharedMemoryIsPoisonedWhenEachBlockStartsNotLeftFromTheLastOne) {
  // A block's shared memory is a static per host thread, which would hold the previous block's
  // values; CG_SHARED fills it with 0xFF bytes (-1 as an int) for each block, in either order of
  // its threads, without undoing what the block itself wrote.
  for (const char* order : {"forward", "reverse"}) {
    Schedule schedule(order);
    constexpr int kBlocks = 64;
    DeviceArray<int> first(kBlocks), after(kBlocks);
    ::cg_emu::launch(read_before_write, "read_before_write", kBlocks, 64)(first.ptr, after.ptr);
    CHECK_CUDA(cudaDeviceSynchronize());
    const std::vector<int> f = first.download(), a = after.download();
    for (int b = 0; b < kBlocks; ++b) {
      EXPECT_EQ(f[size_t(b)], -1) << order << ": block " << b << " read a value left in shared memory";
      EXPECT_EQ(a[size_t(b)], 100 + b) << order << ": block " << b;
    }
  }
}

// Thread t reads what thread t - 1 wrote, with no barrier between: a race that the forward
// schedule hides (thread t - 1 has run to the end before t starts) and the reverse one shows.
// `salt` differs per launch: a plain __shared__ array keeps the previous block's values on the
// emulator (static storage per host thread; only CG_SHARED arrays are poisoned), and the stale
// ones must not look right.
__global__ void read_lower_neighbour(int* out, int salt) {
  __shared__ int slots[256];
  const int t = threadIdx.x;
  slots[t] = t + salt;
  out[t] = slots[(t + blockDim.x - 1) % blockDim.x];
}

int wrong_lower_reads(const char* order) {
  static int salt = 0;
  salt += 1000;
  Schedule schedule(order);
  DeviceArray<int> out(256);
  ::cg_emu::launch(read_lower_neighbour, "read_lower_neighbour", 1, 256)(out.ptr, salt);
  if (cudaDeviceSynchronize() != cudaSuccess) return -1;
  const std::vector<int> h = out.download();
  int wrong = 0;
  for (int t = 1; t < 256; ++t) wrong += h[size_t(t)] != t - 1 + salt;
  return wrong;
}

TEST(EmulatedDevice, TheReverseScheduleShowsTheRaceTheForwardOneHides) {
  EXPECT_EQ(wrong_lower_reads("forward"), 0);
  EXPECT_GT(wrong_lower_reads("reverse"), 0);
  Schedule bad("sideways");
  DeviceArray<int> out(256);
  ::cg_emu::launch(read_lower_neighbour, "read_lower_neighbour", 1, 256)(out.ptr, 0);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue) << "an unknown schedule fails the launch";
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << "and leaves the device usable";
}

__global__ void divergent_barrier(int* out) {
  if (threadIdx.x < 16) __syncthreads();  // half the block never arrives: a bug
  out[threadIdx.x] = 1;
  if (threadIdx.x >= 16) __syncwarp();
}

TEST(EmulatedDevice, BarriersThatCanNeverAllBeReachedFailTheLaunch) {
  NEED_UNWINDABLE_FIBERS();
  // Run in a child: a kernel fault is sticky and would fail every later test in this process.
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the emulator's block workers are threads
  EXPECT_EXIT(
      {
        int* out = nullptr;
        cudaMalloc(reinterpret_cast<void**>(&out), 64 * sizeof(int));
        ::cg_emu::launch(divergent_barrier, "divergent_barrier", 1, 64)(out);
        const cudaError_t e = cudaDeviceSynchronize();
        std::exit(e == cudaErrorLaunchFailure ? 3 : 0);
      },
      ::testing::ExitedWithCode(3), "divergent_barrier: block \\(0, 0, 0\\): threads wait at barriers");
}

// --- warp shuffles --------------------------------------------------------------------------

__global__ void shuffle_lanes(int* exchanged, float* sums) {
  const int lane = threadIdx.x % 32;
  exchanged[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 5);
  float s = float(lane);
  for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync(0xffffffffu, s, offset);
  sums[threadIdx.x] = s;
}

TEST(EmulatedDevice, ShuffleExchangesLanesWithinEachWarp) {
  DeviceArray<int> exchanged(128);
  DeviceArray<float> sums(128);
  ::cg_emu::launch(shuffle_lanes, "shuffle_lanes", 1, 128)(exchanged.ptr, sums.ptr);
  CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<int> e = exchanged.download();
  const std::vector<float> s = sums.download();
  for (int t = 0; t < 128; ++t) {
    EXPECT_EQ(e[size_t(t)], t ^ 5) << t;
    EXPECT_EQ(s[size_t(t)], 496.f) << t;  // 0 + 1 + ... + 31 in every lane of every warp
  }
}

// Each lane i of the first 16 takes, through the four shuffles: lane 3's value over the whole warp,
// lane 3 of its own 8-lane segment, lane i - 1 (up) and lane i + 2 (down) within 16-lane
// segments. The other 16 lanes do not take part: the mask leaves them out, and the shuffles go on
// without them.
__global__ void masked_shuffles(int* out) {
  const int lane = threadIdx.x;
  if (lane >= 16) return;
  const unsigned mask = 0x0000ffffu;
  const int v = 100 + lane;
  out[lane * 4 + 0] = __shfl_sync(mask, v, 3);
  out[lane * 4 + 1] = __shfl_sync(mask, v, 3, 8);
  out[lane * 4 + 2] = __shfl_up_sync(mask, v, 1, 16);
  out[lane * 4 + 3] = __shfl_down_sync(mask, v, 2, 16);
}

TEST(EmulatedDevice, ShufflesTakeTheirSourceLaneAsCudaDefinesIt) {
  DeviceArray<int> out(64);
  ::cg_emu::launch(masked_shuffles, "masked_shuffles", 1, 32)(out.ptr);
  CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<int> o = out.download();
  for (int lane = 0; lane < 16; ++lane) {
    EXPECT_EQ(o[size_t(lane * 4 + 0)], 103) << lane;
    EXPECT_EQ(o[size_t(lane * 4 + 1)], 100 + (lane / 8) * 8 + 3) << lane;
    EXPECT_EQ(o[size_t(lane * 4 + 2)], 100 + (lane == 0 ? 0 : lane - 1)) << lane << ": below the segment, its own";
    EXPECT_EQ(o[size_t(lane * 4 + 3)], 100 + (lane + 2 < 16 ? lane + 2 : lane)) << lane << ": past it, its own";
  }
}

// Lanes 0-15 shuffle under their own mask, but lane 0 asks for lane 20, which is not in it.
__global__ void shuffle_outside_mask(int* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_sync(0x0000ffffu, int(threadIdx.x), threadIdx.x == 0 ? 20 : 1);
}

TEST(EmulatedDevice, AShuffleThatReadsALaneOutsideItsMaskFaults) {
  NEED_UNWINDABLE_FIBERS();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        int* out = nullptr;
        cudaMalloc(reinterpret_cast<void**>(&out), 32 * sizeof(int));
        ::cg_emu::launch(shuffle_outside_mask, "shuffle_outside_mask", 1, 32)(out);
        std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 3 : 0);
      },
      ::testing::ExitedWithCode(3),
      "shuffle_outside_mask: block \\(0, 0, 0\\): __shfl_sync: lane 0 reads lane 20, outside the mask 0x0000ffff");
}

// --- shared-memory checks (emulator/shared_checker.h) ----------------------------------------

// Off in the AddressSanitizer build (scripts/sanitize.sh emu): g++ does not combine the access
// instrumentation with ASan, so nothing reports a race or a shared-memory overrun there.
#ifdef CG_EMU_ACCESS_CHECKS
#define NEED_ACCESS_CHECKS()
#else
#define NEED_ACCESS_CHECKS() GTEST_SKIP() << "this build does not check shared-memory accesses (CUDAGRAD_EMU_ACCESS_CHECKS=OFF)"
#endif

// Every thread adds its index into one shared total: without an atomic a race (the emulator's
// unpreempted threads get 2016 anyway, in either order), with one the right way.
__global__ void shared_total(int* out, bool atomic) {
  CG_SHARED(int, total, );
  if (threadIdx.x == 0) total = 0;
  __syncthreads();
  if (atomic) atomicAdd(&total, int(threadIdx.x));
  else total += int(threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) *out = total;
}

TEST(EmulatedDevice, AnAtomicSumInSharedMemoryIsNoRace) {
  DeviceArray<int> out(1);
  ::cg_emu::launch(shared_total, "shared_total", 1, 64)(out.ptr, true);
  CHECK_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(out.download()[0], 2016);
}

TEST(EmulatedDevice, AReadModifyWriteRaceOnSharedMemoryFaultsNamingBothThreads) {
  NEED_ACCESS_CHECKS();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        int* out = nullptr;
        cudaMalloc(reinterpret_cast<void**>(&out), sizeof(int));
        ::cg_emu::launch(shared_total, "shared_total", 1, 64)(out, false);
        std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 3 : 0);
      },
      ::testing::ExitedWithCode(3),
      // Threads 0 then 1 in the forward schedule, 63 then 62 in the reverse one.
      "shared_total: block \\(0, 0, 0\\): a race on shared array 'total', byte 0: thread [0-9]+ read it after "
      "thread [0-9]+ wrote it between the same two barriers");
}

// Lane i writes slot i, the warp meets (__syncwarp), and lane i reads slot i + 1 of its warp: the
// warp operation orders them, so this is no race; nor is reading another warp's slots after
// __syncthreads.
__global__ void warp_ordered_rotation(int* out) {
  CG_SHARED(int, slots, [64]);
  const int t = threadIdx.x;
  slots[t] = 10 * t;
  __syncwarp();
  const int within_warp = slots[(t & ~31) + (t + 1) % 32];
  __syncthreads();
  out[t] = within_warp + slots[(t + 32) % 64];
}

TEST(EmulatedDevice, AccessesOrderedByAWarpOperationAreNoRace) {
  DeviceArray<int> out(64);
  ::cg_emu::launch(warp_ordered_rotation, "warp_ordered_rotation", 1, 64)(out.ptr);
  CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<int> o = out.download();
  for (int t = 0; t < 64; ++t) EXPECT_EQ(o[size_t(t)], 10 * ((t & ~31) + (t + 1) % 32) + 10 * ((t + 32) % 64)) << t;
}

// 33 threads write a 32-float shared array, the last one past its end.
__global__ void shared_overrun(float* out) {
  CG_SHARED(float, tile, [32]);
  tile[threadIdx.x] = 1.f;
  __syncthreads();
  if (threadIdx.x == 0) *out = tile[31];
}

TEST(EmulatedDevice, AnAccessPastASharedArrayFaults) {
  NEED_ACCESS_CHECKS();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        float* out = nullptr;
        cudaMalloc(reinterpret_cast<void**>(&out), sizeof(float));
        ::cg_emu::launch(shared_overrun, "shared_overrun", 1, 33)(out);
        std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 3 : 0);
      },
      ::testing::ExitedWithCode(3),
      "shared_overrun: block \\(0, 0, 0\\): thread 32 wrote 4 bytes at byte 128 of shared array 'tile', which has "
      "128: out of bounds");
}

// --- guard bytes ----------------------------------------------------------------------------

// The emulator's check of the guard zones, or under AddressSanitizer (scripts/sanitize.sh emu,
// where the zones are poisoned) ASan's report at the access itself.
#if defined(__SANITIZE_ADDRESS__)
#define EXPECT_GUARD_FAULT(body, message) EXPECT_DEATH(body, "use-after-poison")
#else
#define EXPECT_GUARD_FAULT(body, message) EXPECT_EXIT(body, ::testing::ExitedWithCode(3), message)
#endif

// n threads copy in to out, the last one also one element past the end of out.
__global__ void copy_one_past(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
  if (i == n - 1) out[n] = in[i];
}

TEST(EmulatedDevice, AKernelThatWritesPastItsAllocationFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_GUARD_FAULT(
      {
        float* in = nullptr;
        float* out = nullptr;
        cudaMalloc(reinterpret_cast<void**>(&in), 1000 * sizeof(float));
        cudaMalloc(reinterpret_cast<void**>(&out), 1000 * sizeof(float));
        ::cg_emu::launch(copy_one_past, "copy_one_past", 4, 256)(in, out, 1000);
        std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 3 : 0);
      },
      "copy_one_past: wrote outside its memory: bytes 0 to 3 past the end of the 4000-byte device allocation");
}

TEST(EmulatedDevice, WithinItsAllocationTheSameKernelRunsClean) {
  DeviceArray<float> in(1001), out(1001);
  ::cg_emu::launch(copy_one_past, "copy_one_past", 4, 256)(in.ptr, out.ptr, 1000);
  CHECK_CUDA(cudaDeviceSynchronize());
}

TEST(EmulatedDevice, FreeingAnAllocationWrittenBeforeItsStartFails) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_GUARD_FAULT(
      {
        unsigned char* p = nullptr;
        cudaMalloc(reinterpret_cast<void**>(&p), 64);
        p[-2] = 0;  // the second byte before it ("byte 0" is the nearest); a stray host write
        std::exit(cudaFree(p) == cudaErrorIllegalAddress ? 3 : 0);
      },
      "cudaFree: byte 1 before the start of the 64-byte device allocation");
}

// --- WMMA -----------------------------------------------------------------------------------

template <typename ALayout, typename BLayout>
__global__ void wmma_product(const __half* a, const __half* b, float* c) {
  namespace wmma = nvcuda::wmma;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, ALayout> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, BLayout> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.5f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}

// C = A B + 0.5 with A, B stored row- or column-major as the fragments' layouts say.
template <typename ALayout, typename BLayout>
void expect_wmma_product(bool a_row, bool b_row) {
  std::vector<float> a(256), b(256);
  for (int i = 0; i < 256; ++i) {
    a[size_t(i)] = float((i * 7) % 11) - 5.f;
    b[size_t(i)] = float((i * 5) % 13) * 0.25f - 1.f;
  }
  auto stored = [](const std::vector<float>& m, bool row_major) {
    std::vector<__half> s(256);
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 16; ++c) s[size_t(row_major ? r * 16 + c : c * 16 + r)] = __float2half(m[size_t(r * 16 + c)]);
    return s;
  };
  DeviceArray<__half> da(256), db(256);
  DeviceArray<float> dc(256);
  da.upload(stored(a, a_row));
  db.upload(stored(b, b_row));
  ::cg_emu::launch(wmma_product<ALayout, BLayout>, "wmma_product", 1, 32)(da.ptr, db.ptr, dc.ptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> c = dc.download();
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 16; ++col) {
      float want = 0.5f;
      for (int k = 0; k < 16; ++k) want += a[size_t(r * 16 + k)] * b[size_t(k * 16 + col)];
      ASSERT_EQ(c[size_t(r * 16 + col)], want) << r << " " << col;  // small integers and quarters: exact
    }
}

TEST(EmulatedDevice, WmmaIsTheMatrixProductInEveryLayout) {
  namespace wmma = nvcuda::wmma;
  expect_wmma_product<wmma::row_major, wmma::row_major>(true, true);
  expect_wmma_product<wmma::row_major, wmma::col_major>(true, false);
  expect_wmma_product<wmma::col_major, wmma::row_major>(false, true);
  expect_wmma_product<wmma::col_major, wmma::col_major>(false, false);
}

// --- half and bfloat16 rounding -------------------------------------------------------------

// Round to nearest even, written out on the bits: the device's conversion (cvt.rn).
uint16_t reference_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return uint16_t(sign | 0x7e00u);  // NaN
  if (x >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to infinity
  if (x < 0x33000001u) return uint16_t(sign);              // at most half the smallest subnormal
  const int exp = int(x >> 23) - 127;
  uint32_t mant = (x & 0x7fffffu) | 0x800000u;
  int shift = exp < -14 ? 13 + (-14 - exp) : 13;  // subnormal results lose more bits
  uint32_t kept = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1))) kept++;
  if (exp < -14) return uint16_t(sign | kept);
  return uint16_t(sign | (uint32_t(exp + 15) << 10)) + uint16_t(kept - 0x400u);
}

uint16_t reference_bf16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return uint16_t((x + rounding) >> 16);
}

__global__ void round_to_16bit(const float* in, __half* h, __nv_bfloat16* b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    h[i] = __float2half_rn(in[i]);
    b[i] = __float2bfloat16_rn(in[i]);
  }
}

TEST(EmulatedDevice, HalfAndBfloat16RoundToNearestEvenAsTheDeviceDoes) {
  std::vector<float> values = {1.f + 0x1p-11f, 1.f + 3 * 0x1p-11f, 1.f + 0x1p-8f, 65504.f, 65520.f, 65519.99f,
                               0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-14f + 0x1p-25f, -2.75f, 0.f, -0.f, 1e-30f,
                               3.14159265f, 1.f + 0x1p-8f + 0x1p-9f, 255.5f, 256.5f};
  for (uint32_t i = 0; i < 4000; ++i) {  // and a sweep of bit patterns over the half range
    const uint32_t bits = 0x33000000u + i * 0x5a5a5u % 0x14800000u;
    float f;
    std::memcpy(&f, &bits, 4);
    values.push_back(i % 2 ? f : -f);
  }
  const int n = int(values.size());
  DeviceArray<float> in{size_t(n)};
  DeviceArray<__half> h{size_t(n)};
  DeviceArray<__nv_bfloat16> b{size_t(n)};
  in.upload(values);
  ::cg_emu::launch(round_to_16bit, "round_to_16bit", (n + 255) / 256, 256)(in.ptr, h.ptr, b.ptr, n);
  CHECK_CUDA(cudaDeviceSynchronize());
  const std::vector<__half> hh = h.download();
  const std::vector<__nv_bfloat16> bb = b.download();
  for (int i = 0; i < n; ++i) {
    uint16_t hb, bbits;
    std::memcpy(&hb, &hh[size_t(i)], 2);
    std::memcpy(&bbits, &bb[size_t(i)], 2);
    ASSERT_EQ(hb, reference_half_bits(values[size_t(i)])) << std::hexfloat << values[size_t(i)];
    ASSERT_EQ(bbits, reference_bf16_bits(values[size_t(i)])) << std::hexfloat << values[size_t(i)];
  }
}

// --- streams and events ---------------------------------------------------------------------

__global__ void fill_value(int* p, int n, int value) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = value;
}

// A kernel on `producer`, a copy of its output on `consumer`; with or without the event between.
std::vector<int> copy_across_streams(bool wait) {
  cudaStream_t producer, consumer;
  cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking);
  cudaEvent_t done;
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  DeviceArray<int> d(1000);
  int* pinned = nullptr;
  cudaMallocHost(reinterpret_cast<void**>(&pinned), 1000 * sizeof(int));
  cudaMemsetAsync(d.ptr, 0, 1000 * sizeof(int), producer);
  cudaStreamSynchronize(producer);
  ::cg_emu::launch(fill_value, "fill_value", 4, 128, 0, producer)(d.ptr, 1000, 7);
  cudaEventRecord(done, producer);
  if (wait) cudaStreamWaitEvent(consumer, done, 0);
  cudaMemcpyAsync(pinned, d.ptr, 1000 * sizeof(int), cudaMemcpyDeviceToHost, consumer);
  cudaStreamSynchronize(consumer);
  std::vector<int> out(pinned, pinned + 1000);
  cudaDeviceSynchronize();
  cudaFreeHost(pinned);
  cudaEventDestroy(done);
  cudaStreamDestroy(producer);
  cudaStreamDestroy(consumer);
  return out;
}

TEST(EmulatedDevice, AStreamWaitOrdersTwoStreams) {
  EXPECT_EQ(copy_across_streams(true), std::vector<int>(1000, 7));
}

TEST(EmulatedDevice, WithoutTheWaitTheCopyRunsFirst) {
  // Work runs as late as CUDA allows: nothing orders the producer's kernel before the copy, so
  // the copy sees the zeros that were there before it. A missing wait is always caught.
  EXPECT_EQ(copy_across_streams(false), std::vector<int>(1000, 0));
}

// A stream destroyed while a wait for it is still queued on another stream (the legacy stream's
// implicit one, or cudaStreamWaitEvent's), or while an event recorded on it is still to be
// synchronized: CUDA allows both, and the destroyed stream's work has all run. The next stream
// created takes the destroyed one's memory (glibc hands a freed block of that size straight
// back), so a wait that kept the raw pointer drove the new stream's work, which nothing had asked
// for yet; had the memory gone elsewhere, it called into freed memory (an emulated ZeRO test
// crashed so in about one process in ten). The wait: `queue` before stream a is destroyed,
// `finish` after stream b's kernel is queued. Returns what that kernel's target holds then, read
// on a third stream: 1 if only a's kernel ran, 2 if the wait ran b's too.
struct DestroyedStreamWait {
  unsigned a_flags;
  std::function<void(cudaEvent_t recorded_on_a)> queue;
  std::function<void(cudaEvent_t recorded_on_a)> finish;
};
int value_after_waiting_on_a_destroyed_stream(const DestroyedStreamWait& w) {
  DeviceArray<int> d(1);
  d.upload({0});
  cudaStream_t a, b, reader;
  cudaStreamCreateWithFlags(&a, w.a_flags);
  cudaEvent_t on_a;
  cudaEventCreateWithFlags(&on_a, cudaEventDisableTiming);
  ::cg_emu::launch(fill_value, "fill_value", 1, 32, 0, a)(d.ptr, 1, 1);
  cudaEventRecord(on_a, a);
  w.queue(on_a);
  cudaStreamDestroy(a);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  EXPECT_EQ(b, a) << "the test's premise: the new stream reuses the destroyed one's memory";
  ::cg_emu::launch(fill_value, "fill_value", 1, 32, 0, b)(d.ptr, 1, 2);
  w.finish(on_a);
  cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking);
  int* pinned = nullptr;
  cudaMallocHost(reinterpret_cast<void**>(&pinned), sizeof(int));
  cudaMemcpyAsync(pinned, d.ptr, sizeof(int), cudaMemcpyDeviceToHost, reader);
  cudaStreamSynchronize(reader);
  const int value = *pinned;
  cudaDeviceSynchronize();
  cudaFreeHost(pinned);
  cudaEventDestroy(on_a);
  cudaStreamDestroy(b);
  cudaStreamDestroy(reader);
  return value;
}

TEST(EmulatedDevice, TheLegacyStreamsWaitForADestroyedStreamRunsNoOtherStream) {
  DeviceArray<int> scratch(1);
  EXPECT_EQ(value_after_waiting_on_a_destroyed_stream(
                {.a_flags = 0,  // blocking: work on the legacy stream waits for it
                 .queue = [&](cudaEvent_t) { cudaMemsetAsync(scratch.ptr, 0, sizeof(int), cudaStreamLegacy); },
                 .finish = [](cudaEvent_t) { cudaStreamSynchronize(cudaStreamLegacy); }}),
            1);
}

TEST(EmulatedDevice, AnEventWaitForADestroyedStreamRunsNoOtherStream) {
  cudaStream_t waiter;
  cudaStreamCreateWithFlags(&waiter, cudaStreamNonBlocking);
  EXPECT_EQ(value_after_waiting_on_a_destroyed_stream({.a_flags = cudaStreamNonBlocking,
                                                       .queue = [&](cudaEvent_t e) { cudaStreamWaitEvent(waiter, e, 0); },
                                                       .finish = [&](cudaEvent_t) { cudaStreamSynchronize(waiter); }}),
            1);
  cudaStreamDestroy(waiter);
}

TEST(EmulatedDevice, AnEventOfADestroyedStreamSynchronizesWithoutRunningAnotherStream) {
  EXPECT_EQ(value_after_waiting_on_a_destroyed_stream({.a_flags = cudaStreamNonBlocking,
                                                       .queue = [](cudaEvent_t) {},
                                                       .finish = [](cudaEvent_t e) { cudaEventSynchronize(e); }}),
            1);
}

TEST(EmulatedDevice, FreshDeviceMemoryIsPoisoned) {
  DeviceArray<float> d(64);
  for (float v : d.download()) EXPECT_TRUE(std::isnan(v));
}

TEST(EmulatedDevice, APageableSourceIsStagedAtTheCall) {
  DeviceArray<int> d(4);
  std::vector<int> host = {1, 2, 3, 4};
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  CHECK_CUDA(cudaMemcpyAsync(d.ptr, host.data(), 4 * sizeof(int), cudaMemcpyHostToDevice, s));
  host = {9, 9, 9, 9};  // allowed: CUDA has copied a pageable source before returning
  CHECK_CUDA(cudaStreamSynchronize(s));
  EXPECT_EQ(d.download(), (std::vector<int>{1, 2, 3, 4}));
  cudaStreamDestroy(s);
}

TEST(EmulatedDevice, CopiesOutsideAnAllocationAreRefused) {
  DeviceArray<int> d(4);
  std::vector<int> host(8);
  EXPECT_EQ(cudaMemcpy(host.data(), d.ptr, 8 * sizeof(int), cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  cudaGetLastError();
}

TEST(EmulatedDevice, LaunchConfigurationsTheDeviceRefusesSetTheLaunchError) {
  DeviceArray<int> d(4);
  ::cg_emu::launch(fill_value, "fill_value", 1, 2048)(d.ptr, 4, 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// --- graphs ---------------------------------------------------------------------------------

__global__ void add_value(int* p, int n, int value) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] += value;
}

TEST(EmulatedDevice, ACapturedForkAndJoinReplays) {
  cudaStream_t main, side;
  cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  cudaEvent_t fork, join;
  cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
  cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
  DeviceArray<int> a(100), b(100);
  cudaMemsetAsync(a.ptr, 0, 100 * sizeof(int), main);
  cudaMemsetAsync(b.ptr, 0, 100 * sizeof(int), main);
  cudaStreamSynchronize(main);
  CHECK_CUDA(cudaStreamBeginCapture(main, cudaStreamCaptureModeRelaxed));
  ::cg_emu::launch(add_value, "add_value", 1, 64, 0, main)(a.ptr, 100, 1);
  cudaEventRecord(fork, main);
  cudaStreamWaitEvent(side, fork, 0);
  ::cg_emu::launch(add_value, "add_value", 1, 64, 0, side)(b.ptr, 100, 10);
  cudaEventRecord(join, side);
  cudaStreamWaitEvent(main, join, 0);
  cudaGraph_t graph;
  CHECK_CUDA(cudaStreamEndCapture(main, &graph));
  EXPECT_EQ(a.download(), std::vector<int>(100, 0)) << "capture records, it does not run";
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) CHECK_CUDA(cudaGraphLaunch(exec, main));
  CHECK_CUDA(cudaStreamSynchronize(main));
  EXPECT_EQ(a.download(), std::vector<int>(100, 3));
  EXPECT_EQ(b.download(), std::vector<int>(100, 30));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(main);
  cudaStreamDestroy(side);
}

TEST(EmulatedDevice, ACaptureWithUnjoinedWorkFails) {
  cudaStream_t main, side;
  cudaStreamCreateWithFlags(&main, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
  cudaEvent_t fork;
  cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
  DeviceArray<int> a(10);
  CHECK_CUDA(cudaStreamBeginCapture(main, cudaStreamCaptureModeRelaxed));
  cudaEventRecord(fork, main);
  cudaStreamWaitEvent(side, fork, 0);
  ::cg_emu::launch(add_value, "add_value", 1, 32, 0, side)(a.ptr, 10, 1);  // never joined back into main
  cudaGraph_t graph;
  EXPECT_EQ(cudaStreamEndCapture(main, &graph), cudaErrorStreamCaptureUnjoined);
  cudaGetLastError();
  cudaStreamDestroy(main);
  cudaStreamDestroy(side);
}

TEST(EmulatedDevice, SynchronizingACapturedStreamInvalidatesTheCapture) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph;
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();
  cudaStreamDestroy(s);
}

}  // namespace
