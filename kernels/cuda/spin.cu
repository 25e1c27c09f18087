#include <cstdint>

#include "kernels/cuda/check.h"
#include "kernels/cuda/device_clock.cuh"
#include "kernels/cuda/spin.h"

namespace cg::kernels::cuda {
namespace {

__global__ void spin_kernel(uint64_t nanoseconds) {
  const uint64_t start = global_timer_ns();
  do {
    __nanosleep(1000);
  } while (global_timer_ns() - start < nanoseconds);
}

}  // namespace

void spin(double microseconds, Stream stream) {
  spin_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(uint64_t(microseconds * 1000.0));
  CG_CUDA_AFTER_LAUNCH("spin_kernel");
}

}  // namespace cg::kernels::cuda
