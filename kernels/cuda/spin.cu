#include <cstdint>

#include "kernels/cuda/check.h"
#include "kernels/cuda/spin.h"

namespace cg::kernels::cuda {
namespace {

__global__ void spin_kernel(uint64_t nanoseconds) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}

}  // namespace

void spin(double microseconds, Stream stream) {
  spin_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(uint64_t(microseconds * 1000.0));
  CG_CUDA_AFTER_LAUNCH("spin_kernel");
}

}  // namespace cg::kernels::cuda
