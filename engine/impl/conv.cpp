#include "engine/impl/conv.h"

#include "kernels/backend.h"

namespace cg::impl {

// The GPU's implementations only in a build with CUDA kernels (nvcc's, or the emulated GPU's), and
// cuDNN's only where cuDNN is linked: entries() lists what can run.
ConvRegistry& conv_registry() {
  static ConvRegistry* registry = [] {
    std::vector<ConvEntry> entries{conv_im2col_entry(), conv_winograd_entry(), conv_direct_entry(),
                                   conv_cpu_channels_last_entry()};
    if constexpr (kernels::kCudaBuild) {
      entries.push_back(conv_native_channels_last_entry());
      entries.push_back(conv_native_entry());
    }
    if constexpr (kernels::kCudaLibraries) entries.push_back(conv_cudnn_entry());
    return new ConvRegistry("conv", std::move(entries));  // never destroyed: ops may run during static destruction
  }();
  return *registry;
}

std::shared_ptr<const ConvImpl> pick_conv(const ConvProblem& p) {
  return conv_registry().pick(p, conv_selection(p), p.layer);
}

}  // namespace cg::impl
