// Autocast's rules that hold on any machine: scopes nest and restore, CPU tensors are never cast,
// and the differentiable cast brings gradients back to the input's dtype.
#include <gtest/gtest.h>

#include "engine/autocast.h"
#include "engine/ops.h"

namespace cg {
namespace {

TEST(Autocast, ScopesNestAndRestore) {
  EXPECT_FALSE(autocast::enabled());
  {
    autocast::Scope on({.dtype = DType::bf16});
    EXPECT_TRUE(autocast::enabled());
    EXPECT_EQ(autocast::dtype(), DType::bf16);
    {
      autocast::Scope off({.enabled = false});
      EXPECT_FALSE(autocast::enabled());
    }
    EXPECT_TRUE(autocast::enabled());
    EXPECT_EQ(autocast::dtype(), DType::bf16);
  }
  EXPECT_FALSE(autocast::enabled());
  EXPECT_THROW(autocast::Scope({.dtype = DType::f32}), Error);
}

TEST(Autocast, LeavesCpuTensorsInFloat32) {
  autocast::Scope on({.dtype = DType::f16});
  const Tensor x = Tensor::full({1, 2, 4, 4}, 1.0), w = Tensor::full({3, 2, 3, 3}, 0.5);
  EXPECT_EQ(autocast::compute_dtype(x), DType::f32);
  EXPECT_EQ(ops::conv2d(x, w, Tensor(), {.stride = 1, .padding = 1}).dtype(), DType::f32);
  EXPECT_EQ(autocast::compute_dtype(Tensor::zeros({2}, DType::i64)), DType::i64);
}

TEST(Cast, GradientComesBackInTheInputDtype) {
  Tensor x = Tensor::from_vector<float>({1.f, -2.f, 3.f}, {3}).set_requires_grad(true);
  const Tensor y = ops::cast(x, DType::f64);
  EXPECT_EQ(y.dtype(), DType::f64);
  ops::scale(ops::reshape(ops::linear(ops::reshape(y, {1, 3}), Tensor::full({1, 3}, 2.0, DType::f64), Tensor()), {}),
             1.0)
      .backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2.f, 2.f, 2.f}));
  EXPECT_TRUE(ops::cast(x, DType::f32).same(x)) << "no copy when the dtype already matches";
  EXPECT_THROW(ops::cast(Tensor::zeros({2}, DType::i64), DType::f32), Error);
}

}  // namespace
}  // namespace cg
