#include "engine/cuda_graph.h"

#include <cstdio>
#include <exception>

#include "engine/device_allocator.h"
#include "kernels/backend.h"
#include "kernels/cuda/graph.h"
#include "util/check.h"

namespace cg {

// In a build without the CUDA backend no CUDA stream exists, so the constructor refuses every
// graph, and the calls below, discarded there, never run.
CudaGraph::CudaGraph(const Stream& stream) : stream_(stream) {
  CG_CHECK(kernels::kCudaBuild, "CUDA graphs: {}", kernels::kNoCudaBackend);
  CG_CHECK(stream.device().is_cuda() && stream.handle() != nullptr,
           "CUDA graphs capture a created stream of a CUDA device, not {}'s {} stream", stream.device().str(),
           stream.handle() ? "given" : "default");
  pool_ = std::make_unique<CapturePool>(allocator_for(stream.device()));
}

CudaGraph::~CudaGraph() {
  if (exec_) {
    try {  // the last replay finishes before its memory can be handed to anyone else
      stream_.synchronize();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cudagrad: CudaGraph: %s\n", e.what());
    }
  }
  // Before the pool: the graph references its blocks.
  if constexpr (kernels::kCudaBuild) kernels::cuda::graph_destroy(exec_);
  pool_.reset();
}

void CudaGraph::warm_up(const std::function<void()>& work) {
  CG_CHECK(!exec_, "CudaGraph::warm_up: this graph was captured already");
  CaptureScope route(*pool_, stream_.id());  // routes the allocations; nothing is captured
  work();
}

void CudaGraph::capture(const std::function<void()>& work) {
  CG_CHECK(!exec_, "CudaGraph::capture: this graph was captured already");
  CaptureScope route(*pool_, stream_.id());
  const size_t backend_before = pool_->allocator().stats().backend_allocations;
  if constexpr (kernels::kCudaBuild) {
    kernels::cuda::graph_capture_begin(stream_.handle());
    try {
      work();
    } catch (...) {
      kernels::cuda::graph_capture_abort(stream_.handle());
      throw;
    }
    exec_ = kernels::cuda::graph_capture_end(stream_.handle());
  }
  backend_allocations_in_capture_ = pool_->allocator().stats().backend_allocations - backend_before;
}

void CudaGraph::replay() const {
  CG_CHECK(exec_, "CudaGraph::replay: nothing was captured");
  if constexpr (kernels::kCudaBuild) kernels::cuda::graph_launch(exec_, stream_.handle());
}

}  // namespace cg
