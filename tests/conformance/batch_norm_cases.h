// The batch-norm family's table (shapes x mode x fused ReLU x residual) and its float64 reference:
// forward, running-statistics update, analytic gradients (conformance/batch_norm_run.h runs an
// implementation against it).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "conformance/conformance.h"
#include "engine/batch_norm/batch_norm.h"

namespace cg::test {

struct BatchNormRow {
  std::string name;
  int64_t n, c, h, w;
  bool training = true;
  bool relu = false;
  bool residual = false;  // relu(bn(x) + residual), as batch_norm_add_relu (relu set too)
  bool sync = false;      // SyncBatchNorm's two phases around the sum over replicas (here one)
};

// Channels not a multiple of 4 or 16, batch 1, 1x1 planes, planes that leave a partial block;
// training and eval, with and without the fused ReLU and residual, and SyncBatchNorm's phases.
inline std::vector<BatchNormRow> batch_norm_rows() {
  return {{"train", 2, 3, 5, 7},
          {"train_relu_batch1", 1, 20, 3, 3, true, true},
          {"train_add_relu", 2, 16, 4, 4, true, true, true},
          {"train_plane1", 8, 33, 1, 1},
          {"train_odd_plane", 2, 4, 17, 19, true, true},
          {"sync_train", 2, 5, 3, 4, true, false, false, true},
          {"sync_add_relu", 2, 6, 3, 3, true, true, true, true},
          {"eval", 3, 5, 2, 3, false},
          {"eval_add_relu", 2, 7, 3, 3, false, true, true}};
}

constexpr double kBnEps = 1e-5, kBnMomentum = 0.1;

inline kernels::BatchNormShape bn_shape(const BatchNormRow& r, Layout layout) {
  return layout == Layout::nhwc ? kernels::channels_last_shape(r.n, r.h, r.w, r.c)
                                : kernels::BatchNormShape{r.n, r.c, r.h * r.w};
}

inline impl::BatchNormProblem batch_norm_problem(const BatchNormRow& r, DType dtype, Layout layout, Device device,
                                                 const ops::KernelPolicy& policy) {
  impl::BatchNormProblem p;
  p.shape = bn_shape(r, layout);
  p.device = device;
  p.dtype = dtype;
  p.layout = layout;
  p.training = r.training;
  p.needs_backward = true;
  p.activation = r.relu ? Activation::relu : Activation::none;
  p.residual = r.residual;
  p.cross_replica = r.sync;
  p.policy = policy;
  p.layer = "conformance batch_norm " + r.name;
  return p;
}

struct BatchNormValues {
  std::vector<double> x, residual, gamma, beta, running_mean, running_var, dy;  // NCHW
};
struct BatchNormResults {
  std::vector<double> y, running_mean, running_var, dx, dgamma, dbeta, d_residual;  // NCHW
};

inline BatchNormValues batch_norm_values(const BatchNormRow& r, DType dtype) {
  const int64_t numel = r.n * r.c * r.h * r.w;
  BatchNormValues v;
  v.x = random_values(numel, 21, dtype, 2.0);
  for (double& e : v.x) e += 0.5;  // a mean away from 0 (exact in every dtype: 0.5 steps)
  v.x = values_of(Tensor::from_vector(v.x, {numel}).to(dtype));
  if (r.residual) v.residual = random_values(numel, 22, dtype);
  v.gamma = random_values(r.c, 23, dtype);
  v.beta = random_values(r.c, 24, dtype);
  v.running_mean = random_values(r.c, 25, dtype);
  v.running_var = random_values(r.c, 26, dtype);
  for (double& e : v.running_var) e = std::abs(e) + 0.5;
  v.dy = random_values(numel, 27, dtype);
  return v;
}

// Per channel: the mean and 1/sqrt(var + eps) the forward normalizes with, and the biased variance.
struct ChannelStats {
  std::vector<double> mean, invstd, var;
};

inline ChannelStats bn_stats(const BatchNormRow& r, const BatchNormValues& v) {
  const int64_t hw = r.h * r.w, m = r.n * hw;
  ChannelStats s{std::vector<double>(size_t(r.c)), std::vector<double>(size_t(r.c)), std::vector<double>(size_t(r.c))};
  for (int64_t c = 0; c < r.c; ++c) {
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < r.n; ++n)
      for (int64_t p = 0; p < hw; ++p) sum += v.x[size_t((n * r.c + c) * hw + p)];
    const double mean = r.training ? sum / double(m) : v.running_mean[size_t(c)];
    for (int64_t n = 0; n < r.n; ++n)
      for (int64_t p = 0; p < hw; ++p) sq += std::pow(v.x[size_t((n * r.c + c) * hw + p)] - sum / double(m), 2);
    s.var[size_t(c)] = sq / double(m);
    s.mean[size_t(c)] = mean;
    s.invstd[size_t(c)] = 1 / std::sqrt((r.training ? s.var[size_t(c)] : v.running_var[size_t(c)]) + kBnEps);
  }
  return s;
}

// y = act(gamma * (x - mean) * invstd + beta [+ residual]).
inline std::vector<double> batch_norm_reference_forward(const BatchNormRow& r, const BatchNormValues& v) {
  const ChannelStats s = bn_stats(r, v);
  const int64_t hw = r.h * r.w;
  std::vector<double> y(v.x.size());
  for (size_t i = 0; i < y.size(); ++i) {
    const size_t c = size_t((int64_t(i) / hw) % r.c);
    double z = v.gamma[c] * (v.x[i] - s.mean[c]) * s.invstd[c] + v.beta[c];
    if (r.residual) z += v.residual[i];
    y[i] = r.relu ? std::max(z, 0.0) : z;
  }
  return y;
}

// The forward, the running statistics after a training step (unbiased variance, as PyTorch) and
// the analytic gradients. The fused ReLU passes the gradient where relu_y (the forward's output the
// backward is given; the reference's own when empty) is positive: where the sum lands within
// rounding of 0 a half-precision forward may legitimately cut what the reference passes.
inline BatchNormResults batch_norm_reference(const BatchNormRow& r, const BatchNormValues& v,
                                             const std::vector<double>& relu_y = {}) {
  const ChannelStats s = bn_stats(r, v);
  const int64_t hw = r.h * r.w, m = r.n * hw;
  BatchNormResults out;
  out.y = batch_norm_reference_forward(r, v);
  out.running_mean = v.running_mean;
  out.running_var = v.running_var;
  std::vector<double> g(v.dy.size()), xhat(v.dy.size());
  out.dgamma.assign(size_t(r.c), 0.0);
  out.dbeta.assign(size_t(r.c), 0.0);
  for (size_t i = 0; i < g.size(); ++i) {
    const size_t c = size_t((int64_t(i) / hw) % r.c);
    g[i] = r.relu && (relu_y.empty() ? out.y : relu_y)[i] <= 0 ? 0.0 : v.dy[i];
    xhat[i] = (v.x[i] - s.mean[c]) * s.invstd[c];
    out.dgamma[c] += g[i] * xhat[i];
    out.dbeta[c] += g[i];
  }
  out.dx.resize(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const size_t c = size_t((int64_t(i) / hw) % r.c);
    const double centered = r.training ? g[i] - (out.dbeta[c] + xhat[i] * out.dgamma[c]) / double(m) : g[i];
    out.dx[i] = v.gamma[c] * s.invstd[c] * centered;
  }
  if (r.residual) out.d_residual = g;
  if (r.training)
    for (size_t c = 0; c < size_t(r.c); ++c) {
      out.running_mean[c] = (1 - kBnMomentum) * v.running_mean[c] + kBnMomentum * s.mean[c];
      out.running_var[c] =
          (1 - kBnMomentum) * v.running_var[c] + kBnMomentum * s.var[c] * double(m) / double(m - 1);
    }
  return out;
}

}  // namespace cg::test
