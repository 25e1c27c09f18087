// Which kernels the ops run: one value, the config's kernels.* keys, part of the thread's
// execution context (engine/execution.h; the training step opens it from the config) and carried in
// each op's problem description down to the implementation registries (engine/conv/,
// engine/batch_norm/, engine/linear/). Nothing here is process-wide: two scopes in one process may
// run different kernels.
#pragma once
#include "util/enum_names.h"

namespace cg::ops {

// Which GPU implementation an op family uses (kernels.conv, kernels.batch_norm). automatic:
// conv2d takes, per layer, whichever of cuDNN and the hand-written kernels measured faster on it
// (engine/conv/conv_choice.cpp; cuDNN under cudnn_algo_search=heuristic), batch_norm the
// hand-written kernels. A named choice that cannot run a given
// layer (shape or dtype) fails naming the layer's shapes instead of quietly falling back.
enum class GpuImpl { automatic, cudnn, native };
inline EnumNames<GpuImpl> enum_names(GpuImpl) {
  return {{GpuImpl::automatic, "auto"}, {GpuImpl::cudnn, "cudnn"}, {GpuImpl::native, "native"}};
}

// Which algorithm the CPU convolution uses (kernels.cpu_conv). im2col: im2col + GEMM for every
// layer (kernels/cpu_conv/im2col.h). winograd: Winograd F(4x4, 3x3) for float32 3x3 stride-1 layers
// with at least 32 input and output channels, or with channels in groups of 16 on planes up to
// 32x32 (4x fewer multiplications; not bit-identical to im2col, error bounded in
// tests/kernels/cpu_conv/winograd_test.cpp), im2col for the rest. winograd2: Winograd F(2x2, 3x3) for
// every float32 3x3 stride-1 layer (2.25x fewer multiplications, about as exact as direct), im2col
// for the rest. direct: the direct convolution
// (kernels/cpu_conv/conv_direct.h) for every float32 3x3 padding-1 and 1x1 layer of stride 1 or 2 (not
// bit-identical to im2col either), im2col for the rest. automatic: per layer and phase, the fastest
// of those as exact as PyTorch float32 there (direct, im2col, and winograd2 where its error is
// PyTorch's or less; winograd's forward and backward-data errors are 4-8x PyTorch's,
// bench/results/conv_fidelity_*.md), kernels/cpu_conv/auto_rule.h. All are deterministic across
// thread counts.
enum class CpuConvAlgorithm { automatic, im2col, winograd, direct, winograd2 };
inline EnumNames<CpuConvAlgorithm> enum_names(CpuConvAlgorithm) {
  return {{CpuConvAlgorithm::automatic, "auto"},
          {CpuConvAlgorithm::im2col, "im2col"},
          {CpuConvAlgorithm::winograd, "winograd"},
          {CpuConvAlgorithm::direct, "direct"},
          {CpuConvAlgorithm::winograd2, "winograd2"}};
}

// How cuDNN picks a convolution algorithm for a new shape (kernels.cudnn_algo_search): by its
// heuristics, or by timing every candidate once (like torch.backends.cudnn.benchmark = True).
// Timed also lets conv=auto time cuDNN against the hand-written kernels per layer.
enum class ConvAlgoSearch { heuristic, timed };
inline EnumNames<ConvAlgoSearch> enum_names(ConvAlgoSearch) {
  return {{ConvAlgoSearch::timed, "timed"}, {ConvAlgoSearch::heuristic, "heuristic"}};
}

// The config's kernels.* group; the defaults are the config's.
struct KernelPolicy {
  GpuImpl conv = GpuImpl::automatic;        // auto: cuDNN or native per layer, timed
  GpuImpl batch_norm = GpuImpl::automatic;  // auto: the hand-written kernels
  ConvAlgoSearch cudnn_algo_search = ConvAlgoSearch::timed;
  // Only cuDNN convolution algorithms that give the same bits run to run (kernels.cudnn_deterministic,
  // like torch.backends.cudnn.deterministic = True). Off admits the backward algorithms that add
  // with atomics: on the H200, two trainings of one binary then ended on different weights.
  bool cudnn_deterministic = true;
  CpuConvAlgorithm cpu_conv = CpuConvAlgorithm::automatic;  // auto: direct, Winograd F(2x2) or im2col by shape and phase
  bool operator==(const KernelPolicy&) const = default;
};

}  // namespace cg::ops
