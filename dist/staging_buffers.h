// Host buffers that stage device regions (StagedGlooComm's pinned copies of DDP's buckets): one
// per device address, at least as large as the region staged there. Buckets are rebuilt after the
// first step, so an address can come back for a larger region: its buffer is then replaced, and
// the old one handed to `retire`, which frees it once no staged work posted earlier can still use
// it. Allocation is a function, so the rule is tested with plain host memory.
#pragma once
#include <cstddef>
#include <functional>
#include <map>
#include <utility>

namespace cg::dist {

class StagingBuffers {
 public:
  using Allocate = std::function<void*(size_t bytes)>;
  using Release = std::function<void(void* buffer)>;

  // free: releases a buffer no work uses (at destruction); retire: releases a replaced buffer
  // after the work already posted.
  StagingBuffers(Allocate allocate, Release free, Release retire)
      : allocate_(std::move(allocate)), free_(std::move(free)), retire_(std::move(retire)) {}
  ~StagingBuffers() {
    for (auto& [key, b] : buffers_) free_(b.data);
  }
  StagingBuffers(const StagingBuffers&) = delete;
  StagingBuffers& operator=(const StagingBuffers&) = delete;

  // A buffer of at least `bytes` for the region at `key`.
  void* get(const void* key, size_t bytes) {
    auto it = buffers_.find(key);
    if (it != buffers_.end() && it->second.bytes >= bytes) return it->second.data;
    void* fresh = allocate_(bytes);
    if (it == buffers_.end()) {
      buffers_.emplace(key, Buffer{fresh, bytes});
    } else {
      retire_(it->second.data);
      it->second = Buffer{fresh, bytes};
    }
    return fresh;
  }
  size_t size() const { return buffers_.size(); }

 private:
  struct Buffer {
    void* data;
    size_t bytes;
  };
  Allocate allocate_;
  Release free_, retire_;
  std::map<const void*, Buffer> buffers_;
};

}  // namespace cg::dist
