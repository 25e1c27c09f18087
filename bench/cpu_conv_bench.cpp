// Times the CPU convolution kernels on every MiniResNet conv layer shape (batch 64, 32x32 input):
// forward, backward-data and backward-filter, each the median of several runs after warm-up, in
// ms and GFLOP/s (the direct convolution's FLOPs), plus the total for one training step's
// convolutions; and the core's FMA peak, measured. Times are the process's CPU time (so a loaded
// machine still gives usable per-core figures; run it with OMP_NUM_THREADS=1 and taskset for a
// single core), or with `wall` elapsed time: the figure to set beside PyTorch's on several threads. The 3x3 stride-1
// layers run im2col, Winograd F(4x4) (wino), the direct kernel and Winograd F(2x2) (wino2), alternating run by run, so
// they share the same machine state. bench/pytorch/conv_layers.py prints the im2col table's
// counterpart for PyTorch. Usage: cpu_conv_bench [batch] [runs] [full|narrow] [cpu|wall] [filter]
// (narrow: the 16/32/64-channel Fashion-MNIST network's layers instead of the full MiniResNet's;
// filter: only the layers whose name contains it, e.g. "s2" or "layer3.0.conv1", for perf).
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "kernels/cpu_conv/im2col.h"
#include "kernels/cpu_conv/conv_direct.h"
#include "kernels/cpu_conv/winograd.h"

namespace {

using namespace cg::bench;
using cg::kernels::Conv2dShape;

struct Layer {
  const char* name;
  int64_t c_in, size, c_out, kernel, stride, pad;
  int count;  // how many convolutions of this shape one MiniResNet has
};

// Same list, same order as bench/pytorch/conv_layers.py.
const Layer kLayers[] = {
    {"stem 3->64 3x3 s1 @32", 3, 32, 64, 3, 1, 1, 1},
    {"layer1 64->64 3x3 s1 @32", 64, 32, 64, 3, 1, 1, 4},
    {"layer2.0.conv1 64->128 3x3 s2 @32", 64, 32, 128, 3, 2, 1, 1},
    {"layer2.0.down 64->128 1x1 s2 @32", 64, 32, 128, 1, 2, 0, 1},
    {"layer2 128->128 3x3 s1 @16", 128, 16, 128, 3, 1, 1, 3},
    {"layer3.0.conv1 128->256 3x3 s2 @16", 128, 16, 256, 3, 2, 1, 1},
    {"layer3.0.down 128->256 1x1 s2 @16", 128, 16, 256, 1, 2, 0, 1},
    {"layer3 256->256 3x3 s1 @8", 256, 8, 256, 3, 1, 1, 3},
};

// The full MiniResNet on 1x28x28 images (bench/step_bound.sh, bench/cpu_compare.sh --net full).
const Layer kFull28Layers[] = {
    {"stem 1->64 3x3 s1 @28", 1, 28, 64, 3, 1, 1, 1},
    {"layer1 64->64 3x3 s1 @28", 64, 28, 64, 3, 1, 1, 4},
    {"layer2.0.conv1 64->128 3x3 s2 @28", 64, 28, 128, 3, 2, 1, 1},
    {"layer2.0.down 64->128 1x1 s2 @28", 64, 28, 128, 1, 2, 0, 1},
    {"layer2 128->128 3x3 s1 @14", 128, 14, 128, 3, 1, 1, 3},
    {"layer3.0.conv1 128->256 3x3 s2 @14", 128, 14, 256, 3, 2, 1, 1},
    {"layer3.0.down 128->256 1x1 s2 @14", 128, 14, 256, 1, 2, 0, 1},
    {"layer3 256->256 3x3 s1 @7", 256, 7, 256, 3, 1, 1, 3},
};

// The narrow network that scripts/train.sh trains on the CPU (configs/fashion_mnist_cpu.yaml:
// widths 16/32/64, 1x28x28 images; batch 64 there).
const Layer kNarrowLayers[] = {
    {"stem 1->16 3x3 s1 @28", 1, 28, 16, 3, 1, 1, 1},
    {"layer1 16->16 3x3 s1 @28", 16, 28, 16, 3, 1, 1, 4},
    {"layer2.0.conv1 16->32 3x3 s2 @28", 16, 28, 32, 3, 2, 1, 1},
    {"layer2.0.down 16->32 1x1 s2 @28", 16, 28, 32, 1, 2, 0, 1},
    {"layer2 32->32 3x3 s1 @14", 32, 14, 32, 3, 1, 1, 3},
    {"layer3.0.conv1 32->64 3x3 s2 @14", 32, 14, 64, 3, 2, 1, 1},
    {"layer3.0.down 32->64 1x1 s2 @14", 32, 14, 64, 1, 2, 0, 1},
    {"layer3 64->64 3x3 s1 @7", 64, 7, 64, 3, 1, 1, 3},
};

}  // namespace

int main(int argc, char** argv) {
  namespace k = cg::kernels::cpu;
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 64;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 7, warmup = 2;
  const std::string network = argc > 3 ? argv[3] : "full";
  const std::string clock = argc > 4 ? argv[4] : "cpu";
  const std::string filter = argc > 5 ? argv[5] : "";
  if (network != "full" && network != "full28" && network != "narrow") {
    fmt::print(stderr, "cpu_conv_bench: unknown network '{}' (full, full28 or narrow)\n", network);
    return 2;
  }
  if (clock != "cpu" && clock != "wall") {
    fmt::print(stderr, "cpu_conv_bench: unknown clock '{}' (cpu or wall)\n", clock);
    return 2;
  }
  if (clock == "wall") timing_clock = CLOCK_MONOTONIC;
  const std::vector<Layer> layers =
      network == "full"     ? std::vector<Layer>(std::begin(kLayers), std::end(kLayers))
      : network == "full28" ? std::vector<Layer>(std::begin(kFull28Layers), std::end(kFull28Layers))
                            : std::vector<Layer>(std::begin(kNarrowLayers), std::end(kNarrowLayers));
  fmt::print("cudagrad CPU conv kernels, fp32, threads {}, batch {}; {}\n", omp_get_max_threads(), batch,
             clock == "wall" ? "elapsed ms" : "CPU ms (all threads' CPU time)");
  fmt::print("FMA peak of one core (measured): {:.1f} GFLOP/s\n", fma_peak_gflops());
  fmt::print("{:38s} {:>5s} {:>8s} {:>6s} {:>12s} {:>6s} {:>14s} {:>6s}\n", "layer", "algo", "fwd ms", "GF/s",
             "bwd-data ms", "GF/s", "bwd-filter ms", "GF/s");
  // Step totals: im2col everywhere; each other algorithm where it applies (im2col elsewhere); and
  // the fastest per layer and phase.
  constexpr int kCount = 4;
  const char* kAlgos[kCount] = {"i2c", "wino", "direct", "wino2"};
  double step_ms[kCount + 1] = {}, step_gflop = 0;
  for (const Layer& l : layers) {
    if (std::string(l.name).find(filter) == std::string::npos) continue;
    const Conv2dShape s{batch, l.c_in, l.size, l.size, l.c_out, l.kernel, l.kernel, l.stride, l.pad};
    const size_t xn = size_t(s.n * s.c_in * s.h * s.w), wn = size_t(s.c_out * s.c_in * s.kh * s.kw);
    const size_t yn = size_t(s.n * s.c_out * s.out_h() * s.out_w());
    const auto x = random_vector(xn, 1), w = random_vector(wn, 2), dy = random_vector(yn, 3);
    std::vector<float> y(yn), dx(xn), dw(wn);
    const double gflop = 2.0 * double(yn) * double(s.c_in * s.kh * s.kw) / 1e9;
    const bool has[kCount] = {true, k::winograd_supports(s), k::direct_conv_supports(s), k::winograd_supports(s)};
    std::vector<std::function<void()>> fwd, data, filter;
    std::vector<int> algos;
    for (int a = 0; a < kCount; ++a) {
      if (!has[a]) continue;
      algos.push_back(a);
      fwd.push_back([&, a] {
        if (a == 0) k::im2col_conv2d_forward<float>(s, x.data(), w.data(), nullptr, y.data());
        if (a == 1) k::winograd_conv2d_forward(s, x.data(), w.data(), nullptr, y.data());
        if (a == 2) k::direct_conv2d_forward(s, x.data(), w.data(), nullptr, y.data());
        if (a == 3) k::winograd2_conv2d_forward(s, x.data(), w.data(), nullptr, y.data());
      });
      data.push_back([&, a] {
        if (a == 0) k::im2col_conv2d_backward_data<float>(s, dy.data(), w.data(), dx.data());
        if (a == 1) k::winograd_conv2d_backward_data(s, dy.data(), w.data(), dx.data());
        if (a == 2) k::direct_conv2d_backward_data(s, dy.data(), w.data(), dx.data());
        if (a == 3) k::winograd2_conv2d_backward_data(s, dy.data(), w.data(), dx.data());
      });
      filter.push_back([&, a] {
        if (a == 0) k::im2col_conv2d_backward_filter<float>(s, x.data(), dy.data(), dw.data(), nullptr);
        if (a == 1) k::winograd_conv2d_backward_filter(s, x.data(), dy.data(), dw.data(), nullptr);
        if (a == 2) k::direct_conv2d_backward_filter(s, x.data(), dy.data(), dw.data(), nullptr);
        if (a == 3) k::winograd2_conv2d_backward_filter(s, x.data(), dy.data(), dw.data(), nullptr);
      });
    }
    const auto f = median_ms(warmup, runs, fwd), d = median_ms(warmup, runs, data), g = median_ms(warmup, runs, filter);
    const bool stem = std::string(l.name).starts_with("stem");  // the stem's input needs no gradient
    double best_f = 1e30, best_d = 1e30, best_g = 1e30;
    for (size_t i = 0; i < algos.size(); ++i) {
      fmt::print("{:38s} {:>6s} {:8.2f} {:6.0f} {:12.2f} {:6.0f} {:14.2f} {:6.0f}  x{}\n", i ? "" : l.name,
                 kAlgos[algos[i]], f[i], gflop / f[i] * 1e3, d[i], gflop / d[i] * 1e3, g[i], gflop / g[i] * 1e3,
                 l.count);
      best_f = std::min(best_f, f[i]), best_d = std::min(best_d, d[i]), best_g = std::min(best_g, g[i]);
    }
    for (int a = 0; a < kCount; ++a) {
      size_t i = 0;  // the algorithm's column, or im2col's where it does not apply
      for (size_t j = 0; j < algos.size(); ++j)
        if (algos[j] == a) i = j;
      step_ms[a] += l.count * (f[i] + g[i] + (stem ? 0 : d[i]));
    }
    step_ms[kCount] += l.count * (best_f + best_g + (stem ? 0 : best_d));
    step_gflop += l.count * gflop * (stem ? 2 : 3);
  }
  fmt::print("one training step's convolutions, im2col: {:.1f} ms, {:.1f} GFLOP, {:.0f} GFLOP/s\n", step_ms[0],
             step_gflop, step_gflop / step_ms[0] * 1e3);
  fmt::print("  Winograd where it applies: {:.1f} ms ({:.2f}x)\n", step_ms[1], step_ms[0] / step_ms[1]);
  fmt::print("  direct where it applies:   {:.1f} ms ({:.2f}x)\n", step_ms[2], step_ms[0] / step_ms[2]);
  fmt::print("  F(2x2) where it applies:   {:.1f} ms ({:.2f}x)\n", step_ms[3], step_ms[0] / step_ms[3]);
  fmt::print("  fastest per layer, phase:  {:.1f} ms ({:.2f}x)\n", step_ms[kCount], step_ms[0] / step_ms[kCount]);
  return 0;
}
