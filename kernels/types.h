// The types the CPU and CUDA kernels share: problem shapes and hyperparameters. Both
// kernels/cpu/ and kernels/cuda/ include this header (and never each other for types); the
// engine's implementations build these from tensors. Layout and Activation come from util/,
// since every layer speaks them.
#pragma once
#include <cstdint>

#include "util/dtype.h"
#include "util/layout.h"
#include "util/optim_options.h"

namespace cg::kernels {

// 2-D convolution, NCHW numbering (an NHWC problem has the same numbers).
struct Conv2dShape {
  int64_t n = 1, c_in = 1, h = 1, w = 1;  // input
  int64_t c_out = 1, kh = 1, kw = 1;      // filter
  int64_t stride = 1, pad = 0;
  int64_t out_h() const { return (h + 2 * pad - kh) / stride + 1; }
  int64_t out_w() const { return (w + 2 * pad - kw) / stride + 1; }
};

// Batch normalization: statistics per channel c over n * hw values.
struct BatchNormShape {
  int64_t n = 1, c = 1, hw = 1;  // hw = H * W
};

// Channels-last ([N, H, W, C]) activations are the same batch norm over the shape
// {N * H * W, C, 1}: element (row, c) sits at row * C + c in both readings.
inline BatchNormShape channels_last_shape(int64_t n, int64_t h, int64_t w, int64_t c) {
  return {n * h * w, c, 1};
}

}  // namespace cg::kernels
