#include <algorithm>
#include <cstdlib>

#include "kernels/cuda/check.h"
#include "kernels/cuda/graph.h"
#include "kernels/cuda/memory.h"

namespace cg::kernels::cuda {
namespace {
cudaStream_t as_cuda(Stream s) { return static_cast<cudaStream_t>(s); }
}  // namespace

void cuda_after_launch(const char* kernel, const char* file, int line) {
  const cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess) fail_call("CUDA", kernel, cudaGetErrorString(launch), file, line);
  static const bool sync = std::getenv("CUDAGRAD_CUDA_SYNC") != nullptr;
  // Inside a CUDA-graph capture the kernel was recorded, not run: there is nothing to wait for,
  // and a device synchronization would invalidate the capture. Its replays are checked instead
  // when the stream is next synchronized.
  if (sync && !any_capture_in_progress()) {
    const cudaError_t run = cudaDeviceSynchronize();
    if (run != cudaSuccess) fail_call("CUDA", kernel, cudaGetErrorString(run), file, line);
  }
}

void* device_malloc(size_t bytes, int device) {
  CG_CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // out of memory is reported by the caller, with its statistics
    return nullptr;
  }
  // Anything else (a kernel's earlier fault, sticky in the context, surfaces at the next call) is
  // not "out of memory": report it as what it is.
  CG_CUDA_CHECK_RESULT(e, "cudaMalloc");
  return p;
}

void device_free(void* ptr, int device) {
  CG_CUDA_CHECK_NOTHROW(cudaSetDevice(device));
  CG_CUDA_CHECK_NOTHROW(cudaFree(ptr));
}

void* pinned_malloc(size_t bytes) {
  void* p = nullptr;
  CG_CUDA_CHECK(cudaMallocHost(&p, bytes));
  return p;
}

void pinned_free(void* ptr) { CG_CUDA_CHECK_NOTHROW(cudaFreeHost(ptr)); }

void copy_host_to_device(void* dst, const void* src, size_t bytes, Stream stream) {
  CG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, as_cuda(stream)));
}
void copy_device_to_host(void* dst, const void* src, size_t bytes, Stream stream) {
  CG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, as_cuda(stream)));
}
void copy_device_to_device(void* dst, const void* src, size_t bytes, Stream stream) {
  CG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_cuda(stream)));
}
void synchronize_stream(Stream stream) { CG_CUDA_CHECK(cudaStreamSynchronize(as_cuda(stream))); }
void synchronize_device(int device) {
  CG_CUDA_CHECK(cudaSetDevice(device));
  CG_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace cg::kernels::cuda

namespace cg::kernels::cuda {

void zero_device(void* dst, size_t bytes, Stream stream) {
  CG_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(stream)));
}
}  // namespace cg::kernels::cuda
