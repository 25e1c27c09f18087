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

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
};

}  // namespace cg
