// A channels-last MiniResNet on the GPU: in float32 a training step (logits, loss, gradients,
// running statistics) equals the CPU's NCHW model; under fp16 autocast it stays close to the GPU's
// NCHW model and its weight gradients are float32 in the parameters' shapes. Skips without a GPU.
#include <gtest/gtest.h>

#include "engine/autocast.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "kernels/cuda/device_info.h"
#include "nn/miniresnet.h"
#include "support/gpu_ops.h"

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


std::vector<double> host_f64(const Tensor& t) { return t.to(Device::cpu()).to(DType::f64).to_vector<double>(); }

// One forward and backward; the logits in float64 on the host.
std::vector<double> step(ops::Layout layout, MiniResNet& model, Device device, bool autocast_f16) {
  const Tensor x = random_images(8, 1).to(device), y = labels_for(8).to(device);
  Tensor logits;
  {
    ops::ExecutionScope in_context({.layout = layout, .autocast = {.enabled = autocast_f16, .dtype = DType::f16}});
    logits = model.forward(x);
  }
  ops::cross_entropy(logits, y).backward();
  return host_f64(logits);
}

void expect_same(const NamedTensors& got, const NamedTensors& ref, test::Tolerance tol, const char* what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, ref[i].first) << what;
    ASSERT_TRUE(got[i].second.defined() && ref[i].second.defined()) << what << " " << ref[i].first;
    EXPECT_EQ(got[i].second.shape(), ref[i].second.shape()) << what << " " << ref[i].first;
    EXPECT_TRUE(test::all_close(host_f64(got[i].second), host_f64(ref[i].second), tol)) << what << " " << ref[i].first;
  }
}

NamedTensors grads_of(const Module& m) {
  NamedTensors g;
  for (const auto& [name, p] : m.named_parameters()) g.emplace_back(name, p.grad());
  return g;
}

TEST(GpuChannelsLastMiniResNet, Float32StepMatchesTheCpuNchwModel) {
  NEED_GPU();
  Generator g1(5), g2(5);
  MiniResNet cpu(small(), g1), gpu(small(), g2);
  gpu.to(kGpu);
  const test::Tolerance tol{2e-4, 2e-3};  // float32 sums in other orders, through the whole net
  EXPECT_TRUE(test::all_close(step(ops::Layout::nhwc, gpu, kGpu, false), step(ops::Layout::nchw, cpu, Device::cpu(), false), tol)) << "logits";
  expect_same(grads_of(gpu), grads_of(cpu), tol, "gradient");
  expect_same(gpu.state_dict(), cpu.state_dict(), tol, "state");
}

TEST(GpuChannelsLastMiniResNet, Fp16AutocastStaysCloseToTheNchwModel) {
  NEED_GPU();
  Generator g1(6), g2(6);
  MiniResNet nchw(small(), g1), nhwc(small(), g2);
  nchw.to(kGpu);
  nhwc.to(kGpu);
  // Both round activations to fp16 between layers but convolve with other algorithms: the
  // difference is a few fp16 roundings deep, not a layout mix-up (which would be O(1)).
  const test::Tolerance tol{5e-2, 5e-2};
  EXPECT_TRUE(test::all_close(step(ops::Layout::nhwc, nhwc, kGpu, true), step(ops::Layout::nchw, nchw, kGpu, true), tol)) << "logits";
  const NamedTensors g = grads_of(nhwc);
  for (const auto& [name, grad] : g) EXPECT_EQ(grad.dtype(), DType::f32) << name;
  expect_same(g, grads_of(nchw), {1e-1, 1e-1}, "gradient");
}

}  // namespace
}  // namespace cg::nn
