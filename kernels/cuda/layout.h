// The GPU transposes between image and filter layouts (see kernels/cpu/layout.h for the mapping
// of NCHW <-> NHWC and KCRS <-> KRSC onto one batched transpose). The element type may change on
// the way (f32, f16, bf16; through float, rounding to nearest even): an NHWC convolution under
// autocast turns its float32 KCRS weight into the half KRSC copy cuDNN reads in one pass.
#pragma once
#include <cstdint>

#include "kernels/types.h"
#include "kernels/cuda/memory.h"
#include "util/dtype.h"

namespace cg::kernels::cuda {

// The shared types (kernels/types.h), also under this namespace.
using ::cg::Layout;

// dst[b, j, i] = convert(src[b, i, j]) for src [batches, rows, cols] in src_dtype and
// dst [batches, cols, rows] in dst_dtype. Device pointers that must not overlap; exact when the
// dtypes match.
void batched_transpose(int64_t batches, int64_t rows, int64_t cols, DType src_dtype, const void* src,
                       DType dst_dtype, void* dst, Stream stream);

}  // namespace cg::kernels::cuda
