// kernels/cuda/spin.h without CUDA: fails naming the missing backend.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/spin.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

void spin(double, Stream) { no_cuda("spin"); }

}  // namespace cg::kernels::cuda
#endif
