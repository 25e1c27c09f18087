// The hand-written implicit-GEMM convolution (kernels/cuda/conv_native_*.cu) against the CPU
// reference (kernels/cpu/conv2d.h): each direction and dtype over every MiniResNet layer shape
// (Fashion-MNIST 28x28 and CIFAR 32x32, small batch) and odd ones that cross tile edges and take
// the generic paths; inputs rounded to the dtype first, the reference computed (summed in double) from the
// rounded values, outputs poisoned (NaN). Budget: the dtype's tolerance with atol scaled by
// sqrt(K), K the number of products summed per output (for_sum). Plus run-to-run determinism.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "kernels/cpu/conv2d.h"
#include "kernels/cuda/conv_native.h"
#include "support/cuda_kernel_test.h"
#include "support/device_workspace.h"

namespace cg::kernels {
namespace {

using kernels::Conv2dShape;
using test::DeviceBuffer;

// n, c_in, h, w, c_out, kh, kw, stride, pad
const Conv2dShape kShapes[] = {
    {2, 1, 28, 28, 64, 3, 3, 1, 1},     // Fashion-MNIST stem
    {2, 64, 28, 28, 64, 3, 3, 1, 1},    // Fashion-MNIST stage 1
    {2, 64, 28, 28, 128, 3, 3, 2, 1},   // ... stage 2, first conv (28 -> 14)
    {2, 64, 28, 28, 128, 1, 1, 2, 0},   // ... stage 2 downsample
    {2, 128, 14, 14, 256, 3, 3, 2, 1},  // ... stage 3, first conv (14 -> 7)
    {2, 256, 7, 7, 256, 3, 3, 1, 1},    // ... stage 3
    {2, 3, 32, 32, 64, 3, 3, 1, 1},     // CIFAR stem
    {2, 64, 32, 32, 64, 3, 3, 1, 1},    // CIFAR stage 1
    {2, 64, 32, 32, 128, 3, 3, 2, 1},   // stage 2, first conv
    {2, 64, 32, 32, 128, 1, 1, 2, 0},   // stage 2 downsample
    {2, 128, 16, 16, 128, 3, 3, 1, 1},  // stage 2
    {2, 128, 16, 16, 256, 3, 3, 2, 1},  // stage 3, first conv
    {2, 128, 16, 16, 256, 1, 1, 2, 0},  // stage 3 downsample
    {2, 256, 8, 8, 256, 3, 3, 1, 1},    // stage 3
    {1, 3, 5, 7, 13, 3, 3, 1, 1},       // odd sizes, batch 1
    {3, 13, 9, 6, 5, 3, 3, 2, 1},
    {1, 13, 5, 7, 3, 1, 1, 1, 0},  // 1x1 stride 1
    {2, 5, 7, 7, 3, 5, 5, 3, 2},   // generic filter size and stride
    {2, 3, 11, 9, 70, 2, 3, 1, 0},  // kh != kw, c_out crosses a 64-wide tile
    // Backward-data's phases of the stride: a 1x1 image (phases without pixels), a 2x2 filter at
    // stride 2 (every phase one tap), a 1x1 filter at stride 3 (eight phases without taps: zeros),
    // padding wider than the stride.
    {1, 4, 1, 1, 3, 3, 3, 2, 1},
    {2, 3, 6, 5, 4, 2, 2, 2, 0},
    {1, 5, 7, 8, 6, 1, 1, 3, 0},
    {2, 4, 9, 9, 5, 3, 3, 2, 2},
};

std::string describe(const Conv2dShape& s, DType t) {
  return fmt::format("{} n{} c{} {}x{} -> {} k{}x{} s{} p{}", dtype_name(t), s.n, s.c_in, s.h, s.w, s.c_out, s.kh,
                     s.kw, s.stride, s.pad);
}

struct Inputs {
  std::vector<float> x, w, b, dy;
};
Inputs random_inputs(const Conv2dShape& s, DType t, uint64_t seed) {
  return {test::random_rounded(size_t(s.n * s.c_in * s.h * s.w), seed, t),
          test::random_rounded(size_t(s.c_out * s.c_in * s.kh * s.kw), seed + 1, t, 0.2f),
          test::random_rounded(size_t(s.c_out), seed + 2, t),
          test::random_rounded(size_t(s.n * s.c_out * s.out_h() * s.out_w()), seed + 3, t)};
}

// Runs the native kernels on poisoned outputs and downloads the results.
std::vector<float> native_forward(const Conv2dShape& s, DType t, const Inputs& in) {
  DeviceBuffer x(in.x, t), w(in.w, t), b(in.b, t), y(in.dy.size(), t);
  y.poison();
  cuda::conv2d_native_forward(s, t, x.get(), w.get(), b.get(), y.get(), nullptr);
  return y.download();
}
std::vector<float> native_backward_data(const Conv2dShape& s, DType t, const Inputs& in) {
  DeviceBuffer dy(in.dy, t), w(in.w, t), dx(in.x.size(), t);
  dx.poison();
  cuda::conv2d_native_backward_data(s, t, dy.get(), w.get(), dx.get(), nullptr);
  return dx.download();
}
struct FilterGrads {
  std::vector<float> dw, db;
};
FilterGrads native_backward_filter(const Conv2dShape& s, DType t, const Inputs& in) {
  DeviceBuffer x(in.x, t), dy(in.dy, t), dw(in.w.size(), t), db(in.b.size(), t);
  dw.poison();
  db.poison();
  cuda::conv2d_native_backward_filter(s, t, x.get(), dy.get(), dw.get(), db.get(), test::device_workspace(), nullptr);
  return {dw.download(), db.download()};
}

class CudaConvNative : public ::testing::TestWithParam<DType> {};

TEST_P(CudaConvNative, ForwardMatchesTheCpu) {
  NEED_GPU();
  const DType t = GetParam();
  uint64_t seed = 100;
  for (const Conv2dShape& s : kShapes) {
    const Inputs in = random_inputs(s, t, seed += 10);
    std::vector<float> ref(in.dy.size());
    cpu::conv2d_forward<float>(s, in.x.data(), in.w.data(), in.b.data(), ref.data());
    const auto tol = test::for_sum(test::tolerance_of(t), double(s.c_in * s.kh * s.kw));
    EXPECT_TRUE(test::all_close(native_forward(s, t, in), ref, tol)) << describe(s, t);
  }
}

TEST_P(CudaConvNative, BackwardDataMatchesTheCpu) {
  NEED_GPU();
  const DType t = GetParam();
  uint64_t seed = 200;
  for (const Conv2dShape& s : kShapes) {
    const Inputs in = random_inputs(s, t, seed += 10);
    std::vector<float> ref(in.x.size());
    cpu::conv2d_backward_data<float>(s, in.dy.data(), in.w.data(), ref.data());
    const auto tol = test::for_sum(test::tolerance_of(t), double(s.c_out * s.kh * s.kw));
    EXPECT_TRUE(test::all_close(native_backward_data(s, t, in), ref, tol)) << describe(s, t);
  }
}

TEST_P(CudaConvNative, BackwardFilterMatchesTheCpu) {
  NEED_GPU();
  const DType t = GetParam();
  uint64_t seed = 300;
  for (const Conv2dShape& s : kShapes) {
    const Inputs in = random_inputs(s, t, seed += 10);
    std::vector<float> dw(in.w.size()), db(in.b.size());
    cpu::conv2d_backward_filter<float>(s, in.x.data(), in.dy.data(), dw.data(), db.data());
    const FilterGrads got = native_backward_filter(s, t, in);
    const auto tol = test::for_sum(test::tolerance_of(t), double(s.n * s.out_h() * s.out_w()));
    EXPECT_TRUE(test::all_close(got.dw, dw, tol)) << describe(s, t) << ": dw";
    EXPECT_TRUE(test::all_close(got.db, db, tol)) << describe(s, t) << ": db";
  }
}

// Batch 8 at 32x32 gives backward-filter several K slices; their sum must not vary run to run.
TEST_P(CudaConvNative, BackwardFilterIsBitIdenticalRunToRun) {
  NEED_GPU();
  const DType t = GetParam();
  for (const Conv2dShape& s : {Conv2dShape{8, 64, 32, 32, 64, 3, 3, 1, 1}, Conv2dShape{8, 3, 32, 32, 64, 3, 3, 1, 1}}) {
    const Inputs in = random_inputs(s, t, 400);
    const FilterGrads a = native_backward_filter(s, t, in), b = native_backward_filter(s, t, in);
    EXPECT_EQ(a.dw, b.dw) << describe(s, t);
    EXPECT_EQ(a.db, b.db) << describe(s, t);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaConvNative, ::testing::Values(DType::f32, DType::f16, DType::bf16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

// Host-side logic, runs without a GPU: which shapes and dtypes the native kernels take.
TEST(CudaConvNativeSupports, FloatingDtypesAndIntIndexableShapes) {
  const Conv2dShape ok{2, 64, 32, 32, 64, 3, 3, 1, 1};
#ifdef CUDAGRAD_WITH_CUDA
  EXPECT_TRUE(cuda::conv2d_native_supports(ok, DType::f32));
  EXPECT_TRUE(cuda::conv2d_native_supports(ok, DType::f16));
  EXPECT_TRUE(cuda::conv2d_native_supports(ok, DType::bf16));
  EXPECT_FALSE(cuda::conv2d_native_supports(ok, DType::f64));
  EXPECT_FALSE(cuda::conv2d_native_supports({4096, 256, 1024, 1024, 64, 3, 3, 1, 1}, DType::f16));  // 2^40 elements
  EXPECT_FALSE(cuda::conv2d_native_supports({1, 3, 2, 2, 8, 5, 5, 1, 0}, DType::f32));  // filter larger than the image
#else
  EXPECT_FALSE(cuda::conv2d_native_supports(ok, DType::f32));  // no CUDA: nothing is supported
#endif
}

}  // namespace
}  // namespace cg::kernels
