// The kernels/cuda interface in a build without CUDA: the device query reports no device, and
// everything else fails naming the missing backend. CUDA tensors cannot be created in such a
// build, so the engine never reaches these except through a bug.
#ifndef CUDAGRAD_WITH_CUDA
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/layers.h"
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

void batchnorm_forward_train(const BatchNormShape&, const float*, const float*, const float*, float, float, float*,
                             float*, float*, float*, float*, Activation, Stream) {
  no_cuda("batchnorm_forward_train");
}
void batchnorm_forward_eval(const BatchNormShape&, const float*, const float*, const float*, const float*,
                            const float*, float, float*, Activation, Stream) {
  no_cuda("batchnorm_forward_eval");
}
void batchnorm_backward_train(const BatchNormShape&, const float*, const float*, const float*, const float*,
                              const float*, float*, float*, float*, const float*, Stream) {
  no_cuda("batchnorm_backward_train");
}
void global_avg_pool_forward(int64_t, int64_t, const float*, float*, Stream) { no_cuda("global_avg_pool_forward"); }
void global_avg_pool_backward(int64_t, int64_t, const float*, float*, Stream) { no_cuda("global_avg_pool_backward"); }
void cross_entropy_forward(int64_t, int64_t, const float*, const int64_t*, float*, float*, int64_t*, Stream) {
  no_cuda("cross_entropy_forward");
}
void cross_entropy_backward(int64_t, int64_t, const float*, const float*, const int64_t*, float*, Stream) {
  no_cuda("cross_entropy_backward");
}
void sgd_update(int64_t, const cpu::SgdParams&, bool, float*, const float*, float*, Stream) { no_cuda("sgd_update"); }
void adamw_update(int64_t, const cpu::AdamWParams&, int64_t, float*, const float*, float*, float*, Stream) {
  no_cuda("adamw_update");
}

}  // namespace cg::kernels::cuda
#endif
