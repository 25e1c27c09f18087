// The two halves of PyTorch's fp16_compress_hook / bf16_compress_hook (torch/distributed/
// algorithms/ddp_comm_hooks/default_hooks.py), with the division moved before the cast (below),
// around DDP's 16-bit all-reduce, as engine calls so
// that dist/ reaches the cast and scale kernels only through the engine. Both enqueue on the
// current stream of the tensors' device (the host computes at once on the CPU) and never wait.
// Rounding is to nearest even throughout, identical on the CPU and the GPU.
#pragma once
#include "engine/tensor.h"

namespace cg::ops {

// compressed[i] = round16(bucket[i] * (1.0f / world_size)), the product taken in float32 and
// round16 rounding to compressed's dtype (f16 or bf16). Dividing before the cast, so
// that fp16 overflows only where the average itself passes 65504. PyTorch's stock hook casts
// first (`buffer.to(dtype).div_(world_size)` in default_hooks.py), so it overflows at W times
// smaller gradients, and its results differ from these in the last bit of some elements (for a
// world size that is not a power of two, or in fp16's subnormal range). The division is a float32
// multiplication by the float32 reciprocal: what PyTorch's CUDA `div` by a scalar does, and
// the exact quotient for a power-of-two world size.
// `bucket` (float32, contiguous) is used as scratch and holds bucket / W afterwards: DDP
// overwrites it with decompress_gradients. Both tensors have the same element count and device.
void compress_gradients(Tensor& bucket, Tensor& compressed, int world_size);
// bucket[i] = float(compressed[i]): the hook's `decompress` (an exact widening).
void decompress_gradients(const Tensor& compressed, Tensor& bucket);

}  // namespace cg::ops
