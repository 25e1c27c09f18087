// Grid-stride elementwise kernels: one launch shape for every size, memory-bound by design.
#include "kernels/cuda/check.h"
#include "kernels/cuda/elementwise.h"

namespace cg::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Enough blocks to fill an H100 (132 SMs) several times over; the grid-stride loop does the rest.
int blocks_for(int64_t n) { return int(std::min<int64_t>((n + kThreads - 1) / kThreads, 132 * 16)); }

template <typename F>
__global__ void map_kernel(int64_t n, F f) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) f(i);
}

template <typename F>
void launch(const char* name, int64_t n, Stream stream, F f) {
  if (n == 0) return;
  map_kernel<<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(n, f);
  CG_CUDA_AFTER_LAUNCH(name);
}

}  // namespace

void relu_forward(int64_t n, const float* x, float* y, Stream s) {
  launch("relu_forward", n, s, [=] __device__(int64_t i) { y[i] = x[i] > 0.f ? x[i] : 0.f; });
}
void relu_backward(int64_t n, const float* dy, const float* y, float* dx, Stream s) {
  launch("relu_backward", n, s, [=] __device__(int64_t i) { dx[i] = y[i] > 0.f ? dy[i] : 0.f; });
}
void add(int64_t n, const float* a, const float* b, float* y, Stream s) {
  launch("add", n, s, [=] __device__(int64_t i) { y[i] = a[i] + b[i]; });
}
void add_relu(int64_t n, const float* a, const float* b, float* y, Stream s) {
  launch("add_relu", n, s, [=] __device__(int64_t i) { y[i] = fmaxf(a[i] + b[i], 0.f); });
}
void accumulate(int64_t n, const float* x, float* y, Stream s) {
  launch("accumulate", n, s, [=] __device__(int64_t i) { y[i] += x[i]; });
}
void scale(int64_t n, float alpha, const float* x, float* y, Stream s) {
  launch("scale", n, s, [=] __device__(int64_t i) { y[i] = alpha * x[i]; });
}
void fill(int64_t n, float value, float* y, Stream s) {
  launch("fill", n, s, [=] __device__(int64_t i) { y[i] = value; });
}

}  // namespace cg::kernels::cuda
