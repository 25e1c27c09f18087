// The optimizer-update and loss-scaling ops (engine/optim_ops.h) on the CPU: the multi-tensor
// calls give exactly what one call per parameter gives and honour the device scalars, and what
// they cannot run (anything but float32) is refused naming the op and the cause.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "engine/optim_ops.h"
#include "support/messages.h"

namespace cg {
namespace {

Tensor ramp(int64_t n, double start, double step) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = float(start + step * double(i));
  return Tensor::from_vector(v, {n});
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector<float>(), y = b.to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// The CPU's multi-tensor SGD and AdamW give the bits of one single-tensor call per parameter.
TEST(OptimOps, CpuMultiTensorUpdatesMatchPerParameterCallsBitForBit) {
  const SgdOptions sgd{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f, .nesterov = true};
  Tensor p1 = ramp(7, -1.0, 0.3), p2 = p1.clone(), g = ramp(7, 0.2, -0.07);
  Tensor b1 = Tensor::zeros({7}), b2 = Tensor::zeros({7});
  for (bool first : {true, false, false}) {
    ops::sgd_update(p1, g, b1, sgd, first);
    ops::sgd_update_multi({{p2, g, b2, Tensor()}}, sgd, first, Tensor(), Tensor());
  }
  EXPECT_TRUE(same_bits(p1, p2));
  EXPECT_TRUE(same_bits(b1, b2));

  const AdamWOptions adam{.lr = 2e-3f, .weight_decay = 0.05f};
  Tensor q1 = ramp(6, 0.5, 0.25), q2 = q1.clone();
  Tensor m1 = Tensor::zeros({6}), v1 = Tensor::zeros({6}), m2 = Tensor::zeros({6}), v2 = Tensor::zeros({6});
  const Tensor g6 = ramp(6, 0.2, -0.07);
  Tensor step = Tensor::zeros({}, DType::i64);
  for (int64_t t = 1; t <= 3; ++t) {
    ops::adamw_update(q1, g6, m1, v1, t, adam);
    ops::advance_step(step, Tensor());
    ops::adamw_update_multi({{q2, g6, m2, v2}}, adam, step, Tensor(), Tensor());
  }
  EXPECT_EQ(step.to_vector<int64_t>()[0], 3);
  EXPECT_TRUE(same_bits(q1, q2));
  EXPECT_TRUE(same_bits(v1, v2));
}

TEST(OptimOps, CpuUpdatesHonourFoundInfAndTheDeviceLearningRate) {
  Tensor p = ramp(3, 1.0, 1.0), g = Tensor::full({3}, 1.0, DType::f32);
  const Tensor before = p.clone();
  Tensor found = Tensor::full({}, 1.0, DType::f32);
  ops::sgd_update_multi({{p, g, Tensor(), Tensor()}}, {.lr = 1.f}, false, found, Tensor());
  EXPECT_TRUE(same_bits(p, before));  // skipped
  Tensor step = Tensor::zeros({}, DType::i64);
  ops::advance_step(step, found);
  EXPECT_EQ(step.to_vector<int64_t>()[0], 0);

  found.zero_();
  const Tensor lr = Tensor::full({}, 0.25, DType::f32);
  ops::sgd_update_multi({{p, g, Tensor(), Tensor()}}, {.lr = 1.f}, false, found, lr);
  EXPECT_EQ(p.to_vector<float>()[0], 0.75f);  // 1 - 0.25 * 1: the device lr, not h.lr
}

TEST(OptimOps, CpuLossScalingFollowsGradScalersRule) {
  Tensor g = ramp(4, 2.0, 2.0);
  Tensor inv = Tensor::full({}, 0.5, DType::f32), found = Tensor::zeros({}, DType::f32);
  ops::unscale_and_check_multi({g}, inv, found);
  EXPECT_EQ(g.to_vector<float>()[3], 4.f);
  EXPECT_EQ(found.item(), 0.0);
  Tensor bad = Tensor::full({2}, std::numeric_limits<float>::max(), DType::f32);
  ops::unscale_and_check_multi({g, bad}, Tensor::full({}, 4.0, DType::f32), found);
  EXPECT_EQ(found.item(), 1.0);

  Tensor scale = Tensor::full({}, 1024.0, DType::f32), inv_scale = Tensor::zeros({}, DType::f32);
  Tensor tracker = Tensor::zeros({}, DType::i64);
  ops::update_loss_scale(scale, inv_scale, tracker, found, 2.f, 0.5f, 2);  // overflow: halves
  EXPECT_EQ(scale.item(), 512.0);
  EXPECT_EQ(inv_scale.item(), 1.0 / 512);
  found.zero_();
  ops::update_loss_scale(scale, inv_scale, tracker, found, 2.f, 0.5f, 2);
  EXPECT_EQ(scale.item(), 512.0);
  EXPECT_EQ(tracker.item(), 1.0);
  ops::update_loss_scale(scale, inv_scale, tracker, found, 2.f, 0.5f, 2);  // second clean step: grows
  EXPECT_EQ(scale.item(), 1024.0);
  EXPECT_EQ(tracker.item(), 0.0);
}

TEST(OptimOps, WhatNoImplementationTakesIsRefusedNamingTheCause) {
  Tensor p = Tensor::zeros({3}, DType::f64), g = Tensor::zeros({3}, DType::f64), buf;
  try {
    ops::sgd_update(p, g, buf, {}, false);
    FAIL() << "a float64 update ran";
  } catch (const Error& e) {
    test::expect_mentions(e.what(), {"sgd_update", "optimizer update", "float64", "float32 only"});
    // The whole text: the op, its dtype, the device and the cause; nothing of a convolution's layout.
    const std::string expected = "sgd_update (float64): an optimizer update on cpu runs float32 only";
    EXPECT_EQ(std::string(e.what()).substr(0, expected.size()), expected) << "the source location may follow";
  }
  Tensor p32 = Tensor::zeros({3}), g64 = Tensor::zeros({3}, DType::f64);
  try {
    ops::sgd_update(p32, g64, buf, {}, false);
    FAIL() << "a float64 gradient was taken for a float32 parameter";
  } catch (const Error& e) {
    test::expect_mentions(e.what(), {"sgd_update", "differs from the first parameter"});
  }
  Tensor gs = Tensor::zeros({3}, DType::f64), found = Tensor::zeros({}, DType::f32);
  try {
    ops::unscale_and_check_multi({gs}, Tensor::full({}, 1.0, DType::f32), found);
    FAIL() << "a float64 gradient was unscaled";
  } catch (const Error& e) {
    test::expect_mentions(e.what(), {"unscale", "loss scaling", "float32 only"});
    EXPECT_EQ(std::string(e.what()).find("NCHW"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cg
