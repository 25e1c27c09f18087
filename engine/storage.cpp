#include "engine/storage.h"

#include "engine/host_allocator.h"
#include "util/check.h"

namespace cg {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  CG_CHECK(device.is_cpu(), "CUDA storage needs the CUDA backend (device {})", device.str());
  if (nbytes > 0) data_ = host_allocator().allocate(nbytes);
}

Storage::~Storage() {
  if (data_) host_allocator().free(data_);
}

}  // namespace cg
