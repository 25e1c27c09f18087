// Channels-last (NHWC) ops on the CPU: conv2d and global_avg_pool give bit-for-bit the NCHW
// results on transposed data, forward and backward (the NHWC convolution is the NCHW reference
// between two exact layout changes; NHWC pooling sums in the NCHW kernel's order); to_layout
// round-trips exactly and its gradient is the inverse transpose; finite-difference checks of all
// three in float64.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "engine/random.h"
#include "support/gradcheck.h"

namespace cg {
namespace {

using ops::Layout;

Tensor randn(const Shape& s, uint64_t seed, DType dtype = DType::f32) {
  Generator gen(seed);
  Tensor t = Tensor::empty(s, dtype);
  normal_(t, gen, 0.0, 1.0);
  return t;
}
Tensor nhwc(const Tensor& t) { return ops::to_layout(t, Layout::nchw, Layout::nhwc); }
Tensor nchw(const Tensor& t) { return ops::to_layout(t, Layout::nhwc, Layout::nchw); }

// The ops under a channels-last execution context (their backward runs as the forward did).
Tensor conv2d_nhwc(const Tensor& x, const Tensor& w, const Tensor& b, ops::Conv2dFuncOptions o) {
  ops::ExecutionScope channels_last({.layout = Layout::nhwc});
  return ops::conv2d(x, w, b, o);
}
Tensor global_avg_pool_nhwc(const Tensor& x) {
  ops::ExecutionScope channels_last({.layout = Layout::nhwc});
  return ops::global_avg_pool(x);
}

struct ConvCase {
  Shape x, w;  // x in NCHW
  int64_t stride, pad;
  bool bias;
};
const ConvCase kConvCases[] = {
    {{2, 3, 8, 8}, {4, 3, 3, 3}, 1, 1, false},    // a 3x3 block conv
    {{2, 4, 9, 7}, {6, 4, 3, 3}, 2, 1, true},     // a strided first conv, odd sizes, bias
    {{3, 4, 8, 8}, {8, 4, 1, 1}, 2, 0, false},    // a downsample
    {{1, 1, 28, 28}, {16, 1, 3, 3}, 1, 1, false}  // the Fashion-MNIST stem
};

TEST(ChannelsLastConv2d, CpuIsBitIdenticalToNchwForwardAndBackward) {
  uint64_t seed = 1;
  for (const ConvCase& c : kConvCases) {
    const Tensor x = randn(c.x, seed++), w = randn(c.w, seed++);
    const Tensor b = c.bias ? randn({c.w[0]}, seed++) : Tensor();
    Tensor x_nchw = x.clone().set_requires_grad(true), w_nchw = w.clone().set_requires_grad(true);
    Tensor x_nhwc = nhwc(x).set_requires_grad(true), w_nhwc = w.clone().set_requires_grad(true);
    Tensor b_nchw = c.bias ? b.clone().set_requires_grad(true) : Tensor();
    Tensor b_nhwc = c.bias ? b.clone().set_requires_grad(true) : Tensor();
    const Tensor y_nchw = ops::conv2d(x_nchw, w_nchw, b_nchw, {.stride = c.stride, .padding = c.pad});
    const Tensor y_nhwc = conv2d_nhwc(x_nhwc, w_nhwc, b_nhwc, {.stride = c.stride, .padding = c.pad});
    ASSERT_EQ(y_nhwc.shape(), nhwc(y_nchw).shape());
    EXPECT_EQ(y_nhwc.to_vector<float>(), nhwc(y_nchw).to_vector<float>()) << x.str();

    const Tensor dy = randn(y_nchw.shape(), seed++);
    y_nchw.backward(dy);
    y_nhwc.backward(nhwc(dy));
    EXPECT_EQ(x_nhwc.grad().to_vector<float>(), nhwc(x_nchw.grad()).to_vector<float>()) << "dx " << x.str();
    EXPECT_EQ(w_nhwc.grad().shape(), w.shape()) << "the weight gradient stays KCRS";
    EXPECT_EQ(w_nhwc.grad().to_vector<float>(), w_nchw.grad().to_vector<float>()) << "dw " << x.str();
    if (c.bias) {
      EXPECT_EQ(b_nhwc.grad().to_vector<float>(), b_nchw.grad().to_vector<float>()) << "db";
    }
  }
}

TEST(ChannelsLastConv2d, RejectsAnInputWhoseLastAxisIsNotTheChannels) {
  const Tensor x = randn({2, 3, 8, 8}, 1), w = randn({4, 3, 3, 3}, 2);  // NCHW data called NHWC
  try {
    conv2d_nhwc(x, w, Tensor(), {.stride = 1, .padding = 1});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("NHWC input"), std::string::npos) << e.what();
  }
}

TEST(ChannelsLastPool, CpuIsBitIdenticalToNchwForwardAndBackward) {
  const Tensor x = randn({4, 16, 7, 7}, 3);
  Tensor x_nchw = x.clone().set_requires_grad(true), x_nhwc = nhwc(x).set_requires_grad(true);
  const Tensor y_nchw = ops::global_avg_pool(x_nchw), y_nhwc = global_avg_pool_nhwc(x_nhwc);
  EXPECT_EQ(y_nhwc.shape(), (Shape{4, 16}));
  EXPECT_EQ(y_nhwc.to_vector<float>(), y_nchw.to_vector<float>());
  const Tensor dy = randn({4, 16}, 4);
  y_nchw.backward(dy);
  y_nhwc.backward(dy);
  EXPECT_EQ(x_nhwc.grad().to_vector<float>(), nhwc(x_nchw.grad()).to_vector<float>());
}

TEST(ToLayout, RoundTripsExactlyAndItsGradientIsTheInverse) {
  const Tensor x = randn({2, 5, 3, 4}, 5);
  const Tensor x_nhwc = nhwc(x);
  EXPECT_EQ(x_nhwc.shape(), (Shape{2, 3, 4, 5}));
  EXPECT_EQ(x_nhwc.data<float>()[((1 * 3 + 2) * 4 + 3) * 5 + 4], x.data<float>()[((1 * 5 + 4) * 3 + 2) * 4 + 3]);
  EXPECT_EQ(nchw(x_nhwc).to_vector<float>(), x.to_vector<float>());
  EXPECT_TRUE(ops::to_layout(x, Layout::nchw, Layout::nchw).same(x)) << "no copy when the layout is kept";

  Tensor leaf = x.clone().set_requires_grad(true);
  const Tensor y = nhwc(leaf);
  const Tensor dy = randn(y.shape(), 6);
  y.backward(dy);
  EXPECT_EQ(leaf.grad().to_vector<float>(), nchw(dy).to_vector<float>());
}

TEST(ChannelsLastGrad, MatchesFiniteDifferences) {
  Generator gen(11);
  for (const ConvCase& c : kConvCases) {
    if (c.x[2] > 10) continue;  // the stem's 784 pixels cost too many forward passes
    const Shape x_nhwc{c.x[0], c.x[2], c.x[3], c.x[1]};
    std::vector<Tensor> in;
    in.push_back(test::random_f64(x_nhwc, gen));
    in.push_back(test::random_f64(c.w, gen));
    if (c.bias) in.push_back(test::random_f64({c.w[0]}, gen));
    test::expect_gradients_match(
        [&](const std::vector<Tensor>& t) {
          return conv2d_nhwc(t[0], t[1], t.size() > 2 ? t[2] : Tensor(), {.stride = c.stride, .padding = c.pad});
        },
        in);
  }
  test::expect_gradients_match([](const std::vector<Tensor>& t) { return global_avg_pool_nhwc(t[0]); },
                               {test::random_f64({2, 3, 4, 5}, gen)});
  test::expect_gradients_match([](const std::vector<Tensor>& t) { return nhwc(t[0]); },
                               {test::random_f64({2, 3, 4, 5}, gen)});
  test::expect_gradients_match([](const std::vector<Tensor>& t) { return nchw(t[0]); },
                               {test::random_f64({2, 3, 4, 5}, gen)});
}

}  // namespace
}  // namespace cg
