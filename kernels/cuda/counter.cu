#include "kernels/cuda/counter.h"
#include "kernels/cuda/launch.h"

namespace cg::kernels::cuda {
namespace {
__global__ void increment_kernel(int64_t* value, int64_t by) { *value += by; }
}  // namespace

void increment_i64(int64_t* value, int64_t by, Stream stream) {
  launch_kernel(increment_kernel, "increment_kernel", 1, 1, 0, static_cast<cudaStream_t>(stream), value, by);
}

}  // namespace cg::kernels::cuda
