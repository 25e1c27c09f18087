// What the GPU convolution tests of both layouts share (ops_test: NCHW, channels_last_test: NHWC):
// a fixture per (kernels.conv choice, compute dtype) and the check of ops::conv2d on the GPU
// against the CPU over a table of layer shapes, with one tolerance rule for each dtype.
#pragma once
#include <gtest/gtest.h>

#include <span>
#include <tuple>

#include "engine/autocast.h"
#include "engine/ops.h"
#include "support/gpu_ops.h"

namespace cg::test {

inline const Tolerance kGpuF32{5e-4, 5e-4};  // float sums in another order than the CPU's

struct ConvCase {
  Shape x, w;  // x in the layout under test
  int64_t stride, pad;
};

// A case per (kernels.conv choice, dtype); kernels() is the policy the case's convolutions run under.
class GpuConvChoice : public ::testing::TestWithParam<std::tuple<ops::GpuImpl, DType>> {
 protected:
  ops::KernelPolicy kernels() const { return {.conv = std::get<0>(GetParam())}; }
};

// float32 as it comes, with a bias; float16 and bfloat16 under autocast (float32 parameters and
// gradients). Weight gradients sum ~1000 products of half-rounded values: about sqrt(1000) times
// the type's rounding error in absolute terms.
inline void expect_conv_cases_match_cpu(std::span<const ConvCase> cases, ops::Layout layout, DType dtype,
                                        const ops::KernelPolicy& kernels) {
  if (dtype == DType::f32) {
    for (const ConvCase& c : cases)
      expect_gpu_matches_cpu(
          [&](const auto& t) {
            ops::ExecutionScope in_context({.layout = layout, .kernels = kernels});
            return ops::conv2d(t[0], t[1], t[2], {.stride = c.stride, .padding = c.pad});
          },
                             {randn(c.x, 1), randn(c.w, 2, 0.0, 0.2), randn({c.w[0]}, 3)}, kGpuF32);
    return;
  }
  const Tolerance tol = dtype == DType::f16 ? Tolerance{5e-2, 2e-2} : Tolerance{4e-1, 6e-2};
  for (const ConvCase& c : cases)
    expect_gpu_matches_cpu(
        [&](const auto& t) {
          ops::ExecutionScope in_context(
              {.layout = layout, .kernels = kernels, .autocast = {.enabled = true, .dtype = dtype}});
          return ops::conv2d(t[0], t[1], Tensor(), {.stride = c.stride, .padding = c.pad});
        },
        {randn(c.x, 4), randn(c.w, 5, 0.0, 0.2)}, tol, dtype);
}

}  // namespace cg::test
