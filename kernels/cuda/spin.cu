#include <cstdint>

#include "kernels/cuda/device_clock.cuh"
#include "kernels/cuda/launch.h"
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
  launch_kernel(spin_kernel, "spin_kernel", 1, 1, 0, static_cast<cudaStream_t>(stream),
                uint64_t(microseconds * 1000.0));
}

}  // namespace cg::kernels::cuda
