// Compiled only where NCCL is linked (its name says so: CMakeLists.txt).
#include "dist/nccl_api.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>

#include "util/check.h"

namespace cg::dist::nccl {
namespace {

[[noreturn]] void fail(const char* library, const char* expr, const char* message) {
  throw Error(fmt::format("{} call failed: {}: {}", library, expr, message));
}
#define CG_NCCL_CHECK(expr)                                                  \
  do {                                                                       \
    const ncclResult_t cg_r_ = (expr);                                       \
    if (cg_r_ != ncclSuccess) fail("NCCL", #expr, ncclGetErrorString(cg_r_)); \
  } while (0)

ncclComm_t as_nccl(Comm c) { return static_cast<ncclComm_t>(c); }
cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }

}  // namespace

std::string unique_id() {
  ncclUniqueId id;
  CG_NCCL_CHECK(ncclGetUniqueId(&id));
  return std::string(id.internal, sizeof(id.internal));
}

Comm init(const std::string& id_bytes, int world_size, int rank, int device) {
  // NCCL 2.22+ connects peers lazily, inside the first collective that needs them, which would put
  // a stalled peer's hang outside the setup's deadline (nccl_comm.cpp). Connect at init instead,
  // unless the user chose otherwise. (setenv before any NCCL thread reads the variable.)
  ::setenv("NCCL_RUNTIME_CONNECT", "0", /*overwrite=*/0);
  CG_CHECK(id_bytes.size() == sizeof(ncclUniqueId::internal), "NCCL unique id of {} bytes, expected {}",
           id_bytes.size(), sizeof(ncclUniqueId::internal));
  ncclUniqueId id;
  std::memcpy(id.internal, id_bytes.data(), id_bytes.size());
  const cudaError_t set = cudaSetDevice(device);
  if (set != cudaSuccess) fail("CUDA", "cudaSetDevice", cudaGetErrorString(set));
  ncclComm_t comm = nullptr;
  CG_NCCL_CHECK(ncclCommInitRank(&comm, world_size, id, rank));
  return comm;
}

void connect(Comm comm) {
  // One all-reduce and one broadcast of a float, waited for: whatever NCCL still connects on first
  // use is connected here, inside the caller's deadline.
  float* one = nullptr;
  cudaStream_t stream = nullptr;
  auto check = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) fail("CUDA", what, cudaGetErrorString(e));
  };
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  check(cudaMallocAsync(reinterpret_cast<void**>(&one), sizeof(float), stream), "cudaMallocAsync");
  check(cudaMemsetAsync(one, 0, sizeof(float), stream), "cudaMemsetAsync");
  CG_NCCL_CHECK(ncclAllReduce(one, one, 1, ncclFloat, ncclSum, as_nccl(comm), stream));
  CG_NCCL_CHECK(ncclBroadcast(one, one, 1, ncclFloat, 0, as_nccl(comm), stream));
  check(cudaFreeAsync(one, stream), "cudaFreeAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
}

void all_reduce_average(Comm comm, float* data, int64_t count, Stream stream) {
  CG_NCCL_CHECK(ncclAllReduce(data, data, size_t(count), ncclFloat, ncclAvg, as_nccl(comm), as_stream(stream)));
}

void broadcast(Comm comm, void* data, size_t bytes, int root, Stream stream) {
  CG_NCCL_CHECK(ncclBroadcast(data, data, bytes, ncclChar, root, as_nccl(comm), as_stream(stream)));
}

void reduce_scatter_average(Comm comm, float* data, int64_t shard, int rank, Stream stream) {
  CG_NCCL_CHECK(ncclReduceScatter(data, data + int64_t(rank) * shard, size_t(shard), ncclFloat, ncclAvg,
                                  as_nccl(comm), as_stream(stream)));
}

void all_gather(Comm comm, void* data, size_t shard_bytes, int rank, Stream stream) {
  char* bytes = static_cast<char*>(data);
  CG_NCCL_CHECK(ncclAllGather(bytes + size_t(rank) * shard_bytes, bytes, shard_bytes, ncclUint8, as_nccl(comm),
                              as_stream(stream)));
}

std::string async_error(Comm comm) {
  ncclResult_t async = ncclSuccess;
  if (ncclCommGetAsyncError(as_nccl(comm), &async) != ncclSuccess) return "ncclCommGetAsyncError failed";
  return async == ncclSuccess || async == ncclInProgress ? std::string() : ncclGetErrorString(async);
}

void abort(Comm comm) { ncclCommAbort(as_nccl(comm)); }
void destroy(Comm comm) {
  if (comm) ncclCommDestroy(as_nccl(comm));
}
int version() {
  int v = 0;
  ncclGetVersion(&v);
  return v;
}

void all_reduce_sum_f64(Comm comm, double* data, int64_t count, Stream stream) {
  CG_NCCL_CHECK(ncclAllReduce(data, data, size_t(count), ncclDouble, ncclSum, as_nccl(comm), as_stream(stream)));
}

void all_reduce_sum_16bit(Comm comm, void* data, int64_t count, bool bfloat16, Stream stream) {
  CG_NCCL_CHECK(ncclAllReduce(data, data, size_t(count), bfloat16 ? ncclBfloat16 : ncclHalf, ncclSum, as_nccl(comm),
                              as_stream(stream)));
}

void reduce_scatter_sum_16bit(Comm comm, void* data, int64_t shard, int rank, bool bfloat16, Stream stream) {
  uint16_t* values = static_cast<uint16_t*>(data);  // 2-byte elements: the in-place form's receive offset
  CG_NCCL_CHECK(ncclReduceScatter(values, values + int64_t(rank) * shard, size_t(shard),
                                  bfloat16 ? ncclBfloat16 : ncclHalf, ncclSum, as_nccl(comm), as_stream(stream)));
}

}  // namespace cg::dist::nccl
