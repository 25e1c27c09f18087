// Moving bytes between and within devices: the one place that knows how (memcpy, or a CUDA copy
// in stream order followed by a wait when the host needs the result). Uses the default stream.
#pragma once
#include <cstddef>

#include "engine/device.h"

namespace cg {

// Copies bytes from src (on src_device) to dst (on dst_device); returns once dst is usable by the
// host (CPU destination) or in stream order (GPU destination).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
void zero_bytes(void* dst, Device device, size_t bytes);

}  // namespace cg
