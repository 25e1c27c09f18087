// A CUDA graph's private memory, as RAII types over the caching allocator's pools
// (engine/caching_allocator.h). CapturePool owns one pool for as long as the graph that uses its
// blocks exists; CaptureScope routes every allocation on one stream into it for the duration of a
// capture, whichever code makes it (ops, the kernels' scratch workspaces, native and cuDNN alike,
// autograd's gradient buffers). Blocks freed during the capture are reused by the same capture
// and by later captures into the same pool (which are then safe only if their graphs are replayed
// one after another, never concurrently, as with PyTorch's shared graph pools); no allocation
// outside the pool ever gets one.
// No CUDA here: the logic runs and is tested on the CPU over a fake backend.
#pragma once
#include <cstdint>

#include "engine/caching_allocator.h"

namespace cg {

class CapturePool {
 public:
  explicit CapturePool(CachingAllocator& allocator);
  ~CapturePool();  // releases the pool; must outlive (be destroyed after) the graph using it
  CapturePool(const CapturePool&) = delete;
  CapturePool& operator=(const CapturePool&) = delete;

  CachingAllocator& allocator() const { return allocator_; }
  PoolId id() const { return id_; }
  PoolStats stats() const { return allocator_.pool_stats(id_); }

 private:
  CachingAllocator& allocator_;
  PoolId id_;
};

class CaptureScope {
 public:
  // stream: the capturing stream's id (Stream::id()).
  CaptureScope(CapturePool& pool, uint64_t stream);
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  CachingAllocator& allocator_;
  uint64_t stream_;
};

}  // namespace cg
