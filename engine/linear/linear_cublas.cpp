// The fully connected layer through cuBLAS (compiled only where cuBLAS is linked).
#include "engine/linear/linear_cuda.h"

namespace cg::impl {

LinearRegistry::Entry linear_cublas_entry() {
  using CublasLinear = detail::CudaLinear<kernels::cuda::linear_cublas_forward, kernels::cuda::linear_cublas_backward>;
  return {"cublas", DeviceType::cuda, ImplKey::cublas, std::make_shared<CublasLinear>()};
}

}  // namespace cg::impl
