#include <nccl.h>

#include <cstring>

#include "kernels/cuda/check.h"
#include "kernels/cuda/comm.h"

#define CG_NCCL_CHECK(expr)                                                                                 \
  do {                                                                                                      \
    const ncclResult_t cg_r_ = (expr);                                                                      \
    if (cg_r_ != ncclSuccess)                                                                               \
      ::cg::kernels::cuda::fail_call("NCCL", #expr, ncclGetErrorString(cg_r_), __FILE__, __LINE__);         \
  } while (0)

namespace cg::kernels::cuda {
namespace {
ncclComm_t as_nccl(NcclComm c) { return static_cast<ncclComm_t>(c); }
cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }

__global__ void spin_kernel(uint64_t nanoseconds) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}
}  // namespace

std::string nccl_unique_id() {
  ncclUniqueId id;
  CG_NCCL_CHECK(ncclGetUniqueId(&id));
  return std::string(id.internal, sizeof(id.internal));
}

NcclComm nccl_init(const std::string& unique_id, int world_size, int rank, int device) {
  CG_CHECK(unique_id.size() == sizeof(ncclUniqueId::internal), "NCCL unique id of {} bytes, expected {}",
           unique_id.size(), sizeof(ncclUniqueId::internal));
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), unique_id.size());
  CG_CUDA_CHECK(cudaSetDevice(device));
  ncclComm_t comm = nullptr;
  CG_NCCL_CHECK(ncclCommInitRank(&comm, world_size, id, rank));
  return comm;
}

void nccl_all_reduce_average(NcclComm comm, float* data, int64_t count, Stream stream) {
  CG_NCCL_CHECK(ncclAllReduce(data, data, size_t(count), ncclFloat, ncclAvg, as_nccl(comm), as_stream(stream)));
}

void nccl_broadcast(NcclComm comm, void* data, size_t bytes, int root, Stream stream) {
  CG_NCCL_CHECK(ncclBroadcast(data, data, bytes, ncclChar, root, as_nccl(comm), as_stream(stream)));
}

std::string nccl_async_error(NcclComm comm) {
  ncclResult_t async = ncclSuccess;
  if (ncclCommGetAsyncError(as_nccl(comm), &async) != ncclSuccess) return "ncclCommGetAsyncError failed";
  return async == ncclSuccess || async == ncclInProgress ? std::string() : ncclGetErrorString(async);
}

void nccl_abort(NcclComm comm) { ncclCommAbort(as_nccl(comm)); }
void nccl_destroy(NcclComm comm) {
  if (comm) ncclCommDestroy(as_nccl(comm));
}
int nccl_version() {
  int v = 0;
  ncclGetVersion(&v);
  return v;
}

void spin(double microseconds, Stream stream) {
  spin_kernel<<<1, 1, 0, as_stream(stream)>>>(uint64_t(microseconds * 1000.0));
  CG_CUDA_AFTER_LAUNCH("spin_kernel");
}

}  // namespace cg::kernels::cuda
