// The optimizer-update and loss-scaling registries, each filled with its built-in implementations
// (engine/impl/optim_cpu.cpp, optim_cuda.cpp) on first use.
#include "engine/impl/optim.h"

namespace cg::impl {

OptimizerRegistry& optimizer_registry() {
  static OptimizerRegistry* registry = [] {
    auto* r = new OptimizerRegistry("optimizer update");  // never destroyed, like conv_registry()
    register_optimizer_cpu(*r);
    register_optimizer_cuda(*r);
    return r;
  }();
  return *registry;
}

LossScaleRegistry& loss_scale_registry() {
  static LossScaleRegistry* registry = [] {
    auto* r = new LossScaleRegistry("loss scaling");  // never destroyed, like conv_registry()
    register_loss_scale_cpu(*r);
    register_loss_scale_cuda(*r);
    return r;
  }();
  return *registry;
}

}  // namespace cg::impl
