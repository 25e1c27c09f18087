// kernels/cuda/augment.h without CUDA: fails naming the missing backend.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/augment.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {
void gather_augment(int64_t, const int64_t*, const float*, const int64_t*, int, int, int, const float*,
                    const GatherAugment&, float*, int64_t*, Stream) {
  no_cuda("gather_augment");
}
}  // namespace cg::kernels::cuda
#endif
