// Direct convolution on the CPU (NCHW, float32), without im2col, for 3x3 padding-1 and 1x1
// padding-0 layers of stride 1 or 2: for the few-channel layers (the 1-channel stem, 16- and
// 32-channel layers) where im2col + GEMM spends more time copying than multiplying. Each image's
// channels are copied into zero-bordered planes (stride 2: four planes per channel, its even/odd
// row and column phases) whose rows are a little longer than an output row; in those, the input
// under output position q = y * row + x for each tap is plane[q + offset of the tap], so a
// register tile of 8 output channels x 48 consecutive positions walks (input channel, tap) the
// way a GEMM walks its depth, reading the planes in place.
// NOT bit-identical to im2col.h (the sums run in another order); error bounded in
// tests/kernels/cpu_conv/conv_direct_test.cpp. Deterministic: images (forward, backward-data) or fixed
// slots of images (backward-filter, partial sums added in slot order) are the only units of
// parallel work, so 1 and 16 threads give bit-identical results.
// Same contracts as the reference (kernels/cpu/conv2d.h): forward and backward-data write (=)
// their outputs; backward-filter writes (=) dw and db.
#pragma once
#include "kernels/types.h"

namespace cg::kernels::cpu {

// True for the layers it runs: 3x3 kernel with padding 1 or 1x1 kernel with padding 0, stride 1
// or 2.
bool direct_conv_supports(const Conv2dShape& s);

// y[n, c_out, out_h, out_w] = conv(x, w) + bias (bias may be null).
void direct_conv2d_forward(const Conv2dShape& s, const float* x, const float* w, const float* bias, float* y);

// dx[n, c_in, h, w] from dy: stride 1 runs the forward kernel on dy with the filters rotated by
// 180 degrees and c_in / c_out swapped; stride 2 computes dx's four (even/odd row, even/odd
// column) phases as stride-1 correlations of dy with the 1, 2 or 4 taps that reach each.
void direct_conv2d_backward_data(const Conv2dShape& s, const float* dy, const float* w, float* dx);

// dw[c_out, c_in, 3, 3] and db[c_out] (db may be null) from x and dy.
void direct_conv2d_backward_filter(const Conv2dShape& s, const float* x, const float* dy, float* dw, float* db);

}  // namespace cg::kernels::cpu
