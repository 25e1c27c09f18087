// kernels.cpu_conv=auto's rule for a float32 NCHW layer: of the CPU convolutions as exact as
// PyTorch float32 (each phase's error against float64 at most PyTorch's own,
// bench/results/conv_fidelity_*.md), the one that measured fastest for the layer's shape, and
// which of the direct convolution's backward phases beat im2col's. Winograd F(4x4, 3x3) is not a
// candidate: its forward and backward-data errors are 3.7-8.5x PyTorch's on every layer it takes,
// and a whole training run drifted 4-5x further from float64 than PyTorch's (issue 41;
// tests/dist/pytorch_run_fidelity_test.cpp), so it runs by name only. The engine's rule
// (engine/conv/conv_choice.cpp) adds what is not about shapes: the dtype and kernels.cpu_conv.
#pragma once
#include "kernels/cpu_conv/conv_direct.h"
#include "kernels/types.h"

namespace cg::kernels::cpu {

enum class ExactConv { im2col, direct };

// From per-layer A/B timings (cpu_conv_bench; bench/NOTES.md, "Figures once kept in code
// comments", "Stride 2, phase by phase"): 3x3, stride 1 or 2: the direct forward beats im2col on
// every layer measured (16 to 128 channels in), and so does its stride-1 backward-data; the
// backward phases go to im2col where it wins (direct_phases_auto). 1x1: im2col, since the direct
// 1x1 reads its input planes once per tap with nothing to reuse.
inline ExactConv fastest_exact_conv(const Conv2dShape& s) {
  return direct_conv_supports(s) && s.kh == 3 ? ExactConv::direct : ExactConv::im2col;
}

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

}  // namespace cg::kernels::cpu
