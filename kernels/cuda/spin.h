// A kernel that keeps a stream busy for a given time (one thread spinning on the device clock):
// the modeled communication backend stands in for an all-reduce of a known duration with it.
#pragma once
#include "kernels/cuda/memory.h"

namespace cg::kernels::cuda {

void spin(double microseconds, Stream stream);

}  // namespace cg::kernels::cuda
