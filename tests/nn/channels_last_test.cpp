// A channels-last MiniResNet is the NCHW one with another activation layout: built from the same
// seed it has the same state dict (names, shapes, values), and on the CPU it computes the same
// logits, loss, parameter gradients and batch-norm running statistics, in training and in eval.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/ops.h"
#include "engine/random.h"
#include "nn/miniresnet.h"

namespace cg::nn {
namespace {

MiniResNetOptions small(ops::Layout layout) {
  MiniResNetOptions o;
  o.in_channels = 3;
  o.widths = {8, 16};
  o.blocks = {1, 1};  // a stride-2 block with a downsample, and an identity-shortcut block
  o.layout = layout;
  return o;
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

StepResult train_step(MiniResNet& model, const Tensor& x) {
  const Tensor labels = Tensor::from_vector(std::vector<int64_t>{1, 7, 3, 0}, {4});
  const Tensor logits = model.forward(x);
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

TEST(ChannelsLastMiniResNet, SameStateDictAsNchw) {
  Generator g1(5), g2(5);
  MiniResNet a(small(ops::Layout::nchw), g1), b(small(ops::Layout::nhwc), g2);
  const NamedTensors sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sb[i].first, sa[i].first);
    EXPECT_EQ(sb[i].second.shape(), sa[i].second.shape()) << sa[i].first;
    EXPECT_EQ(sb[i].second.dtype(), sa[i].second.dtype()) << sa[i].first;
    if (sa[i].second.dtype() == DType::f32) {  // same seed, same draws: initialization is bit-identical
      EXPECT_EQ(sb[i].second.to_vector<float>(), sa[i].second.to_vector<float>()) << sa[i].first;
    }
  }
}

TEST(ChannelsLastMiniResNet, TrainingStepMatchesNchw) {
  Generator g1(6), g2(6);
  MiniResNet a(small(ops::Layout::nchw), g1), b(small(ops::Layout::nhwc), g2);
  const Tensor x = images(7);
  const StepResult ra = train_step(a, x), rb = train_step(b, x);
  expect_close(rb.logits, ra.logits, "logits");
  EXPECT_NEAR(rb.loss, ra.loss, 1e-5 + 1e-4 * std::abs(ra.loss));
  expect_same_named(rb.grads, ra.grads, "gradient");
  expect_same_named(rb.state, ra.state, "state after the step");  // running statistics, counters

  // Eval mode normalizes with the running statistics: no reduction over the batch at all.
  a.eval();
  b.eval();
  const Tensor x2 = images(8);
  expect_close(b.forward(x2).to_vector<float>(), a.forward(x2).to_vector<float>(), "eval logits");
}

TEST(ChannelsLastMiniResNet, ChecksItsNchwInput) {
  Generator gen(9);
  MiniResNet model(small(ops::Layout::nhwc), gen);
  const Tensor channels_last_images = Tensor::zeros({4, 10, 10, 3});  // the model converts; it takes NCHW
  EXPECT_THROW(model.forward(channels_last_images), Error);
}

}  // namespace
}  // namespace cg::nn
