// Times the CPU batch-norm kernels (training forward and backward, float32, NCHW) on every
// MiniResNet batch-norm shape (batch 64, 32x32 input), with the residual + ReLU fusion where the
// network has it, the median of several runs after warm-up, and the total for one training step's
// batch norms. Made to measure the cost of the statistics' accumulation (issue 26: double
// accumulation as PyTorch's). Times are process CPU time by default (steady on a shared machine),
// or elapsed time with `wall`. Usage: cpu_batch_norm_bench [batch] [runs] [cpu|wall]
#include <fmt/format.h>
#include <omp.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "kernels/cpu/batch_norm.h"

namespace {

using namespace cg::bench;
using cg::Activation;
using cg::kernels::BatchNormShape;

struct Layer {
  const char* name;
  int64_t channels, size;
  int count;  // batch norms of this shape in one MiniResNet (widths 64/128/256, 2 blocks each)
};

const Layer kLayers[] = {
    {"64 @32", 64, 32, 5},    // stem, layer1's 4
    {"128 @16", 128, 16, 5},  // layer2: 4 and the downsample's
    {"256 @8", 256, 8, 5},    // layer3: 4 and the downsample's
};

std::vector<float> random_floats(size_t n, float mean, float sd, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(mean, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 64;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 15;
  if (argc > 3 && std::string(argv[3]) == "wall") timing_clock = CLOCK_MONOTONIC;
  fmt::print("CPU batch norm, float32 NCHW, batch {}, {} thread(s), median of {} runs ({} time)\n", batch,
             omp_get_max_threads(), runs, timing_clock == CLOCK_MONOTONIC ? "wall" : "CPU");
  fmt::print("{:<10} {:>12} {:>12} {:>14} {:>14}\n", "layer", "forward ms", "backward ms", "fwd+relu+res", "bwd+relu+res");
  double step_ms = 0;
  for (const Layer& l : kLayers) {
    const BatchNormShape s{batch, l.channels, l.size * l.size};
    const size_t n = size_t(s.n * s.c * s.hw), c = size_t(s.c);
    const std::vector<float> x = random_floats(n, 0.5f, 2.f, 1), dy = random_floats(n, 0.f, 1.f, 2),
                             residual = random_floats(n, 0.f, 1.f, 3), gamma = random_floats(c, 1.f, 0.1f, 4),
                             beta = random_floats(c, 0.f, 0.1f, 5);
    std::vector<float> y(n), dx(n), dres(n), rm(c, 0.f), rv(c, 1.f), mean(c), invstd(c), dgamma(c), dbeta(c);
    auto forward = [&](Activation act, const float* r) {
      cg::kernels::cpu::batch_norm_forward_train<float>(s, x.data(), gamma.data(), beta.data(), 1e-5f, 0.1f, rm.data(),
                                                       rv.data(), y.data(), mean.data(), invstd.data(), act, r);
    };
    auto backward = [&](const float* relu_y, float* d_residual) {
      cg::kernels::cpu::batch_norm_backward_train<float>(s, dy.data(), x.data(), gamma.data(), mean.data(),
                                                        invstd.data(), dx.data(), dgamma.data(), dbeta.data(), relu_y,
                                                        d_residual);
    };
    const std::vector<double> ms = median_ms(2, runs, {
        [&] { forward(Activation::none, nullptr); },
        [&] { backward(nullptr, nullptr); },
        [&] { forward(Activation::relu, residual.data()); },
        [&] { backward(y.data(), dres.data()); },
    });
    fmt::print("{:<10} {:>12.3f} {:>12.3f} {:>14.3f} {:>14.3f}\n", l.name, ms[0], ms[1], ms[2], ms[3]);
    step_ms += l.count * (ms[0] + ms[1]);
  }
  fmt::print("one training step's batch norms (plain forward + backward): {:.2f} ms\n", step_ms);
  return 0;
}
