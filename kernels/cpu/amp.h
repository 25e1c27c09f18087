// Mixed-precision support on the CPU: unscale gradients in place and report whether any is inf
// or NaN, in one pass (the CUDA version does the same over many tensors in one launch).
#pragma once
#include <cstdint>

namespace cg::kernels::cpu {

// g *= inv_scale for n elements; returns true when any resulting value is inf or NaN.
bool unscale_and_check(int64_t n, float inv_scale, float* grad);

}  // namespace cg::kernels::cpu
