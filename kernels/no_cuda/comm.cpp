// kernels/cuda/comm.h without CUDA: every call fails naming the missing backend.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/comm.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

std::string nccl_unique_id() { no_cuda("nccl_unique_id"); }
NcclComm nccl_init(const std::string&, int, int, int) { no_cuda("nccl_init"); }
void nccl_all_reduce_average(NcclComm, float*, int64_t, Stream) { no_cuda("nccl_all_reduce_average"); }
void nccl_broadcast(NcclComm, void*, size_t, int, Stream) { no_cuda("nccl_broadcast"); }
std::string nccl_async_error(NcclComm) { no_cuda("nccl_async_error"); }
void nccl_abort(NcclComm) {}
void nccl_destroy(NcclComm) {}
int nccl_version() { return 0; }
void spin(double, Stream) { no_cuda("spin"); }

}  // namespace cg::kernels::cuda
#endif
