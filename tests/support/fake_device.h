// A device of `capacity` bytes for the caching allocator's CPU tests: host memory behind a
// MemoryBackend that counts what it hands out and refuses what would exceed the capacity.
#pragma once
#include <cstdlib>
#include <map>

#include "engine/caching_allocator.h"

namespace cg::test {

struct FakeDevice {
  explicit FakeDevice(size_t capacity_bytes) : capacity(capacity_bytes) {}
  size_t capacity, used = 0;
  std::map<void*, size_t> live;  // pointer -> bytes, for what is handed out now
  MemoryBackend backend() {
    return {"fake",
            [this](size_t n) -> void* {
              if (used + n > capacity) return nullptr;
              used += n;
              void* p = std::malloc(n);
              live[p] = n;
              return p;
            },
            [this](void* p) {
              used -= live.at(p);
              live.erase(p);
              std::free(p);
            }};
  }
};

}  // namespace cg::test
