// The pooling family's conformance (global average pooling): its table of image shapes, the
// float64 reference (the mean over each plane; the gradient spread evenly back) and the check of
// one implementation on one row in one dtype and layout against it.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conformance/conformance.h"
#include "engine/impl/pool.h"

namespace cg::test {

struct PoolRow {
  std::string name;
  int64_t n, c, h, w;
};

// A single value, odd planes, channels not a multiple of 4, the head's 64 channels on 7x7.
inline std::vector<PoolRow> pool_rows() {
  return {{"one", 1, 1, 1, 1}, {"odd", 2, 3, 5, 7}, {"c17", 3, 17, 4, 4}, {"head", 2, 64, 7, 7}};
}

inline impl::PoolProblem pool_problem(const PoolRow& r, DType dtype, Layout layout, Device device) {
  return {r.n, r.c, r.h * r.w, device, dtype, layout};
}

using PoolParam = Param<impl::PoolImpl, PoolRow>;

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
  const impl::PoolProblem problem = pool_problem(r, p.dtype, p.layout, device);
  const Tensor xt = nhwc ? tensor_of(nchw_to_nhwc(x, r.n, r.c, hw), {r.n, r.h, r.w, r.c}, p.dtype, device)
                         : tensor_of(x, {r.n, r.c, r.h, r.w}, p.dtype, device);
  Tensor y = Tensor::empty({r.n, r.c}, p.dtype, device), dx = Tensor::empty(xt.shape(), p.dtype, device);
  const Selected selected(p.implementation);
  p.implementation.impl->forward(problem, xt, y);
  p.implementation.impl->backward(problem, tensor_of(dy, {r.n, r.c}, p.dtype, device), dx);
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
  return params_of(impl::pool_registry(), device, pool_rows(), {Layout::nchw, Layout::nhwc}, pool_problem);
}

}  // namespace cg::test
