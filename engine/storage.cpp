#include "engine/storage.h"

#include "engine/device_allocator.h"
#include "engine/stream.h"
#include "util/check.h"

namespace cg {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  // GPU blocks belong to the current stream: freed, they are reused in that stream's order.
  if (nbytes > 0) data_ = allocator_for(device).allocate(nbytes, current_stream(device).id());
}

Storage::~Storage() {
  if (data_) allocator_for(device_).free(data_);
}

void Storage::release() {
  if (data_) allocator_for(device_).free(data_);
  data_ = nullptr;
}

void Storage::reacquire() {
  if (data_ || nbytes_ == 0) return;
  data_ = allocator_for(device_).allocate(nbytes_, current_stream(device_).id());
}

void Storage::throw_released() {
  throw Error("a tensor was read while its memory is released: a parameter sharded by dist.sharding=full_shard "
              "used outside its unit's forward or backward (gather it first)");
}

}  // namespace cg
