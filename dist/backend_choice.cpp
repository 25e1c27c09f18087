#include "dist/backend_choice.h"

#include "util/check.h"

namespace cg::dist {

TransportChoice choose_transport(BackendRequest requested, const JobShape& job) {
  if (requested == BackendRequest::modeled) {
    if (job.world_size > 1)
      throw UsageError(fmt::format("dist.backend=modeled runs one process standing for dist.modeled_world_size "
                                   "ranks; this job has {} processes",
                                   job.world_size));
    return {Transport::modeled, "one process models the ring all-reduce of dist.modeled_world_size ranks"};
  }
  if (job.world_size <= 1) return {Transport::none, "one process: nothing to communicate"};
  if (!job.cuda_tensors) {
    if (requested == BackendRequest::nccl)
      throw UsageError("dist.backend=nccl needs CUDA tensors; use gloo (or auto) on the CPU");
    return {Transport::host_gloo, "CPU tensors: Gloo"};
  }
  const bool own_gpu = job.local_world_size <= job.visible_gpus;
  const std::string sharing = fmt::format("{} ranks on this node share {} GPU(s)", job.local_world_size,
                                          job.visible_gpus);
  if (requested == BackendRequest::nccl && !own_gpu)
    throw UsageError(fmt::format("dist.backend=nccl: {}, which NCCL refuses (\"Duplicate GPU detected\"); use "
                                 "dist.backend=gloo (staged through pinned host memory) or auto",
                                 sharing));
  if (requested == BackendRequest::nccl) return {Transport::nccl, "dist.backend=nccl"};
  if (requested == BackendRequest::gloo)
    return {Transport::staged_gloo, "dist.backend=gloo: CUDA tensors staged through pinned host memory"};
  if (own_gpu) return {Transport::nccl, "every rank on this node has a GPU of its own: NCCL"};
  return {Transport::staged_gloo, sharing + ", which NCCL refuses: Gloo staged through pinned host memory"};
}

}  // namespace cg::dist
