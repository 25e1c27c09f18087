// The optimizer-update family's conformance (SGD and AdamW over a list of parameters, AdamW's
// step counter): its table of hyperparameter sets (momentum, Nesterov, weight decay, the first
// step, a learning rate read from a tensor, an update skipped for an overflow), the float64
// reference of torch.optim's update rules, and the check of one device on one row. The updates
// are a device switch, so each device is the implementation: the suite runs the public
// multi-tensor ops (ops::sgd_update_multi, adamw_update_multi, advance_step) on its tensors.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "conformance/conformance.h"
#include "engine/optim_ops.h"

namespace cg::test {

struct OptimizerRow {
  std::string name;
  bool adamw = false;
  SgdOptions sgd{};
  AdamWOptions adam{};
  bool first_step = false;  // SGD: the momentum buffers take the gradient
  int64_t step = 1;         // AdamW: this update's step (the device counter holds step - 1 before)
  bool skipped = false;     // found_inf is set: nothing may change
  bool device_lr = false;   // the learning rate comes from a tensor (kDeviceLr), not the hyperparameters
};

constexpr float kDeviceLr = 0.03f;

inline std::vector<OptimizerRow> optimizer_rows() {
  return {{"sgd_plain", false, {.lr = 0.1f}},
          {"sgd_momentum_decay_dampening", false, {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-2f, .dampening = 0.1f}},
          {"sgd_nesterov_first_step", false, {.lr = 0.05f, .momentum = 0.9f, .nesterov = true}, {}, true},
          {"sgd_device_lr", false, {.lr = 0.05f, .momentum = 0.9f}, {}, false, 1, false, true},
          {"sgd_skipped", false, {.lr = 0.05f, .momentum = 0.9f}, {}, false, 1, true},
          {"adamw_step1", true, {}, {.lr = 1e-2f}, false, 1},
          {"adamw_step7_decay", true, {}, {.lr = 1e-2f, .beta1 = 0.8f, .weight_decay = 0.1f}, false, 7},
          {"adamw_device_lr", true, {}, {}, false, 3, false, true},
          {"adamw_skipped", true, {}, {}, false, 2, true}};
}

// Parameter sizes: one element, a few, and a tail after whole vectors and chunks.
inline const std::vector<int64_t> kOptimSizes = {1, 5, 1031};

// One parameter's tensors as doubles: param, grad, state1 (momentum buffer or exp_avg), state2.
struct SlotValues {
  std::vector<double> param, grad, state1, state2;
};

inline std::vector<SlotValues> optimizer_values(const OptimizerRow& r) {
  std::vector<SlotValues> out;
  uint64_t seed = 70;
  for (int64_t n : kOptimSizes) {
    SlotValues s{random_values(n, seed, DType::f32), random_values(n, seed + 1, DType::f32),
                 random_values(n, seed + 2, DType::f32), random_values(n, seed + 3, DType::f32)};
    for (double& e : s.state2) e = std::abs(e);  // exp_avg_sq
    if (!r.adamw) s.state2.clear();
    if (!r.adamw && r.sgd.momentum == 0.f) s.state1.clear();
    out.push_back(s);
    seed += 4;
  }
  return out;
}

inline void sgd_reference(const OptimizerRow& r, double lr, SlotValues& s) {
  const SgdOptions& h = r.sgd;
  for (size_t i = 0; i < s.param.size(); ++i) {
    const double g = s.grad[i] + double(h.weight_decay) * s.param[i];
    double d = g;
    if (h.momentum != 0.f) {
      double& b = s.state1[i];
      b = r.first_step ? g : double(h.momentum) * b + (1 - double(h.dampening)) * g;
      d = h.nesterov ? g + double(h.momentum) * b : b;
    }
    s.param[i] -= lr * d;
  }
}

inline void adamw_reference(const OptimizerRow& r, double lr, SlotValues& s) {
  const AdamWOptions& h = r.adam;
  const double b1 = h.beta1, b2 = h.beta2;
  const double c1 = 1 - std::pow(b1, double(r.step)), c2 = 1 - std::pow(b2, double(r.step));
  for (size_t i = 0; i < s.param.size(); ++i) {
    double &m = s.state1[i], &v = s.state2[i];
    s.param[i] *= 1 - lr * double(h.weight_decay);
    m = b1 * m + (1 - b1) * s.grad[i];
    v = b2 * v + (1 - b2) * s.grad[i] * s.grad[i];
    s.param[i] -= lr * (m / c1) / (std::sqrt(v / c2) + double(h.eps));
  }
}

// Every slot after the update (unchanged when skipped).
inline std::vector<SlotValues> optimizer_reference(const OptimizerRow& r, std::vector<SlotValues> slots) {
  if (r.skipped) return slots;
  const double lr = r.device_lr ? double(kDeviceLr) : double(r.adamw ? r.adam.lr : r.sgd.lr);
  for (SlotValues& s : slots) r.adamw ? adamw_reference(r, lr, s) : sgd_reference(r, lr, s);
  return slots;
}

using OptimizerParam = Param<DeviceSwitch, OptimizerRow>;

// Advances the step counter (from step - 1), then updates: as the optimizers call them.
inline std::vector<SlotValues> run_optimizer(const OptimizerParam& p, const std::vector<SlotValues>& values,
                                             int64_t& step_after) {
  const OptimizerRow& r = p.c;
  const Device device = device_of(p.implementation.device);
  const auto tensor = [&](const std::vector<double>& v) {
    return v.empty() ? Tensor() : tensor_of(v, {int64_t(v.size())}, DType::f32, device);
  };
  std::vector<ops::UpdateSlot> slots;
  for (const SlotValues& s : values) slots.push_back({tensor(s.param), tensor(s.grad), tensor(s.state1), tensor(s.state2)});
  const Tensor found_inf = Tensor::scalar(r.skipped ? 1.0 : 0.0).to(device);
  const Tensor device_lr = r.device_lr ? Tensor::scalar(kDeviceLr).to(device) : Tensor();
  Tensor step = Tensor::scalar(double(r.step - 1), DType::i64).to(device);
  ops::advance_step(step, found_inf);
  if (r.adamw) ops::adamw_update_multi(slots, r.adam, step, found_inf, device_lr);
  else ops::sgd_update_multi(slots, r.sgd, r.first_step, found_inf, device_lr);
  step_after = int64_t(step.item());
  std::vector<SlotValues> out;
  const auto back = [](const Tensor& t) { return t.defined() ? values_of(t) : std::vector<double>(); };
  for (const ops::UpdateSlot& s : slots) out.push_back({back(s.param), back(s.grad), back(s.state1), back(s.state2)});
  return out;
}

inline void expect_optimizer_conforms(const OptimizerParam& p) {
  const std::vector<SlotValues> values = optimizer_values(p.c);
  const std::vector<SlotValues> ref = optimizer_reference(p.c, values);
  int64_t step = 0;
  const std::vector<SlotValues> got = run_optimizer(p, values, step);
  EXPECT_EQ(step, p.c.skipped ? p.c.step - 1 : p.c.step) << "the step counter after advance_step";
  const Tolerance tol{1e-6, 2e-6};  // float32 elementwise arithmetic: a few roundings per element
  for (size_t i = 0; i < ref.size(); ++i) {
    SCOPED_TRACE("parameter of " + std::to_string(kOptimSizes[i]) + " elements");
    EXPECT_TRUE(matches_reference(got[i].param, ref[i].param, tol)) << "param";
    EXPECT_TRUE(matches_reference(got[i].state1, ref[i].state1, tol)) << "state1 (momentum buffer or exp_avg)";
    EXPECT_TRUE(matches_reference(got[i].state2, ref[i].state2, tol)) << "state2 (exp_avg_sq)";
  }
}

inline std::vector<OptimizerParam> optimizer_params(DeviceType device) {
  return device_params(device, optimizer_rows(), {DType::f32});  // the updates run float32 only
}

}  // namespace cg::test
