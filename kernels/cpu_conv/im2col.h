// Convolution as im2col + GEMM on the CPU (NCHW, weights [c_out, c_in, kh, kw]): every kernel
// size, stride and padding, float32 and float64; what kernels.cpu_conv=im2col runs, and what the
// other algorithms leave to it. Checked against the plain reference (kernels/cpu/conv2d.h) by
// tests/kernels/cpu_conv/im2col_test.cpp.
// Same contracts as the reference: forward and backward-data write (=) their outputs;
// backward-filter writes (=) dw and db, db by the reference's conv2d_bias_gradient (so every CPU
// algorithm's bias gradient is the same to the bit). Deterministic: results do not depend on the
// number of OpenMP threads.
#pragma once
#include "kernels/types.h"

namespace cg::kernels::cpu {

// y[n, c_out, out_h, out_w] = conv(x, w) + bias (bias may be null).
template <typename T>
void im2col_conv2d_forward(const Conv2dShape& s, const T* x, const T* w, const T* bias, T* y);

// dx[n, c_in, h, w] from dy[n, c_out, out_h, out_w].
template <typename T>
void im2col_conv2d_backward_data(const Conv2dShape& s, const T* dy, const T* w, T* dx);

// dw[c_out, c_in, kh, kw] and db[c_out] (db may be null) from x and dy.
template <typename T>
void im2col_conv2d_backward_filter(const Conv2dShape& s, const T* x, const T* dy, T* dw, T* db);

}  // namespace cg::kernels::cpu
