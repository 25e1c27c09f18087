// The check of one batch-norm implementation on one row of the family's table
// (conformance/batch_norm_cases.h), in one dtype and layout, against the float64 reference: the
// forward, the running statistics it updates, and the backward fed the forward's own saved
// statistics (as ops::batch_norm does).
#pragma once
#include <gtest/gtest.h>

#include "conformance/batch_norm_cases.h"

namespace cg::test {

using BatchNormParam = Param<impl::BatchNormImpl, BatchNormRow>;

// The image tensors of a row (x, residual, dy and the results) in the case's layout, and back.
struct BnImages {
  const BatchNormRow& r;
  Layout layout;
  DType dtype;
  Device device;
  Tensor to_tensor(const std::vector<double>& nchw) const {
    if (layout == Layout::nhwc)
      return tensor_of(nchw_to_nhwc(nchw, r.n, r.c, r.h * r.w), {r.n, r.h, r.w, r.c}, dtype, device);
    return tensor_of(nchw, {r.n, r.c, r.h, r.w}, dtype, device);
  }
  std::vector<double> from_tensor(const Tensor& t) const {
    return layout == Layout::nhwc ? nhwc_to_nchw(values_of(t), r.n, r.c, r.h * r.w) : values_of(t);
  }
};

// The forward as ops::batch_norm runs it: one call, or (SyncBatchNorm) the local moments, then the
// forward with them (one replica: the summed moments are the local ones), which it returns.
inline Tensor bn_forward(const impl::BatchNormImpl& im, const impl::BatchNormProblem& p,
                         impl::BatchNormForwardArgs& f) {
  if (!p.cross_replica) {
    im.forward(p, f);
    return Tensor();
  }
  const Tensor moments = Tensor::empty({2 * p.shape.c + 1}, DType::f64, p.device);
  im.local_moments(p, f, moments);
  im.forward_with_moments(p, f, moments);
  return moments;
}

// The backward likewise: one call, or the local gradient sums, then dx from them.
inline void bn_backward(const impl::BatchNormImpl& im, const impl::BatchNormProblem& p,
                        impl::BatchNormBackwardArgs& b, const Tensor& moments) {
  if (!p.cross_replica) return im.backward(p, b);
  const Tensor sums = Tensor::empty({2 * p.shape.c}, DType::f64, p.device);
  im.local_grad_sums(p, b, sums);
  im.backward_with_sums(p, b, sums, moments);
}

// Forward, then backward, as ops::batch_norm runs them. Per-channel tensors are float32 on the
// GPU and in the compute dtype on the CPU.
inline BatchNormResults run_batch_norm(const BatchNormParam& p, const BatchNormValues& v) {
  const BatchNormRow& r = p.c;
  const Device device = device_of(p.implementation.device);
  const DType channel_dtype = device.is_cpu() ? p.dtype : DType::f32;
  const BnImages images{r, p.layout, p.dtype, device};
  const auto channel = [&](const std::vector<double>& values) { return tensor_of(values, {r.c}, channel_dtype, device); };
  const impl::BatchNormProblem problem = batch_norm_problem(r, p.dtype, p.layout, device, p.implementation.policy);
  impl::BatchNormForwardArgs f{.x = images.to_tensor(v.x), .residual = r.residual ? images.to_tensor(v.residual) : Tensor(),
                           .weight = channel(v.gamma), .bias = channel(v.beta), .running_mean = channel(v.running_mean),
                           .running_var = channel(v.running_var), .eps = kBnEps, .momentum = kBnMomentum};
  f.y = Tensor::empty(f.x.shape(), p.dtype, device);
  if (r.training) {
    f.save_mean = Tensor::empty({r.c}, channel_dtype, device);
    f.save_invstd = Tensor::empty({r.c}, channel_dtype, device);
  }
  const Tensor moments = bn_forward(*p.implementation.impl, problem, f);
  impl::BatchNormBackwardArgs b{.dy = images.to_tensor(v.dy), .x = f.x, .gamma = f.weight,
                                .mean = r.training ? f.save_mean : channel(v.running_mean),
                                .stat = r.training ? f.save_invstd : channel(v.running_var),
                                .relu_y = r.relu ? f.y : Tensor(), .eps = kBnEps};
  b.dx = Tensor::empty(f.x.shape(), p.dtype, device);
  b.dgamma = Tensor::empty({r.c}, channel_dtype, device);
  b.dbeta = Tensor::empty({r.c}, channel_dtype, device);
  if (r.residual) b.d_residual = Tensor::empty(f.x.shape(), p.dtype, device);
  bn_backward(*p.implementation.impl, problem, b, moments);
  return {images.from_tensor(f.y),     values_of(f.running_mean), values_of(f.running_var),
          images.from_tensor(b.dx),    values_of(b.dgamma),       values_of(b.dbeta),
          r.residual ? images.from_tensor(b.d_residual) : std::vector<double>()};
}

inline void expect_batch_norm_conforms(const BatchNormParam& p) {
  const BatchNormValues v = batch_norm_values(p.c, p.dtype);
  const BatchNormResults got = run_batch_norm(p, v);
  const BatchNormResults ref = batch_norm_reference(p.c, v, got.y);
  const Tolerance tol = budget_for(p.dtype, p.implementation.device);
  EXPECT_TRUE(matches_reference(got.y, ref.y, tol)) << "forward y";
  EXPECT_TRUE(matches_reference(got.running_mean, ref.running_mean, tol)) << "running_mean";
  EXPECT_TRUE(matches_reference(got.running_var, ref.running_var, tol)) << "running_var";
  EXPECT_TRUE(matches_reference(got.dx, ref.dx, tol)) << "dx";
  EXPECT_TRUE(matches_reference(got.dgamma, ref.dgamma, tol)) << "dgamma";
  EXPECT_TRUE(matches_reference(got.dbeta, ref.dbeta, tol)) << "dbeta";
  EXPECT_TRUE(matches_reference(got.d_residual, ref.d_residual, tol)) << "d_residual";
}

inline std::vector<BatchNormParam> batch_norm_params(DeviceType device) {
  return params_of(impl::batch_norm_registry(), device, batch_norm_rows(), {Layout::nchw, Layout::nhwc},
                   batch_norm_problem);
}

}  // namespace cg::test
