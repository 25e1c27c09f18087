// The convolution family: the interface every conv2d implementation offers, its registry and its
// rule (conv_selection, engine/conv/conv_choice.cpp). Built in: on the CPU the plain reference
// (chosen by no configuration: the conformance suites run it), im2col, Winograd and the direct
// convolution (NCHW; kernels.cpu_conv, or per layer shape under auto) and the channels-last
// convolution (the NCHW one between two layout changes); on the GPU the
// hand-written implicit GEMM (NCHW, and channels-last between layout changes) and cuDNN (NCHW and
// channels-last), chosen by kernels.conv. ops::conv2d picks one per call and its backward node
// keeps it.
#pragma once
#include <memory>
#include <string>

#include "engine/registry.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "kernels/types.h"

namespace cg::impl {

struct ConvProblem {
  kernels::Conv2dShape shape;
  Device device;
  DType dtype;             // of x, y and the bias (the autocast compute dtype)
  ops::Layout layout;      // of x and y
  ops::KernelPolicy policy;  // which implementation runs it (kernels.conv, cpu_conv, cudnn_algo_search)
  std::string layer;       // "conv2d layer with input [...] and weight [...] (stride 1, padding 1)"
};

// What a forward keeps for its backward, prepared as the implementation needs it (cuDNN's
// channels-last keeps the KRSC copy of the weight, for instance).
class ConvImpl;

struct ConvSaved {
  Tensor x, w;
  DType weight_dtype = DType::f32;  // the parameter's own dtype: dw leaves in it
  // For an implementation that runs another one inside (the CPU's channels-last runs an NCHW
  // one): the inner implementation, kept for the backward.
  std::shared_ptr<const ConvImpl> inner = nullptr;
};

// One call's tensors, inputs first. The outputs are written by the implementation (each prepares
// its weight its own way, and keeps that for the backward).
struct ConvForwardArgs {
  // y = conv(x, w) + b. x in p.layout and p.dtype; w the [c_out, c_in, kh, kw] parameter in its
  // own floating dtype; b [c_out] in p.dtype or undefined.
  Tensor x, w, b;
  Tensor y{};         // out: p.layout, p.dtype
  ConvSaved saved{};  // out: what the backward needs
};
struct ConvBackwardArgs {
  Tensor dy;
  ConvSaved saved;  // the forward's
  bool need_dx = true, need_w = true, has_bias = false;
  // out: dx (like x) when need_dx; dw ([c_out, c_in, kh, kw], saved.weight_dtype) and db (p.dtype,
  // when has_bias) when need_w.
  Tensor dx{}, dw{}, db{};
};

class ConvImpl : public Supports<ConvProblem> {
 public:
  virtual void forward(const ConvProblem& p, ConvForwardArgs& a) const = 0;
  virtual void backward(const ConvProblem& p, ConvBackwardArgs& a) const = 0;
};

using ConvRegistry = Registry<ConvImpl>;
using ConvEntry = ConvRegistry::Entry;
// The registry, built with the implementations of this build on first use.
ConvRegistry& conv_registry();

// The rule (conv_choice.cpp): which implementations may run `p` under p.policy, most preferred first.
Selection conv_selection(const ConvProblem& p);
// kernels.cpu_conv=auto's algorithm for an NCHW layer of this shape and dtype: whichever measured
// fastest there (never automatic).
ops::CpuConvAlgorithm cpu_conv_auto(const kernels::Conv2dShape& s, DType dtype);
// kernels.cpu_conv=auto's backward of an NCHW float32 layer whose forward ran the direct or the
// F(2x2) Winograd convolution: each phase from the kernel kernels/cpu_conv/auto_rule.h names for it
// (conv_cpu_auto.cpp).
void cpu_auto_backward(const ConvProblem& p, ConvBackwardArgs& a);
// kernels.conv=auto on a GPU under kernels.cudnn_algo_search=timed (conv_choice.cpp): cuDNN and
// the native kernels each run p's forward and both backward passes, timed, the first time the
// process meets p's shape; the native kernels come first only when native_measured_faster.
Selection timed_gpu_selection(const ConvProblem& p);
// Whether the native kernels' time beats cuDNN's by the margin that keeps a close call on cuDNN.
inline constexpr double kNativeMargin = 1.25;
bool native_measured_faster(double cudnn_ms, double native_ms);
// The implementation conv_selection(p) prefers, or the refusal naming p.layer.
std::shared_ptr<const ConvImpl> pick_conv(const ConvProblem& p);

// One line each in conv_registry(): the built-in implementations' entries.
ConvEntry conv_reference_entry();
ConvEntry conv_im2col_entry();
ConvEntry conv_winograd_entry();
ConvEntry conv_winograd2_entry();
ConvEntry conv_direct_entry();
ConvEntry conv_cpu_channels_last_entry();
ConvEntry conv_native_channels_last_entry();
ConvEntry conv_native_entry();
ConvEntry conv_cudnn_entry();

}  // namespace cg::impl
