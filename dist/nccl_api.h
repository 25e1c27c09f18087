// The NCCL calls the data-parallel layer makes, behind opaque handles so that the rest of dist/
// needs no CUDA or NCCL header. NCCL is communication, not compute, so it lives here rather than
// in kernels/. Only a build that links NCCL defines these (kLinked).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace cg::dist::nccl {

// NCCL is linked: the nvcc build, not the emulated GPU or a CPU-only build. nccl_api.cpp and
// nccl_comm.cpp are compiled only then (their names say so: CMakeLists.txt), and the code that
// stays reaches them only inside `if constexpr (kLinked)` (make_nccl_comm).
#ifdef CUDAGRAD_WITH_CUDA_LIBRARIES
inline constexpr bool kLinked = true;
#else
inline constexpr bool kLinked = false;
#endif

using Comm = void*;    // an ncclComm_t
using Stream = void*;  // a cudaStream_t (cg::Stream::handle())

std::string unique_id();  // rank 0 makes it; the bytes travel through the rendezvous store
// Every peer connected before it returns (NCCL_RUNTIME_CONNECT=0 unless set otherwise).
Comm init(const std::string& unique_id, int world_size, int rank, int device);
// A first all-reduce and broadcast, waited for: what NCCL still connects lazily is connected now,
// so a peer that stalls shows inside the communicator's setup rather than in a later collective.
void connect(Comm comm);
// In place, on `stream`: sum then divide by the world size (ncclAvg).
void all_reduce_average(Comm comm, float* data, int64_t count, Stream stream);
void broadcast(Comm comm, void* data, size_t bytes, int root, Stream stream);
// ZeRO-1, in place on `data` (world_size * shard floats), on `stream`: rank r's shard
// [r * shard, (r + 1) * shard) receives the average (ncclReduceScatter, ncclAvg) ...
void reduce_scatter_average(Comm comm, float* data, int64_t shard, int rank, Stream stream);
// ... and every rank's shard of `shard_bytes` is copied to all (ncclAllGather, as bytes: float32
// or full_shard's 16-bit gathers alike).
void all_gather(Comm comm, void* data, size_t shard_bytes, int rank, Stream stream);
// "" while healthy; otherwise NCCL's description of the asynchronous error.
std::string async_error(Comm comm);
void abort(Comm comm);    // ends in-flight collectives so their streams can proceed
void destroy(Comm comm);  // does not throw
int version();            // e.g. 22803; 0 without NCCL
// In place, on `stream`: the sum over ranks of `count` doubles (SyncBatchNorm's statistics).
void all_reduce_sum_f64(Comm comm, double* data, int64_t count, Stream stream);
// In place, on `stream`: the sum of 16-bit floats (ncclHalf, or ncclBfloat16 when `bfloat16`),
// in 16 bits on the wire (dist.grad_compression).
void all_reduce_sum_16bit(Comm comm, void* data, int64_t count, bool bfloat16, Stream stream);
// ZeRO-1 with dist.grad_compression, in place on `data` (world_size * shard 16-bit floats), on
// `stream`: rank r's shard [r * shard, (r + 1) * shard) receives the sum (ncclReduceScatter,
// ncclHalf or ncclBfloat16, ncclSum).
void reduce_scatter_sum_16bit(Comm comm, void* data, int64_t shard, int rank, bool bfloat16, Stream stream);

}  // namespace cg::dist::nccl
