// What CUDA devices this process can see. Safe to call on a machine with no GPU or no driver:
// it reports zero devices instead of failing, so CPU-only runs and GPU-test skips need no guard.
#pragma once
#include <string>

namespace cg::kernels::cuda {

// Number of usable CUDA devices; 0 when the build has no CUDA, or there is no driver or GPU.
int device_count();
// One line naming device `index` (name, compute capability, memory), or why there is none.
std::string describe_device(int index);
// "runtime 13.0, driver 13.0" (or why there is none), for benchmark reports.
std::string cuda_versions();

}  // namespace cg::kernels::cuda
