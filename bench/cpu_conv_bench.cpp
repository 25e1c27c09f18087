// Times the CPU convolution kernels on every MiniResNet conv layer shape (batch 64, 32x32 input):
// forward, backward-data and backward-filter, each the median of several runs after warm-up, in
// ms and GFLOP/s, plus the total for one training step's convolutions. bench/pytorch/conv_layers.py
// prints the same table for PyTorch. Usage: cpu_conv_bench [batch] [runs].
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/conv2d.h"

namespace {

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

template <typename F>
double median_ms(int warmup, int runs, F&& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::vector<float> random_vector(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  namespace k = cg::kernels::cpu;
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 64;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 7, warmup = 2;
  fmt::print("cudagrad CPU conv kernels, fp32, threads {}, batch {}\n", omp_get_max_threads(), batch);
  fmt::print("{:38s} {:>8s} {:>6s} {:>12s} {:>6s} {:>14s} {:>6s}\n", "layer", "fwd ms", "GF/s",
             "bwd-data ms", "GF/s", "bwd-filter ms", "GF/s");
  double step_ms = 0, step_gflop = 0;
  for (const Layer& l : kLayers) {
    const Conv2dShape s{batch, l.c_in, l.size, l.size, l.c_out, l.kernel, l.kernel, l.stride, l.pad};
    const size_t xn = size_t(s.n * s.c_in * s.h * s.w), wn = size_t(s.c_out * s.c_in * s.kh * s.kw);
    const size_t yn = size_t(s.n * s.c_out * s.out_h() * s.out_w());
    const auto x = random_vector(xn, 1), w = random_vector(wn, 2), dy = random_vector(yn, 3);
    std::vector<float> y(yn), dx(xn), dw(wn);
    const double gflop = 2.0 * double(yn) * double(s.c_in * s.kh * s.kw) / 1e9;
    const double f = median_ms(warmup, runs, [&] { k::conv2d_forward<float>(s, x.data(), w.data(), nullptr, y.data()); });
    const double d = median_ms(warmup, runs, [&] { k::conv2d_backward_data<float>(s, dy.data(), w.data(), dx.data()); });
    const double g = median_ms(warmup, runs, [&] {
      k::conv2d_backward_filter<float>(s, x.data(), dy.data(), dw.data(), nullptr);
    });
    fmt::print("{:38s} {:8.2f} {:6.0f} {:12.2f} {:6.0f} {:14.2f} {:6.0f}  x{}\n", l.name, f, gflop / f * 1e3, d,
               gflop / d * 1e3, g, gflop / g * 1e3, l.count);
    const bool stem = std::string(l.name).starts_with("stem");  // the stem's input needs no gradient
    step_ms += l.count * (f + g + (stem ? 0 : d));
    step_gflop += l.count * gflop * (stem ? 2 : 3);
  }
  fmt::print("one training step's convolutions: {:.1f} ms, {:.1f} GFLOP, {:.0f} GFLOP/s\n", step_ms, step_gflop,
             step_gflop / step_ms * 1e3);
  return 0;
}
