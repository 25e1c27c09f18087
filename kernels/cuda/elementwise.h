// Elementwise CUDA kernels, the counterparts of kernels/cpu/elementwise.h (same semantics, same
// argument order), for float32, float16 and bfloat16 (`dtype` names the type of every pointer;
// half types compute in fp32 registers), on a stream. Device pointers.
#pragma once
#include <cstdint>

#include "kernels/cuda/memory.h"
#include "util/dtype.h"

namespace cg::kernels::cuda {

void relu_forward(int64_t n, DType dtype, const void* x, void* y, Stream stream);
void relu_backward(int64_t n, DType dtype, const void* dy, const void* y, void* dx, Stream stream);
void add(int64_t n, DType dtype, const void* a, const void* b, void* y, Stream stream);
void add_relu(int64_t n, DType dtype, const void* a, const void* b, void* y, Stream stream);
void accumulate(int64_t n, DType dtype, const void* x, void* y, Stream stream);  // y += x
void scale(int64_t n, DType dtype, float alpha, const void* x, void* y, Stream stream);
void fill(int64_t n, DType dtype, double value, void* y, Stream stream);  // any dtype, integers too
void silu_forward(int64_t n, DType dtype, const void* x, void* y, Stream stream);
void silu_backward(int64_t n, DType dtype, const void* dy, const void* x, void* dx, Stream stream);

// dst[i] = convert(src[i]) between any two of f32, f16, bf16, f64, i64, i32, u8, rounding to
// nearest even like kernels/cpu/cast.h.
void cast(int64_t n, DType src_dtype, const void* src, DType dst_dtype, void* dst, Stream stream);

}  // namespace cg::kernels::cuda
