// The classifier head's kernels: global average pooling (x/y in `dtype`, f32/f16/bf16, fp32 sums)
// and cross-entropy (float32 logits: under mixed precision the loss is computed in fp32, as
// PyTorch's autocast does). Counterparts of kernels/cpu/{pool,loss}.h.
#pragma once
#include <cstdint>

#include "kernels/cuda/memory.h"
#include "util/dtype.h"

namespace cg::kernels::cuda {

void global_avg_pool_forward(int64_t nc, int64_t hw, DType dtype, const void* x, void* y, Stream stream);
void global_avg_pool_backward(int64_t nc, int64_t hw, DType dtype, const void* dy, void* dx, Stream stream);
// Channels-last: x [n, hw, c] -> y [n, c], each output summing its hw inputs in order (deterministic,
// and the CPU's order); backward dx[i, j, k] = dy[i, k] / hw.
void global_avg_pool_nhwc_forward(int64_t n, int64_t hw, int64_t c, DType dtype, const void* x, void* y,
                                  Stream stream);
void global_avg_pool_nhwc_backward(int64_t n, int64_t hw, int64_t c, DType dtype, const void* dy, void* dx,
                                   Stream stream);

// loss (one float) and the number of correct rows (one int64) are written to device memory, so
// the host reads them only when it wants to (no synchronization inside a step). A label outside
// [0, classes) makes the loss NaN and is recorded for raise_device_error() (device_error.h).
void cross_entropy_forward(int64_t n, int64_t classes, const float* logits, const int64_t* labels, float* loss,
                           float* probs, int64_t* correct, Stream stream);
// dloss: one float in device memory.
void cross_entropy_backward(int64_t n, int64_t classes, const float* dloss, const float* probs,
                            const int64_t* labels, float* dlogits, Stream stream);

}  // namespace cg::kernels::cuda
