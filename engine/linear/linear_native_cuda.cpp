// The fully connected layer through cudagrad's own GPU kernels (compiled only with a CUDA backend).
#include "engine/linear/linear_cuda.h"

namespace cg::impl {

LinearRegistry::Entry linear_native_entry() {
  using NativeLinear = detail::CudaLinear<kernels::cuda::linear_native_forward, kernels::cuda::linear_native_backward>;
  return {"native", DeviceType::cuda, ImplKey::native, std::make_shared<NativeLinear>()};
}

}  // namespace cg::impl
