// The convolution family's rule: from a layer and its KernelPolicy to the implementations that may
// run it, most preferred first (conv_registry() then takes the first that supports the layer).
//   CPU, channels-last: the channels-last convolution (which picks the NCHW one inside).
//   CPU, NCHW: kernels.cpu_conv's algorithm (auto: cpu_conv_auto's, per layer shape), then the
//     im2col reference for what that algorithm does not run.
//   GPU: kernels.conv=cudnn or native by name (refused where it cannot run the layer); auto:
//     cuDNN, else the hand-written kernel.
#include "engine/impl/conv.h"
#include "engine/impl/conv_cpu_tensors.h"
#include "kernels/cpu/conv_direct.h"

namespace cg::impl {
namespace {

using ops::CpuConvAlgorithm;
using ops::GpuImpl;

// From per-layer A/B timings (cpu_conv_bench; the figures: bench/NOTES.md, "Figures once kept in
// code comments", and "Stride 2, phase by phase"). 3x3 stride 1: the direct kernel beats im2col
// on every layer below 32 channels in or out, and Winograd beats it where winograd_takes. 3x3
// stride 2: the direct forward beats im2col on every layer measured (16 to 128 channels in), so
// auto gives the layer to direct, which keeps the backward phases where im2col wins
// (direct_phases_auto). 1x1: im2col, since the direct 1x1 reads its input planes once per tap
// with nothing to reuse.
bool direct_is_fastest(const kernels::Conv2dShape& s) {
  if (s.kh != 3) return false;
  if (s.stride == 2) return true;
  return (s.c_in < 32 || s.c_out < 32) && !winograd_takes(s);
}

std::string_view cpu_key(CpuConvAlgorithm algorithm) {
  switch (algorithm) {
    case CpuConvAlgorithm::winograd: return "winograd";
    case CpuConvAlgorithm::direct: return "direct";
    default: return "im2col";
  }
}

Selection cpu_selection(const ConvProblem& p) {
  if (p.layout == ops::Layout::nhwc) return {.keys = {"channels-last"}};
  const CpuConvAlgorithm algorithm =
      p.policy.cpu_conv == CpuConvAlgorithm::automatic ? cpu_conv_auto(p.shape, p.dtype) : p.policy.cpu_conv;
  return {.keys = {cpu_key(algorithm), "im2col"}};
}

Selection gpu_selection(const ConvProblem& p) {
  switch (p.policy.conv) {
    case GpuImpl::cudnn: return {.keys = {"cudnn"}, .choice = "cudnn", .named = true};
    case GpuImpl::native: return {.keys = {"native"}, .choice = "native", .named = true};
    case GpuImpl::automatic: break;
  }
  return {.keys = {"cudnn", "native"}};
}

}  // namespace

CpuConvAlgorithm cpu_conv_auto(const kernels::Conv2dShape& s, DType dtype) {
  if (dtype != DType::f32) return CpuConvAlgorithm::im2col;  // Winograd and direct run float32 only
  if (kernels::cpu::direct_conv_supports(s) && direct_is_fastest(s)) return CpuConvAlgorithm::direct;
  if (winograd_takes(s)) return CpuConvAlgorithm::winograd;
  return CpuConvAlgorithm::im2col;
}

// 3x3 stride 2, 2 threads, batch 64 (cpu_conv_bench full28 and narrow, 2026-11-27): direct's
// backward-data is faster up to 64 input channels (64->128 at 28x28: 5.5 ms against 6.2) and
// slower at 128 (6.4-6.7 against 5.7-6.2); its backward-filter only below 32 (16->32: 0.57 ms
// against 0.75; 64->128: 10.7-11.1 against 8.1).
DirectPhases direct_phases_auto(const kernels::Conv2dShape& s) {
  if (s.stride != 2) return {};
  return {.data = s.c_in <= 64, .filter = s.c_in < 32};
}

Selection conv_selection(const ConvProblem& p) { return p.device.is_cpu() ? cpu_selection(p) : gpu_selection(p); }

}  // namespace cg::impl
