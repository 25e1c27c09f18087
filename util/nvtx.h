// NVTX ranges for Nsight Systems: CG_NVTX_RANGE("backward") marks the enclosing scope on the
// timeline. Header-only NVTX 3 from the CUDA toolkit; in a build without CUDA it compiles away.
#pragma once

#if defined(CUDAGRAD_WITH_CUDA) && __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>

namespace cg {
class NvtxRange {
 public:
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};
}  // namespace cg

#define CG_NVTX_CONCAT_(a, b) a##b
#define CG_NVTX_CONCAT(a, b) CG_NVTX_CONCAT_(a, b)
#define CG_NVTX_RANGE(name) ::cg::NvtxRange CG_NVTX_CONCAT(cg_nvtx_range_, __LINE__)(name)
#else
#define CG_NVTX_RANGE(name) ((void)0)
#endif
