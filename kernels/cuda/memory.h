// Device memory and copies, without CUDA types in the interface so the engine can use them from
// plain C++: streams are opaque handles (nullptr = the default stream).
#pragma once
#include <cstddef>
#include <functional>

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
// Scratch memory for a kernel's intermediate results, from the caller (the engine serves it from
// its caching allocator, ops::detail::workspace, so scratch shows in the allocator's statistics
// and a steady step never reaches cudaMalloc): returns device memory of at least `bytes`, usable
// in stream order by the work the call it is passed to enqueues, until that call returns. A
// kernel function calls it at most once per call.
using WorkspaceFn = std::function<void*(size_t bytes)>;
// Sets `bytes` bytes at dst to zero, in stream order.
void zero_device(void* dst, size_t bytes, Stream stream);
}  // namespace cg::kernels::cuda
