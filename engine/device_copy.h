// Moving bytes between and within devices: the one place that knows how (memcpy, or a CUDA copy
// on the current stream of the GPU involved, followed by a wait when the host needs the result).
#pragma once
#include <cstddef>

#include "engine/device.h"
#include "engine/stream.h"

namespace cg {

// Copies bytes from src (on src_device) to dst (on dst_device); returns once dst is usable by the
// host (CPU destination, or a pageable CPU source the caller may reuse) or in stream order (GPU
// to GPU).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
// Host to GPU without waiting, on `stream`: src must be pinned (runtime::PinnedBuffer, engine/runtime.h) and stay
// untouched until the copy is done (record an event after it).
void copy_bytes_async(void* dst, const void* pinned_src, size_t bytes, const Stream& stream);
// GPU to host without waiting, on `stream`: dst must be pinned (runtime::PinnedBuffer) and is
// usable once the stream has passed the copy (synchronize it, or an event recorded after it).
void copy_to_host_async(void* pinned_dst, const void* src, size_t bytes, const Stream& stream);
void zero_bytes(void* dst, Device device, size_t bytes);

}  // namespace cg
