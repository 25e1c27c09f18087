// Conversions between element types on the CPU (the same rounding as the GPU: round to nearest
// even; floating to integer saturates, NaN to 0: kernels/float_to_int.h). The dtype-dispatching
// entry points serve Tensor::to, copy_ and fill_.
#pragma once
#include <cstdint>

#include "util/dtype.h"

namespace cg::kernels::cpu {

// dst[i] = convert(src[i]) for n elements; src and dst must not overlap unless same dtype.
void cast(int64_t n, DType src_type, const void* src, DType dst_type, void* dst);
// dst[i] = convert(value) for n elements.
void fill_cast(int64_t n, double value, DType dst_type, void* dst);

}  // namespace cg::kernels::cpu
