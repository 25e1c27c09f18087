// cuDNN-backed convolution and batch norm, and the per-device handles they share. Same semantics
// and argument order as the native kernels (kernels/cuda/conv_native.h, kernels/cuda/batch_norm.h).
// Convolution algorithms are chosen once per (shape, dtype, direction, search) and cached: by
// cuDNN's heuristics, or by timing every candidate once, deterministic ones only unless the
// caller's AlgoRule says otherwise. Scratch memory comes
// from the caller through a WorkspaceFn, so it is served by the engine's caching allocator.
// Convolutions take Layout::nhwc too: x, y, dx, dy are then [n, h, w, c] and the filter w, dw is
// KRSC ([c_out, kh, kw, c_in]; kernels/cuda/layout.h converts from PyTorch's KCRS).
#pragma once
#include <cstddef>
#include <functional>

#include "kernels/types.h"
#include "kernels/cuda/memory.h"
#include "util/dtype.h"

namespace cg::kernels::cuda {

// The shared types (kernels/types.h), also under this namespace.
using ::cg::Activation;
using ::cg::Layout;
using kernels::BatchNormShape;
using kernels::Conv2dShape;


enum class AlgoSearch { heuristic, timed };  // timed: like cudnn.benchmark = True
// How an algorithm is chosen for a new shape: the search, and whether only algorithms that give
// the same bits run to run may win (like torch.backends.cudnn.deterministic = True).
struct AlgoRule {
  AlgoRule(AlgoSearch search = AlgoSearch::timed, bool deterministic = true)  // NOLINT: an AlgoSearch is a rule
      : search(search), deterministic(deterministic) {}
  AlgoSearch search;
  bool deterministic;
};
int cudnn_version();                            // e.g. 91900

bool conv2d_cudnn_supports(const Conv2dShape& s, DType dtype);
void conv2d_cudnn_forward(const Conv2dShape& s, DType dtype, const void* x, const void* w, const void* bias, void* y,
                          const WorkspaceFn& workspace, Stream stream, Layout layout = Layout::nchw,
                          AlgoRule rule = {});
void conv2d_cudnn_backward_data(const Conv2dShape& s, DType dtype, const void* dy, const void* w, void* dx,
                                const WorkspaceFn& workspace, Stream stream, Layout layout = Layout::nchw,
                                AlgoRule rule = {});
void conv2d_cudnn_backward_filter(const Conv2dShape& s, DType dtype, const void* x, const void* dy, void* dw,
                                  void* db, const WorkspaceFn& workspace, Stream stream,
                                  Layout layout = Layout::nchw, AlgoRule rule = {});

// x, y, dy, dx in `dtype` (f32, f16, bf16); gamma, beta, statistics and their gradients float32.
// save_invstd is 1/sqrt(var + eps) of the batch, as in the native kernels. The fused ReLU, when
// cuDNN cannot fuse it for this layout and dtype, runs as a separate pass.
bool batch_norm_cudnn_supports(const BatchNormShape& s, DType dtype);
void batch_norm_cudnn_forward_train(const BatchNormShape& s, DType dtype, const void* x, const float* gamma,
                                   const float* beta, float eps, float momentum, float* running_mean,
                                   float* running_var, void* y, float* save_mean, float* save_invstd,
                                   Activation act, const void* residual, Stream stream);
void batch_norm_cudnn_forward_eval(const BatchNormShape& s, DType dtype, const void* x, const float* gamma,
                                  const float* beta, const float* running_mean, const float* running_var, float eps,
                                  void* y, Activation act, const void* residual, Stream stream);
// relu_y: the fused ReLU's forward output (dy is masked where it is zero), or null. d_residual:
// receives the gradient of the forward's residual (the masked dy), or null.
void batch_norm_cudnn_backward_train(const BatchNormShape& s, DType dtype, const void* dy, const void* x,
                                    const float* gamma, const float* save_mean, const float* save_invstd,
                                    float eps, void* dx, float* dgamma, float* dbeta, const void* relu_y,
                                    void* d_residual, const WorkspaceFn& workspace, Stream stream);

}  // namespace cg::kernels::cuda
