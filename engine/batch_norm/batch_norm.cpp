#include "engine/batch_norm/batch_norm.h"

#include "kernels/backend.h"
#include "util/check.h"

namespace cg::impl {

// The GPU's implementations only where the build has them, as in conv_registry().
BatchNormRegistry& batch_norm_registry() {
  static BatchNormRegistry* registry = [] {
    std::vector<BatchNormEntry> entries{batch_norm_cpu_entry()};
    if constexpr (kernels::kCudaBuild) entries.push_back(batch_norm_native_entry());
    if constexpr (kernels::kCudaLibraries) entries.push_back(batch_norm_cudnn_entry());
    return new BatchNormRegistry("batch_norm", std::move(entries));  // never destroyed, like conv_registry()
  }();
  return *registry;
}

Selection batch_norm_selection(const BatchNormProblem& p) {
  if (p.device.is_cpu()) return {.keys = {ImplKey::reference}};
  switch (p.policy.batch_norm) {
    case ops::GpuImpl::cudnn: return {.keys = {ImplKey::cudnn}, .choice = "cudnn", .named = true};
    case ops::GpuImpl::native: return {.keys = {ImplKey::native}, .choice = "native", .named = true};
    case ops::GpuImpl::automatic: break;
  }
  return {.keys = {ImplKey::native, ImplKey::cudnn}};
}

std::shared_ptr<const BatchNormImpl> pick_batch_norm(const BatchNormProblem& p) {
  return batch_norm_registry().pick(p, batch_norm_selection(p), p.layer);
}

namespace {
[[noreturn]] void no_cross_replica(const BatchNormProblem& p) {
  CG_FAIL("{}: this batch-norm implementation has no SyncBatchNorm path", p.layer);
}
}  // namespace

void BatchNormImpl::local_moments(const BatchNormProblem& p, const BatchNormForwardArgs&, const Tensor&) const {
  no_cross_replica(p);
}
void BatchNormImpl::forward_with_moments(const BatchNormProblem& p, const BatchNormForwardArgs&, const Tensor&) const {
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
