// The two halves of PyTorch's fp16_compress_hook / bf16_compress_hook (torch/distributed/
// algorithms/ddp_comm_hooks/default_hooks.py) around DDP's 16-bit all-reduce, as engine calls so
// that dist/ reaches the cast and scale kernels only through the engine. Both enqueue on the
// current stream of the tensors' device (the host computes at once on the CPU) and never wait.
// Rounding is to nearest even throughout, identical on the CPU and the GPU.
#pragma once
#include "engine/tensor.h"

namespace cg::ops {

// compressed[i] = round16(round16(bucket[i]) * (1.0f / world_size)), where round16 rounds to
// compressed's dtype (f16 or bf16) and the product is taken in float32. That is the hook's
// `buffer.to(dtype).div_(world_size)`: cast first, then divide in 16 bits; PyTorch's CUDA kernel
// divides by a host scalar as a float32 multiplication by its reciprocal, which is what this does
// on every device (for a power-of-two world size it is the exact quotient anyway).
// `bucket` (float32, contiguous) is used as scratch and holds garbage afterwards: DDP overwrites it
// with decompress_gradients. Both tensors have the same element count and device.
void compress_gradients(Tensor& bucket, Tensor& compressed, int world_size);
// bucket[i] = float(compressed[i]): the hook's `decompress` (an exact widening).
void decompress_gradients(const Tensor& compressed, Tensor& bucket);

}  // namespace cg::ops
