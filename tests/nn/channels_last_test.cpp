// A MiniResNet run under a channels-last execution context computes, on the CPU, the same logits,
// loss, parameter gradients and batch-norm running statistics as under NCHW, in training and in
// eval. (The layout is not the model's: one model, one state dict, either context.)
#include <gtest/gtest.h>

#include <cmath>

#include "engine/ops.h"
#include "engine/random.h"
#include "nn/miniresnet.h"

namespace cg::nn {
namespace {

MiniResNetOptions small() {
  MiniResNetOptions o;
  o.in_channels = 3;
  o.widths = {8, 16};
  o.blocks = {1, 1};  // a stride-2 block with a downsample, and an identity-shortcut block
  return o;
}

// The model's forward under an execution context of `layout` (the model itself has no layout: its
// state dict is the same whatever it runs in).
Tensor forward_in(ops::Layout layout, MiniResNet& model, const Tensor& x) {
  ops::ExecutionScope in_layout({.layout = layout});
  return model.forward(x);
}

Tensor images(uint64_t seed) {
  Generator gen(seed);
  Tensor x = Tensor::empty({4, 3, 10, 10});
  normal_(x, gen, 0.0, 1.0);
  return x;
}

// Everything a training step reads out of the model.
struct StepResult {
  std::vector<float> logits;
  float loss = 0;
  NamedTensors grads, state;
};

StepResult train_step(ops::Layout layout, MiniResNet& model, const Tensor& x) {
  const Tensor labels = Tensor::from_vector(std::vector<int64_t>{1, 7, 3, 0}, {4});
  const Tensor logits = forward_in(layout, model, x);
  const Tensor loss = ops::cross_entropy(logits, labels);
  loss.backward();
  StepResult r{logits.to_vector<float>(), float(loss.item()), {}, model.state_dict()};
  for (auto& [name, p] : model.named_parameters()) r.grads.emplace_back(name, p.grad());
  return r;
}

// Not bit-identical, though convolutions and pooling are (tests/engine/channels_last_test.cpp):
// batch norm sums each channel over N*H*W values in another order per layout (NCHW: image by
// image over contiguous planes; NHWC: over rows strided by C), so results differ by rounding, a
// few ulps of the sums, grown through the net. Budget: 1e-5 absolute plus 1e-4 relative, far below any real
// difference (a wrong layout anywhere scrambles values at O(1)).
void expect_close(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  size_t worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double excess = std::abs(double(got[i]) - ref[i]) - (1e-5 + 1e-4 * std::abs(double(ref[i])));
    if (!(excess <= worst_excess)) {
      worst_excess = excess;
      worst = i;
    }
  }
  EXPECT_LE(worst_excess, 0.0) << what << ": element " << worst << " " << got[worst] << " vs " << ref[worst];
}

void expect_same_named(const NamedTensors& got, const NamedTensors& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, ref[i].first) << what;
    EXPECT_EQ(got[i].second.shape(), ref[i].second.shape()) << what << " " << ref[i].first;
    EXPECT_EQ(got[i].second.dtype(), ref[i].second.dtype()) << what << " " << ref[i].first;
    if (got[i].second.dtype() == DType::f32)
      expect_close(got[i].second.to_vector<float>(), ref[i].second.to_vector<float>(), what + " " + ref[i].first);
    else
      EXPECT_EQ(got[i].second.to_vector<int64_t>(), ref[i].second.to_vector<int64_t>()) << what << " " << ref[i].first;
  }
}

TEST(ChannelsLastMiniResNet, TrainingStepMatchesNchw) {
  Generator g1(6), g2(6);
  MiniResNet a(small(), g1), b(small(), g2);
  const Tensor x = images(7);
  const StepResult ra = train_step(ops::Layout::nchw, a, x), rb = train_step(ops::Layout::nhwc, b, x);
  expect_close(rb.logits, ra.logits, "logits");
  EXPECT_NEAR(rb.loss, ra.loss, 1e-5 + 1e-4 * std::abs(ra.loss));
  expect_same_named(rb.grads, ra.grads, "gradient");
  expect_same_named(rb.state, ra.state, "state after the step");  // running statistics, counters

  // Eval mode normalizes with the running statistics: no reduction over the batch at all.
  a.eval();
  b.eval();
  const Tensor x2 = images(8);
  expect_close(forward_in(ops::Layout::nhwc, b, x2).to_vector<float>(),
               forward_in(ops::Layout::nchw, a, x2).to_vector<float>(), "eval logits");
}

TEST(ChannelsLastMiniResNet, ChecksItsNchwInput) {
  Generator gen(9);
  MiniResNet model(small(), gen);
  const Tensor channels_last_images = Tensor::zeros({4, 10, 10, 3});  // the model converts; it takes NCHW
  EXPECT_THROW(forward_in(ops::Layout::nhwc, model, channels_last_images), Error);
}

}  // namespace
}  // namespace cg::nn
