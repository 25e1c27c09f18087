// The convolution family's rule: from a layer and its KernelPolicy to the implementations that may
// run it, most preferred first (conv_registry() then takes the first that supports the layer).
//   CPU, channels-last: the channels-last convolution (which picks the NCHW one inside).
//   CPU, NCHW: kernels.cpu_conv's algorithm (auto: cpu_conv_auto's, per layer shape), then the
//     im2col reference for what that algorithm does not run.
//   GPU: kernels.conv=cudnn or native by name (refused where it cannot run the layer); auto: per
//     layer, whichever of the two measured faster (conv_gpu_timed.cpp) under
//     kernels.cudnn_algo_search=timed, cuDNN first under heuristic.
#include "engine/impl/conv.h"
#include "engine/impl/conv_cpu_tensors.h"
#include "kernels/cpu/conv_direct.h"

namespace cg::impl {
namespace {

using ops::CpuConvAlgorithm;
using ops::GpuImpl;

// auto runs, of the algorithms as exact as PyTorch float32 (each phase's error against float64 at
// most PyTorch's own, bench/results/conv_fidelity_*.md), the one that measured fastest. Winograd
// F(4x4, 3x3) is not among them: its forward and backward-data errors are 3.7-8.5x PyTorch's on
// every layer it takes, and a whole training run drifted 4-5x further from float64 than
// PyTorch's (issue 41; tests/dist/pytorch_run_fidelity_test.cpp), so it runs by name only.
// From per-layer A/B timings (cpu_conv_bench; bench/NOTES.md, "Figures once kept in code
// comments", "Stride 2, phase by phase"): 3x3, stride 1 or 2: the direct forward beats im2col on
// every layer measured (16 to 128 channels in), and so does its stride-1 backward-data; the
// backward phases go to im2col where it wins (direct_phases_auto). 1x1: im2col, since the direct
// 1x1 reads its input planes once per tap with nothing to reuse.
bool direct_is_fastest(const kernels::Conv2dShape& s) { return s.kh == 3; }

ImplKey cpu_key(CpuConvAlgorithm algorithm) {
  switch (algorithm) {
    case CpuConvAlgorithm::winograd: return ImplKey::winograd;
    case CpuConvAlgorithm::direct: return ImplKey::direct;
    default: return ImplKey::im2col;
  }
}

Selection cpu_selection(const ConvProblem& p) {
  if (p.layout == ops::Layout::nhwc) return {.keys = {ImplKey::channels_last}};
  const CpuConvAlgorithm algorithm =
      p.policy.cpu_conv == CpuConvAlgorithm::automatic ? cpu_conv_auto(p.shape, p.dtype) : p.policy.cpu_conv;
  return {.keys = {cpu_key(algorithm), ImplKey::im2col}};
}

Selection gpu_selection(const ConvProblem& p) {
  switch (p.policy.conv) {
    case GpuImpl::cudnn: return {.keys = {ImplKey::cudnn}, .choice = "cudnn", .named = true};
    case GpuImpl::native: return {.keys = {ImplKey::native}, .choice = "native", .named = true};
    case GpuImpl::automatic: break;
  }
  if (p.policy.cudnn_algo_search == ops::ConvAlgoSearch::timed) return timed_gpu_selection(p);
  return {.keys = {ImplKey::cudnn, ImplKey::native}};
}

}  // namespace

CpuConvAlgorithm cpu_conv_auto(const kernels::Conv2dShape& s, DType dtype) {
  if (dtype != DType::f32) return CpuConvAlgorithm::im2col;  // Winograd and direct run float32 only
  if (kernels::cpu::direct_conv_supports(s) && direct_is_fastest(s)) return CpuConvAlgorithm::direct;
  return CpuConvAlgorithm::im2col;
}

// 3x3 stride 2, 2 threads, batch 64 (cpu_conv_bench full28 and narrow, 2026-11-27): direct's
// backward-data is faster up to 64 input channels (64->128 at 28x28: 5.5 ms against 6.2) and
// slower at 128 (6.4-6.7 against 5.7-6.2); its backward-filter only below 32 (16->32: 0.57 ms
// against 0.75; 64->128: 10.7-11.1 against 8.1). Stride 1: direct's backward-filter beat im2col's
// up to 64 channels (1 thread, batch 64: 32 at 14x14 2.41 ms, 64 at 7x7 3.98, against about 5.2
// and 4.6); past that its per-slot accumulators (c_out x c_in x 9 vectors) leave the cache and
// fell to 12-52 GFLOP/s, so im2col's.
DirectPhases direct_phases_auto(const kernels::Conv2dShape& s) {
  if (s.stride != 2) return {.data = true, .filter = s.c_in <= 64 && s.c_out <= 64};
  return {.data = s.c_in <= 64, .filter = s.c_in < 32};
}

Selection conv_selection(const ConvProblem& p) { return p.device.is_cpu() ? cpu_selection(p) : gpu_selection(p); }

}  // namespace cg::impl
