// The convolution family: the interface every conv2d implementation offers, and its registry.
// Built in: the CPU reference (NCHW), the CPU Winograd for 3x3 stride-1 float32 NCHW layers
// (ahead of the reference unless kernels.cpu_conv=im2col or direct), the CPU direct convolution
// (ahead of both on few-channel layers unless kernels.cpu_conv=im2col or winograd), the CPU
// channels-last convolution (the registry's NCHW one between two layout changes), the hand-written GPU implicit GEMM (NCHW) and
// cuDNN (NCHW and channels-last). ops::conv2d picks one per call and its backward node keeps it.
#pragma once
#include <memory>
#include <string>

#include "engine/impl/registry.h"
#include "engine/tensor.h"
#include "kernels/types.h"

namespace cg::impl {

struct ConvProblem {
  kernels::Conv2dShape shape;
  Device device;
  DType dtype;             // of x, y and the bias (the autocast compute dtype)
  ops::Layout layout;      // of x and y
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

struct ConvGrads {
  Tensor dx, dw, db;
};

class ConvImpl {
 public:
  virtual ~ConvImpl() = default;
  // "" when this implementation runs `p`; else why not, phrased after "kernels.conv=<name> ",
  // e.g. "does not support it".
  virtual std::string why_unsupported(const ConvProblem& p) const = 0;
  // y = conv(x, w) + b. x in p.layout and p.dtype; w the [c_out, c_in, kh, kw] parameter in its
  // own floating dtype; b [c_out] in p.dtype or undefined.
  virtual Tensor forward(const ConvProblem& p, const Tensor& x, const Tensor& w, const Tensor& b,
                         ConvSaved& saved) const = 0;
  // dx (like x) when need_dx; dw ([c_out, c_in, kh, kw], saved.weight_dtype) and db (p.dtype,
  // when has_bias) when need_w.
  virtual ConvGrads backward(const ConvProblem& p, const ConvSaved& saved, const Tensor& dy, bool need_dx,
                             bool need_w, bool has_bias) const = 0;
};

using ConvRegistry = Registry<ConvImpl>;
// The registry, with the built-in implementations added on first use.
ConvRegistry& conv_registry();

// One line each in conv_registry(): the built-in implementations' registrations.
void register_conv_cpu(ConvRegistry& r);
void register_conv_cpu_winograd(ConvRegistry& r);
void register_conv_cpu_direct(ConvRegistry& r);
void register_conv_channels_last(ConvRegistry& r);
void register_conv_native(ConvRegistry& r);
void register_conv_cudnn(ConvRegistry& r);

}  // namespace cg::impl
