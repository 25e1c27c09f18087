// Every differentiable op's backward against float64 finite differences.
#include <gtest/gtest.h>

#include "engine/ops.h"
#include "support/gradcheck.h"

namespace cg {
namespace {

using test::expect_gradients_match;
using test::random_f64;

struct ConvCase {
  Shape x, w;
  int64_t stride, pad;
  bool bias;
};

class Conv2dGrad : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dGrad, MatchesFiniteDifferences) {
  const ConvCase c = GetParam();
  Generator gen(7);
  std::vector<Tensor> in{random_f64(c.x, gen), random_f64(c.w, gen)};
  if (c.bias) in.push_back(random_f64({c.w[0]}, gen));
  expect_gradients_match(
      [&](const std::vector<Tensor>& t) {
        return ops::conv2d(t[0], t[1], t.size() > 2 ? t[2] : Tensor(), {.stride = c.stride, .padding = c.pad});
      },
      in);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv2dGrad,
                         ::testing::Values(ConvCase{{2, 3, 5, 5}, {4, 3, 3, 3}, 1, 1, false},
                                           ConvCase{{2, 2, 6, 5}, {3, 2, 3, 3}, 2, 1, true},
                                           ConvCase{{1, 3, 6, 6}, {2, 3, 1, 1}, 2, 0, false},
                                           ConvCase{{2, 1, 7, 7}, {2, 1, 5, 5}, 3, 2, true}));

TEST(BatchNormGrad, TrainingMode) {
  Generator gen(8);
  Tensor rm = Tensor::zeros({3}, DType::f64), rv = Tensor::full({3}, 1.0, DType::f64);
  expect_gradients_match(
      [&](const std::vector<Tensor>& t) {
        return ops::batch_norm(t[0], t[1], t[2], rm, rv, Tensor(), {.training = true, .momentum = 0.1, .eps = 1e-5});
      },
      {random_f64({4, 3, 3, 2}, gen), random_f64({3}, gen), random_f64({3}, gen)});
}

TEST(BatchNormGrad, EvalMode) {
  Generator gen(9);
  Tensor rm = random_f64({3}, gen, false);
  Tensor rv = random_f64({3}, gen, false, 2.0, 0.3);
  expect_gradients_match(
      [&](const std::vector<Tensor>& t) {
        return ops::batch_norm(t[0], t[1], t[2], rm, rv, Tensor(), {.training = false, .momentum = 0.1, .eps = 1e-5});
      },
      {random_f64({2, 3, 2, 2}, gen), random_f64({3}, gen), random_f64({3}, gen)});
}

TEST(BatchNormGrad, FusedReluTrainAndEval) {
  Generator gen(16);
  for (bool training : {true, false}) {
    Tensor rm = Tensor::zeros({3}, DType::f64), rv = Tensor::full({3}, 1.0, DType::f64);
    ops::BatchNormOptions o{.training = training, .momentum = 0.1, .eps = 1e-5, .activation = ops::Activation::relu};
    std::vector<Tensor> in{test::random_f64({4, 3, 2, 2}, gen), test::random_f64({3}, gen),
                           test::random_f64({3}, gen)};
    expect_gradients_match(
        [&](const std::vector<Tensor>& t) { return ops::batch_norm(t[0], t[1], t[2], rm, rv, Tensor(), o); }, in);
    // And the same values as the unfused pair.
    ops::BatchNormOptions plain = o;
    plain.activation = ops::Activation::none;
    plain.momentum = 0;  // leave the running statistics as they are
    o.momentum = 0;
    Tensor fused = ops::batch_norm(in[0], in[1], in[2], rm, rv, Tensor(), o);
    Tensor separate = ops::relu(ops::batch_norm(in[0], in[1], in[2], rm, rv, Tensor(), plain));
    EXPECT_EQ(fused.to_vector<double>(), separate.to_vector<double>());
  }
}

// Inputs bounded away from 0 so no finite-difference step crosses ReLU's kink.
Tensor away_from_zero(const Shape& shape, Generator& gen) {
  Tensor t = random_f64(shape, gen, false);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] += p[i] >= 0 ? 0.1 : -0.1;
  t.set_requires_grad(true);
  return t;
}

TEST(ElementwiseGrad, Relu) {
  Generator gen(10);
  expect_gradients_match([](const std::vector<Tensor>& t) { return ops::relu(t[0]); },
                         {away_from_zero({3, 4}, gen)});
}

TEST(ElementwiseGrad, AddAndScale) {
  Generator gen(11);
  expect_gradients_match(
      [](const std::vector<Tensor>& t) { return ops::scale(ops::add(t[0], t[1]), -0.7); },
      {random_f64({2, 5}, gen), random_f64({2, 5}, gen)});
}

TEST(ElementwiseGrad, AddRelu) {
  Generator gen(12);
  Tensor a = away_from_zero({2, 6}, gen);
  Tensor b = Tensor::zeros({2, 6}, DType::f64).set_requires_grad(true);  // a + b stays off 0
  expect_gradients_match([](const std::vector<Tensor>& t) { return ops::add_relu(t[0], t[1]); },
                         {a, b});
}

TEST(HeadGrad, GlobalAvgPoolFlattenLinear) {
  Generator gen(13);
  expect_gradients_match(
      [](const std::vector<Tensor>& t) {
        return ops::linear(ops::flatten(ops::global_avg_pool(t[0])), t[1], t[2]);
      },
      {random_f64({3, 4, 3, 2}, gen), random_f64({5, 4}, gen), random_f64({5}, gen)});
}

TEST(HeadGrad, CrossEntropy) {
  Generator gen(14);
  Tensor labels = Tensor::from_vector<int64_t>({0, 3, 2, 3}, {4});
  expect_gradients_match(
      [&](const std::vector<Tensor>& t) { return ops::cross_entropy(t[0], labels); },
      {random_f64({4, 5}, gen, true, 0.0, 3.0)});
}

// A whole residual block, so gradients flowing through shared inputs (the shortcut) add up.
TEST(CompositeGrad, ResidualBlock) {
  Generator gen(15);
  Tensor rm1 = Tensor::zeros({3}, DType::f64), rv1 = Tensor::full({3}, 1.0, DType::f64);
  Tensor rm2 = rm1.clone(), rv2 = rv1.clone();
  expect_gradients_match(
      [&](const std::vector<Tensor>& t) {
        Tensor h = ops::batch_norm(ops::conv2d(t[0], t[1], Tensor(), {.stride = 1, .padding = 1}), t[3], t[4], rm1, rv1,
                                   Tensor(), {.training = true, .momentum = 0.1, .eps = 1e-5});
        h = ops::conv2d(ops::relu(h), t[2], Tensor(), {.stride = 1, .padding = 1});
        h = ops::batch_norm(h, t[3], t[4], rm2, rv2, Tensor(), {.training = true, .momentum = 0.1, .eps = 1e-5});
        return ops::add(h, t[0]);
      },
      {random_f64({2, 3, 4, 4}, gen), random_f64({3, 3, 3, 3}, gen), random_f64({3, 3, 3, 3}, gen),
       random_f64({3}, gen), random_f64({3}, gen)},
      1e-6, 1e-6, 1e-4);
}

}  // namespace
}  // namespace cg
