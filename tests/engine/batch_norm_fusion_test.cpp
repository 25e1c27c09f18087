// ops::batch_norm_add_relu and channels-last batch norm on the CPU: the fused residual gives
// bit for bit what separate batch_norm and add_relu give, forward and backward, in training and
// eval mode and in both layouts; its gradients match finite differences; channels-last batch
// norm equals NCHW batch norm on the same values rearranged.
#include <gtest/gtest.h>

#include <vector>

#include "engine/ops.h"
#include "support/gradcheck.h"

namespace cg {
namespace {

using ops::Activation;
using ops::Layout;
using test::random_f64;

Tensor random_f32(const Shape& shape, Generator& gen, double mean = 0.0) {
  Tensor t = Tensor::empty(shape, DType::f32);
  normal_(t, gen, mean, 1.0);
  return t;
}

// A fresh leaf with t's values, so every run starts from empty gradients.
Tensor leaf(const Tensor& t) { return t.detach().clone().set_requires_grad(true); }

// The running statistics of one batch-norm layer, fresh for every run that updates them.
struct Stats {
  Tensor mean, var, count;
  explicit Stats(int64_t c)
      : mean(Tensor::zeros({c})), var(Tensor::full({c}, 1.0)), count(Tensor::zeros({}, DType::i64)) {}
};

struct Result {
  std::vector<float> y, dx, dgamma, dbeta, dresidual, running_mean, running_var;
};

// y = relu(bn(x) + r), fused or as two ops, then backward with a fixed upstream gradient.
Result run(bool fused, bool training, Layout layout, const Tensor& x_values, const Tensor& r_values,
           const Tensor& gamma_values, const Tensor& beta_values, const Tensor& dy) {
  Tensor x = leaf(x_values), r = leaf(r_values), gamma = leaf(gamma_values), beta = leaf(beta_values);
  Stats st(gamma.numel());
  if (!training) {  // eval normalizes with running statistics: make them non-trivial
    st.mean = Tensor::full({gamma.numel()}, 0.25);
    st.var = Tensor::full({gamma.numel()}, 1.5);
  }
  ops::ExecutionScope in_layout({.layout = layout});
  const ops::BatchNormOptions o{.training = training, .momentum = 0.1, .eps = 1e-5};
  Tensor y = fused ? ops::batch_norm_add_relu(x, r, gamma, beta, st.mean, st.var, st.count, o)
                   : ops::add_relu(ops::batch_norm(x, gamma, beta, st.mean, st.var, st.count, o), r);
  y.backward(dy);
  return {y.to_vector<float>(),          x.grad().to_vector<float>(),       gamma.grad().to_vector<float>(),
          beta.grad().to_vector<float>(), r.grad().to_vector<float>(),       st.mean.to_vector<float>(),
          st.var.to_vector<float>()};
}

void expect_identical(const Result& a, const Result& b, const char* where) {
  EXPECT_EQ(a.y, b.y) << where << ": y";
  EXPECT_EQ(a.dx, b.dx) << where << ": dx";
  EXPECT_EQ(a.dgamma, b.dgamma) << where << ": dgamma";
  EXPECT_EQ(a.dbeta, b.dbeta) << where << ": dbeta";
  EXPECT_EQ(a.dresidual, b.dresidual) << where << ": d residual";
  EXPECT_EQ(a.running_mean, b.running_mean) << where << ": running_mean";
  EXPECT_EQ(a.running_var, b.running_var) << where << ": running_var";
}

TEST(BatchNormAddRelu, BitIdenticalToSeparateOps) {
  Generator gen(21);
  // 5x7 images (H*W not a multiple of the 16 vector lanes) and 8x8 ones.
  for (const Shape& shape : {Shape{3, 4, 5, 7}, Shape{2, 6, 8, 8}}) {
    for (Layout layout : {Layout::nchw, Layout::nhwc}) {
      const int64_t c = layout == Layout::nhwc ? shape[3] : shape[1];
      Tensor x = random_f32(shape, gen, 0.5), r = random_f32(shape, gen);
      Tensor gamma = random_f32({c}, gen, 1.0), beta = random_f32({c}, gen);
      Tensor dy = Tensor::empty(shape);
      normal_(dy, gen, 0.0, 1.0);
      for (bool training : {true, false}) {
        const char* where = training ? "training" : "eval";
        expect_identical(run(true, training, layout, x, r, gamma, beta, dy),
                         run(false, training, layout, x, r, gamma, beta, dy), where);
      }
    }
  }
}

// Inputs away from the ReLU's kink: a residual that keeps bn(x) + r clear of 0 where it matters
// is hard to arrange, so the check uses a large positive residual (the ReLU passes everything)
// and a large negative one (it passes nothing but the residual's own zero gradient).
TEST(BatchNormAddRelu, GradientsMatchFiniteDifferences) {
  Generator gen(22);
  for (bool training : {true, false})
    for (double shift : {8.0, -8.0}) {
      Tensor rm = Tensor::full({3}, 0.2, DType::f64), rv = Tensor::full({3}, 1.3, DType::f64);
      const double momentum = 0;  // keep the running statistics fixed across the probes
      const ops::BatchNormOptions o{.training = training, .momentum = momentum, .eps = 1e-5};
      test::expect_gradients_match(
          [&](const std::vector<Tensor>& t) {
            return ops::batch_norm_add_relu(t[0], t[3], t[1], t[2], rm, rv, Tensor(), o);
          },
          {random_f64({4, 3, 2, 3}, gen), random_f64({3}, gen), random_f64({3}, gen),
           random_f64({4, 3, 2, 3}, gen, true, shift, 0.5)});
    }
}

// [N, C, H, W] values rearranged as [N, H, W, C], and back.
std::vector<float> to_nhwc(const std::vector<float>& v, const Shape& nchw) {
  const int64_t n = nchw[0], c = nchw[1], hw = nchw[2] * nchw[3];
  std::vector<float> out(v.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < hw; ++p) out[size_t((i * hw + p) * c + k)] = v[size_t((i * c + k) * hw + p)];
  return out;
}

TEST(BatchNormChannelsLast, MatchesNchwOnRearrangedValues) {
  Generator gen(23);
  const Shape nchw{3, 5, 4, 6}, nhwc{3, 4, 6, 5};
  Tensor x = random_f32(nchw, gen, 2.0), r = random_f32(nchw, gen);
  Tensor gamma = random_f32({5}, gen, 1.0), beta = random_f32({5}, gen);
  Tensor dy = Tensor::empty(nchw);
  normal_(dy, gen, 0.0, 1.0);
  auto rearranged = [&](const Tensor& t) {
    return Tensor::from_vector(to_nhwc(t.to_vector<float>(), nchw), nhwc);
  };
  Tensor x_cl = rearranged(x), r_cl = rearranged(r), dy_cl = rearranged(dy);
  for (bool training : {true, false}) {
    const Result a = run(true, training, Layout::nchw, x, r, gamma, beta, dy);
    const Result b = run(true, training, Layout::nhwc, x_cl, r_cl, gamma, beta, dy_cl);
    // The two layouts add the same values in different orders (planes of H*W in float lanes
    // vs one value at a time): equal to float rounding, not bit for bit.
    auto near = [](const std::vector<float>& u, const std::vector<float>& v, const char* what) {
      ASSERT_EQ(u.size(), v.size()) << what;
      for (size_t i = 0; i < u.size(); ++i) EXPECT_NEAR(u[i], v[i], 1e-5 + 1e-5 * std::abs(v[i])) << what << " " << i;
    };
    near(to_nhwc(a.y, nchw), b.y, "y");
    near(to_nhwc(a.dx, nchw), b.dx, "dx");
    near(to_nhwc(a.dresidual, nchw), b.dresidual, "d residual");
    near(a.dgamma, b.dgamma, "dgamma");
    near(a.dbeta, b.dbeta, "dbeta");
    near(a.running_mean, b.running_mean, "running_mean");
    near(a.running_var, b.running_var, "running_var");
  }
}

TEST(BatchNormAddRelu, RejectsAResidualOfAnotherShape) {
  Generator gen(24);
  Tensor x = random_f32({2, 3, 4, 4}, gen), r = random_f32({2, 3, 4, 5}, gen);
  Tensor gamma = Tensor::full({3}, 1.0), beta = Tensor::zeros({3});
  Stats st(3);
  try {
    ops::batch_norm_add_relu(x, r, gamma, beta, st.mean, st.var, st.count, {});
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("residual"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cg
