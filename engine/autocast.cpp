#include "engine/autocast.h"

namespace cg::autocast {

bool enabled() { return ops::execution().autocast.enabled; }
DType dtype() { return ops::execution().autocast.dtype; }

DType compute_dtype(const Tensor& t) {
  if (!enabled() || !t.device().is_cuda() || !is_floating(t.dtype())) return t.dtype();
  return dtype();
}

}  // namespace cg::autocast
