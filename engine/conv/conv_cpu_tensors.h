// What every CPU NCHW convolution does around its kernels, whichever algorithm it runs (the plain
// reference, im2col, Winograd, direct): the output it writes, what forward keeps for backward, and
// the gradients backward writes. Each implementation then differs only in the kernels it calls.
#pragma once
#include "engine/conv/conv.h"
#include "engine/dispatch.h"

namespace cg::impl {

// True for the 3x3 stride-1 float32 layers Winograd takes under kernels.cpu_conv=winograd: 32+
// channels in and out, or channels in groups of 16 on planes its 16-plane transforms handle
// (conv_cpu_winograd.cpp). auto never gives it a layer (conv_choice.cpp: not exact enough); F(2x2)
// (kernels.cpu_conv=winograd2) takes every 3x3 stride-1 layer.
bool winograd_takes(const kernels::Conv2dShape& s);

// y of x conv w, uninitialized (the kernels write every element), after checking x and w agree.
inline Tensor new_conv_output(const ConvProblem& p, const Tensor& x, const Tensor& w) {
  const kernels::Conv2dShape& s = p.shape;
  ops::detail::check_same("conv2d", x, w);
  return Tensor::empty({s.n, s.c_out, s.out_h(), s.out_w()}, x.dtype(), x.device());
}

// On the CPU the compute dtype is the parameter's, so the saved weight needs no cast back.
inline ConvSaved conv_saved(const Tensor& x, const Tensor& w) { return {x.detach(), w.detach(), w.dtype()}; }

// a.dx, a.dw and a.db as asked for, uninitialized; db only with dw (the bias gradient comes out of
// the backward-filter pass).
inline void new_conv_grads(const ConvProblem& p, ConvBackwardArgs& a) {
  const Tensor &x = a.saved.x, &w = a.saved.w;
  if (a.need_dx) a.dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (a.need_w) {
    a.dw = Tensor::empty(w.shape(), w.dtype(), w.device());
    if (a.has_bias) a.db = Tensor::empty({p.shape.c_out}, w.dtype(), w.device());
  }
}

// t's data, or null when t is undefined (an absent bias or bias gradient).
template <typename T>
T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace cg::impl
