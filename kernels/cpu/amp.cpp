#include "kernels/cpu/amp.h"

#include <cmath>

namespace cg::kernels::cpu {

bool unscale_and_check(int64_t n, float inv_scale, float* grad) {
  bool bad = false;
  for (int64_t i = 0; i < n; ++i) {
    grad[i] *= inv_scale;
    bad |= !std::isfinite(grad[i]);
  }
  return bad;
}

}  // namespace cg::kernels::cpu
