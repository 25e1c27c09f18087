// Elementwise kernels in f32, f16 and bf16 (aligned pointers: the 16-byte vector path and its
// tail; misaligned ones: the scalar path) and the casts between every pair of dtypes, against the
// CPU reference, bit for bit; outputs poisoned first.
#include <cstring>

#include "kernels/cpu/cast.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/elementwise.h"
#include "support/cuda_kernel_test.h"
#include "support/gpu_params.h"

namespace cg::kernels {
namespace {

using test::DeviceBuffer;

// Sizes: MiniResNet's activations at batch 4 (32x32 and 28x28 inputs, every stage), one at batch
// 256 (+3, a tail after the 16-byte vectors), and odd ones (shorter than one vector, 5x7 images
// with 3 and 13 channels).
const int64_t kSizes[] = {4 * 64 * 32 * 32, 4 * 128 * 16 * 16, 4 * 256 * 8 * 8, 4 * 64 * 28 * 28, 4 * 128 * 14 * 14,
                          4 * 256 * 7 * 7,  256 * 64 * 32 * 32 + 3, 1, 7, 3 * 5 * 7, 2 * 13 * 5 * 7 + 1};

// Runs every op on n elements that start `offset` elements into their buffers (offset 1 makes
// every pointer misaligned: the one-element-per-thread path) and compares with the CPU.
void check_every_op(DType t, int64_t n, size_t offset, uint64_t seed) {
  const auto a = test::random_rounded(size_t(n), seed, t), b = test::random_rounded(size_t(n), seed + 1, t);
  auto padded = [&](const std::vector<float>& v) {
    std::vector<float> out(offset, 0.f);
    out.insert(out.end(), v.begin(), v.end());
    return out;
  };
  DeviceBuffer ga(padded(a), t), gb(padded(b), t), gy(size_t(n) + offset, t);
  const size_t skip = offset * itemsize(t);
  const void *pa = ga.get<char>() + skip, *pb = gb.get<char>() + skip;
  void* py = gy.get<char>() + skip;
  std::vector<float> ref(static_cast<size_t>(n));
  auto check = [&](const char* op) {
    // The GPU computes in fp32 and rounds once, like the CPU reference followed by rounding.
    std::vector<float> got = gy.download();
    got.erase(got.begin(), got.begin() + long(offset));
    EXPECT_TRUE(test::all_close(got, test::rounded(ref, t), {0, 0}))
        << op << " " << dtype_name(t) << " n " << n << " offset " << offset;
    gy.poison();
  };
  gy.poison();
  cuda::relu_forward(n, t, pa, py, nullptr);
  cpu::relu_forward<float>(n, a.data(), ref.data());
  check("relu");
  cuda::relu_backward(n, t, pa, pb, py, nullptr);
  cpu::relu_backward<float>(n, a.data(), b.data(), ref.data());
  check("relu_backward");
  cuda::add(n, t, pa, pb, py, nullptr);
  cpu::add<float>(n, a.data(), b.data(), ref.data());
  check("add");
  cuda::add_relu(n, t, pa, pb, py, nullptr);
  cpu::add_relu<float>(n, a.data(), b.data(), ref.data());
  check("add_relu");
  cuda::scale(n, t, -0.375f, pa, py, nullptr);
  cpu::scale<float>(n, -0.375f, a.data(), ref.data());
  check("scale");
  gy.upload(padded(b));
  cuda::accumulate(n, t, pa, py, nullptr);
  ref = b;
  cpu::accumulate<float>(n, a.data(), ref.data());
  check("accumulate");
  // In place (y is also the input), as the engine does for relu and scale.
  gy.upload(padded(a));
  cuda::relu_forward(n, t, py, py, nullptr);
  cpu::relu_forward<float>(n, a.data(), ref.data());
  check("relu in place");
}

// One case per dtype (CudaElementwiseOps.EveryOpMatchesTheCpu/float16).
class CudaElementwiseOps : public ::testing::TestWithParam<DType> {};

TEST_P(CudaElementwiseOps, EveryOpMatchesTheCpu) {
  NEED_GPU();
  const DType t = GetParam();
  uint64_t seed = 1 + 100 * uint64_t(t);
  for (int64_t n : kSizes) check_every_op(t, n, 0, seed += 2);
}

// More elements than one grid covers (blocks_for caps it at 132 * 16 blocks of kThreads): the
// scalar path's grid-stride loop must go round a second time (the emulation mutant grid_stride_wrap
// takes that loop away).
constexpr int64_t kPastOneGrid = 132 * 16 * 256 + 4099;

TEST_P(CudaElementwiseOps, MisalignedPointersMatchTheCpu) {
  NEED_GPU();
  const DType t = GetParam();
  uint64_t seed = 1000 + 100 * uint64_t(t);
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(4 * 64 * 28 * 28), int64_t(2 * 13 * 5 * 7 + 1), kPastOneGrid})
    check_every_op(t, n, 1, seed += 2);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaElementwiseOps, ::testing::ValuesIn(test::kGpuFloatTypes), test::dtype_case_name);

const DType kAllTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::u8};

// One case per (from, to) pair (CudaCastPairs.ConvertsLikeTheCpu/float16_to_uint8).
class CudaCastPairs : public ::testing::TestWithParam<std::tuple<DType, DType>> {};

TEST_P(CudaCastPairs, ConvertsLikeTheCpu) {
  NEED_GPU();
  const auto [from, to] = GetParam();
  std::vector<float> values = test::random_vector<float>(4099, 3);
  for (float& v : values) v = v * 60.f + 70.f;  // mostly in u8's range; ties and large values too
  const int64_t n = int64_t(values.size());
  std::vector<unsigned char> src(size_t(n) * itemsize(from)), want(size_t(n) * itemsize(to)), got(want.size());
  cpu::cast(n, DType::f32, values.data(), from, src.data());
  cpu::cast(n, from, src.data(), to, want.data());
  void* gsrc = cuda::device_malloc(src.size(), 0);
  void* gdst = cuda::device_malloc(got.size(), 0);
  cuda::copy_host_to_device(gsrc, src.data(), src.size(), nullptr);
  cuda::cast(n, from, gsrc, to, gdst, nullptr);
  cuda::copy_device_to_host(got.data(), gdst, got.size(), nullptr);
  cuda::synchronize_stream(nullptr);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << dtype_name(from) << " -> " << dtype_name(to);
  cuda::device_free(gsrc, 0);
  cuda::device_free(gdst, 0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaCastPairs,
                         ::testing::Combine(::testing::ValuesIn(kAllTypes), ::testing::ValuesIn(kAllTypes)),
                         test::dtype_pair_case_name);

// One case per dtype (CudaFill.WritesTheCpusBits/int64).
class CudaFill : public ::testing::TestWithParam<DType> {};

TEST_P(CudaFill, WritesTheCpusBits) {
  NEED_GPU();
  const DType t = GetParam();
  for (double v : {0.0, 1.0, -2.5, 65536.0, 1.0 / 3.0}) {
    const int64_t n = 777;
    std::vector<unsigned char> want(size_t(n) * itemsize(t)), got(want.size());
    cpu::fill_cast(n, v, t, want.data());
    void* g = cuda::device_malloc(got.size(), 0);
    cuda::fill(n, t, v, g, nullptr);
    cuda::copy_device_to_host(got.data(), g, got.size(), nullptr);
    cuda::synchronize_stream(nullptr);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << dtype_name(t) << " " << v;
    cuda::device_free(g, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaFill,
                         ::testing::Values(DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::u8),
                         test::dtype_case_name);

}  // namespace
}  // namespace cg::kernels
