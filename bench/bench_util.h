// What the CPU micro-benchmarks share: a clock (process CPU time or elapsed time), the median of
// alternating runs, the core's measured FMA peak, the memory bandwidth, and random inputs.
#pragma once
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace cg::bench {

inline clockid_t timing_clock = CLOCK_PROCESS_CPUTIME_ID;  // or CLOCK_MONOTONIC: `wall`

inline double clock_ms(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}
inline double cpu_ms() { return clock_ms(CLOCK_PROCESS_CPUTIME_ID); }

// Median ms (timing_clock) of each function, run in turn (f0, f1, f2, f0, f1, ...) after warm-up.
inline std::vector<double> median_ms(int warmup, int runs, const std::vector<std::function<void()>>& fns) {
  for (int i = 0; i < warmup; ++i)
    for (const auto& f : fns) f();
  std::vector<std::vector<double>> t(fns.size());
  for (int i = 0; i < runs; ++i)
    for (size_t k = 0; k < fns.size(); ++k) {
      const double t0 = clock_ms(timing_clock);
      fns[k]();
      t[k].push_back(clock_ms(timing_clock) - t0);
    }
  std::vector<double> med;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

// GFLOP/s of one core running independent fused multiply-adds on full vector registers (12 chains,
// enough to cover the FMA latency): the peak the GEMM is measured against.
inline double fma_peak_gflops() {
#if defined(__AVX512F__)
  constexpr int kWidth = 16;  // one register of floats
#else
  // AVX2: 12 chains of 16 floats are 24 registers of 16, so they spilled and the "peak" came out at
  // a third of what the direct convolution then reached; 12 chains of 8 floats fit.
  constexpr int kWidth = 8;
#endif
  using V __attribute__((vector_size(kWidth * 4))) = float;
  V acc[12], mul = V{} + 1.0000001f, add = V{} + 1e-8f;
  for (int i = 0; i < 12; ++i) acc[i] = V{} + float(i);
  const long iters = 50'000'000;
  const double t0 = cpu_ms();
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = acc[i] * mul + add;
  }
  const double ms = cpu_ms() - t0;
  volatile float sink = 0;  // keeps the loop's results alive
  for (int i = 0; i < 12; ++i) sink = sink + acc[i][0];
  return 2.0 * kWidth * 12 * double(iters) / ms * 1e-6;
}

// Memory bandwidth in GB/s (1e9 bytes), STREAM's way: the best of `runs` passes over arrays far
// larger than the caches, on all OpenMP threads, elapsed time. Copy a = b counts 8 bytes a float,
// triad a = b + s * c 12 (reads and writes; not the write-allocate reads a cache may add).
struct Bandwidth {
  double copy_gbs = 0, triad_gbs = 0;
};
inline Bandwidth stream_bandwidth(int runs, int64_t floats = int64_t(1) << 25) {
  std::vector<float> a(size_t(floats), 0.f), b(size_t(floats), 1.f), c(size_t(floats), 2.f);
  auto best_gbs = [&](double bytes_per_float, const std::function<void()>& pass) {
    double best_ms = 1e30;
    for (int r = 0; r < runs; ++r) {
      const double t0 = clock_ms(CLOCK_MONOTONIC);
      pass();
      best_ms = std::min(best_ms, clock_ms(CLOCK_MONOTONIC) - t0);
    }
    return bytes_per_float * double(floats) / best_ms * 1e-6;
  };
  float *pa = a.data(), *pb = b.data(), *pc = c.data();
  Bandwidth bw;
  bw.copy_gbs = best_gbs(8, [&] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < floats; ++i) pa[i] = pb[i];
  });
  bw.triad_gbs = best_gbs(12, [&] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < floats; ++i) pa[i] = pb[i] + 3.f * pc[i];
  });
  return bw;
}

inline std::vector<float> random_vector(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

}  // namespace cg::bench
