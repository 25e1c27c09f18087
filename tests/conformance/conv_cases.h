// The convolution family's conformance: its table of layer shapes, the float64 reference (the
// plain CPU convolution, kernels/cpu/conv2d.h), and the check of one implementation on one row in
// one dtype and layout against it.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conformance/conformance.h"
#include "engine/conv/conv.h"
#include "kernels/cpu/conv2d.h"

namespace cg::test {

struct ConvRow {
  std::string name;
  kernels::Conv2dShape s;  // n, c_in, h, w, c_out, kh, kw, stride, pad
  bool bias = true;
};

// Small enough for the emulated GPU, awkward enough to catch index mistakes: non-square images
// and kernels, stride 2, padding 0 and 1, 1x1, channels not a multiple of 4 or 16, batch 1,
// output counts that leave a partial tile (the native kernel's tiles are 128 x 64), and the
// shapes the CPU Winograd (channels in groups of 16; 32+) and direct kernels take.
inline std::vector<ConvRow> conv_rows() {
  return {{"stem3x3", {2, 3, 9, 7, 5, 3, 3, 1, 1}},
          {"stride2", {2, 5, 8, 9, 6, 3, 3, 2, 1}},
          {"down1x1", {2, 6, 7, 6, 10, 1, 1, 2, 0}, false},
          {"pointwise", {1, 7, 5, 3, 3, 1, 1, 1, 0}},
          {"valid3x3", {2, 4, 6, 5, 3, 3, 3, 1, 0}, false},
          {"kernel3x5", {1, 3, 8, 9, 4, 3, 5, 1, 1}},
          {"groups16", {1, 16, 7, 9, 16, 3, 3, 1, 1}},
          {"wide32", {1, 32, 6, 5, 33, 3, 3, 1, 1}},
          {"tiletail", {3, 8, 9, 7, 70, 3, 3, 1, 1}}};
}

inline impl::ConvProblem conv_problem(const ConvRow& r, DType dtype, Layout layout, Device device,
                                      const ops::KernelPolicy& policy) {
  return {r.s, device, dtype, layout, policy, "conformance conv " + r.name};
}

struct ConvValues {
  std::vector<double> x, w, b, dy;  // NCHW; b empty without a bias
};
struct ConvResults {
  std::vector<double> y, dx, dw, db;  // NCHW
};

inline int64_t conv_out_numel(const kernels::Conv2dShape& s) { return s.n * s.c_out * s.out_h() * s.out_w(); }

// Inputs rounded to `dtype`; weights scaled like an initialized layer's.
inline ConvValues conv_values(const ConvRow& r, DType dtype) {
  const kernels::Conv2dShape& s = r.s;
  ConvValues v;
  v.x = random_values(s.n * s.c_in * s.h * s.w, 11, dtype);
  v.w = random_values(s.c_out * s.c_in * s.kh * s.kw, 12, dtype, 0.3);
  if (r.bias) v.b = random_values(s.c_out, 13, dtype);
  v.dy = random_values(conv_out_numel(s), 14, dtype);
  return v;
}

// The float64 reference: the plain CPU convolution (kernels/cpu/conv2d.h), the one every
// convolution is checked against; ConvReference checks its gradients against its forward.
inline std::vector<double> conv_reference_forward(const kernels::Conv2dShape& s, const std::vector<double>& x,
                                                  const std::vector<double>& w, const std::vector<double>& b) {
  std::vector<double> y(size_t(conv_out_numel(s)));
  kernels::cpu::conv2d_forward<double>(s, x.data(), w.data(), b.empty() ? nullptr : b.data(), y.data());
  return y;
}

// Forward, dx, dw, and db (with a bias).
inline ConvResults conv_reference(const ConvRow& r, const ConvValues& v) {
  const kernels::Conv2dShape& s = r.s;
  ConvResults out{conv_reference_forward(s, v.x, v.w, v.b), std::vector<double>(v.x.size()),
                  std::vector<double>(v.w.size()), std::vector<double>(r.bias ? size_t(s.c_out) : 0)};
  kernels::cpu::conv2d_backward_data<double>(s, v.dy.data(), v.w.data(), out.dx.data());
  kernels::cpu::conv2d_backward_filter<double>(s, v.x.data(), v.dy.data(), out.dw.data(),
                                               r.bias ? out.db.data() : nullptr);
  return out;
}

// The backward asked for one side only (a first layer's input needs no gradient, a frozen
// layer's weight none): that side as the full backward gave it, the other not computed.
inline void expect_one_sided_backwards_agree(const Param<impl::ConvImpl, ConvRow>& p, const impl::ConvProblem& problem,
                                             const impl::ConvBackwardArgs& full) {
  const impl::ConvImpl& im = *p.implementation.impl;
  const Tolerance tol = budget_for(p.dtype, p.implementation.device);
  impl::ConvBackwardArgs only_dx{.dy = full.dy, .saved = full.saved, .need_dx = true, .need_w = false,
                                 .has_bias = p.c.bias};
  impl::ConvBackwardArgs only_w{.dy = full.dy, .saved = full.saved, .need_dx = false, .need_w = true,
                                .has_bias = p.c.bias};
  im.backward(problem, only_dx);
  im.backward(problem, only_w);
  EXPECT_FALSE(only_dx.dw.defined() || only_dx.db.defined()) << "need_w=false computed dw or db";
  EXPECT_FALSE(only_w.dx.defined()) << "need_dx=false computed dx";
  if (!only_dx.dx.defined() || !only_w.dw.defined()) {
    ADD_FAILURE() << "a one-sided backward left out the side it was asked for";
    return;
  }
  EXPECT_TRUE(matches_reference(values_of(only_dx.dx), values_of(full.dx), tol)) << "dx alone";
  EXPECT_TRUE(matches_reference(values_of(only_w.dw), values_of(full.dw), tol)) << "dw alone";
}

// Runs the implementation forward and backward (all gradients, then each side alone) on the row,
// in the case's dtype and layout, the weight as a training step holds it: the parameter's dtype
// on the CPU, float32 on the GPU (the implementation casts it and returns dw in float32).
inline ConvResults run_conv(const Param<impl::ConvImpl, ConvRow>& p, const ConvValues& v) {
  const kernels::Conv2dShape& s = p.c.s;
  const Device device = device_of(p.implementation.device);
  const bool nhwc = p.layout == Layout::nhwc;
  const DType w_dtype = device.is_cpu() ? p.dtype : DType::f32;
  const impl::ConvProblem problem = conv_problem(p.c, p.dtype, p.layout, device, p.implementation.policy);
  const auto image = [&](const std::vector<double>& nchw, int64_t c, int64_t h, int64_t w) {
    return nhwc ? tensor_of(nchw_to_nhwc(nchw, s.n, c, h * w), {s.n, h, w, c}, p.dtype, device)
                : tensor_of(nchw, {s.n, c, h, w}, p.dtype, device);
  };
  const auto from_image = [&](const Tensor& t, int64_t c, int64_t hw) {
    return nhwc ? nhwc_to_nchw(values_of(t), s.n, c, hw) : values_of(t);
  };
  const Tensor x = image(v.x, s.c_in, s.h, s.w), dy = image(v.dy, s.c_out, s.out_h(), s.out_w());
  const Tensor w = tensor_of(v.w, {s.c_out, s.c_in, s.kh, s.kw}, w_dtype, device);
  const Tensor b = p.c.bias ? tensor_of(v.b, {s.c_out}, p.dtype, device) : Tensor();
  impl::ConvForwardArgs f{.x = x, .w = w, .b = b};
  p.implementation.impl->forward(problem, f);
  impl::ConvBackwardArgs g{.dy = dy, .saved = f.saved, .need_dx = true, .need_w = true, .has_bias = p.c.bias};
  p.implementation.impl->backward(problem, g);
  const Tensor& y = f.y;
  EXPECT_EQ(y.dtype(), p.dtype) << "y keeps the compute dtype";
  EXPECT_EQ(g.dw.dtype(), w_dtype) << "dw leaves in the parameter's dtype";
  EXPECT_EQ(g.dx.shape(), x.shape()) << "dx is laid out like x";
  expect_one_sided_backwards_agree(p, problem, g);
  return {from_image(y, s.c_out, s.out_h() * s.out_w()), from_image(g.dx, s.c_in, s.h * s.w), values_of(g.dw),
          p.c.bias ? values_of(g.db) : std::vector<double>()};
}

inline void expect_conv_conforms(const Param<impl::ConvImpl, ConvRow>& p) {
  const ConvValues v = conv_values(p.c, p.dtype);
  const ConvResults ref = conv_reference(p.c, v);
  const ConvResults got = run_conv(p, v);
  const Tolerance tol = budget_for(p.dtype, p.implementation.device);
  EXPECT_TRUE(matches_reference(got.y, ref.y, tol)) << "forward y";
  EXPECT_TRUE(matches_reference(got.dx, ref.dx, tol)) << "dx";
  EXPECT_TRUE(matches_reference(got.dw, ref.dw, tol)) << "dw";
  EXPECT_TRUE(matches_reference(got.db, ref.db, tol)) << "db";
}

inline std::vector<Param<impl::ConvImpl, ConvRow>> conv_params(DeviceType device) {
  return params_of(impl::conv_registry(), device, conv_rows(), {Layout::nchw, Layout::nhwc}, conv_problem);
}

}  // namespace cg::test
