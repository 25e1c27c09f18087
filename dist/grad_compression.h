// dist.grad_compression: DDP's gradient buckets all-reduced in 16 bits, as PyTorch's
// fp16_compress_hook / bf16_compress_hook (ddp_comm_hooks/default_hooks.py) but dividing first:
// each bucket is divided by the world size in float32 and then cast to the 16-bit type (so that
// fp16 cannot overflow before the division), summed over the ranks with 16-bit data on
// the wire, and cast back into the float32 bucket. The stock hook casts first
// (`buffer.to(dtype).div_(world_size)`), which with the fp16 loss scaler at 2^16 overflows at W
// times smaller gradients; so results differ from the stock hook's in the last bit of some elements
// (engine/compress_ops.h). Half the bytes of a float32 all-reduce, for the precision of the
// 16-bit type (fp16: 11 significant bits, range up to 65504; bf16: 8 bits, float32's range).
//
// The compression is a decorator over a transport (make_compressed_comm): its float32 averages (a
// bucket's all-reduce, ZeRO-1's reduce-scatter) become the casts around the transport's 16-bit
// sum (GradientComm::wire16()); everything else (broadcasts, all-gathers, SyncBatchNorm's sums)
// goes to the transport unchanged. A reducer averages its buckets through it and nothing else:
// the scaler's found_inf and parameters never travel compressed.
#pragma once
#include <memory>

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

class GradientComm;

// `transport` with its float32 averages sent in 16 bits as `compression` (not none) says; the
// transport must outlive it. Throws a UsageError naming the key and the transport's reason when
// it has no 16-bit sum. The 16-bit values live in a buffer that mirrors the float32 one a bucket
// is a slice of (one per flat gradient buffer, replaced when the reducer lays out a new one), so
// they stay alive and at fixed addresses (CUDA graphs) while the collective runs.
std::unique_ptr<GradientComm> make_compressed_comm(GradientComm& transport, GradCompression compression);

}  // namespace cg::dist
