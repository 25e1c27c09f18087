// kernels/cuda/counter.h without CUDA: fails naming the missing backend.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/counter.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {
void increment_i64(int64_t*, int64_t, Stream) { no_cuda("increment_i64"); }
}  // namespace cg::kernels::cuda
#endif
