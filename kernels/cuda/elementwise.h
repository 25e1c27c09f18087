// Elementwise CUDA kernels, the counterparts of kernels/cpu/elementwise.h (same semantics, same
// argument order), float32, on a stream. Device pointers.
#pragma once
#include <cstdint>

#include "kernels/cuda/memory.h"

namespace cg::kernels::cuda {

void relu_forward(int64_t n, const float* x, float* y, Stream stream);
void relu_backward(int64_t n, const float* dy, const float* y, float* dx, Stream stream);
void add(int64_t n, const float* a, const float* b, float* y, Stream stream);
void add_relu(int64_t n, const float* a, const float* b, float* y, Stream stream);
void accumulate(int64_t n, const float* x, float* y, Stream stream);
void scale(int64_t n, float alpha, const float* x, float* y, Stream stream);
void fill(int64_t n, float value, float* y, Stream stream);

}  // namespace cg::kernels::cuda
