#include "engine/impl/registry.h"

#include <atomic>

namespace cg::impl {

const char* choice_name(Choice choice) {
  switch (choice) {
    case Choice::automatic: return "auto";
    case Choice::cudnn: return "cudnn";
    case Choice::native: return "native";
  }
  return "?";
}

}  // namespace cg::impl

namespace cg::ops {
namespace {
std::atomic<GpuImpl> conv_impl{GpuImpl::automatic};
std::atomic<GpuImpl> batch_norm_impl{GpuImpl::automatic};
}  // namespace

// The process-wide kernels.* choice lives with the registries that read it.
void set_gpu_kernels(const GpuKernels& kernels) {
  conv_impl = kernels.conv;
  batch_norm_impl = kernels.batch_norm;
}
GpuKernels gpu_kernels() { return {conv_impl.load(), batch_norm_impl.load()}; }

}  // namespace cg::ops
