// Hand-written convolution: implicit GEMM (the im2col matrix is never materialized; each tile
// gathers its input window on the fly), NCHW activations, weights [c_out, c_in, kh, kw].
// float32 on CUDA cores; float16 and bfloat16 on tensor cores. Every dtype accumulates in fp32
// and writes its outputs in the input dtype. Same semantics as kernels/cpu/conv2d.h:
// forward and backward-data write (=) their outputs; backward-filter writes (=) dw and db.
#pragma once
#include "kernels/types.h"
#include "kernels/cuda/memory.h"
#include "util/dtype.h"
#include "util/layout.h"

namespace cg::kernels::cuda {

// The shared types (kernels/types.h), also under this namespace.
using kernels::Conv2dShape;

// Whether the native kernels handle this shape and dtype (f32, f16, bf16; any shape today).
bool conv2d_native_supports(const Conv2dShape& s, DType dtype);

// x [n, c_in, h, w], w [c_out, c_in, kh, kw], bias [c_out] or null, y [n, c_out, oh, ow]; all `dtype`.
void conv2d_native_forward(const Conv2dShape& s, DType dtype, const void* x, const void* w, const void* bias,
                           void* y, Stream stream);
void conv2d_native_backward_data(const Conv2dShape& s, DType dtype, const void* dy, const void* w, void* dx,
                                 Stream stream);
// db may be null.
void conv2d_native_backward_filter(const Conv2dShape& s, DType dtype, const void* x, const void* dy, void* dw,
                                   void* db, const WorkspaceFn& workspace, Stream stream);
// db[o] = sum of dy over every element of channel o, dy [n, c_out, oh, ow] or, with Layout::nhwc,
// [n, oh, ow, c_out]; fixed summation order, no atomics. The cuDNN path uses it too: cuDNN 9's
// cudnnConvolutionBackwardBias answers NOT_SUPPORTED for bfloat16 (seen on the H100, cuDNN 9.19).
void conv2d_bias_grad(const Conv2dShape& s, DType dtype, const void* dy, void* db, Stream stream, Layout layout);

}  // namespace cg::kernels::cuda
