// Times the packed GEMM (kernels/cpu_conv/gemm.h) on the shapes MiniResNet's CPU convolutions give it
// at batch 64 (logged from one training step of each network: Winograd's 36 per-element GEMMs,
// im2col's forward, backward-data and backward-filter), with their operand layouts, on one thread:
// GFLOP/s of each call and its share of the core's FMA peak (measured), then the FLOP-weighted
// total of each network's step. The figure the target names: 75% of the peak.
// Usage: cpu_gemm_bench [runs] [filter] (run it pinned: OMP_NUM_THREADS=1 taskset -c 1); filter:
// only the shapes whose "net issued-by" text contains it.
#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "kernels/cpu_conv/gemm.h"

namespace {

using namespace cg::bench;
namespace k = cg::kernels::cpu;

struct Shape {
  const char* net;    // full or narrow
  const char* where;  // which convolution phase issues it
  int64_t m, n, k;
  bool a_transposed, b_transposed;  // the operand is read through a transposed view
  bool accumulate;
  bool a_packed_once;  // Winograd's filters: gemm_packed_lhs with A packed before the timed calls
  int calls;  // per training step at batch 64 (all chunks and layers of this shape)
};

// From one step of `cudagrad-bench-cpu` at batch 64 with the GEMM's arguments logged (at eac1245:
// kernels.cpu_conv=auto); together these are 90%+ of each network's GEMM FLOPs. Since the
// transforms store channels innermost for planes of up to 64 tiles, Winograd forward and
// backward-data read B (the transformed input) of every layer through a transposed view, and
// backward-filter reads A (the transformed gradient) so and B straight; and the narrow network's
// first stride-2 layer no longer gives im2col's backward-data GEMM (the direct kernel runs it).
const Shape kShapes[] = {
    {"full", "winograd fwd/bwd-data layer1", 64, 192, 64, false, true, false, true, 6048},
    {"full", "winograd fwd/bwd-data layer2", 128, 48, 128, false, true, false, true, 4536},
    {"full", "winograd fwd/bwd-data layer3", 256, 48, 256, false, true, false, true, 1080},
    {"full", "winograd bwd-filter layer1", 64, 64, 64, true, false, true, false, 8640},
    {"full", "winograd bwd-filter layer2", 128, 128, 48, true, false, true, false, 1836},
    {"full", "winograd bwd-filter layer3", 256, 256, 48, true, false, false, false, 432},
    {"full", "im2col bwd-data layer2.0.conv1", 576, 512, 128, true, false, false, false, 32},
    {"full", "im2col fwd layer2.0.conv1", 128, 512, 576, false, false, false, false, 32},
    {"full", "im2col fwd layer3.0.conv1", 256, 512, 1152, false, false, false, false, 8},
    {"full", "im2col bwd-filter layer3.0.conv1", 256, 1152, 512, false, true, false, false, 8},
    {"full", "im2col bwd-data layer3.0.conv1", 1152, 512, 256, true, false, false, false, 8},
    {"full", "im2col bwd-filter layer2.0.conv1", 128, 576, 512, false, true, true, false, 24},
    {"narrow", "winograd fwd/bwd-data layer2", 32, 48, 32, false, true, false, true, 4536},
    {"narrow", "winograd bwd-filter layer2", 32, 32, 48, true, false, true, false, 1836},
    {"narrow", "winograd fwd/bwd-data layer3", 64, 48, 64, false, true, false, true, 1080},
    {"narrow", "winograd bwd-filter layer3", 64, 64, 48, true, false, false, false, 432},
    {"narrow", "im2col fwd layer3.0.conv1", 64, 539, 288, false, false, false, false, 5},
    {"narrow", "im2col bwd-filter layer3.0.conv1", 64, 288, 539, false, true, false, false, 5},
    {"narrow", "im2col bwd-data layer3.0.conv1", 288, 539, 64, true, false, false, false, 5},
};

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 30;
  if (runs < 1) {
    fmt::print(stderr, "cpu_gemm_bench: runs must be a positive number, got '{}'\n", argv[1]);
    return 2;
  }
  const std::string filter = argc > 2 ? argv[2] : "";
  const double peak = fma_peak_gflops();
  fmt::print("FMA peak of one core (measured): {:.1f} GFLOP/s; GEMM CPU time, median of {} runs\n", peak, runs);
  fmt::print("| net | issued by | m x n x k | A, B (T: transposed view, P: packed once) | calls/step | us/call | GFLOP/s | % of peak |\n");
  fmt::print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: |\n");
  struct Total {
    double flop = 0, ms = 0;
  };
  Total totals[2];
  for (const Shape& s : kShapes) {
    if ((std::string(s.net) + " " + s.where).find(filter) == std::string::npos) continue;
    const std::vector<float> a = random_vector(size_t(s.m * s.k), 1), b = random_vector(size_t(s.k * s.n), 2);
    std::vector<float> c(size_t(s.m * s.n));
    // a_transposed: A is stored k x m; b_transposed: B is stored n x k.
    const k::MatrixView<float> av = s.a_transposed ? k::transposed<float>(a.data(), s.m) : k::row_major<float>(a.data(), s.k);
    const k::MatrixView<float> bv = s.b_transposed ? k::transposed<float>(b.data(), s.k) : k::row_major<float>(b.data(), s.n);
    const auto mode = s.accumulate ? k::GemmMode::accumulate : k::GemmMode::overwrite;
    std::vector<float> packed(size_t(k::packed_lhs_size<float>(s.m, s.k)));
    k::pack_lhs<float>(s.m, s.k, av, packed.data());
    // Enough calls per timed run to lift it well above the clock's resolution.
    const int repeat = std::max(1, int(2e7 / double(s.m * s.n * s.k)));
    const double ms = median_ms(3, runs, {[&] {
                                  for (int r = 0; r < repeat; ++r) {
                                    if (s.a_packed_once) {
                                      k::gemm_packed_lhs<float>(s.m, s.n, s.k, packed.data(), bv, c.data(), s.n, mode);
                                    } else {
                                      k::gemm<float>(s.m, s.n, s.k, av, bv, c.data(), s.n, mode);
                                    }
                                  }
                                }})[0] / repeat;
    const double flop = 2.0 * double(s.m * s.n * s.k), gflops = flop / ms * 1e-6;
    fmt::print("| {} | {} | {} x {} x {} | {}, {} | {} | {:.1f} | {:.1f} | {:.0f}% |\n", s.net, s.where, s.m, s.n, s.k,
               s.a_packed_once ? "P" : s.a_transposed ? "T" : "N", s.b_transposed ? "T" : "N", s.calls, ms * 1e3, gflops, 100 * gflops / peak);
    Total& t = totals[std::string(s.net) == "full" ? 0 : 1];
    t.flop += flop * s.calls;
    t.ms += ms * s.calls;
  }
  for (int i = 0; i < 2; ++i) {
    if (totals[i].ms == 0) continue;
    const double gflops = totals[i].flop / totals[i].ms * 1e-6;
    fmt::print("{} network, these shapes per step: {:.1f} GFLOP in {:.1f} ms, {:.1f} GFLOP/s, {:.0f}% of peak\n",
               i == 0 ? "full" : "narrow", totals[i].flop * 1e-9, totals[i].ms, gflops, 100 * gflops / peak);
  }
  return 0;
}
