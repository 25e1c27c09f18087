// Multi-tensor SGD and AdamW against the per-tensor CPU reference (lists longer than one launch
// carries, tensors of very different sizes), the device-side skip on found_inf, the step counter,
// unscale-and-check, and GradScaler's scale rule on the device.
#include <limits>

#include "kernels/cpu/amp.h"
#include "kernels/cpu/optim.h"
#include "kernels/cuda/optim.h"
#include "support/cuda_kernel_test.h"

namespace cg::kernels {
namespace {

using test::DeviceBuffer;

// 40 tensors (more than one launch's 32 slots) of sizes from 1 to 300k.
std::vector<int64_t> sizes() {
  std::vector<int64_t> s;
  for (int i = 0; i < 40; ++i) s.push_back(i % 5 == 0 ? 300001 : 1 + i * 37);
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
  void expect_params_equal_host(test::Tolerance tol, const char* what) {
    for (size_t i = 0; i < p.size(); ++i)
      EXPECT_TRUE(test::all_close(dp[i]->download(), p[i], tol)) << what << " tensor " << i;
  }
};

TEST(CudaOptim, MultiTensorSgdMatchesTheCpuAndSkipsOnFoundInf) {
  NEED_GPU();
  Tensors t(1);
  cpu::SgdParams h{0.1f, 0.9f, 1e-4f, 0.f, true};
  DeviceBuffer clean(std::vector<float>{0.f}, DType::f32), overflow(std::vector<float>{1.f}, DType::f32);
  for (int step = 0; step < 3; ++step) {
    cuda::sgd_update_multi(t.slots, h, step == 0, clean.get<float>(), nullptr);
    for (size_t i = 0; i < t.p.size(); ++i)
      cpu::sgd_update(int64_t(t.p[i].size()), h, step == 0, t.p[i].data(), t.g[i].data(), t.s1[i].data());
  }
  t.expect_params_equal_host({1e-6, 1e-5}, "sgd");
  cuda::sgd_update_multi(t.slots, h, false, overflow.get<float>(), nullptr);  // skipped on the device
  t.expect_params_equal_host({1e-6, 1e-5}, "sgd after a skipped step");
}

TEST(CudaOptim, MultiTensorAdamWMatchesTheCpuWithADeviceStep) {
  NEED_GPU();
  Tensors t(2);
  cpu::AdamWParams h{1e-3f, 0.9f, 0.999f, 1e-8f, 1e-2f};
  DeviceBuffer step(1, DType::i64), clean(std::vector<float>{0.f}, DType::f32), overflow(std::vector<float>{1.f}, DType::f32);
  cuda::copy_host_to_device(step.get(), std::vector<int64_t>{0}.data(), 8, nullptr);
  for (int s = 1; s <= 3; ++s) {
    cuda::advance_step(step.get<int64_t>(), clean.get<float>(), nullptr);
    cuda::adamw_update_multi(t.slots, h, step.get<int64_t>(), clean.get<float>(), nullptr);
    for (size_t i = 0; i < t.p.size(); ++i)
      cpu::adamw_update(int64_t(t.p[i].size()), h, s, t.p[i].data(), t.g[i].data(), t.s1[i].data(), t.s2[i].data());
  }
  t.expect_params_equal_host({1e-6, 1e-5}, "adamw");
  cuda::advance_step(step.get<int64_t>(), overflow.get<float>(), nullptr);
  cuda::adamw_update_multi(t.slots, h, step.get<int64_t>(), overflow.get<float>(), nullptr);
  int64_t s = 0;
  cuda::copy_device_to_host(&s, step.get(), 8, nullptr);
  cuda::synchronize_stream(nullptr);
  EXPECT_EQ(s, 3) << "a skipped step does not count";
  t.expect_params_equal_host({1e-6, 1e-5}, "adamw after a skipped step");
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
  auto poisoned = t.g[37];
  poisoned[5] = std::numeric_limits<float>::infinity();
  t.dg[37]->upload(poisoned);
  cuda::unscale_and_check_multi(grads, inv.get<float>(), found.get<float>(), nullptr);
  EXPECT_EQ(found.download()[0], 1.f) << "an inf in the 38th tensor (second launch) is found";
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
  int64_t tr = -1;
  cuda::copy_device_to_host(&tr, tracker.get(), 8, nullptr);
  cuda::synchronize_stream(nullptr);
  EXPECT_EQ(tr, 0);
}

}  // namespace
}  // namespace cg::kernels
