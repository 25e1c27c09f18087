// Two words of the vocabulary every layer shares with the kernels, like DType (util/dtype.h):
// how an image tensor is laid out in memory, and an activation fused into the op before it.
#pragma once

namespace cg {

// Image tensors are contiguous: NCHW ones have shape [N, C, H, W], channels-last (NHWC) ones
// [N, H, W, C], the layout tensor cores read best. Filters follow the activations: KCRS for
// NCHW, KRSC ([c_out, kh, kw, c_in]) for an NHWC convolution.
enum class Layout { nchw, nhwc };

// relu(op(x)) computed in the op's own pass (relu(bn(x)) is the pattern in every BasicBlock;
// fusing saves a full read and write of the activation each way).
enum class Activation { none, relu };

}  // namespace cg
