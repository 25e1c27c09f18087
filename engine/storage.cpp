#include "engine/storage.h"

#include "engine/device_allocator.h"

namespace cg {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (nbytes > 0) data_ = allocator_for(device).allocate(nbytes);
}

Storage::~Storage() {
  if (data_) allocator_for(device_).free(data_);
}

}  // namespace cg
