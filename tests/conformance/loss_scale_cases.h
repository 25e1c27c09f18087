// The loss-scaling family's conformance (unscale with the inf/NaN check, GradScaler's scale
// update): its table of gradient contents and scaler states, the float64 reference of
// torch.cuda.amp.GradScaler's rules, and the check of one device on one row. Loss scaling is a
// device switch, so each device is the implementation: the suite runs the public ops
// (ops::unscale_and_check_multi, update_loss_scale) on its tensors.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "conformance/conformance.h"
#include "engine/optim_ops.h"

namespace cg::test {

struct LossScaleRow {
  std::string name;
  double scale = 1024;
  int64_t tracker = 0;
  double bad = 0;       // placed in one gradient element (inf or NaN); 0: every gradient finite
  int64_t bad_at = 0;   // which element of the concatenated gradients
};

constexpr double kInf = std::numeric_limits<double>::infinity();
// GradScaler's rule: growth factor, backoff factor, growth interval.
struct LossScaleRule {
  float growth_factor, backoff_factor;
  int64_t growth_interval;
};
constexpr LossScaleRule kRule{2.f, 0.5f, 4};
// Gradient sizes: one element, a few, and a tail after whole vectors and chunks.
inline const std::vector<int64_t> kGradSizes = {1, 5, 1031};

// Finite gradients below and at the growth interval (and growth that would overflow), an inf in
// the last tensor's tail, a NaN in the first tensor, -inf in the middle one.
inline std::vector<LossScaleRow> loss_scale_rows() {
  return {{"finite", 1024, 1},  {"finite_grows", 1024, 3},          {"growth_overflows", 3e38, 3},
          {"inf_in_tail", 1024, 2, kInf, 1036}, {"nan_first", 65536, 0, std::nan(""), 0},
          {"minus_inf", 8, 3, -kInf, 3}};
}

struct LossScaleResults {
  std::vector<std::vector<double>> grads;  // compared where the row's gradients are all finite
  double found_inf = 0, scale = 0, inv_scale = 0;
  int64_t tracker = 0;
};

inline std::vector<std::vector<double>> loss_scale_grads(const LossScaleRow& r) {
  std::vector<std::vector<double>> grads;
  int64_t offset = 0;
  for (int64_t n : kGradSizes) {
    grads.push_back(random_values(n, 80 + uint64_t(n), DType::f32, 100.0));
    if (r.bad != 0 && r.bad_at >= offset && r.bad_at < offset + n) grads.back()[size_t(r.bad_at - offset)] = r.bad;
    offset += n;
  }
  return grads;
}

inline LossScaleResults loss_scale_reference(const LossScaleRow& r, std::vector<std::vector<double>> grads) {
  LossScaleResults out;
  const double inv = double(1.f / float(r.scale));  // the inv_scale the state holds, in float32
  for (auto& g : grads)
    for (double& e : g) e *= inv;
  out.grads = grads;
  out.found_inf = r.bad != 0 ? 1 : 0;
  out.scale = r.scale;
  if (r.bad != 0) {
    out.scale *= double(kRule.backoff_factor);
  } else if (r.tracker + 1 >= kRule.growth_interval) {
    if (std::isfinite(float(r.scale * double(kRule.growth_factor)))) out.scale *= double(kRule.growth_factor);
  } else {
    out.tracker = r.tracker + 1;
  }
  out.inv_scale = 1 / out.scale;
  return out;
}

using LossScaleParam = Param<DeviceSwitch, LossScaleRow>;

// Unscales (found_inf zeroed first, as GradScaler does), then updates the scale.
inline LossScaleResults run_loss_scale(const LossScaleParam& p, const std::vector<std::vector<double>>& values) {
  const LossScaleRow& r = p.c;
  const Device device = device_of(p.implementation.device);
  std::vector<Tensor> grads;
  for (const auto& g : values) grads.push_back(tensor_of(g, {int64_t(g.size())}, DType::f32, device));
  Tensor scale = Tensor::scalar(r.scale).to(device), inv_scale = Tensor::scalar(1.f / float(r.scale)).to(device);
  Tensor tracker = Tensor::scalar(double(r.tracker), DType::i64).to(device);
  Tensor found_inf = Tensor::scalar(0.0).to(device);
  ops::unscale_and_check_multi(grads, inv_scale, found_inf);
  ops::update_loss_scale(scale, inv_scale, tracker, found_inf, kRule.growth_factor, kRule.backoff_factor,
                         kRule.growth_interval);
  LossScaleResults out;
  for (const Tensor& g : grads) out.grads.push_back(values_of(g));
  out.found_inf = found_inf.item();
  out.scale = scale.item();
  out.inv_scale = inv_scale.item();
  out.tracker = int64_t(tracker.item());
  return out;
}

inline void expect_loss_scale_conforms(const LossScaleParam& p) {
  const std::vector<std::vector<double>> grads = loss_scale_grads(p.c);
  const LossScaleResults ref = loss_scale_reference(p.c, grads), got = run_loss_scale(p, grads);
  // One float32 multiply per value (atol for the subnormal results of a huge scale).
  const Tolerance exact{1e-7, 1e-7};
  if (p.c.bad == 0) {
    for (size_t i = 0; i < ref.grads.size(); ++i)
      EXPECT_TRUE(matches_reference(got.grads[i], ref.grads[i], exact)) << "gradient " << i << " unscaled";
  }
  EXPECT_EQ(got.found_inf, ref.found_inf) << "found_inf";
  EXPECT_TRUE(matches_reference({got.scale, got.inv_scale}, {ref.scale, ref.inv_scale}, exact)) << "scale, inv_scale";
  EXPECT_EQ(got.tracker, ref.tracker) << "growth tracker";
}

inline std::vector<LossScaleParam> loss_scale_params(DeviceType device) {
  return device_params(device, loss_scale_rows(), {DType::f32});  // loss scaling runs float32 only
}

}  // namespace cg::test
