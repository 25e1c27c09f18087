// A block of memory shared by every tensor that views it, from its device's caching allocator
// (engine/device_allocator.h): 64-byte-aligned host memory, or GPU memory.
#pragma once
#include <cstddef>
#include <memory>

#include "engine/device.h"

namespace cg {

class Storage {
 public:
  // Allocates nbytes on `device` (uninitialized).
  Storage(size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // Fails on a released storage: whoever reads it read a sharded parameter outside its gather.
  void* data() const {
    if (!data_ && nbytes_ > 0) [[unlikely]]
      throw_released();
    return data_;
  }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // dist.sharding=full_shard (dist/full_shard.h), PyTorch FSDP's storage resize to 0 and back:
  // release() gives the memory back to the allocator while every tensor viewing it lives on (a
  // parameter, a backward node's saved weight), and reacquire() takes a block of the same size
  // again (uninitialized, perhaps elsewhere: views find it through this object) before anyone
  // reads them. Neither moves any data.
  void release();
  void reacquire();
  bool released() const { return !data_ && nbytes_ > 0; }

 private:
  [[noreturn]] static void throw_released();

  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
};

}  // namespace cg
