// Training on the GPU through nn: a MiniResNet step equals the CPU's, the multi-tensor optimizers
// equal their CPU references, the GradScaler skips overflowed steps on the device, and fp16
// mixed precision learns. Skips without a GPU.
#include <gtest/gtest.h>

#include "engine/autocast.h"
#include "engine/device_allocator.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "kernels/cuda/device_info.h"
#include "nn/grad_scaler.h"
#include "nn/miniresnet.h"
#include "nn/optimizer.h"
#include "support/gpu_ops.h"
#include "support/need_gpu.h"

namespace cg::nn {
namespace {

using test::kGpu;
using test::labels_for;
using test::random_images;

MiniResNetOptions small() {
  MiniResNetOptions o;
  o.in_channels = 3;
  o.widths = {8, 16, 32};
  return o;
}


void expect_same_state(const Module& gpu, const Module& cpu, test::Tolerance tol) {
  const NamedTensors g = gpu.state_dict(), c = cpu.state_dict();
  ASSERT_EQ(g.size(), c.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const Tensor a = g[i].second.to(Device::cpu()).to(DType::f64), b = c[i].second.to(DType::f64);
    EXPECT_TRUE(test::all_close(a.to_vector<double>(), b.to_vector<double>(), tol)) << g[i].first;
  }
}

template <typename Opt, typename Hyper>
void expect_steps_match(const Hyper& h) {
  Generator g1(5), g2(5);
  MiniResNet cpu(small(), g1), gpu(small(), g2);
  gpu.to(kGpu);
  Opt opt_cpu(cpu.named_parameters(), h), opt_gpu(gpu.named_parameters(), h);
  const Tensor x = random_images(8, 1), y = labels_for(8);
  // Two steps: enough for the momentum buffers to matter. A third is not a fair comparison: from
  // the second step on, the GPU's and the CPU's weights differ by float rounding (1e-7), which can
  // put a pre-activation on the other side of a ReLU; measured on the emulated GPU, the second
  // step's gradients then differ by 0.4% from one block down (every layer above agrees to 3e-6),
  // and the third step's weights by 3e-4.
  for (int step = 0; step < 2; ++step) {
    ops::cross_entropy(cpu(x), y).backward();
    ops::cross_entropy(gpu(x.to(kGpu)), y.to(kGpu)).backward();
    opt_cpu.step(h.lr);
    opt_gpu.step(h.lr);
    opt_cpu.zero_grad();
    opt_gpu.zero_grad();
  }
  expect_same_state(gpu, cpu, {2e-4, 2e-3});
}

TEST(GpuTraining, SgdStepsMatchTheCpu) {
  NEED_GPU();
  SgdOptions h;
  h.lr = 0.05f;
  h.momentum = 0.9f;
  h.weight_decay = 1e-4f;
  h.nesterov = true;
  expect_steps_match<SGD>(h);
}

TEST(GpuTraining, AdamWStepsMatchTheCpu) {
  NEED_GPU();
  AdamWOptions h;
  h.lr = 1e-3f;
  expect_steps_match<AdamW>(h);
}

TEST(GpuTraining, AdamWStateRoundTripsThroughTheCpu) {
  NEED_GPU();
  Generator gen(6);
  MiniResNet model(small(), gen);
  model.to(kGpu);
  AdamW opt(model.named_parameters(), {});
  ops::cross_entropy(model(random_images(4, 2).to(kGpu)), labels_for(4).to(kGpu)).backward();
  opt.step(1e-3);
  opt.step(1e-3);
  std::map<std::string, Tensor> saved;
  for (const auto& [k, t] : opt.state_tensors()) saved[k] = t.to(Device::cpu());
  EXPECT_EQ(saved.at("step.fc.weight").item(), 2.0);
  AdamW restored(model.named_parameters(), {});
  restored.load_state_tensors(saved, 2);
  for (const auto& [k, t] : restored.state_tensors())
    EXPECT_EQ(t.to(Device::cpu()).to_vector<float>(), saved.at(k).to_vector<float>()) << k;
}

TEST(GpuTraining, GradScalerSkipsAnOverflowOnTheDevice) {
  NEED_GPU();
  Tensor p = Tensor::from_vector<float>({1.f, 2.f}, {2}).to(kGpu).set_requires_grad(true);
  NamedTensors params{{"p", p}};
  SGD sgd(params, {1.0f, 0.f, 0.f, 0.f, false});
  GradScaler scaler({8.0, 2.0, 0.5, 3}, kGpu);
  p.set_grad(Tensor::from_vector<float>({8.f, -16.f}, {2}).to(kGpu));
  scaler.step(sgd, 1.0);
  EXPECT_FALSE(scaler.last_step_skipped());
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{0.f, 4.f}));  // unscaled by 8, then p -= g
  p.set_grad(Tensor::from_vector<float>({std::numeric_limits<float>::infinity(), 1.f}, {2}).to(kGpu));
  scaler.step(sgd, 1.0);
  EXPECT_TRUE(scaler.last_step_skipped());
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{0.f, 4.f})) << "skipped on the device";
  EXPECT_EQ(scaler.scale(), 4.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  for (int i = 0; i < 3; ++i) {
    p.set_grad(Tensor::zeros({2}).to(kGpu));
    scaler.step(sgd, 1.0);
  }
  EXPECT_EQ(scaler.scale(), 8.0) << "grows after growth_interval clean steps";
}

TEST(GpuTraining, SteadyStateStepsNeverReachCudaMalloc) {
  NEED_GPU();
  Generator gen(8);
  MiniResNet model(small(), gen);
  model.to(kGpu);
  SGD opt(model.named_parameters(), {0.01f, 0.9f, 0.f, 0.f, false});
  GradScaler scaler({}, kGpu);
  const Tensor x = random_images(16, 4).to(kGpu), y = labels_for(16).to(kGpu);
  auto step = [&] {
    Tensor loss;
    {
      autocast::Scope scope({.dtype = DType::f16});
      loss = ops::cross_entropy(model(x), y);
    }
    scaler.backward(loss);
    scaler.step(opt, 0.01);
    opt.zero_grad();
  };
  step();
  step();
  const AllocatorStats before = allocator_for(kGpu).stats();
  for (int i = 0; i < 5; ++i) step();
  const AllocatorStats after = allocator_for(kGpu).stats();
  EXPECT_EQ(after.backend_allocations, before.backend_allocations) << "cudaMalloc in a steady-state step";
  EXPECT_EQ(after.backend_releases, before.backend_releases) << "cudaFree in a steady-state step";
  EXPECT_GT(after.peak_in_use_bytes, 0u);
}

TEST(GpuTraining, MixedPrecisionFp16Learns) {
  NEED_GPU();
  Generator gen(7);
  MiniResNet model(small(), gen);
  model.to(kGpu);
  SgdOptions h;
  h.lr = 0.05f;
  h.momentum = 0.9f;
  SGD opt(model.named_parameters(), h);
  GradScaler scaler({}, kGpu);
  // Half the images on the emulated GPU, where each step of 32 takes over a second.
  const int64_t n = test::kEmulatedGpu ? 16 : 32;
  const Tensor x = random_images(n, 3).to(kGpu), y = labels_for(n).to(kGpu);
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    Tensor loss;
    {
      autocast::Scope scope({.dtype = DType::f16});
      loss = ops::cross_entropy(model(x), y);
    }
    if (step == 0) first = loss.item();
    last = loss.item();
    scaler.backward(loss);
    scaler.step(opt, h.lr);
    opt.zero_grad();
  }
  EXPECT_LT(last, 0.5 * first) << "memorizing " << n << " images: the loss must fall";
  for (const auto& [name, t] : model.named_parameters()) EXPECT_EQ(t.dtype(), DType::f32) << name << ": master weights";
}

}  // namespace
}  // namespace cg::nn
