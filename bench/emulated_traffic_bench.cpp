// What each hand-written kernel call of the kernel benchmark (gpu_kernels_bench) asks of device
// memory, counted on the emulated GPU (cg_emu/traffic.h; issue 37 item 6): per call, its launches
// with their grids, warp-wide requests, sectors, coalescing, footprint and WMMA flops. The same
// rows as the benchmark, named alike, so scripts/perf_model.py can predict each row's time on a
// device from these counts and set it beside the time a lease measured. Emulated build only (it
// links the instrumented kernels); one JSON line per row on stdout, a summary on stderr.
//
//   emulated_traffic_bench [conv_batch=4] [batch_norm_batch=256]
//
// Convolutions run at conv_batch and are reported scaled to batch 256 (their grids, requests and
// flops grow with the batch; the weights' share, small, is scaled with them); batch norm runs at
// its own batch (256, the benchmark's, by default: a few minutes).
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/gpu_bench_common.h"
#include "cg_emu/traffic.h"
#include "kernels/cuda/batch_norm.h"
#include "kernels/cuda/conv_native.h"
#include "kernels/cuda/elementwise.h"

namespace cg {
namespace {
namespace cu = kernels::cuda;
using Buffer = bench::GpuBuffer;
using nlohmann::json;

json traffic(const cg_emu::MemoryTraffic& m, double scale) {
  return {{"requests", double(m.requests) * scale},      {"bytes", double(m.bytes) * scale},
          {"sectors", double(m.sectors) * scale},        {"least_sectors", double(m.least_sectors) * scale},
          {"footprint_sectors", double(m.footprint_sectors) * scale}};
}

// One row: fn's launches, recorded, counts multiplied by `scale`.
void row(const std::string& kernel, const std::string& shape, double scale, const std::function<void()>& fn) {
  cg_emu::start_traffic_recording();
  fn();
  const std::vector<cg_emu::LaunchTraffic> launches = cg_emu::stop_traffic_recording();
  json out{{"kernel", kernel}, {"shape", shape}, {"scale", scale}, {"launches", json::array()}};
  double footprint = 0;
  for (const cg_emu::LaunchTraffic& l : launches) {
    out["launches"].push_back({{"name", l.kernel},
                               {"entry_object", l.entry_object},
                               {"entry_offset", l.entry_offset},
                               {"blocks", double(l.blocks()) * scale},
                               {"threads_per_block", l.threads_per_block()},
                               {"shared_bytes", l.dynamic_shared_bytes + l.static_shared_bytes},
                               {"loads", traffic(l.loads, scale)},
                               {"stores", traffic(l.stores, scale)},
                               {"mma_flops", double(l.mma_flops) * scale}});
    footprint += 32.0 * double(l.loads.footprint_sectors + l.stores.footprint_sectors) * scale;
  }
  std::printf("%s\n", out.dump().c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "%-42s %-28s %zu launches, %8.1f MB footprint\n", kernel.c_str(), shape.c_str(),
               launches.size(), footprint / 1e6);
}

int run(int64_t conv_batch, int64_t bn_batch) {
  if (!cg_emu::traffic_hooks_built()) {
    std::fprintf(stderr, "emulated_traffic_bench: this build has no access hooks (CUDAGRAD_EMU_ACCESS_CHECKS=OFF)\n");
    return 1;
  }
  std::vector<void*> scratch;
  const cu::WorkspaceFn ws = [&](size_t bytes) {
    scratch.push_back(cu::device_malloc(bytes, 0));
    return scratch.back();
  };
  const double conv_scale = 256.0 / double(conv_batch);
  for (DType t : {DType::f16, DType::f32})
    for (const cu::Conv2dShape& s : bench::miniresnet_convolutions(conv_batch)) {
      const size_t nx = size_t(s.n * s.c_in * s.h * s.w), nw = size_t(s.c_out * s.c_in * s.kh * s.kw);
      const size_t ny = size_t(s.n * s.c_out * s.out_h() * s.out_w());
      Buffer x(nx, t), w(nw, t), y(ny, t), dy(ny, t), dx(nx, t), dw(nw, t);
      const std::string shape = bench::conv_shape_name(s, t);
      row("conv forward", shape, conv_scale, [&] { cu::conv2d_native_forward(s, t, x.ptr, w.ptr, nullptr, y.ptr, nullptr); });
      row("conv backward-data", shape, conv_scale, [&] { cu::conv2d_native_backward_data(s, t, dy.ptr, w.ptr, dx.ptr, nullptr); });
      row("conv backward-filter", shape, conv_scale,
          [&] { cu::conv2d_native_backward_filter(s, t, x.ptr, dy.ptr, dw.ptr, nullptr, ws, nullptr); });
    }
  const double bn_scale = 256.0 / double(bn_batch);
  for (auto [c, hw] : bench::kBatchNormStages)
    for (bool channels_last : {false, true}) {
      const cu::BatchNormShape bs = bench::batch_norm_shape(bn_batch, c, hw, channels_last);
      const size_t n = size_t(bs.n * bs.c * bs.hw);
      const std::string shape = bench::batch_norm_shape_name(256, c, hw, channels_last);
      Buffer x(n, DType::f16), y(n, DType::f16), dy(n, DType::f16), dx(n, DType::f16), r(n, DType::f16), dr(n, DType::f16);
      Buffer gamma(size_t(c), DType::f32), beta(size_t(c), DType::f32), run_mean(size_t(c), DType::f32),
          run_var(size_t(c), DType::f32), save_mean(size_t(c), DType::f32), save_invstd(size_t(c), DType::f32),
          dgamma(size_t(c), DType::f32), dbeta(size_t(c), DType::f32);
      auto f = [](Buffer& b) { return static_cast<float*>(b.ptr); };
      for (const bool residual : {false, true}) {
        row(residual ? "batch norm + add + relu forward (train)" : "batch norm + relu forward (train)", shape, bn_scale, [&] {
          cu::batch_norm_forward_train(bs, DType::f16, x.ptr, f(gamma), f(beta), 1e-5f, 0.1f, f(run_mean), f(run_var),
                                       y.ptr, f(save_mean), f(save_invstd), cu::Activation::relu,
                                       residual ? r.ptr : nullptr, ws, nullptr);
        });
        row(residual ? "batch norm + add + relu backward" : "batch norm + relu backward", shape, bn_scale, [&] {
          cu::batch_norm_backward_train(bs, DType::f16, dy.ptr, x.ptr, f(gamma), f(save_mean), f(save_invstd), dx.ptr,
                                        f(dgamma), f(dbeta), y.ptr, residual ? dr.ptr : nullptr, ws, nullptr);
        });
      }
      if (channels_last) continue;
      const int64_t ni = int64_t(n);
      row("relu forward", shape, bn_scale, [&] { cu::relu_forward(ni, DType::f16, x.ptr, y.ptr, nullptr); });
      row("relu backward", shape, bn_scale, [&] { cu::relu_backward(ni, DType::f16, dy.ptr, y.ptr, dx.ptr, nullptr); });
      row("add_relu", shape, bn_scale, [&] { cu::add_relu(ni, DType::f16, x.ptr, dy.ptr, y.ptr, nullptr); });
    }
  cu::synchronize_stream(nullptr);
  for (void* p : scratch) cu::device_free(p, 0);
  return 0;
}

}  // namespace
}  // namespace cg

int main(int argc, char** argv) {
  try {
    const long conv_batch = argc > 1 ? std::atol(argv[1]) : 4, bn_batch = argc > 2 ? std::atol(argv[2]) : 256;
    if (conv_batch <= 0 || bn_batch <= 0) {
      std::fprintf(stderr, "usage: emulated_traffic_bench [conv_batch=4] [batch_norm_batch=256] (positive)\n");
      return 2;
    }
    return cg::run(conv_batch, bn_batch);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "emulated_traffic_bench: %s\n", e.what());
    return 1;
  }
}
