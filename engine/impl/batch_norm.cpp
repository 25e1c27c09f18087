#include "engine/impl/batch_norm.h"

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

}  // namespace cg::impl
