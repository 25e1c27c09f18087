// Device memory and copies, without CUDA types in the interface so the engine can use them from
// plain C++: streams are opaque handles (nullptr = the default stream).
#pragma once
#include <cstddef>

namespace cg::kernels::cuda {

using Stream = void*;  // a cudaStream_t

void* device_malloc(size_t bytes, int device);  // nullptr when out of memory
void device_free(void* ptr, int device);
void* pinned_malloc(size_t bytes);  // page-locked host memory: asynchronous copies need it
void pinned_free(void* ptr);

void copy_host_to_device(void* dst, const void* src, size_t bytes, Stream stream);
void copy_device_to_host(void* dst, const void* src, size_t bytes, Stream stream);
void copy_device_to_device(void* dst, const void* src, size_t bytes, Stream stream);
void synchronize_stream(Stream stream);
void synchronize_device(int device);  // the host waits for every stream of `device`

}  // namespace cg::kernels::cuda

namespace cg::kernels::cuda {
// Scratch for a kernel's intermediate results, from CUDA's stream-ordered pool: usable by work
// enqueued on `stream` after this call, returned in stream order. The pool keeps its memory
// between steps (its release threshold is raised on first use), so a steady step does not reach
// the driver.
void* scratch_alloc(size_t bytes, Stream stream);
void scratch_free(void* ptr, Stream stream);
// Sets `bytes` bytes at dst to zero, in stream order.
void zero_device(void* dst, size_t bytes, Stream stream);
}  // namespace cg::kernels::cuda
