// Channels-last ops on the GPU through the engine against the CPU (whose NHWC ops equal the NCHW
// reference bit for bit): conv2d through cuDNN and through the native kernel between layout
// changes, in float32 and under fp16/bf16 autocast (for cuDNN the KRSC weight is cast and
// transposed in one pass, its gradient comes back float32 KCRS), pooling and to_layout. Skips
// without a GPU.
#include <gtest/gtest.h>

#include <functional>
#include <tuple>

#include "engine/autocast.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "kernels/cuda/device_info.h"
#include "gpu_conv_cases.h"
#include "support/gpu_ops.h"
#include "support/gpu_params.h"

namespace cg {
namespace {

using ops::Layout;
using test::expect_gpu_matches_cpu;
using test::host_f32;
using test::kGpu;

// Zero-mean normal values with standard deviation sd.
Tensor randn(const Shape& s, uint64_t seed, double sd = 1.0) { return test::randn(s, seed, 0.0, sd); }

const test::Tolerance kF32 = test::kGpuF32;

const test::ConvCase kConvCases[] = {{{4, 28, 28, 1}, {16, 1, 3, 3}, 1, 1},   // Fashion-MNIST stem (x NHWC)
                                     {{4, 16, 16, 16}, {32, 16, 3, 3}, 2, 1},  // first conv of a stage
                                     {{4, 16, 16, 16}, {32, 16, 1, 1}, 2, 0},  // downsample
                                     {{3, 7, 5, 13}, {5, 13, 3, 3}, 1, 1}};    // odd sizes

// One case per implementation choice x compute dtype (GpuChannelsLastConv.MatchesTheCpu/
// cudnn_float16), with the NCHW cases' budgets (tests/engine/cuda/ops_test.cpp); under autocast
// the half KRSC weight is made in one pass and its gradient comes back float32 KCRS.
class GpuChannelsLastConv : public test::GpuConvChoice {};

TEST_P(GpuChannelsLastConv, MatchesTheCpu) {
  NEED_GPU();
  NEED_GPU_IMPL(std::get<0>(GetParam()));
  test::expect_conv_cases_match_cpu(kConvCases, Layout::nhwc, std::get<1>(GetParam()), kernels());
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuChannelsLastConv,
                         ::testing::Combine(::testing::Values(ops::GpuImpl::cudnn, ops::GpuImpl::native, ops::GpuImpl::automatic),
                                            ::testing::ValuesIn(test::kGpuFloatTypes)),
                         test::impl_dtype_case_name);

TEST(GpuChannelsLast, PoolingMatchesTheCpu) {
  NEED_GPU();
  expect_gpu_matches_cpu(
      [](const auto& t) {
        ops::ExecutionScope channels_last({.layout = Layout::nhwc});
        return ops::global_avg_pool(t[0]);
      },
      {randn({4, 8, 8, 32}, 8)}, kF32);
}

// One case per dtype (GpuToLayout.IsExactBothWays/bfloat16).
class GpuToLayout : public ::testing::TestWithParam<DType> {};

TEST_P(GpuToLayout, IsExactBothWays) {
  NEED_GPU();
  const DType t = GetParam();
  const Tensor x = randn({3, 5, 7, 33}, 9);
  const Tensor xt = x.to(t);
  const Tensor gpu = ops::to_layout(xt.to(kGpu), Layout::nchw, Layout::nhwc);
  EXPECT_EQ(gpu.dtype(), t);
  EXPECT_EQ(host_f32(gpu), host_f32(ops::to_layout(xt.to(DType::f32), Layout::nchw, Layout::nhwc)));
  EXPECT_EQ(host_f32(ops::to_layout(gpu, Layout::nhwc, Layout::nchw)), host_f32(xt));
  if (t == DType::f32)  // and its gradient, through autograd
    expect_gpu_matches_cpu([](const auto& v) { return ops::to_layout(v[0], Layout::nchw, Layout::nhwc); }, {x},
                           {0, 0});
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuToLayout, ::testing::ValuesIn(test::kGpuFloatTypes), test::dtype_case_name);

}  // namespace
}  // namespace cg
