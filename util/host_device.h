// CG_HOST_DEVICE marks a function that both the host compiler and nvcc compile, for the rules that
// must be the same on the CPU and the GPU (util/counter_rng.h, kernels/float_to_int.h).
#pragma once

#if defined(__CUDACC__)
#define CG_HOST_DEVICE __host__ __device__
#else
#define CG_HOST_DEVICE
#endif
