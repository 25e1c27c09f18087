// Which GPU backend this build compiled, as constants the code above reads instead of #ifdefs:
// a GPU branch written `if constexpr (kernels::kCudaBuild) {...}` is discarded in a CPU-only build,
// and a function named only inside a discarded statement needs no definition ([basic.def.odr]), so
// such a build links without kernels/cuda at all.
#pragma once

namespace cg::kernels {

// kernels/cuda is compiled: by nvcc (the CUDA build) or for the emulated GPU (-DCUDAGRAD_GPU_EMULATION=ON).
#ifdef CUDAGRAD_WITH_CUDA
inline constexpr bool kCudaBuild = true;
#else
inline constexpr bool kCudaBuild = false;
#endif

// cuDNN, cuBLAS and NCCL are linked: the CUDA build only, not the emulated GPU.
#ifdef CUDAGRAD_WITH_CUDA_LIBRARIES
inline constexpr bool kCudaLibraries = true;
#else
inline constexpr bool kCudaLibraries = false;
#endif

// The emulated GPU: kernels/cuda run on the CPU (emulator/).
#ifdef CUDAGRAD_GPU_EMULATION
inline constexpr bool kGpuEmulation = true;
#else
inline constexpr bool kGpuEmulation = false;
#endif

// Why a CUDA request fails in a build without the CUDA backend.
inline constexpr const char* kNoCudaBackend = "this build has no CUDA backend, configure with -DCUDAGRAD_CUDA=ON";

}  // namespace cg::kernels
