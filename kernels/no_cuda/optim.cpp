// kernels/cuda/optim.h without CUDA: every call fails naming the missing backend.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/optim.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

void sgd_update_multi(const std::vector<TensorSlot>&, const SgdOptions&, bool, const float*, Stream, const float*) {
  no_cuda("sgd_update_multi");
}
void adamw_update_multi(const std::vector<TensorSlot>&, const AdamWOptions&, const int64_t*, const float*, Stream,
                        const float*) {
  no_cuda("adamw_update_multi");
}
void advance_step(int64_t*, const float*, Stream) { no_cuda("advance_step"); }
void unscale_and_check_multi(const std::vector<TensorSlot>&, const float*, float*, Stream) {
  no_cuda("unscale_and_check_multi");
}
void update_loss_scale(float*, float*, int64_t*, const float*, float, float, int64_t, Stream) {
  no_cuda("update_loss_scale");
}

}  // namespace cg::kernels::cuda
#endif
