// The linear family's conformance: its table of [m, k] x [n, k]^T problems, the float64 reference
// (y = x w^T + b and its analytic gradients) and the check of one implementation on one row in
// one dtype against it.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conformance/conformance.h"
#include "engine/linear/linear.h"

namespace cg::test {

struct LinearRow {
  std::string name;
  int64_t m, k, n;
  bool bias = true;
};

// One element; sizes below and across the GPU kernels' 16/32/64 tiles with partial tiles left.
inline std::vector<LinearRow> linear_rows() {
  return {{"single", 1, 1, 1}, {"small", 3, 5, 7}, {"no_bias", 4, 9, 6, false}, {"classifier", 17, 64, 10},
          {"tails", 33, 37, 65}};
}

inline impl::LinearProblem linear_problem(const LinearRow& r, DType dtype, Layout, Device device,
                                          const ops::KernelPolicy&) {
  return {r.m, r.k, r.n, device, dtype};
}

struct LinearValues {
  std::vector<double> x, w, b, dy;
};
struct LinearResults {
  std::vector<double> y, dx, dw, db;
};

inline LinearValues linear_values(const LinearRow& r, DType dtype) {
  return {random_values(r.m * r.k, 31, dtype), random_values(r.n * r.k, 32, dtype, 0.3),
          r.bias ? random_values(r.n, 33, dtype) : std::vector<double>(), random_values(r.m * r.n, 34, dtype)};
}

inline std::vector<double> linear_reference_forward(const LinearRow& r, const std::vector<double>& x,
                                                    const std::vector<double>& w, const std::vector<double>& b) {
  std::vector<double> y(size_t(r.m * r.n));
  for (int64_t i = 0; i < r.m; ++i)
    for (int64_t j = 0; j < r.n; ++j) {
      double s = b.empty() ? 0.0 : b[size_t(j)];
      for (int64_t l = 0; l < r.k; ++l) s += x[size_t(i * r.k + l)] * w[size_t(j * r.k + l)];
      y[size_t(i * r.n + j)] = s;
    }
  return y;
}

// dx = dy w, dw = dy^T x, db = the column sums of dy.
inline LinearResults linear_reference(const LinearRow& r, const LinearValues& v) {
  LinearResults out{linear_reference_forward(r, v.x, v.w, v.b), std::vector<double>(v.x.size(), 0.0),
                    std::vector<double>(v.w.size(), 0.0), {}};
  if (r.bias) out.db.assign(size_t(r.n), 0.0);
  for (int64_t i = 0; i < r.m; ++i)
    for (int64_t j = 0; j < r.n; ++j) {
      const double g = v.dy[size_t(i * r.n + j)];
      if (r.bias) out.db[size_t(j)] += g;
      for (int64_t l = 0; l < r.k; ++l) {
        out.dx[size_t(i * r.k + l)] += g * v.w[size_t(j * r.k + l)];
        out.dw[size_t(j * r.k + l)] += g * v.x[size_t(i * r.k + l)];
      }
    }
  return out;
}

using LinearParam = Param<impl::LinearImpl, LinearRow>;

inline LinearResults run_linear(const LinearParam& p, const LinearValues& v) {
  const LinearRow& r = p.c;
  const Device device = device_of(p.implementation.device);
  const impl::LinearProblem problem = linear_problem(r, p.dtype, Layout::nchw, device, p.implementation.policy);
  const Tensor x = tensor_of(v.x, {r.m, r.k}, p.dtype, device), w = tensor_of(v.w, {r.n, r.k}, p.dtype, device);
  const Tensor b = r.bias ? tensor_of(v.b, {r.n}, p.dtype, device) : Tensor();
  impl::LinearForwardArgs f{.x = x, .w = w, .b = b, .y = Tensor::empty({r.m, r.n}, p.dtype, device)};
  impl::LinearBackwardArgs g{.dy = tensor_of(v.dy, {r.m, r.n}, p.dtype, device), .x = x, .w = w,
                             .dx = Tensor::empty(x.shape(), p.dtype, device),
                             .dw = Tensor::empty(w.shape(), p.dtype, device),
                             .db = r.bias ? Tensor::empty({r.n}, p.dtype, device) : Tensor()};
  p.implementation.impl->forward(problem, f);
  p.implementation.impl->backward(problem, g);
  return {values_of(f.y), values_of(g.dx), values_of(g.dw), r.bias ? values_of(g.db) : std::vector<double>()};
}

inline void expect_linear_conforms(const LinearParam& p) {
  const LinearValues v = linear_values(p.c, p.dtype);
  const LinearResults ref = linear_reference(p.c, v), got = run_linear(p, v);
  const Tolerance tol = budget_for(p.dtype, p.implementation.device);
  EXPECT_TRUE(matches_reference(got.y, ref.y, tol)) << "forward y";
  EXPECT_TRUE(matches_reference(got.dx, ref.dx, tol)) << "dx";
  EXPECT_TRUE(matches_reference(got.dw, ref.dw, tol)) << "dw";
  EXPECT_TRUE(matches_reference(got.db, ref.db, tol)) << "db";
}

inline std::vector<LinearParam> linear_params(DeviceType device) {
  return params_of(impl::linear_registry(), device, linear_rows(), {Layout::nchw}, linear_problem);
}

}  // namespace cg::test
