// kernels/cuda/device_error.h without CUDA: no kernel runs, so none reports an error.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/device_error.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {
DeviceErrorRecord* device_error_record() { no_cuda("device_error_record"); }
void raise_device_error() {}
}  // namespace cg::kernels::cuda
#endif
