// Multi-tensor SGD and AdamW against the per-tensor CPU reference (lists longer than one launch
// carries, tensors of very different sizes, an empty one), the device-side skip on found_inf
// (parameters, state and step untouched), the step counter, unscale-and-check, and GradScaler's
// scale rule on the device (growth after the interval, backoff and reset on overflow).
#include <fmt/format.h>

#include <limits>
#include <string>

#include "kernels/cpu/amp.h"
#include "kernels/cpu/optim.h"
#include "kernels/cuda/optim.h"
#include "support/cuda_kernel_test.h"

namespace cg::kernels {
namespace {

using test::DeviceBuffer;

// 150 tensors (three launches of at most 64 slots) of sizes from 0 (left out of the launch) to
// 300k (many 4096-element chunks, the last one partial).
constexpr int kTensors = 150;
std::vector<int64_t> sizes() {
  std::vector<int64_t> s;
  for (int i = 0; i < kTensors; ++i) s.push_back(i % 10 == 0 ? 300001 : i == 77 ? 0 : 1 + i * 37);
  return s;
}

struct Tensors {  // host and device copies of params, grads and two state buffers per tensor
  std::vector<std::vector<float>> p, g, s1, s2;
  std::vector<std::unique_ptr<DeviceBuffer>> dp, dg, ds1, ds2;
  std::vector<cuda::TensorSlot> slots;

  explicit Tensors(uint64_t seed) {
    for (int64_t n : sizes()) {
      p.push_back(test::random_vector<float>(size_t(n), seed++));
      g.push_back(test::random_vector<float>(size_t(n), seed++));
      s1.push_back(std::vector<float>(static_cast<size_t>(n), 0.f));
      s2.push_back(std::vector<float>(static_cast<size_t>(n), 0.f));
      dp.push_back(std::make_unique<DeviceBuffer>(p.back(), DType::f32));
      dg.push_back(std::make_unique<DeviceBuffer>(g.back(), DType::f32));
      ds1.push_back(std::make_unique<DeviceBuffer>(s1.back(), DType::f32));
      ds2.push_back(std::make_unique<DeviceBuffer>(s2.back(), DType::f32));
      slots.push_back({n, dp.back()->get<float>(), dg.back()->get<float>(), ds1.back()->get<float>(),
                       ds2.back()->get<float>()});
    }
  }
  // Parameters and optimizer state on the device against the host's.
  void expect_equal_host(test::Tolerance tol, const char* what, bool two_states) {
    for (size_t i = 0; i < p.size(); ++i) {
      EXPECT_TRUE(test::all_close(dp[i]->download(), p[i], tol)) << what << " tensor " << i << ": param";
      EXPECT_TRUE(test::all_close(ds1[i]->download(), s1[i], tol)) << what << " tensor " << i << ": state1";
      if (two_states) {
        EXPECT_TRUE(test::all_close(ds2[i]->download(), s2[i], tol)) << what << " tensor " << i << ": state2";
      }
    }
  }
};

TEST(CudaOptim, MultiTensorSgdMatchesTheCpuAndSkipsOnFoundInf) {
  NEED_GPU();
  // Nesterov (the recipe), plain momentum with dampening, and no momentum at all.
  const SgdOptions variants[] = {{0.1f, 0.9f, 1e-4f, 0.f, true}, {0.05f, 0.8f, 5e-4f, 0.25f, false},
                                     {0.1f, 0.f, 1e-4f, 0.f, false}};
  uint64_t seed = 1;
  for (const SgdOptions& h : variants) {
    Tensors t(seed += 1000);
    DeviceBuffer clean(std::vector<float>{0.f}, DType::f32), overflow(std::vector<float>{1.f}, DType::f32);
    for (int step = 0; step < 3; ++step) {
      cuda::sgd_update_multi(t.slots, h, step == 0, step == 1 ? nullptr : clean.get<float>(), nullptr);
      for (size_t i = 0; i < t.p.size(); ++i)
        cpu::sgd_update(int64_t(t.p[i].size()), h, step == 0, t.p[i].data(), t.g[i].data(), t.s1[i].data());
    }
    const std::string what = fmt::format("sgd momentum {} nesterov {}", h.momentum, h.nesterov);
    t.expect_equal_host({1e-6, 1e-5}, what.c_str(), false);
    cuda::sgd_update_multi(t.slots, h, false, overflow.get<float>(), nullptr);  // skipped on the device
    t.expect_equal_host({1e-6, 1e-5}, (what + " after a skipped step").c_str(), false);
  }
}

TEST(CudaOptim, MultiTensorAdamWMatchesTheCpuWithADeviceStep) {
  NEED_GPU();
  Tensors t(2);
  AdamWOptions h{1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f};
  DeviceBuffer step(1, DType::i64), clean(std::vector<float>{0.f}, DType::f32),
      overflow(std::vector<float>{1.f}, DType::f32);
  cuda::copy_host_to_device(step.get(), std::vector<int64_t>{0}.data(), 8, nullptr);
  for (int s = 1; s <= 3; ++s) {
    cuda::advance_step(step.get<int64_t>(), clean.get<float>(), nullptr);
    cuda::adamw_update_multi(t.slots, h, step.get<int64_t>(), clean.get<float>(), nullptr);
    for (size_t i = 0; i < t.p.size(); ++i)
      cpu::adamw_update(int64_t(t.p[i].size()), h, s, t.p[i].data(), t.g[i].data(), t.s1[i].data(), t.s2[i].data());
  }
  t.expect_equal_host({1e-6, 1e-5}, "adamw", true);
  cuda::advance_step(step.get<int64_t>(), overflow.get<float>(), nullptr);
  cuda::adamw_update_multi(t.slots, h, step.get<int64_t>(), overflow.get<float>(), nullptr);
  int64_t s = 0;
  cuda::copy_device_to_host(&s, step.get(), 8, nullptr);
  cuda::synchronize_stream(nullptr);
  EXPECT_EQ(s, 3) << "a skipped step does not count";
  t.expect_equal_host({1e-6, 1e-5}, "adamw after a skipped step", true);
}

TEST(CudaAmp, UnscaleAndCheckOverManyTensors) {
  NEED_GPU();
  Tensors t(3);
  DeviceBuffer inv(std::vector<float>{0.125f}, DType::f32), found(std::vector<float>{0.f}, DType::f32);
  std::vector<cuda::TensorSlot> grads;
  for (auto& s : t.slots) grads.push_back({s.n, const_cast<float*>(s.grad), nullptr, nullptr, nullptr});
  cuda::unscale_and_check_multi(grads, inv.get<float>(), found.get<float>(), nullptr);
  for (size_t i = 0; i < t.g.size(); ++i) {
    cpu::unscale_and_check(int64_t(t.g[i].size()), 0.125f, t.g[i].data());
    EXPECT_EQ(t.dg[i]->download(), t.g[i]) << "tensor " << i;
  }
  EXPECT_EQ(found.download()[0], 0.f);
  // An inf and a NaN side by side in tensor 140 (the third launch), in its last partial chunk: two
  // threads of one block set the block's flag (with an atomic: the emulator's shared-memory check
  // faults a plain read-modify-write there, the mutant read_modify_write_race).
  auto poisoned = t.g[140];
  poisoned[299999] = std::numeric_limits<float>::quiet_NaN();
  poisoned[300000] = std::numeric_limits<float>::infinity();  // its last element
  t.dg[140]->upload(poisoned);
  cuda::unscale_and_check_multi(grads, inv.get<float>(), found.get<float>(), nullptr);
  EXPECT_EQ(found.download()[0], 1.f) << "an inf in tensor 140 (third launch) is found";
  cuda::unscale_and_check_multi(grads, inv.get<float>(), found.get<float>(), nullptr);
  EXPECT_EQ(found.download()[0], 1.f) << "found_inf is only ever set";
}

TEST(CudaAmp, LossScaleRuleOnTheDevice) {
  NEED_GPU();
  DeviceBuffer scale(std::vector<float>{8.f}, DType::f32), inv(std::vector<float>{0.125f}, DType::f32);
  DeviceBuffer tracker(1, DType::i64), found(std::vector<float>{0.f}, DType::f32);
  cuda::copy_host_to_device(tracker.get(), std::vector<int64_t>{0}.data(), 8, nullptr);
  auto update = [&](float f) {
    found.upload({f});
    cuda::update_loss_scale(scale.get<float>(), inv.get<float>(), tracker.get<int64_t>(), found.get<float>(), 2.f,
                            0.5f, 3, nullptr);
  };
  update(0.f);
  update(0.f);
  EXPECT_EQ(scale.download()[0], 8.f);
  update(0.f);
  EXPECT_EQ(scale.download()[0], 16.f) << "grows after 3 clean steps";
  EXPECT_EQ(inv.download()[0], 1.f / 16.f);
  update(0.f);
  update(1.f);
  EXPECT_EQ(scale.download()[0], 8.f) << "backs off on overflow";
  EXPECT_EQ(inv.download()[0], 1.f / 8.f);
  int64_t tr = -1;
  cuda::copy_device_to_host(&tr, tracker.get(), 8, nullptr);
  cuda::synchronize_stream(nullptr);
  EXPECT_EQ(tr, 0) << "an overflow resets the count of clean steps";
  update(0.f);
  update(0.f);
  EXPECT_EQ(scale.download()[0], 8.f) << "two clean steps after the overflow are not enough";
  update(0.f);
  EXPECT_EQ(scale.download()[0], 16.f) << "three are";
  // Growth never reaches inf.
  scale.upload({3e38f});
  for (int i = 0; i < 3; ++i) update(0.f);
  EXPECT_EQ(scale.download()[0], 3e38f);
}

}  // namespace
}  // namespace cg::kernels
