// The autograd engine's contract: accumulation across backward calls, zero_grad, no-grad scopes,
// and grad-ready hooks firing exactly once, when a parameter's gradient is final.
#include <gtest/gtest.h>

#include "engine/autograd/grad_mode.h"
#include "engine/ops.h"
#include "support/need_gpu.h"

namespace cg {
namespace {

Tensor param(std::vector<double> v) {
  return Tensor::from_vector<double>(v, {int64_t(v.size())}).set_requires_grad(true);
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor w = param({1.0, -2.0});
  for (int i = 0; i < 2; ++i) ops::scale(w, 3.0).backward(Tensor::full({2}, 1.0, DType::f64));
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{6.0, 6.0}));
}

TEST(Autograd, SharedInputGetsTheSumOfBothPaths) {
  Tensor w = param({2.0});
  ops::add(ops::scale(w, 3.0), ops::scale(w, 5.0)).backward(Tensor::full({1}, 1.0, DType::f64));
  EXPECT_DOUBLE_EQ(w.grad().item(), 8.0);
}

// A graph a million nodes deep (a deep enough model) is released, with and without a backward
// first, without one stack frame per node: the recursive release overflowed the 8 MiB stack.
TEST(Autograd, DeepGraphIsReleasedWithoutRecursion) {
  constexpr int kDepth = 1'000'000;
  for (bool run_backward : {false, true}) {
    Tensor w = param({1.0});
    Tensor y = w;
    for (int i = 0; i < kDepth; ++i) y = ops::scale(y, 1.0);
    if (run_backward) y.backward(Tensor::full({1}, 1.0, DType::f64));
    y = Tensor();  // the last handle on the chain: every node goes here
    if (run_backward) EXPECT_DOUBLE_EQ(w.grad().item(), 1.0);
  }
}

TEST(Autograd, NoGradScopeRecordsNothing) {
  Tensor w = param({1.0});
  Tensor y;
  {
    autograd::NoGradGuard guard;
    y = ops::scale(w, 2.0);
  }
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
  EXPECT_TRUE(autograd::grad_enabled());
  EXPECT_THROW(y.backward(), Error);
}

TEST(Autograd, ZeroGradFreesGradients) {
  Tensor w = param({1.0});
  ops::scale(w, 2.0).backward(Tensor::full({1}, 1.0, DType::f64));
  ASSERT_TRUE(w.grad().defined());
  w.impl().grad.reset();
  EXPECT_FALSE(w.grad().defined());
}

TEST(Autograd, HookFiresOnceWithTheFinalGradient) {
  Tensor w = param({1.0});
  std::vector<double> seen;
  w.register_grad_ready_hook([&](Tensor& p) { seen.push_back(p.grad().item()); });
  // w feeds two paths that meet late: the hook must wait for both.
  Tensor a = ops::scale(w, 2.0);
  Tensor b = ops::scale(ops::scale(w, 3.0), 1.0);
  ops::add(a, b).backward(Tensor::full({1}, 1.0, DType::f64));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_DOUBLE_EQ(seen[0], 5.0);
}

TEST(Autograd, LaterLayersBecomeReadyFirst) {
  Tensor x = Tensor::full({1}, 1.0, DType::f64);
  Tensor w1 = param({1.0}), w2 = param({1.0}), w3 = param({1.0});
  std::vector<int> order;
  w1.register_grad_ready_hook([&](Tensor&) { order.push_back(1); });
  w2.register_grad_ready_hook([&](Tensor&) { order.push_back(2); });
  w3.register_grad_ready_hook([&](Tensor&) { order.push_back(3); });
  Tensor h = ops::add(x, w1);
  h = ops::add(h, w2);
  h = ops::add(h, w3);
  h.backward(Tensor::full({1}, 1.0, DType::f64));
  EXPECT_EQ(order, (std::vector<int>{3, 2, 1}));
}

TEST(Autograd, ReshapeIsADifferentiableView) {
  Tensor w = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}).set_requires_grad(true);
  Tensor y = ops::reshape(w, {4});
  EXPECT_EQ(y.raw_data(), w.raw_data());
  y.backward(Tensor::from_vector<double>({1, 2, 3, 4}, {4}));
  EXPECT_EQ(w.grad().shape(), (Shape{2, 2}));
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{1, 2, 3, 4}));
}

TEST(Tensor, CastsRoundTripThroughHalfAndBFloat16) {
  Tensor x = Tensor::from_vector<float>({0.0f, 1.0f, -2.5f, 65504.0f, 1e-7f, 3.14159f}, {6});
  std::vector<float> h = x.to(DType::f16).to(DType::f32).to_vector<float>();
  EXPECT_EQ(h[1], 1.0f);
  EXPECT_EQ(h[2], -2.5f);
  EXPECT_EQ(h[3], 65504.0f);
  EXPECT_EQ(h[4], std::ldexp(1.0f, -23));  // 1e-7 is subnormal in f16: rounds to 2 * 2^-24
  EXPECT_NEAR(h[5], 3.14159f, 2e-3f);
  std::vector<float> b = x.to(DType::bf16).to(DType::f32).to_vector<float>();
  EXPECT_EQ(b[2], -2.5f);
  EXPECT_NEAR(b[5], 3.14159f, 2e-2f);
  EXPECT_TRUE(std::isinf(float(Half(70000.0f))));
}

TEST(Tensor, CudaTensorsWithoutAGpuFailClearly) {
  if (test::gpu_visible()) GTEST_SKIP() << "checks the no-GPU error; this machine has a GPU";
  try {
    Tensor::empty({2}, DType::f32, Device::cuda());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
    // A build without the CUDA backend says so (engine/device_allocator.cpp), not "no device".
    if (!kernels::kCudaBuild) {
      EXPECT_NE(std::string(e.what()).find("this build has no CUDA backend"), std::string::npos) << e.what();
    }
  }
}

TEST(Tensor, ErrorsNameTheProblem) {
  Tensor x = Tensor::zeros({2, 3});
  EXPECT_THROW(x.data<double>(), Error);
  EXPECT_THROW(x.view({4}), Error);
  try {
    ops::conv2d(x.view({1, 1, 2, 3}), Tensor::zeros({1, 2, 3, 3}), Tensor(), {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("channels"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cg
