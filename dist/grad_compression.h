// dist.grad_compression: DDP's gradient buckets all-reduced in 16 bits, as PyTorch's
// fp16_compress_hook / bf16_compress_hook (ddp_comm_hooks/default_hooks.py) but dividing first:
// each bucket is divided by the world size in float32 and then cast to the 16-bit type (so that
// fp16 cannot overflow before the division), summed over the ranks with 16-bit data on
// the wire, and cast back into the float32 bucket. The stock hook casts first
// (`buffer.to(dtype).div_(world_size)`), which with the fp16 loss scaler at 2^16 overflows at W
// times smaller gradients; so results differ from the stock hook's in the last bit of some elements
// (engine/grad_compression.h). Half the bytes of a float32 all-reduce, for the precision of the
// 16-bit type (fp16: 11 significant bits, range up to 65504; bf16: 8 bits, float32's range).
#pragma once
#include "util/dtype.h"
#include "util/enum_names.h"

namespace cg::dist {

enum class GradCompression { none, fp16, bf16 };
inline EnumNames<GradCompression> enum_names(GradCompression) {
  return {{GradCompression::none, "none"}, {GradCompression::fp16, "fp16"}, {GradCompression::bf16, "bf16"}};
}

// The element type on the wire: f32 (none), f16 or bf16.
inline DType wire_dtype(GradCompression c) {
  return c == GradCompression::fp16 ? DType::f16 : c == GradCompression::bf16 ? DType::bf16 : DType::f32;
}

}  // namespace cg::dist
