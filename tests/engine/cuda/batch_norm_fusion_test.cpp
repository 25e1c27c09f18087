// ops::batch_norm_add_relu on the GPU, through the engine, in f32, f16 and bf16, NCHW and
// channels-last, native kernels and cuDNN: bit for bit what separate batch_norm and add_relu give
// on the same GPU (forward, all four gradients, running statistics), and close to the CPU's
// float32 on the same (half-rounded) inputs: f32 within 5e-4; f16 and bf16 within their budgets
// (sums: the budget grown with the number of terms), with the residual moved so that no
// pre-activation lies within rounding of the ReLU's kink, where the two runs could disagree. cuDNN has no eval-mode backward, so
// under kernels.batch_norm=cudnn the eval cases expect the refusal. Skips without a GPU.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/ops.h"
#include "support/cuda_kernel_test.h"
#include "support/gpu_ops.h"

namespace cg {
namespace {

using ops::Activation;
using ops::Layout;
using test::kGpu;
using test::randn;

std::vector<float> host(const Tensor& t) { return test::host_f32(t); }

struct Result {
  std::vector<float> y, dx, dgamma, dbeta, dresidual, running_mean, running_var;
};

// relu(bn(x) + r) with activations in `dtype` on `device` (parameters and statistics f32), under
// kernels.batch_norm=impl.
Result run(ops::GpuImpl impl, bool fused, bool training, Layout layout, Device device, DType dtype,
           const Tensor& x_values, const Tensor& r_values, const Tensor& gamma_values, const Tensor& beta_values,
           const Tensor& dy) {
  auto leaf = [&](const Tensor& t, DType dt) { return t.to(dt).to(device).set_requires_grad(true); };
  Tensor x = leaf(x_values, dtype), r = leaf(r_values, dtype);
  Tensor gamma = leaf(gamma_values, DType::f32), beta = leaf(beta_values, DType::f32);
  const int64_t c = gamma.numel();
  Tensor mean = Tensor::full({c}, 0.25).to(device), var = Tensor::full({c}, 1.5).to(device);
  Tensor count = Tensor::zeros({}, DType::i64).to(device);
  ops::ExecutionScope in_context({.layout = layout, .kernels = {.batch_norm = impl}});
  const ops::BatchNormOptions o{.training = training, .momentum = 0.1, .eps = 1e-5};
  Tensor y = fused ? ops::batch_norm_add_relu(x, r, gamma, beta, mean, var, count, o)
                   : ops::add_relu(ops::batch_norm(x, gamma, beta, mean, var, count, o), r);
  y.backward(dy.to(dtype).to(device));
  return {host(y), host(x.grad()), host(gamma.grad()), host(beta.grad()), host(r.grad()), host(mean), host(var)};
}

std::vector<std::pair<const char*, const std::vector<float>*>> fields(const Result& r) {
  return {{"y", &r.y},
          {"dx", &r.dx},
          {"dgamma", &r.dgamma},
          {"dbeta", &r.dbeta},
          {"d residual", &r.dresidual},
          {"running_mean", &r.running_mean},
          {"running_var", &r.running_var}};
}

struct Case {
  Shape shape;  // in the layout's own order
  Layout layout;
};

// MiniResNet's stage shapes at batch 4 in both layouts (H*W 64 and 49: vector and scalar paths).
const Case kCases[] = {{{4, 64, 8, 8}, Layout::nchw},
                       {{4, 8, 8, 64}, Layout::nhwc},
                       {{4, 256, 7, 7}, Layout::nchw},
                       {{4, 7, 7, 256}, Layout::nhwc}};

// One case per implementation x dtype, named in a failure (e.g. .../cudnn_float16).
struct ImplCase {
  ops::GpuImpl impl;
  DType dtype;
};

std::string impl_case_name(const ::testing::TestParamInfo<ImplCase>& info) {
  return fmt::format("{}_{}", info.param.impl == ops::GpuImpl::cudnn ? "cudnn" : "native",
                     dtype_name(info.param.dtype));
}

class GpuBatchNormAddRelu : public ::testing::TestWithParam<ImplCase> {};

// A half-type GPU result against the CPU's float32 one on the same rounded inputs.
void expect_half_close_to_cpu(const Result& gpu, const Result& cpu, DType dtype, int64_t per_channel,
                              const std::string& where) {
  const test::Tolerance tol = test::tolerance_of(dtype), sum = test::for_sum(tol, double(per_channel));
  size_t flipped = 0;
  for (size_t i = 0; i < gpu.y.size(); ++i) flipped += (gpu.y[i] > 0) != (cpu.y[i] > 0);
  EXPECT_EQ(flipped, 0u) << where << ": values on the other side of the ReLU's kink";
  for (auto [name, g, c] : {std::tuple{"y", &gpu.y, &cpu.y}, std::tuple{"d residual", &gpu.dresidual, &cpu.dresidual}})
    EXPECT_TRUE(test::all_close(*g, *c, tol)) << where << ": " << name;
  for (auto [name, g, c] : {std::tuple{"dx", &gpu.dx, &cpu.dx}, std::tuple{"dgamma", &gpu.dgamma, &cpu.dgamma},
                            std::tuple{"dbeta", &gpu.dbeta, &cpu.dbeta},
                            std::tuple{"running_mean", &gpu.running_mean, &cpu.running_mean},
                            std::tuple{"running_var", &gpu.running_var, &cpu.running_var}})
    EXPECT_TRUE(test::all_close(*g, *c, sum)) << where << ": " << name;
}

// Rounded to `dtype` and back: the values a half-type run actually sees.
Tensor as_seen_in(const Tensor& t, DType dtype) { return t.to(dtype).to(DType::f32); }

// The residual moved so that every pre-activation bn(x) + r lies at least 0.1 from the ReLU's
// kink (a value within rounding of 0 could land on either side in the two runs, and its gradient
// with it); the half types' rounding moves a pre-activation by a few hundredths at most here.
Tensor residual_away_from_kink(const Tensor& x, const Tensor& r, const Tensor& gamma, const Tensor& beta,
                               bool training, Layout layout) {
  autograd::NoGradGuard no_grad;
  const int64_t c = gamma.numel();
  Tensor mean = Tensor::full({c}, 0.25), var = Tensor::full({c}, 1.5), count = Tensor::zeros({}, DType::i64);
  ops::ExecutionScope in_layout({.layout = layout});
  const ops::BatchNormOptions o{.training = training, .momentum = 0.1, .eps = 1e-5};
  const std::vector<float> pre = ops::add(ops::batch_norm(x, gamma, beta, mean, var, count, o), r).to_vector<float>();
  std::vector<float> moved = r.to_vector<float>();
  for (size_t i = 0; i < pre.size(); ++i)
    if (std::abs(pre[i]) < 0.1f) moved[i] += pre[i] >= 0 ? 0.1f : -0.1f;
  return Tensor::from_vector(moved, r.shape());
}

// kernels.batch_norm=cudnn has no eval-mode backward: such a layer is refused, not run natively.
bool refused_eval_backward(ops::GpuImpl impl, bool training, const Case& k, DType dtype, const Tensor& x,
                           const Tensor& r, const Tensor& gamma, const Tensor& beta, const Tensor& dy) {
  if (impl != ops::GpuImpl::cudnn || training) return false;
  for (bool fused : {true, false}) {
    try {
      run(impl, fused, training, k.layout, kGpu, dtype, x, r, gamma, beta, dy);
      ADD_FAILURE() << "kernels.batch_norm=cudnn ran an eval-mode backward";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("kernels.batch_norm=cudnn has no eval-mode backward"), std::string::npos)
          << e.what();
    }
  }
  return true;
}

TEST_P(GpuBatchNormAddRelu, IsBitIdenticalToSeparateOps) {
  NEED_GPU();
  const auto [impl, dtype] = GetParam();
  NEED_GPU_IMPL(impl);
  uint64_t seed = 100;
  for (const Case& k : kCases)
    for (bool training : {true, false}) {
      const int64_t c = k.layout == Layout::nhwc ? k.shape[3] : k.shape[1];
      const Tensor x = randn(k.shape, ++seed, 0.5), r = randn(k.shape, ++seed), dy = randn(k.shape, ++seed);
      const Tensor gamma = randn({c}, ++seed, 1.0), beta = randn({c}, ++seed);
      const std::string where = fmt::format("{} {} {} {}", dtype_name(dtype), shape_str(k.shape),
                                            k.layout == Layout::nhwc ? "nhwc" : "nchw", training ? "train" : "eval");
      if (refused_eval_backward(impl, training, k, dtype, x, r, gamma, beta, dy)) continue;
      const Result fused = run(impl, true, training, k.layout, kGpu, dtype, x, r, gamma, beta, dy);
      const Result separate = run(impl, false, training, k.layout, kGpu, dtype, x, r, gamma, beta, dy);
      const auto f = fields(fused), s = fields(separate);
      for (size_t i = 0; i < f.size(); ++i)
        EXPECT_EQ(*f[i].second, *s[i].second) << where << ": " << f[i].first << " fused vs separate";
      if (dtype != DType::f32) {
        const Tensor xs = as_seen_in(x, dtype), dys = as_seen_in(dy, dtype);
        const Tensor rs = as_seen_in(residual_away_from_kink(xs, as_seen_in(r, dtype), gamma, beta, training, k.layout), dtype);
        const Result gpu = run(impl, true, training, k.layout, kGpu, dtype, xs, rs, gamma, beta, dys);
        const Result cpu = run(impl, true, training, k.layout, Device::cpu(), DType::f32, xs, rs, gamma, beta, dys);
        expect_half_close_to_cpu(gpu, cpu, dtype, shape_numel(k.shape) / c, where);
        continue;
      }
      const Result cpu = run(impl, true, training, k.layout, Device::cpu(), DType::f32, x, r, gamma, beta, dy);
      const auto h = fields(cpu);
      for (size_t i = 0; i < f.size(); ++i)
        EXPECT_TRUE(test::all_close(*f[i].second, *h[i].second, {5e-4, 5e-4}))
            << where << ": " << f[i].first << " vs CPU";
    }
}

INSTANTIATE_TEST_SUITE_P(Impls, GpuBatchNormAddRelu,
                         ::testing::Values(ImplCase{ops::GpuImpl::native, DType::f32},
                                           ImplCase{ops::GpuImpl::native, DType::f16},
                                           ImplCase{ops::GpuImpl::native, DType::bf16},
                                           ImplCase{ops::GpuImpl::cudnn, DType::f32},
                                           ImplCase{ops::GpuImpl::cudnn, DType::f16},
                                           ImplCase{ops::GpuImpl::cudnn, DType::bf16}),
                         impl_case_name);

}  // namespace
}  // namespace cg
