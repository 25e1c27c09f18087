// The differentiable operations a model is built from. Each takes and returns Tensors, computes
// with the kernel for the tensor's device and dtype, and, when an input requires grad, records a
// Node whose backward calls the matching backward kernels.
// How they run comes from the thread's execution context (engine/execution.h), read when an op is
// called: the image activations' layout (NCHW, or channels-last NHWC, the layout tensor cores read
// best; weights always follow PyTorch, [c_out, c_in, kh, kw] and [out, in], so that checkpoints do
// not depend on it), the kernels (kernels.*), and autocast (engine/autocast.h: conv2d, linear and
// cross_entropy follow it). A backward runs as its forward did, whatever scope it runs in.
// On the GPU, every op enqueues on current_stream() (engine/stream.h) and never waits for the
// device.
#pragma once
#include <functional>
#include <memory>

#include "engine/cross_replica.h"
#include "engine/execution.h"
#include "engine/tensor.h"
#include "util/enum_names.h"
#include "util/layout.h"

namespace cg::ops {

// A differentiable dtype conversion (backward converts the gradient back); x itself when it
// already has `dtype`.
Tensor cast(const Tensor& x, DType dtype);

// Image tensors are contiguous: NCHW ones have shape [N, C, H, W], channels-last ones [N, H, W, C]
// (util/layout.h, a word every layer shares).
using ::cg::Layout;

// One call's arguments, as F.conv2d's (nn::Conv2dOptions describes the module, its channels and
// kernel size included).
struct Conv2dFuncOptions {
  int64_t stride = 1;
  int64_t padding = 0;
};
// x [N, Cin, H, W] (or [N, H, W, Cin] for nhwc), weight [Cout, Cin, kh, kw], bias [Cout] or
// undefined.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Conv2dFuncOptions options);

using ::cg::Activation;  // relu(op(x)) fused into one pass where an op offers it

struct BatchNormOptions {
  bool training = true;
  double momentum = 0.1;
  double eps = 1e-5;
  // Activation::relu returns relu(batch_norm(x)) from one fused pass (forward and backward).
  Activation activation = Activation::none;
  // SyncBatchNorm: training statistics (and the two gradient sums of the backward) are summed
  // over the replicas through this hook, with each replica's own count; null = this process only.
  // Eval mode never uses it.
  std::shared_ptr<CrossReplicaSum> cross_replica = nullptr;
};
// x [N, C, H, W] (or [N, H, W, C] for nhwc); weight, bias, running_mean, running_var [C]. Training mode normalizes with the
// batch statistics and updates the running ones (and num_batches_tracked, when defined) in place;
// eval mode normalizes with the running statistics.
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& num_batches_tracked, BatchNormOptions options);
// relu(batch_norm(x) + residual) in one pass forward and backward (the end of a residual block);
// residual has x's shape, dtype and device. Bit-identical to add_relu(batch_norm(x, ...), residual).
Tensor batch_norm_add_relu(const Tensor& x, const Tensor& residual, const Tensor& weight,
                           const Tensor& bias, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& num_batches_tracked,
                           BatchNormOptions options);

Tensor relu(const Tensor& x);
Tensor silu(const Tensor& x);  // x * sigmoid(x), PyTorch's SiLU
Tensor add(const Tensor& a, const Tensor& b);
Tensor add_relu(const Tensor& a, const Tensor& b);  // relu(a + b), one pass
Tensor scale(const Tensor& x, double alpha);        // alpha * x
// x itself in the forward (the same memory); in the backward, `before_backward` runs as x's
// gradient arrives, before the ops that made x see it (dist/full_shard.h gathers a unit's
// parameters there). Without autograd, x unchanged and no hook.
Tensor backward_hook(const Tensor& x, std::function<void()> before_backward);
// dst += src in place, recording nothing (gradient accumulation).
void accumulate_(Tensor& dst, const Tensor& src);

// [N, C, H, W] (or [N, H, W, C] for nhwc) -> [N, C], the mean over H and W.
Tensor global_avg_pool(const Tensor& x);
// x [N, in], weight [out, in], bias [out] or undefined -> [N, out].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
// Mean over the batch of -log softmax(logits)[label]; logits [N, classes], labels int64 [N] on
// the logits' device. Computed in float32 (half logits are cast, as under autocast). When
// `correct` is given, it receives how many rows' argmax equals the label, as an int64 scalar
// tensor on the same device (read it when convenient: on the GPU reading waits for the device).
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, Tensor* correct = nullptr);
// A differentiable view with a new shape (same number of elements).
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor flatten(const Tensor& x);  // [N, ...] -> [N, prod(...)]
// A differentiable copy of an image batch in another layout: [N, C, H, W] <-> [N, H, W, C]
// (x itself when from == to). Exact; the backward converts the gradient back.
Tensor to_layout(const Tensor& x, Layout from, Layout to);

}  // namespace cg::ops
