#include "engine/impl/batch_norm.h"

#include "util/check.h"

namespace cg::impl {

BatchNormRegistry& batch_norm_registry() {
  static BatchNormRegistry* registry = [] {
    auto* r = new BatchNormRegistry("batch_norm");  // never destroyed, like conv_registry()
    register_batch_norm_cpu(*r);
    register_batch_norm_native(*r);
    register_batch_norm_cudnn(*r);
    return r;
  }();
  return *registry;
}

namespace {
[[noreturn]] void no_cross_replica(const BatchNormProblem& p) {
  CG_FAIL("{}: this batch-norm implementation has no SyncBatchNorm path", p.layer);
}
}  // namespace

void BatchNormImpl::local_moments(const BatchNormProblem& p, const BatchNormForward&, const Tensor&) const {
  no_cross_replica(p);
}
void BatchNormImpl::forward_with_moments(const BatchNormProblem& p, const BatchNormForward&, const Tensor&) const {
  no_cross_replica(p);
}
void BatchNormImpl::local_grad_sums(const BatchNormProblem& p, const BatchNormBackwardArgs&, const Tensor&) const {
  no_cross_replica(p);
}
void BatchNormImpl::backward_with_sums(const BatchNormProblem& p, const BatchNormBackwardArgs&, const Tensor&,
                                       const Tensor&) const {
  no_cross_replica(p);
}

}  // namespace cg::impl
