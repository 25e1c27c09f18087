// CPU reference for 2-D convolution, NCHW layout, weights [c_out, c_in, kh, kw] (PyTorch order).
// Rule: forward and backward-data write (=) their outputs; backward-filter writes (=) dw and db.
// Deterministic: results do not depend on the number of OpenMP threads.
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

// db[c_out] = the sum of dy over images and positions, in that order: the bias gradient every CPU
// convolution (im2col, Winograd, direct) gives, so their bias gradients are bit-identical.
template <typename T>
void conv2d_bias_gradient(const Conv2dShape& s, const T* dy, T* db);

}  // namespace cg::kernels::cpu
