// Shared by the cuDNN-backed kernels (internal to kernels/cuda/): the check macro, one handle per
// device, and RAII descriptors for 4-D tensors (NCHW or NHWC).
#pragma once
#include <cudnn.h>

#include <memory>

#include "kernels/cuda/check.h"
#include "kernels/cuda/memory.h"
#include "util/dtype.h"

#define CG_CUDNN_CHECK(expr)                                                                                  \
  do {                                                                                                        \
    const cudnnStatus_t cg_st_ = (expr);                                                                      \
    if (cg_st_ != CUDNN_STATUS_SUCCESS)                                                                       \
      ::cg::kernels::cuda::fail_call("cuDNN", #expr, cudnnGetErrorString(cg_st_), __FILE__, __LINE__);        \
  } while (0)

namespace cg::kernels::cuda::cudnn {

// The calling thread's current device's handle (created on first use), bound to `stream`.
cudnnHandle_t handle(Stream stream);

cudnnDataType_t data_type(DType dtype);  // f32, f16, bf16; anything else fails

// A 4-D tensor descriptor; sizes are given as n, c, h, w whatever the memory format
// (CUDNN_TENSOR_NHWC: contiguous [n, h, w, c]).
class TensorDesc {
 public:
  TensorDesc(DType dtype, int64_t n, int64_t c, int64_t h, int64_t w,
             cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW);
  ~TensorDesc();
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

}  // namespace cg::kernels::cuda::cudnn
