// The kernel benchmark (issues 3 and 5): each hand-written kernel against cuDNN on MiniResNet's
// layer shapes at batch 256, next to the device's peaks measured in the same run (device-to-device
// copy bandwidth counting bytes read plus written; large f16, bf16 and f32 cuBLAS products). CUDA
// events around each call, warm-up first, median of repeats, random inputs. Prints a markdown
// table, then one JSON line per row. Without a GPU it says so and exits 0.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/gpu_bench_common.h"
#include "engine/stream.h"
#include "kernels/cuda/batch_norm.h"
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

using Buffer = bench::GpuBuffer;

// Median milliseconds of fn over `reps` timed calls after `warmup` untimed ones.
double time_ms(const std::function<void()>& fn, int warmup = 3, int reps = 20) {
  const Stream s(Device::cuda(0), nullptr);
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    Event a = Event::create(Device::cuda(0), {.timing = true}), b = Event::create(Device::cuda(0), {.timing = true});
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

  // Peaks measured here, in the same run: a 1 GiB device-to-device copy, and a large cuBLAS
  // product per dtype (f32 goes wherever cuBLAS's default math mode sends it).
  const size_t copy_n = size_t(1) << 28;  // floats: 1 GiB each way
  Buffer src(copy_n, DType::f32), dst(copy_n, DType::f32);
  const double copy_ms = time_ms([&] { cu::copy_device_to_device(dst.ptr, src.ptr, copy_n * 4, nullptr); });
  const double bandwidth = 2.0 * double(copy_n * 4) / (copy_ms * 1e-3) / 1e9;  // GB/s, read + write
  std::map<DType, double> gemm_peak;  // TFLOP/s
  for (DType t : {DType::f16, DType::bf16, DType::f32}) {
    const int64_t g = 8192;
    Buffer a(size_t(g * g), t), b(size_t(g * g), t), c(size_t(g * g), t);
    const double ms = time_ms([&] { cu::linear_cublas_forward(g, g, g, t, a.ptr, b.ptr, nullptr, c.ptr, nullptr, {}); });
    gemm_peak[t] = 2.0 * double(g) * g * g / (ms * 1e-3) / 1e12;
  }
  std::printf("measured peaks: copy %.0f GB/s (read + write); GEMM 8192^3 f16 %.0f, bf16 %.0f, f32 %.0f TFLOP/s\n\n",
              bandwidth, gemm_peak[DType::f16], gemm_peak[DType::bf16], gemm_peak[DType::f32]);

  std::vector<Row> rows;
  const std::vector<cu::Conv2dShape> layers = bench::miniresnet_convolutions(256);
  for (DType t : {DType::f16, DType::f32}) {
    for (const cu::Conv2dShape& s : layers) {
      const size_t nx = size_t(s.n * s.c_in * s.h * s.w), nw = size_t(s.c_out * s.c_in * s.kh * s.kw);
      const size_t ny = size_t(s.n * s.c_out * s.out_h() * s.out_w());
      Buffer x(nx, t), w(nw, t), y(ny, t), dy(ny, t), dx(nx, t), dw(nw, t);
      const double flop = 2.0 * double(ny) * double(s.c_in * s.kh * s.kw);
      const std::string shape = bench::conv_shape_name(s, t);
      auto tf = [&](double ms) { return flop / (ms * 1e-3) / 1e12; };
      rows.push_back({"conv forward", shape, "TFLOP/s",
                      tf(time_ms([&] { cu::conv2d_native_forward(s, t, x.ptr, w.ptr, nullptr, y.ptr, nullptr); })),
                      tf(time_ms([&] { cu::conv2d_cudnn_forward(s, t, x.ptr, w.ptr, nullptr, y.ptr, ws, nullptr); })),
                      gemm_peak[t]});
      rows.push_back({"conv backward-data", shape, "TFLOP/s",
                      tf(time_ms([&] { cu::conv2d_native_backward_data(s, t, dy.ptr, w.ptr, dx.ptr, nullptr); })),
                      tf(time_ms([&] { cu::conv2d_cudnn_backward_data(s, t, dy.ptr, w.ptr, dx.ptr, ws, nullptr); })),
                      gemm_peak[t]});
      rows.push_back(
          {"conv backward-filter", shape, "TFLOP/s",
           tf(time_ms([&] { cu::conv2d_native_backward_filter(s, t, x.ptr, dy.ptr, dw.ptr, nullptr, ws, nullptr); })),
           tf(time_ms([&] { cu::conv2d_cudnn_backward_filter(s, t, x.ptr, dy.ptr, dw.ptr, nullptr, ws, nullptr); })),
           gemm_peak[t]});
    }
  }
  // Batch norm (with its fused ReLU) and the elementwise kernels at each stage's activation size
  // of the 32x32 model, fp16, in GB/s of the bytes that must move at least once.
  auto gbs = [](double moved, double ms) { return moved / (ms * 1e-3) / 1e9; };
  for (auto [c, hw] : bench::kBatchNormStages)
    for (bool channels_last : {false, true}) {
      const cu::BatchNormShape bs = bench::batch_norm_shape(256, c, hw, channels_last);
      const size_t n = size_t(bs.n * bs.c * bs.hw), bytes = n * 2;
      const std::string shape = bench::batch_norm_shape_name(256, c, hw, channels_last);
      Buffer x(n, DType::f16), y(n, DType::f16), dy(n, DType::f16), dx(n, DType::f16), r(n, DType::f16),
          dr(n, DType::f16);
      // Per-channel float vectors, each its own buffer so no kernel reads what another output aliases.
      Buffer gamma(size_t(c), DType::f32), beta(size_t(c), DType::f32), run_mean(size_t(c), DType::f32),
          run_var(size_t(c), DType::f32), save_mean(size_t(c), DType::f32), save_invstd(size_t(c), DType::f32),
          dgamma(size_t(c), DType::f32), dbeta(size_t(c), DType::f32);
      auto f = [](Buffer& b) { return static_cast<float*>(b.ptr); };
      const bool has_cudnn = cu::batch_norm_cudnn_supports(bs, DType::f16);
      // Train forward reads x and writes y (its statistics pass is the kernel's own business).
      const double fwd = gbs(2.0 * bytes, time_ms([&] {
        cu::batch_norm_forward_train(bs, DType::f16, x.ptr, f(gamma), f(beta), 1e-5f, 0.1f, f(run_mean), f(run_var),
                                    y.ptr, f(save_mean), f(save_invstd), cu::Activation::relu, nullptr, ws, nullptr);
      }));
      const double fwd_cudnn = !has_cudnn ? 0 : gbs(2.0 * bytes, time_ms([&] {
        cu::batch_norm_cudnn_forward_train(bs, DType::f16, x.ptr, f(gamma), f(beta), 1e-5f, 0.1f, f(run_mean),
                                          f(run_var), y.ptr, f(save_mean), f(save_invstd), cu::Activation::relu,
                                          nullptr, nullptr);
      }));
      rows.push_back({"batch norm + relu forward (train)", shape, "GB/s", fwd, fwd_cudnn, bandwidth});
      // With the residual: reads x and r, writes y.
      const double fwd_add = gbs(3.0 * bytes, time_ms([&] {
        cu::batch_norm_forward_train(bs, DType::f16, x.ptr, f(gamma), f(beta), 1e-5f, 0.1f, f(run_mean), f(run_var),
                                    y.ptr, f(save_mean), f(save_invstd), cu::Activation::relu, r.ptr, ws, nullptr);
      }));
      rows.push_back({"batch norm + add + relu forward (train)", shape, "GB/s", fwd_add, 0, bandwidth});
      // Backward reads dy, x and the ReLU output y, writes dx.
      const double bwd = gbs(4.0 * bytes, time_ms([&] {
        cu::batch_norm_backward_train(bs, DType::f16, dy.ptr, x.ptr, f(gamma), f(save_mean), f(save_invstd), dx.ptr,
                                     f(dgamma), f(dbeta), y.ptr, nullptr, ws, nullptr);
      }));
      const double bwd_cudnn = !has_cudnn ? 0 : gbs(4.0 * bytes, time_ms([&] {
        cu::batch_norm_cudnn_backward_train(bs, DType::f16, dy.ptr, x.ptr, f(gamma), f(save_mean), f(save_invstd),
                                           1e-5f, dx.ptr, f(dgamma), f(dbeta), y.ptr, nullptr, ws, nullptr);
      }));
      rows.push_back({"batch norm + relu backward", shape, "GB/s", bwd, bwd_cudnn, bandwidth});
      // With the residual: also writes the residual's gradient.
      const double bwd_add = gbs(5.0 * bytes, time_ms([&] {
        cu::batch_norm_backward_train(bs, DType::f16, dy.ptr, x.ptr, f(gamma), f(save_mean), f(save_invstd), dx.ptr,
                                     f(dgamma), f(dbeta), y.ptr, dr.ptr, ws, nullptr);
      }));
      rows.push_back({"batch norm + add + relu backward", shape, "GB/s", bwd_add, 0, bandwidth});
      if (channels_last) continue;  // the elementwise kernels do not care about the layout
      const int64_t ni = int64_t(n);
      const double relu = time_ms([&] { cu::relu_forward(ni, DType::f16, x.ptr, y.ptr, nullptr); });
      const double relu_bwd = time_ms([&] { cu::relu_backward(ni, DType::f16, dy.ptr, y.ptr, dx.ptr, nullptr); });
      const double add_relu = time_ms([&] { cu::add_relu(ni, DType::f16, x.ptr, dy.ptr, y.ptr, nullptr); });
      rows.push_back({"relu forward", shape, "GB/s", gbs(2.0 * bytes, relu), 0, bandwidth});
      rows.push_back({"relu backward", shape, "GB/s", gbs(3.0 * bytes, relu_bwd), 0, bandwidth});
      rows.push_back({"add_relu", shape, "GB/s", gbs(3.0 * bytes, add_relu), 0, bandwidth});
    }
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
