// The plain CPU reference for 2-D convolution: NCHW, weights [c_out, c_in, kh, kw] (PyTorch
// order), every kernel size, stride and padding. The definition written out as loops over every
// tap, each output a sum in double rounded once to T: slow, and small enough to check by reading.
// Everything else is tested against it: the fast CPU convolutions (kernels/cpu_conv: im2col +
// GEMM, Winograd, direct), the GPU's, and the conformance suites' float64 results.
// Rule: forward and backward-data write (=) their outputs; backward-filter writes (=) dw and db.
// Deterministic: each output element is one thread's fixed-order sum, whatever the thread count.
#pragma once
#include <cstdint>

#include "kernels/types.h"

namespace cg::kernels::cpu {

using kernels::Conv2dShape;

// y[n, c_out, out_h, out_w] = conv(x, w) + bias (bias may be null).
template <typename T>
void conv2d_forward(const Conv2dShape& s, const T* x, const T* w, const T* bias, T* y);

// dx[n, c_in, h, w] from dy[n, c_out, out_h, out_w].
template <typename T>
void conv2d_backward_data(const Conv2dShape& s, const T* dy, const T* w, T* dx);

// dw[c_out, c_in, kh, kw] and db[c_out] (db may be null) from x and dy.
template <typename T>
void conv2d_backward_filter(const Conv2dShape& s, const T* x, const T* dy, T* dw, T* db);

// db[c_out] = the sum of dy over images and positions, in that order, in T. Every CPU convolution
// (this reference, im2col, Winograd, direct) calls this one, so their bias gradients are the same
// to the bit; changing its order changes theirs (and the checkpoint fingerprints).
template <typename T>
void conv2d_bias_gradient(const Conv2dShape& s, const T* dy, T* db);

}  // namespace cg::kernels::cpu
