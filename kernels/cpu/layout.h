// Memory layouts of image tensors and the CPU transposes between them. Activations are NCHW or
// channels-last NHWC (what tensor-core convolutions read best); filters are KCRS ([c_out, c_in,
// kh, kw], PyTorch's order) or KRSC ([c_out, kh, kw, c_in], what an NHWC convolution takes).
// Every one of those conversions is the same batched transpose of the last two of three axes:
//   NCHW -> NHWC: batched_transpose(n, c, h*w)      NHWC -> NCHW: batched_transpose(n, h*w, c)
//   KCRS -> KRSC: batched_transpose(k, c, kh*kw)    KRSC -> KCRS: batched_transpose(k, kh*kw, c)
// Pure data movement: results are exact and independent of the thread count.
#pragma once
#include <cstdint>

#include "util/layout.h"

namespace cg::kernels::cpu {

using ::cg::Layout;

// dst[b, j, i] = src[b, i, j] for src [batches, rows, cols] and dst [batches, cols, rows].
// src and dst must not overlap.
template <typename T>
void batched_transpose(int64_t batches, int64_t rows, int64_t cols, const T* src, T* dst);

}  // namespace cg::kernels::cpu
