#include "kernels/cuda/cudnn_common.h"

#include "kernels/cuda/cudnn.h"

namespace cg::kernels::cuda::cudnn {

cudnnHandle_t handle(Stream stream) {
  cudnnHandle_t& h = thread_handle_slot<cudnnHandle_t>("cuDNN");
  if (!h) CG_CUDNN_CHECK(cudnnCreate(&h));
  CG_CUDNN_CHECK(cudnnSetStream(h, static_cast<cudaStream_t>(stream)));
  return h;
}

cudnnDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    default: throw Error(fmt::format("cuDNN: dtype {} is not supported", dtype_name(dtype)));
  }
}

TensorDesc::TensorDesc(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w, cudnnTensorFormat_t format) {
  CG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_));
  CG_CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc_, format, data_type(dtype), int(n), int(c), int(h), int(w)));
}

TensorDesc::~TensorDesc() {
  if (desc_) cudnnDestroyTensorDescriptor(desc_);
}

}  // namespace cg::kernels::cuda::cudnn

namespace cg::kernels::cuda {
int cudnn_version() { return int(cudnnGetVersion()); }
}  // namespace cg::kernels::cuda
