// The execution context (engine/execution.h): one value for layout, kernels and autocast, set by
// nested scopes that each restore what they found, read by the ops when they are called; a
// backward runs as its forward did, whatever scope is open when it runs.
#include <gtest/gtest.h>

#include "engine/autocast.h"
#include "engine/ops.h"
#include "engine/random.h"

namespace cg {
namespace {

using ops::ExecutionScope;
using ops::Layout;

TEST(ExecutionContext, ScopesNestAndRestoreEveryPart) {
  EXPECT_EQ(ops::execution().layout, Layout::nchw);
  EXPECT_EQ(ops::execution().kernels, ops::KernelPolicy{});
  {
    ExecutionScope outer({.layout = Layout::nhwc, .kernels = {.cpu_conv = ops::CpuConvAlgorithm::im2col}});
    {
      // autocast::Scope changes autocast only: the layout and kernels around it stay.
      autocast::Scope half({.dtype = DType::bf16});
      EXPECT_TRUE(autocast::enabled());
      EXPECT_EQ(ops::execution().layout, Layout::nhwc);
      EXPECT_EQ(ops::execution().kernels.cpu_conv, ops::CpuConvAlgorithm::im2col);
      {
        ExecutionScope inner(ops::execution().with_layout(Layout::nchw));
        EXPECT_EQ(ops::execution().layout, Layout::nchw);
        EXPECT_TRUE(autocast::enabled()) << "with_layout keeps the rest";
      }
      EXPECT_EQ(ops::execution().layout, Layout::nhwc);
    }
    EXPECT_FALSE(autocast::enabled());
    EXPECT_EQ(ops::execution().kernels.cpu_conv, ops::CpuConvAlgorithm::im2col);
  }
  EXPECT_EQ(ops::execution().layout, Layout::nchw);
  EXPECT_EQ(ops::execution().kernels, ops::KernelPolicy{});
  EXPECT_THROW(ExecutionScope({.autocast = {.enabled = true, .dtype = DType::f32}}), Error);
}

Tensor randn(const Shape& s, uint64_t seed) {
  Generator gen(seed);
  Tensor t = Tensor::empty(s);
  normal_(t, gen, 0.0, 1.0);
  return t;
}

// A channels-last convolution, pooled, differentiated after its scope closed (as the training
// step's backward runs after its forward's scope): the gradients are those of the NCHW run.
TEST(ExecutionContext, ABackwardRunsAsItsForwardDidAfterTheScopeCloses) {
  // dy differs per channel: a backward that took the wrong layout would scatter it to the wrong
  // places (a uniform dy would hide that).
  const Tensor x = randn({2, 3, 6, 6}, 1), w = randn({4, 3, 3, 3}, 2), dy = randn({2, 4}, 3);
  Tensor x_nchw = x.clone().set_requires_grad(true), w_nchw = w.clone().set_requires_grad(true);
  ops::global_avg_pool(ops::conv2d(x_nchw, w_nchw, Tensor(), {.padding = 1})).backward(dy);

  Tensor x_nhwc = ops::to_layout(x, Layout::nchw, Layout::nhwc).set_requires_grad(true);
  Tensor w_nhwc = w.clone().set_requires_grad(true);
  Tensor pooled;
  {
    ExecutionScope channels_last({.layout = Layout::nhwc});
    pooled = ops::global_avg_pool(ops::conv2d(x_nhwc, w_nhwc, Tensor(), {.padding = 1}));
  }
  pooled.backward(dy);  // in the default (NCHW) context
  EXPECT_EQ(x_nhwc.grad().shape(), (Shape{2, 6, 6, 3}));
  EXPECT_EQ(ops::to_layout(x_nhwc.grad(), Layout::nhwc, Layout::nchw).to_vector<float>(),
            x_nchw.grad().to_vector<float>());
  EXPECT_EQ(w_nhwc.grad().to_vector<float>(), w_nchw.grad().to_vector<float>());
}

}  // namespace
}  // namespace cg
