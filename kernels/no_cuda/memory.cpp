// kernels/cuda/{memory,device_info}.h without CUDA: no device, and every other call fails naming
// the missing backend (CUDA tensors cannot be created in such a build, so only a bug reaches these).
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/memory.h"
#include "kernels/no_cuda/no_cuda.h"

namespace cg::kernels::cuda {

int device_count() { return 0; }
std::string describe_device(int) { return "this build has no CUDA backend"; }
std::string cuda_versions() { return "this build has no CUDA backend"; }

void* device_malloc(size_t, int) { no_cuda("device_malloc"); }
void device_free(void*, int) { no_cuda("device_free"); }
void* pinned_malloc(size_t) { no_cuda("pinned_malloc"); }
void pinned_free(void*) { no_cuda("pinned_free"); }
void copy_host_to_device(void*, const void*, size_t, Stream) { no_cuda("copy_host_to_device"); }
void copy_device_to_host(void*, const void*, size_t, Stream) { no_cuda("copy_device_to_host"); }
void copy_device_to_device(void*, const void*, size_t, Stream) { no_cuda("copy_device_to_device"); }
void synchronize_stream(Stream) { no_cuda("synchronize_stream"); }
void synchronize_device(int) { no_cuda("synchronize_device"); }
void zero_device(void*, size_t, Stream) { no_cuda("zero_device"); }

}  // namespace cg::kernels::cuda
#endif
