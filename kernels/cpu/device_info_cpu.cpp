// Without the CUDA backend, the device query still links and reports no device.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/device_info.h"

namespace cg::kernels::cuda {
int device_count() { return 0; }
std::string describe_device(int index) { return "this build has no CUDA backend"; }
}  // namespace cg::kernels::cuda
#endif
