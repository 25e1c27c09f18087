// The kernel benchmark (issue 3): each hand-written kernel against cuDNN on MiniResNet's layer
// shapes at batch 256, next to the device's measured peaks (device-to-device copy bandwidth,
// counting bytes read plus written; a large fp16 cuBLAS matrix product). CUDA events around each
// call, warm-up first, median of repeats, random inputs. Prints a markdown table, then one JSON
// line per row. Without a GPU it says so and exits 0.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/stream.h"
#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/conv_native.h"
#include "kernels/cuda/cudnn.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/memory.h"
#include "util/check.h"

namespace cg {
namespace {
namespace cu = kernels::cuda;

// Device memory filled with random-ish values of `dtype` (a cast of a float ramp with noise).
struct Buffer {
  void* ptr = nullptr;
  Buffer(size_t n, DType dtype) {
    ptr = cu::device_malloc(std::max<size_t>(n * itemsize(dtype), 16), 0);
    if (!ptr) throw Error("out of GPU memory for the benchmark");
    std::vector<float> host(n);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (float& v : host) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      v = float(int64_t(s % 2001) - 1000) / 1000.f;
    }
    void* tmp = cu::device_malloc(n * 4 + 16, 0);
    cu::copy_host_to_device(tmp, host.data(), n * 4, nullptr);
    cu::cast(int64_t(n), DType::f32, tmp, dtype, ptr, nullptr);
    cu::synchronize_stream(nullptr);
    cu::device_free(tmp, 0);
  }
  ~Buffer() { cu::device_free(ptr, 0); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// Median milliseconds of fn over `reps` timed calls after `warmup` untimed ones.
double time_ms(const std::function<void()>& fn, int warmup = 3, int reps = 20) {
  const Stream s(Device::cuda(0), nullptr);
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    Event a = Event::create(Device::cuda(0), true), b = Event::create(Device::cuda(0), true);
    a.record(s);
    fn();
    b.record(s);
    b.synchronize();
    ms.push_back(Event::elapsed_ms(a, b));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct Row {
  std::string kernel, shape, unit;
  double native = 0, cudnn = 0;  // in `unit` (TFLOP/s or GB/s); cudnn 0 = no counterpart
  double peak = 0;
};

void print(const std::vector<Row>& rows) {
  std::printf("| kernel | shape | unit | native | cuDNN | native/cuDNN | native/peak |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Row& r : rows)
    std::printf("| %s | %s | %s | %.1f | %s | %s | %.0f%% |\n", r.kernel.c_str(), r.shape.c_str(), r.unit.c_str(),
                r.native, r.cudnn > 0 ? fmt::format("{:.1f}", r.cudnn).c_str() : "-",
                r.cudnn > 0 ? fmt::format("{:.2f}", r.native / r.cudnn).c_str() : "-", 100.0 * r.native / r.peak);
  for (const Row& r : rows)
    std::printf("%s\n", nlohmann::json{{"kernel", r.kernel}, {"shape", r.shape}, {"unit", r.unit},
                                       {"native", r.native}, {"cudnn", r.cudnn}, {"peak", r.peak}}
                            .dump()
                            .c_str());
}

int run() {
  if (cu::device_count() == 0) {
    std::printf("no CUDA GPU visible: nothing to measure (%s)\n", cu::describe_device(0).c_str());
    return 0;
  }
  std::printf("device: %s; %s; cuDNN %d\n\n", cu::describe_device(0).c_str(), cu::cuda_versions().c_str(),
              cu::cudnn_version());
  // One scratch buffer, grown when a call needs more (old ones kept until the end, since work in
  // flight may use them): no allocation inside a timed call once warmed up.
  std::vector<void*> scratch;
  size_t scratch_bytes = 0;
  const cu::WorkspaceFn ws = [&](size_t bytes) {
    if (bytes > scratch_bytes) {
      scratch.push_back(cu::device_malloc(bytes, 0));
      if (!scratch.back()) throw Error(fmt::format("out of GPU memory for a {} byte cuDNN workspace", bytes));
      scratch_bytes = bytes;
    }
    return scratch.back();
  };

  // Peaks measured here, in the same run.
  const size_t copy_n = size_t(1) << 28;  // 1 GiB of floats... as bytes: 256 Mi floats
  Buffer src(copy_n, DType::f32), dst(copy_n, DType::f32);
  const double copy_ms = time_ms([&] { cu::copy_device_to_device(dst.ptr, src.ptr, copy_n * 4, nullptr); });
  const double bandwidth = 2.0 * double(copy_n * 4) / (copy_ms * 1e-3) / 1e9;  // GB/s, read + write
  const int64_t g = 8192;
  Buffer ga(size_t(g * g), DType::f16), gb(size_t(g * g), DType::f16), gc(size_t(g * g), DType::f16);
  const double gemm_ms = time_ms([&] { cu::linear_forward(g, g, g, DType::f16, ga.ptr, gb.ptr, nullptr, gc.ptr, nullptr); });
  const double tflops = 2.0 * double(g) * g * g / (gemm_ms * 1e-3) / 1e12;
  std::printf("measured peaks: copy %.0f GB/s (read + write), fp16 GEMM %.0f TFLOP/s\n\n", bandwidth, tflops);

  std::vector<Row> rows;
  const cu::Conv2dShape layers[] = {{256, 3, 32, 32, 64, 3, 3, 1, 1},    {256, 64, 32, 32, 64, 3, 3, 1, 1},
                                    {256, 64, 32, 32, 128, 3, 3, 2, 1},  {256, 64, 32, 32, 128, 1, 1, 2, 0},
                                    {256, 128, 16, 16, 128, 3, 3, 1, 1}, {256, 128, 16, 16, 256, 3, 3, 2, 1},
                                    {256, 128, 16, 16, 256, 1, 1, 2, 0}, {256, 256, 8, 8, 256, 3, 3, 1, 1}};
  for (DType t : {DType::f16, DType::f32}) {
    for (const cu::Conv2dShape& s : layers) {
      const size_t nx = size_t(s.n * s.c_in * s.h * s.w), nw = size_t(s.c_out * s.c_in * s.kh * s.kw);
      const size_t ny = size_t(s.n * s.c_out * s.out_h() * s.out_w());
      Buffer x(nx, t), w(nw, t), y(ny, t), dy(ny, t), dx(nx, t), dw(nw, t);
      const double flop = 2.0 * double(ny) * double(s.c_in * s.kh * s.kw);
      const std::string shape = fmt::format("{} {}x{}x{} -> {} k{} s{}", dtype_name(t), s.c_in, s.h, s.w, s.c_out,
                                            s.kh, s.stride);
      auto tf = [&](double ms) { return flop / (ms * 1e-3) / 1e12; };
      rows.push_back({"conv forward", shape, "TFLOP/s",
                      tf(time_ms([&] { cu::conv2d_native_forward(s, t, x.ptr, w.ptr, nullptr, y.ptr, nullptr); })),
                      tf(time_ms([&] { cu::conv2d_cudnn_forward(s, t, x.ptr, w.ptr, nullptr, y.ptr, ws, nullptr); })),
                      tflops});
      rows.push_back({"conv backward-data", shape, "TFLOP/s",
                      tf(time_ms([&] { cu::conv2d_native_backward_data(s, t, dy.ptr, w.ptr, dx.ptr, nullptr); })),
                      tf(time_ms([&] { cu::conv2d_cudnn_backward_data(s, t, dy.ptr, w.ptr, dx.ptr, ws, nullptr); })),
                      tflops});
      rows.push_back(
          {"conv backward-filter", shape, "TFLOP/s",
           tf(time_ms([&] { cu::conv2d_native_backward_filter(s, t, x.ptr, dy.ptr, dw.ptr, nullptr, nullptr); })),
           tf(time_ms([&] { cu::conv2d_cudnn_backward_filter(s, t, x.ptr, dy.ptr, dw.ptr, nullptr, ws, nullptr); })),
           tflops});
    }
  }
  // Batch norm and elementwise at stage 1's activation size, fp16, in GB/s of the bytes that must move.
  const cu::BatchNormShape bs{256, 64, 32 * 32};
  const size_t n = size_t(bs.n * bs.c * bs.hw), bytes = n * 2;
  Buffer x(n, DType::f16), y(n, DType::f16), dy(n, DType::f16), dx(n, DType::f16), p(4 * 64, DType::f32);
  float* pf = static_cast<float*>(p.ptr);
  auto gbs = [&](double moved, double ms) { return moved / (ms * 1e-3) / 1e9; };
  rows.push_back({"batch norm forward (train)", "f16 256x64x32x32", "GB/s",
                  gbs(2.0 * bytes, time_ms([&] {
                        cu::batchnorm_forward_train(bs, DType::f16, x.ptr, pf, pf + 64, 1e-5f, 0.1f, pf + 128, pf + 192,
                                                    y.ptr, pf + 128, pf + 192, cu::Activation::relu, nullptr);
                      })),
                  gbs(2.0 * bytes, time_ms([&] {
                        cu::batchnorm_cudnn_forward_train(bs, DType::f16, x.ptr, pf, pf + 64, 1e-5f, 0.1f, pf + 128,
                                                          pf + 192, y.ptr, pf + 128, pf + 192, cu::Activation::relu,
                                                          nullptr);
                      })),
                  bandwidth});
  rows.push_back({"batch norm backward", "f16 256x64x32x32", "GB/s",
                  gbs(3.0 * bytes, time_ms([&] {
                        cu::batchnorm_backward_train(bs, DType::f16, dy.ptr, x.ptr, pf, pf + 128, pf + 192, dx.ptr,
                                                     pf + 64, pf + 64, nullptr, nullptr);
                      })),
                  gbs(3.0 * bytes, time_ms([&] {
                        cu::batchnorm_cudnn_backward_train(bs, DType::f16, dy.ptr, x.ptr, pf, pf + 128, pf + 192, 1e-5f,
                                                           dx.ptr, pf + 64, pf + 64, nullptr, ws, nullptr);
                      })),
                  bandwidth});
  rows.push_back({"add_relu", "f16 256x64x32x32", "GB/s",
                  gbs(3.0 * bytes, time_ms([&] { cu::add_relu(int64_t(n), DType::f16, x.ptr, dy.ptr, y.ptr, nullptr); })),
                  0, bandwidth});
  rows.push_back({"relu backward", "f16 256x64x32x32", "GB/s",
                  gbs(3.0 * bytes, time_ms([&] { cu::relu_backward(int64_t(n), DType::f16, dy.ptr, y.ptr, dx.ptr, nullptr); })),
                  0, bandwidth});
  print(rows);
  cu::synchronize_stream(nullptr);
  for (void* s : scratch) cu::device_free(s, 0);
  return 0;
}

}  // namespace
}  // namespace cg

int main() {
  try {
    return cg::run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_kernels_bench: %s\n", e.what());
    return 1;
  }
}
