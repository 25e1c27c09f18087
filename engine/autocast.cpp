#include "engine/autocast.h"

#include "util/check.h"

namespace cg::autocast {
namespace {
thread_local bool enabled_ = false;
thread_local DType dtype_ = DType::f16;
}  // namespace

bool enabled() { return enabled_; }
DType dtype() { return dtype_; }

Scope::Scope(ScopeOptions options) : previous_enabled_(enabled_), previous_dtype_(dtype_) {
  CG_CHECK(options.dtype == DType::f16 || options.dtype == DType::bf16, "autocast needs float16 or bfloat16, got {}",
           dtype_name(options.dtype));
  enabled_ = options.enabled;
  dtype_ = options.dtype;
}

Scope::~Scope() {
  enabled_ = previous_enabled_;
  dtype_ = previous_dtype_;
}

DType compute_dtype(const Tensor& t) {
  if (!enabled_ || !t.device().is_cuda() || !is_floating(t.dtype())) return t.dtype();
  return dtype_;
}

}  // namespace cg::autocast
