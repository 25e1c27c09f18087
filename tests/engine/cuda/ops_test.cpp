// Every differentiable op on the GPU against the same op on the CPU, through the engine: forward
// outputs, input gradients and state updates (BatchNorm's running statistics), with each GPU
// implementation choice (cuDNN and native) and under autocast. Skips without a GPU.
#include <gtest/gtest.h>

#include <functional>
#include <tuple>

#include <fmt/format.h>

#include "engine/autocast.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "kernels/cuda/device_info.h"
#include "gpu_conv_cases.h"
#include "support/gpu_ops.h"
#include "support/gpu_params.h"

namespace cg {
namespace {

using test::expect_gpu_matches_cpu;
using test::host_f32;
using test::kGpu;
using test::randn;

const test::Tolerance kF32 = test::kGpuF32;

const test::ConvCase kConvCases[] = {{{4, 3, 32, 32}, {16, 3, 3, 3}, 1, 1},   // stem
                                     {{4, 16, 16, 16}, {32, 16, 3, 3}, 2, 1},  // first conv of a stage
                                     {{4, 16, 16, 16}, {32, 16, 1, 1}, 2, 0},  // downsample
                                     {{3, 13, 7, 5}, {5, 13, 3, 3}, 1, 1}};    // odd sizes

// One case per implementation x compute dtype (GpuConv.MatchesTheCpu/native_bfloat16): float32
// as it comes, float16 and bfloat16 under autocast (float32 parameters and gradients).
class GpuConv : public test::GpuConvChoice {};

TEST_P(GpuConv, MatchesTheCpu) {
  NEED_GPU();
  NEED_GPU_IMPL(std::get<0>(GetParam()));
  test::expect_conv_cases_match_cpu(kConvCases, ops::Layout::nchw, std::get<1>(GetParam()), kernels());
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuConv,
                         ::testing::Combine(::testing::Values(ops::GpuImpl::cudnn, ops::GpuImpl::native),
                                            ::testing::ValuesIn(test::kGpuFloatTypes)),
                         test::impl_dtype_case_name);

class GpuBatchNorm : public ::testing::TestWithParam<ops::GpuImpl> {};

// kernels.batch_norm=cudnn in eval: cuDNN's forward matches the CPU, and a backward through it is
// refused (cuDNN has none) instead of being run by the native kernels.
void expect_cudnn_eval(const ops::BatchNormOptions& o, const Tensor& rm_c, const Tensor& rv_c, const Tensor& rm_g,
                       const Tensor& rv_g) {
  const Tensor x = randn({8, 16, 6, 6}, 9, 0.5, 2.0), w = randn({16}, 10), b = randn({16}, 11);
  const Tensor yc = ops::batch_norm(x, w, b, rm_c, rv_c, Tensor(), o);
  const Tensor yg = ops::batch_norm(x.to(kGpu), w.to(kGpu), b.to(kGpu), rm_g, rv_g, Tensor(), o);
  EXPECT_TRUE(test::all_close(host_f32(yg), yc.to_vector<float>(), kF32)) << "cuDNN eval forward";
  Tensor xg = x.to(kGpu).set_requires_grad(true);
  try {
    ops::batch_norm(xg, w.to(kGpu), b.to(kGpu), rm_g, rv_g, Tensor(), o);
    ADD_FAILURE() << "kernels.batch_norm=cudnn accepted an eval-mode backward";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no eval-mode backward"), std::string::npos) << e.what();
  }
}

// One case per implementation x mode x activation (GpuBatchNormModes.MatchTheCpuWithStatistics/
// cudnn_eval_relu).
struct BatchNormCase {
  ops::GpuImpl impl;
  bool training;
  ops::Activation act;
};

std::vector<BatchNormCase> batch_norm_cases() {
  std::vector<BatchNormCase> out;
  for (ops::GpuImpl impl : {ops::GpuImpl::cudnn, ops::GpuImpl::native})
    for (bool training : {true, false})
      for (ops::Activation act : {ops::Activation::none, ops::Activation::relu}) out.push_back({impl, training, act});
  return out;
}

std::string batch_norm_case_name(const ::testing::TestParamInfo<BatchNormCase>& info) {
  const BatchNormCase& c = info.param;
  return fmt::format("{}_{}_{}", c.impl == ops::GpuImpl::cudnn ? "cudnn" : "native", c.training ? "train" : "eval",
                     c.act == ops::Activation::relu ? "relu" : "none");
}

class GpuBatchNormModes : public ::testing::TestWithParam<BatchNormCase> {};

TEST_P(GpuBatchNormModes, MatchTheCpuWithStatistics) {
  NEED_GPU();
  NEED_GPU_IMPL(GetParam().impl);
  const BatchNormCase c = GetParam();
  Tensor rm_c = randn({16}, 7), rv_c = Tensor::full({16}, 1.5);
  Tensor rm_g = rm_c.to(kGpu), rv_g = rv_c.to(kGpu);
  Tensor nbt_g = Tensor::zeros({}, DType::i64).to(kGpu);
  ops::ExecutionScope with_impl({.kernels = {.batch_norm = c.impl}});
  const ops::BatchNormOptions o{.training = c.training, .momentum = 0.1, .eps = 1e-5, .activation = c.act};
  if (c.impl == ops::GpuImpl::cudnn && !c.training) {
    expect_cudnn_eval(o, rm_c, rv_c, rm_g, rv_g);
    return;
  }
  bool on_gpu = false;
  expect_gpu_matches_cpu(
      [&](const auto& t) {
        on_gpu = t[0].device().is_cuda();
        return ops::batch_norm(t[0], t[1], t[2], on_gpu ? rm_g : rm_c, on_gpu ? rv_g : rv_c,
                               on_gpu ? nbt_g : Tensor(), o);
      },
      {randn({8, 16, 6, 6}, 9, 0.5, 2.0), randn({16}, 10), randn({16}, 11)}, kF32);
  EXPECT_TRUE(test::all_close(host_f32(rm_g), rm_c.to_vector<float>(), kF32)) << "running_mean";
  EXPECT_TRUE(test::all_close(host_f32(rv_g), rv_c.to_vector<float>(), kF32)) << "running_var";
  EXPECT_EQ(nbt_g.item(), c.training ? 1.0 : 0.0) << "num_batches_tracked counts on the device";
}

INSTANTIATE_TEST_SUITE_P(Cases, GpuBatchNormModes, ::testing::ValuesIn(batch_norm_cases()), batch_norm_case_name);

TEST_P(GpuBatchNorm, TakesHalfActivationsWithFloat32Parameters) {
  NEED_GPU();
  NEED_GPU_IMPL(GetParam());
  Tensor x = randn({8, 16, 6, 6}, 12).to(DType::f16).to(kGpu);
  Tensor w = Tensor::full({16}, 1.0).to(kGpu), b = Tensor::zeros({16}).to(kGpu);
  Tensor rm = Tensor::zeros({16}).to(kGpu), rv = Tensor::full({16}, 1.0).to(kGpu);
  ops::ExecutionScope with_impl({.kernels = {.batch_norm = GetParam()}});
  const ops::BatchNormOptions o{.training = true, .momentum = 0.1, .eps = 1e-5, .activation = ops::Activation::relu};
  const Tensor y = ops::batch_norm(x, w, b, rm, rv, Tensor(), o);
  EXPECT_EQ(y.dtype(), DType::f16);
  const Tensor ref = ops::batch_norm(x.to(DType::f32).to(Device::cpu()), w.to(Device::cpu()), b.to(Device::cpu()),
                                     Tensor::zeros({16}), Tensor::full({16}, 1.0), Tensor(),
                                     {true, 0.1, 1e-5, ops::Activation::relu});
  EXPECT_TRUE(test::all_close(host_f32(y), ref.to_vector<float>(), test::kToleranceF16));
}

INSTANTIATE_TEST_SUITE_P(Impl, GpuBatchNorm, ::testing::Values(ops::GpuImpl::cudnn, ops::GpuImpl::native),
                         [](const auto& info) { return info.param == ops::GpuImpl::cudnn ? "cudnn" : "native"; });

TEST(GpuOps, ElementwiseMatchTheCpu) {
  NEED_GPU();
  const Shape s{4, 8, 5, 3};
  expect_gpu_matches_cpu([](const auto& t) { return ops::relu(t[0]); }, {randn(s, 20)}, kF32);
  expect_gpu_matches_cpu([](const auto& t) { return ops::add(t[0], t[1]); }, {randn(s, 21), randn(s, 22)}, kF32);
  expect_gpu_matches_cpu([](const auto& t) { return ops::add_relu(t[0], t[1]); }, {randn(s, 23), randn(s, 24)}, kF32);
  expect_gpu_matches_cpu([](const auto& t) { return ops::scale(t[0], -0.75); }, {randn(s, 25)}, kF32);
}

TEST(GpuOps, HeadMatchesTheCpu) {
  NEED_GPU();
  expect_gpu_matches_cpu([](const auto& t) { return ops::global_avg_pool(t[0]); }, {randn({4, 32, 8, 8}, 30)}, kF32);
  expect_gpu_matches_cpu([](const auto& t) { return ops::linear(t[0], t[1], t[2]); },
                         {randn({16, 64}, 31), randn({10, 64}, 32, 0.0, 0.1), randn({10}, 33)}, kF32);
  const Tensor labels = Tensor::from_vector<int64_t>({3, 0, 9, 9, 1, 2, 7, 4}, {8});
  const Tensor labels_gpu = labels.to(kGpu);
  expect_gpu_matches_cpu(
      [&](const auto& t) { return ops::cross_entropy(t[0], t[0].device().is_cuda() ? labels_gpu : labels); },
      {randn({8, 10}, 34, 0.0, 3.0)}, kF32);
  Tensor hits_cpu, hits_gpu;
  const Tensor logits = randn({8, 10}, 35, 0.0, 3.0);
  ops::cross_entropy(logits, labels, &hits_cpu);
  ops::cross_entropy(logits.to(kGpu), labels_gpu, &hits_gpu);
  EXPECT_TRUE(hits_gpu.device().is_cuda());
  EXPECT_EQ(hits_gpu.item(), hits_cpu.item());
}

TEST(GpuOps, LinearUnderAutocastAndHalfLogitsInTheLoss) {
  NEED_GPU();
  expect_gpu_matches_cpu(
      [](const auto& t) {
        autocast::Scope scope({.dtype = DType::f16});
        return ops::linear(t[0], t[1], t[2]);
      },
      {randn({16, 64}, 40), randn({10, 64}, 41, 0.0, 0.1), randn({10}, 42)}, {2e-2, 2e-2}, DType::f16);
  const Tensor labels = Tensor::from_vector<int64_t>({1, 2}, {2}).to(kGpu);
  const Tensor loss = ops::cross_entropy(randn({2, 10}, 43).to(DType::f16).to(kGpu), labels);
  EXPECT_EQ(loss.dtype(), DType::f32) << "the loss is computed in float32";
}

TEST(GpuTensor, FillCastAndCopyAcrossDevicesAndDtypes) {
  NEED_GPU();
  Tensor t = Tensor::full({1000}, 2.5, DType::f32, kGpu);
  EXPECT_EQ(host_f32(t), std::vector<float>(1000, 2.5f));
  const Tensor h = randn({333}, 50);
  for (DType d : {DType::f16, DType::bf16, DType::f64}) {
    const Tensor there_and_back = h.to(kGpu).to(d).to(DType::f32).to(Device::cpu());
    const Tensor on_cpu = h.to(d).to(DType::f32);
    EXPECT_EQ(there_and_back.to_vector<float>(), on_cpu.to_vector<float>()) << dtype_name(d) << ": same rounding";
  }
  Tensor dst = Tensor::empty({333}, DType::bf16, kGpu);
  dst.copy_(h);  // CPU float32 into GPU bfloat16
  EXPECT_EQ(host_f32(dst), h.to(DType::bf16).to(DType::f32).to_vector<float>());
}

}  // namespace
}  // namespace cg
