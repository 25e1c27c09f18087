// The kernels/cuda interface in a build without CUDA: the device query reports no device, and
// everything else fails naming the missing backend. CUDA tensors cannot be created in such a
// build, so the engine never reaches these except through a bug.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/memory.h"
#include "util/check.h"

namespace cg::kernels::cuda {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw Error(fmt::format("{}: this build has no CUDA backend (configure with -DCUDAGRAD_CUDA=ON)", what));
}
}  // namespace

int device_count() { return 0; }
std::string describe_device(int) { return "this build has no CUDA backend"; }

void* device_malloc(size_t, int) { no_cuda("device_malloc"); }
void device_free(void*, int) { no_cuda("device_free"); }
void* pinned_malloc(size_t) { no_cuda("pinned_malloc"); }
void pinned_free(void*) { no_cuda("pinned_free"); }
void copy_host_to_device(void*, const void*, size_t, Stream) { no_cuda("copy_host_to_device"); }
void copy_device_to_host(void*, const void*, size_t, Stream) { no_cuda("copy_device_to_host"); }
void copy_device_to_device(void*, const void*, size_t, Stream) { no_cuda("copy_device_to_device"); }
void synchronize_stream(Stream) { no_cuda("synchronize_stream"); }
void zero_device(void*, size_t, Stream) { no_cuda("zero_device"); }

void relu_forward(int64_t, const float*, float*, Stream) { no_cuda("relu_forward"); }
void relu_backward(int64_t, const float*, const float*, float*, Stream) { no_cuda("relu_backward"); }
void add(int64_t, const float*, const float*, float*, Stream) { no_cuda("add"); }
void add_relu(int64_t, const float*, const float*, float*, Stream) { no_cuda("add_relu"); }
void accumulate(int64_t, const float*, float*, Stream) { no_cuda("accumulate"); }
void scale(int64_t, float, const float*, float*, Stream) { no_cuda("scale"); }
void fill(int64_t, float, float*, Stream) { no_cuda("fill"); }

}  // namespace cg::kernels::cuda
#endif
