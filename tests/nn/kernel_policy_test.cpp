// The kernels.* policy reaches every layer through the execution context (engine/execution.h):
// two models of one process, built alike, run under scopes that differ in kernels.cpu_conv, each
// its own convolutions, side by side, and a scope's end restores the one around it.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/ops.h"
#include "nn/miniresnet.h"

namespace cg::nn {
namespace {

MiniResNetOptions narrow() {
  MiniResNetOptions o;
  o.in_channels = 1;
  o.widths = {16, 32, 64};
  return o;
}

// Logits and the stem's weight gradient of one forward (under kernels.cpu_conv=cpu_conv) and backward.
std::vector<float> step(ops::CpuConvAlgorithm cpu_conv, MiniResNet& model, const Tensor& x) {
  model.zero_grad();
  Tensor logits;
  {
    ops::ExecutionScope with_algorithm({.kernels = {.cpu_conv = cpu_conv}});
    logits = model(x);
  }
  ops::cross_entropy(logits, Tensor::from_vector(std::vector<int64_t>{1, 7}, {2})).backward();
  std::vector<float> out = logits.to_vector<float>();
  for (auto& [name, p] : model.named_parameters())
    if (name == "conv1.weight") for (float g : p.grad().to_vector<float>()) out.push_back(g);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(KernelPolicy, EachScopeRunsItsOwnConvolutions) {
  using ops::CpuConvAlgorithm;
  Generator g1(3), g2(3), gx(4);
  MiniResNet automatic(narrow(), g1), im2col(narrow(), g2);
  Tensor x = Tensor::empty({2, 1, 28, 28});
  normal_(x, gx, 0.0, 1.0);
  const std::vector<float> a1 = step(CpuConvAlgorithm::automatic, automatic, x);
  const std::vector<float> b = step(CpuConvAlgorithm::im2col, im2col, x);
  const std::vector<float> a2 = step(CpuConvAlgorithm::automatic, automatic, x);
  EXPECT_TRUE(same_bits(a1, a2)) << "the im2col model in between changed what the auto model runs";
  EXPECT_FALSE(same_bits(a1, b)) << "both models ran the same convolutions (auto's direct kernel "
                                    "rounds otherwise than im2col)";
  for (size_t i = 0; i < a1.size(); ++i) EXPECT_NEAR(a1[i], b[i], 1e-3 * (1 + std::abs(b[i]))) << i;
}

}  // namespace
}  // namespace cg::nn
