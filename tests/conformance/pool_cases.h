// The pooling family's conformance (global average pooling): its table of image shapes, the
// float64 reference (the mean over each plane; the gradient spread evenly back) and the check of
// one device on one row in one dtype and layout against it. Pooling is a device switch, so each
// device is the implementation: the suite runs ops::global_avg_pool on that device's tensors,
// forward and (through autograd, seeded with an output gradient) backward.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conformance/conformance.h"
#include "engine/ops.h"

namespace cg::test {

struct PoolRow {
  std::string name;
  int64_t n, c, h, w;
};

// A single value, odd planes, channels not a multiple of 4, the head's 64 channels on 7x7.
inline std::vector<PoolRow> pool_rows() {
  return {{"one", 1, 1, 1, 1}, {"odd", 2, 3, 5, 7}, {"c17", 3, 17, 4, 4}, {"head", 2, 64, 7, 7}};
}

using PoolParam = Param<DeviceSwitch, PoolRow>;

// y [n, c] and dx (NCHW) for the input x and output gradient dy.
struct PoolResults {
  std::vector<double> y, dx;
};

inline PoolResults pool_reference(const PoolRow& r, const std::vector<double>& x, const std::vector<double>& dy) {
  const int64_t hw = r.h * r.w;
  PoolResults out{std::vector<double>(size_t(r.n * r.c), 0.0), std::vector<double>(x.size())};
  for (size_t i = 0; i < x.size(); ++i) {
    out.y[i / size_t(hw)] += x[i] / double(hw);
    out.dx[i] = dy[i / size_t(hw)] / double(hw);
  }
  return out;
}

inline PoolResults run_pool(const PoolParam& p, const std::vector<double>& x, const std::vector<double>& dy) {
  const PoolRow& r = p.c;
  const Device device = device_of(p.implementation.device);
  const bool nhwc = p.layout == Layout::nhwc;
  const int64_t hw = r.h * r.w;
  Tensor xt = nhwc ? tensor_of(nchw_to_nhwc(x, r.n, r.c, hw), {r.n, r.h, r.w, r.c}, p.dtype, device)
                   : tensor_of(x, {r.n, r.c, r.h, r.w}, p.dtype, device);
  xt.set_requires_grad(true);
  ops::ExecutionScope in_layout({.layout = p.layout});
  const Tensor y = ops::global_avg_pool(xt);
  y.backward(tensor_of(dy, {r.n, r.c}, p.dtype, device));
  const Tensor dx = xt.grad();
  EXPECT_EQ(dx.shape(), xt.shape()) << "dx is laid out like x";
  return {values_of(y), nhwc ? nhwc_to_nchw(values_of(dx), r.n, r.c, hw) : values_of(dx)};
}

inline void expect_pool_conforms(const PoolParam& p) {
  const PoolRow& r = p.c;
  const std::vector<double> x = random_values(r.n * r.c * r.h * r.w, 41, p.dtype);
  const std::vector<double> dy = random_values(r.n * r.c, 42, p.dtype);
  const PoolResults ref = pool_reference(r, x, dy), got = run_pool(p, x, dy);
  const Tolerance tol = budget_for(p.dtype, p.implementation.device);
  EXPECT_TRUE(matches_reference(got.y, ref.y, tol)) << "forward y";
  EXPECT_TRUE(matches_reference(got.dx, ref.dx, tol)) << "dx";
}

inline std::vector<PoolParam> pool_params(DeviceType device) {
  return device_params(device, pool_rows(), dtypes_on(device), {Layout::nchw, Layout::nhwc});
}

}  // namespace cg::test
