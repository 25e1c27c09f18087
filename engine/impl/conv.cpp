#include "engine/impl/conv.h"

namespace cg::impl {

ConvRegistry& conv_registry() {
  static ConvRegistry* registry = [] {
    auto* r = new ConvRegistry("conv");  // never destroyed: ops may run during static destruction
    register_conv_cpu(*r);
    register_conv_channels_last(*r);
    register_conv_cpu_winograd(*r);
    register_conv_cpu_direct(*r);
    register_conv_native(*r);
    register_conv_cudnn(*r);
    return r;
  }();
  return *registry;
}

}  // namespace cg::impl
