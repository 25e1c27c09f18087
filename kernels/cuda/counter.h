// A device-side counter increment, for state the host must not read inside a step
// (BatchNorm's num_batches_tracked on the GPU).
#pragma once
#include <cstdint>

#include "kernels/cuda/memory.h"

namespace cg::kernels::cuda {

void increment_i64(int64_t* value, int64_t by, Stream stream);  // *value += by

}  // namespace cg::kernels::cuda
