// NCCL and a "busy" kernel, behind opaque handles so dist/ needs no CUDA headers: the NCCL
// communicator the data-parallel layer all-reduces gradients with, and a kernel that occupies a
// stream for a given time (the modeled communication backend).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cuda/memory.h"

namespace cg::kernels::cuda {

using NcclComm = void*;  // an ncclComm_t

std::string nccl_unique_id();  // rank 0 makes it; the bytes travel through the rendezvous store
NcclComm nccl_init(const std::string& unique_id, int world_size, int rank, int device);
// In place, on `stream`: sum then divide by the world size (ncclAvg).
void nccl_all_reduce_average(NcclComm comm, float* data, int64_t count, Stream stream);
void nccl_broadcast(NcclComm comm, void* data, size_t bytes, int root, Stream stream);
// "" while healthy; otherwise NCCL's description of the asynchronous error.
std::string nccl_async_error(NcclComm comm);
void nccl_abort(NcclComm comm);    // ends in-flight collectives so their streams can proceed
void nccl_destroy(NcclComm comm);  // does not throw
int nccl_version();                // e.g. 22803

// One thread spins on the device clock for `microseconds`: the stream is busy for that long.
void spin(double microseconds, Stream stream);

}  // namespace cg::kernels::cuda
