#include "engine/storage.h"

#include "engine/device_allocator.h"
#include "engine/stream.h"

namespace cg {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  // GPU blocks belong to the current stream: freed, they are reused in that stream's order.
  if (nbytes > 0) data_ = allocator_for(device).allocate(nbytes, current_stream(device).id());
}

Storage::~Storage() {
  if (data_) allocator_for(device_).free(data_);
}

}  // namespace cg
