// Layout changes of 4-D tensors as plain (unrecorded) copies, for ops that need another layout
// inside: [a, b, c, d] -> [a, c, d, b] is NCHW -> NHWC for activations and KCRS -> KRSC for
// filters, and the inverse goes back. The copy may change the dtype on the way (one pass on the
// GPU): the half KRSC filter of an NHWC convolution under autocast comes straight from the
// float32 weight.
#pragma once
#include "engine/tensor.h"

namespace cg::ops::detail {

// x [a, b, c, d] -> [a, c, d, b] in `dtype`.
Tensor to_channels_last(const Tensor& x, DType dtype);
// x [a, c, d, b] -> [a, b, c, d] in `dtype`.
Tensor to_channels_first(const Tensor& x, DType dtype);

}  // namespace cg::ops::detail
