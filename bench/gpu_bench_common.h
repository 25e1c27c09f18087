// What the GPU benchmarks share (gpu_kernels_bench times the kernels on a device,
// emulated_traffic_bench counts their memory traffic on the emulated one): device buffers of
// random-ish values, and the MiniResNet layers both run, named alike so their rows join.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/cuda/batch_norm.h"
#include "kernels/cuda/conv_native.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/memory.h"
#include "util/check.h"
#include "util/dtype.h"

namespace cg::bench {

// `n` values of `dtype`: a cast of a float ramp with noise.
struct GpuBuffer {
  void* ptr = nullptr;
  GpuBuffer(size_t n, DType dtype) {
    namespace cu = kernels::cuda;
    ptr = cu::device_malloc(std::max<size_t>(n * itemsize(dtype), 16), 0);
    if (!ptr) throw Error("out of GPU memory for the benchmark");
    std::vector<float> host(n);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (float& v : host) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      v = float(int64_t(s % 2001) - 1000) / 1000.f;
    }
    void* tmp = cu::device_malloc(n * 4 + 16, 0);
    if (!tmp) throw Error("out of GPU memory for the benchmark");
    cu::copy_host_to_device(tmp, host.data(), n * 4, nullptr);
    cu::cast(int64_t(n), DType::f32, tmp, dtype, ptr, nullptr);
    cu::synchronize_stream(nullptr);
    cu::device_free(tmp, 0);
  }
  ~GpuBuffer() { kernels::cuda::device_free(ptr, 0); }
  GpuBuffer(const GpuBuffer&) = delete;
  GpuBuffer& operator=(const GpuBuffer&) = delete;
};

// Every distinct convolution of MiniResNet (widths 64/128/256) for both inputs: 32x32x3 (the
// throughput comparison) and Fashion-MNIST's 28x28x1 (the time-to-accuracy run).
inline std::vector<kernels::cuda::Conv2dShape> miniresnet_convolutions(int64_t batch) {
  std::vector<kernels::cuda::Conv2dShape> layers;
  for (auto [c0, hw] : {std::pair<int64_t, int64_t>{3, 32}, {1, 28}}) {
    const int64_t h2 = (hw - 1) / 2 + 1, h3 = (h2 - 1) / 2 + 1;  // after the stride-2 stages
    layers.push_back({batch, c0, hw, hw, 64, 3, 3, 1, 1});  // stem
    layers.push_back({batch, 64, hw, hw, 64, 3, 3, 1, 1});
    layers.push_back({batch, 64, hw, hw, 128, 3, 3, 2, 1});
    layers.push_back({batch, 64, hw, hw, 128, 1, 1, 2, 0});  // downsample
    layers.push_back({batch, 128, h2, h2, 128, 3, 3, 1, 1});
    layers.push_back({batch, 128, h2, h2, 256, 3, 3, 2, 1});
    layers.push_back({batch, 128, h2, h2, 256, 1, 1, 2, 0});
    layers.push_back({batch, 256, h3, h3, 256, 3, 3, 1, 1});
  }
  return layers;
}

inline std::string conv_shape_name(const kernels::cuda::Conv2dShape& s, DType t) {
  return fmt::format("{} {}x{}x{} -> {} k{} s{}", dtype_name(t), s.c_in, s.h, s.w, s.c_out, s.kh, s.stride);
}

// The stages' activations of the 32x32 model as (channels, height = width), and the batch-norm
// shape of one in either layout (channels-last as {N * H * W, C, 1}: the row kernels).
constexpr std::pair<int64_t, int64_t> kBatchNormStages[] = {{64, 32}, {128, 16}, {256, 8}};
inline kernels::cuda::BatchNormShape batch_norm_shape(int64_t batch, int64_t c, int64_t hw, bool channels_last) {
  return channels_last ? kernels::cuda::BatchNormShape{batch * hw * hw, c, 1} : kernels::cuda::BatchNormShape{batch, c, hw * hw};
}
inline std::string batch_norm_shape_name(int64_t batch, int64_t c, int64_t hw, bool channels_last) {
  return fmt::format("f16 {}x{}x{}x{} {}", batch, c, hw, hw, channels_last ? "NHWC" : "NCHW");
}

}  // namespace cg::bench
