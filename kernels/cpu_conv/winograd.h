// Winograd convolution for 3x3 stride-1 layers on the CPU (NCHW, float32), in two tile sizes:
// - F(4x4, 3x3) (winograd_*): each 6x6 input tile and each filter are transformed, the 36
//   transform elements become 36 independent GEMMs (channels x tiles) over the packed GEMM of
//   kernels/cpu_conv/gemm.h, and the products are transformed back into 4x4 output tiles: 4x
//   fewer multiplications than im2col + GEMM, but forward and backward-data errors 3.7-8.5x
//   PyTorch float32's (issue 41), so kernels.cpu_conv=auto does not run it.
// - F(2x2, 3x3) (winograd2_*): 4x4 input tiles, 16 GEMMs, 2x2 output tiles: 2.25x fewer
//   multiplications than im2col, and with the points 0, +-1 (transforms of 1s and 1/2s) about as
//   exact as the direct convolution (bench/NOTES.md, issue 41, session 31).
// Both NOT bit-identical to the direct convolution (or to im2col.h): the transforms round
// differently (errors bounded in tests/kernels/cpu_conv/winograd_test.cpp and, against PyTorch's,
// winograd2_test.cpp). Deterministic: the work is cut by shape only (chunks of images, each on one
// thread), never by thread count, and sums run in a fixed order, so 1 and 16 threads give
// bit-identical results.
// Same contracts as the reference (kernels/cpu/conv2d.h): forward and backward-data write (=)
// their outputs; backward-filter writes (=) dw and db.
#pragma once
#include "kernels/types.h"

namespace cg::kernels::cpu {

// True for the layers these kernels run: 3x3 kernel, stride 1, padding 0 to 2 (backward-data runs
// a forward with padding 2 - pad).
bool winograd_supports(const Conv2dShape& s);

// True when its transforms run 16 planes at a time, one per vector lane (channels in and out in
// whole groups of 16, outputs of up to 32x32 pixels), the form that keeps every vector full;
// otherwise they go plane by plane. The same for both tile sizes.
bool winograd_vectorizes_channels(const Conv2dShape& s);

// y[n, c_out, out_h, out_w] = conv(x, w) + bias (bias may be null).
void winograd_conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* y);

// dx[n, c_in, h, w] from dy: a forward convolution of dy with the filters rotated by 180 degrees
// and c_in / c_out swapped.
void winograd_conv2d_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx);

// dw[c_out, c_in, 3, 3] and db[c_out] (db may be null) from x and dy.
void winograd_conv2d_backward_filter(const Conv2dShape& s, const float* x, const float* dy, float* dw, float* db);

// The same three with F(2x2, 3x3), for the same shapes (winograd_supports).
void winograd2_conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* y);
void winograd2_conv2d_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx);
void winograd2_conv2d_backward_filter(const Conv2dShape& s, const float* x, const float* dy, float* dw, float* db);

}  // namespace cg::kernels::cpu
