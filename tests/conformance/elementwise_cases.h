// The elementwise family's conformance (relu and silu with their backwards, add, add_relu, scale, gradient
// accumulation): its table of element counts, the float64 reference of each op and the check of
// one device on one row in one dtype. The elementwise ops are a device switch, so each device is
// the implementation: the suite runs the public ops (ops::relu, silu, add, add_relu, scale,
// accumulate_) on that device's tensors, relu's and silu's backwards through autograd seeded with a gradient.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "conformance/conformance.h"
#include "engine/ops.h"

namespace cg::test {

struct ElementwiseRow {
  std::string name;
  int64_t n;
};

// One element, fewer than a vector, and counts that leave a tail after whole vectors and blocks.
inline std::vector<ElementwiseRow> elementwise_rows() {
  return {{"one", 1}, {"seven", 7}, {"block_tail", 1027}, {"grid_tail", 4099}};
}

using ElementwiseParam = Param<DeviceSwitch, ElementwiseRow>;
constexpr double kScale = -0.375;

// Each op's result on the same two inputs a, b (and b as relu's output gradient).
struct ElementwiseResults {
  std::vector<double> relu, relu_backward, silu, silu_backward, add, add_relu, scale, accumulate;
};

inline ElementwiseResults elementwise_reference(const std::vector<double>& a, const std::vector<double>& b) {
  ElementwiseResults out;
  for (size_t i = 0; i < a.size(); ++i) {
    out.relu.push_back(std::max(a[i], 0.0));
    out.relu_backward.push_back(a[i] > 0 ? b[i] : 0.0);
    const double s = 1.0 / (1.0 + std::exp(-a[i]));  // sigmoid(a)
    out.silu.push_back(a[i] * s);
    out.silu_backward.push_back(b[i] * (s + a[i] * s * (1.0 - s)));  // d/da of a * s(a), times b
    out.add.push_back(a[i] + b[i]);
    out.add_relu.push_back(std::max(a[i] + b[i], 0.0));
    out.scale.push_back(kScale * a[i]);
  }
  out.accumulate = out.add;  // b += a
  return out;
}

inline ElementwiseResults run_elementwise(const ElementwiseParam& p, const std::vector<double>& a,
                                          const std::vector<double>& b) {
  const Device device = device_of(p.implementation.device);
  const Tensor at = tensor_of(a, {p.c.n}, p.dtype, device), bt = tensor_of(b, {p.c.n}, p.dtype, device);
  ElementwiseResults out;
  // op(a) and its input's gradient for the upstream gradient b, through autograd.
  const auto with_gradient = [&](Tensor (*op)(const Tensor&), std::vector<double>& y, std::vector<double>& dx) {
    Tensor x = at.clone();
    x.set_requires_grad(true);
    const Tensor out_y = op(x);
    out_y.backward(bt);
    y = values_of(out_y);
    dx = values_of(x.grad());
  };
  with_gradient(ops::relu, out.relu, out.relu_backward);
  with_gradient(ops::silu, out.silu, out.silu_backward);
  out.add = values_of(ops::add(at, bt));
  out.add_relu = values_of(ops::add_relu(at, bt));
  out.scale = values_of(ops::scale(at, kScale));
  Tensor dst = bt.clone();
  ops::accumulate_(dst, at);
  out.accumulate = values_of(dst);
  return out;
}

inline void expect_elementwise_conforms(const ElementwiseParam& p) {
  const std::vector<double> a = random_values(p.c.n, 61, p.dtype), b = random_values(p.c.n, 62, p.dtype);
  const ElementwiseResults ref = elementwise_reference(a, b), got = run_elementwise(p, a, b);
  const Tolerance tol = budget_for(p.dtype, p.implementation.device);
  EXPECT_TRUE(matches_reference(got.relu, ref.relu, tol)) << "relu";
  EXPECT_TRUE(matches_reference(got.relu_backward, ref.relu_backward, tol)) << "relu backward";
  EXPECT_TRUE(matches_reference(got.silu, ref.silu, tol)) << "silu";
  EXPECT_TRUE(matches_reference(got.silu_backward, ref.silu_backward, tol)) << "silu backward";
  EXPECT_TRUE(matches_reference(got.add, ref.add, tol)) << "add";
  EXPECT_TRUE(matches_reference(got.add_relu, ref.add_relu, tol)) << "add_relu";
  EXPECT_TRUE(matches_reference(got.scale, ref.scale, tol)) << "scale";
  EXPECT_TRUE(matches_reference(got.accumulate, ref.accumulate, tol)) << "accumulate";
}

inline std::vector<ElementwiseParam> elementwise_params(DeviceType device) {
  return device_params(device, elementwise_rows(), dtypes_on(device));
}

}  // namespace cg::test
