// kernels.cpu_conv=auto's rule for a float32 NCHW layer: per phase, of the CPU convolutions as
// exact as PyTorch float32 there (each phase's error against float64 at most PyTorch's own,
// bench/results/conv_fidelity_*.md), the one that measured fastest for the layer's shape: im2col,
// the direct convolution, or Winograd F(2x2, 3x3) where its error allows. Winograd F(4x4, 3x3) is
// not a candidate: its forward and backward-data errors are 3.7-8.5x PyTorch's on every layer it
// takes, and a whole training run drifted 4-5x further from float64 than PyTorch's (issue 41;
// tests/dist/pytorch_run_fidelity_test.cpp), so it runs by name only. The engine's rule
// (engine/conv/conv_choice.cpp) adds what is not about shapes: the dtype and kernels.cpu_conv.
#pragma once
#include "kernels/cpu_conv/conv_direct.h"
#include "kernels/cpu_conv/winograd.h"
#include "kernels/types.h"

namespace cg::kernels::cpu {

enum class ExactConv { im2col, direct, winograd2 };

// From per-layer A/B timings (cpu_conv_bench; bench/NOTES.md, "Figures once kept in code
// comments", "Stride 2, phase by phase"): 3x3, stride 1 or 2: the direct forward beats im2col on
// every layer measured (16 to 128 channels in), and so does its stride-1 backward-data; the
// backward phases go to im2col where it wins (direct_phases_auto). 1x1: im2col, since the direct
// 1x1 reads its input planes once per tap with nothing to reuse. Winograd F(2x2) then takes the
// phases it is exact enough and faster for (winograd2_phases_auto).
inline bool direct_takes_auto(const Conv2dShape& s) { return direct_conv_supports(s) && s.kh == 3; }

// Which backward phases the direct convolution runs itself under auto (the others go to im2col);
// by name (kernels.cpu_conv=direct) it runs all three.
struct DirectPhases {
  bool data = true, filter = true;  // direct's own backward-data / backward-filter
};

// 3x3 stride 2, 2 threads, batch 64 (cpu_conv_bench full28 and narrow, 2026-11-27): direct's
// backward-data is faster up to 64 input channels (64->128 at 28x28: 5.5 ms against 6.2) and
// slower at 128 (6.4-6.7 against 5.7-6.2); its backward-filter only below 32 (16->32: 0.57 ms
// against 0.75; 64->128: 10.7-11.1 against 8.1). Stride 1: direct's backward-filter beat im2col's
// up to 64 channels (1 thread, batch 64: 32 at 14x14 2.41 ms, 64 at 7x7 3.98, against about 5.2
// and 4.6); past that its per-slot accumulators (c_out x c_in x 9 vectors) leave the cache and
// fell to 12-52 GFLOP/s, so im2col's.
inline DirectPhases direct_phases_auto(const Conv2dShape& s) {
  if (s.stride != 2) return {.data = true, .filter = s.c_in <= 64 && s.c_out <= 64};
  return {.data = s.c_in <= 64, .filter = s.c_in < 32};
}

// Winograd F(2x2, 3x3) under auto, phase by phase (3x3 stride-1 padding-1 layers only). Its error
// (bench/results/conv_fidelity_2026-12-01_*.md, relative L2 against float64, as a multiple of
// PyTorch float32's larger of NCHW and channels-last), with the GEMM's sums in chains of 32
// (kernels/cpu_conv/gemm.cpp): forward 0.34-1.01x on every layer of 16+ channels (1.9x on the
// 1-channel stems), backward-data 0.37-0.97x, backward-filter 0.16-0.45x. Before the chains its
// backward-data on the full network's 64-256 channels was 1.2-2.3x, and auto withheld it there.
// Its time against the direct kernel's, forward and backward-data (cpu_conv_bench, batch 64, the
// kernels alternating in one process; bench/NOTES.md, "Issue 41 (session 34)"), the same with
// either vector width from 32 channels:
// - AVX-512 (2026-12-01, AMD EPYC 2 cores, 1 thread, CPU time, a build on the other core;
//   "Issue 41 (session 33)"): 0.53-0.60x at 32 @14 and 64 @7, 0.75x at 64 @32, 0.44-0.58x at
//   128-256; at 16 @28 a tie (0.97x), so direct keeps it.
// - an AVX2 build (-march=x86-64-v3) on the same Zen 4 core, quiet (2026-12-02, after the chains
//   and the staged output transform): 1 thread 0.75x at 32 @14, 0.82x at 64 @7, 0.78-0.80x at
//   64 @32, 0.71-0.72x at 128 @16, 0.54x at 256 @8, 1.06x at 16 @28; 2 threads (elapsed) 0.75x,
//   0.82-0.84x, 0.78x, 0.73x, 0.56x and 1.06-1.08x. Session 31's AVX2-only EPYC, loaded by other
//   builds and before both changes, had ties or losses below 128 channels: a real AVX2-only core
//   (Zen 2/3) is the check still owed.
// Backward-filter: 0.31-0.79x on every layer of 16+ channels (AVX2 EPYC, session 31), 4-7x slower
// on the stems.
struct Winograd2Phases {
  bool forward = false, data = false, filter = false;
};
inline Winograd2Phases winograd2_phases_auto(const Conv2dShape& s) {
  if (!winograd_supports(s) || s.pad != 1) return {};
  const bool wide = s.c_in >= 32 && s.c_out >= 32;
  return {.forward = wide, .data = wide, .filter = s.c_in >= 16 && s.c_out >= 16};
}

// The kernel of each phase under auto: forward, backward-data, backward-filter.
struct ExactPhases {
  ExactConv forward, data, filter;
};
inline ExactPhases exact_phases_auto(const Conv2dShape& s) {
  if (!direct_takes_auto(s)) return {ExactConv::im2col, ExactConv::im2col, ExactConv::im2col};
  const DirectPhases d = direct_phases_auto(s);
  const Winograd2Phases w = winograd2_phases_auto(s);
  const auto pick = [](bool winograd2, bool direct) {
    return winograd2 ? ExactConv::winograd2 : direct ? ExactConv::direct : ExactConv::im2col;
  };
  return {pick(w.forward, true), pick(w.data, d.data), pick(w.filter, d.filter)};
}

// The algorithm that runs the layer's forward under auto (and owns its backward phases, which it
// runs as exact_phases_auto says).
inline ExactConv fastest_exact_conv(const Conv2dShape& s) { return exact_phases_auto(s).forward; }

}  // namespace cg::kernels::cpu
