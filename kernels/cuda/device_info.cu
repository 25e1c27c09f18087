#include <cuda_runtime.h>
#include <fmt/format.h>

#include "kernels/cuda/device_info.h"

namespace cg::kernels::cuda {

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error so later calls start clean
    return 0;
  }
  return count;
}

std::string describe_device(int index) {
  cudaDeviceProp prop{};
  cudaError_t err = cudaGetDeviceProperties(&prop, index);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("no CUDA device {}: {}", index, cudaGetErrorString(err));
  }
  return fmt::format("{} (sm_{}{}, {:.1f} GiB)", prop.name, prop.major, prop.minor,
                     prop.totalGlobalMem / double(1 << 30));
}

std::string cuda_versions() {
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  if (cudaDriverGetVersion(&driver) != cudaSuccess) cudaGetLastError();
  return fmt::format("runtime {}.{}, driver {}.{}", runtime / 1000, runtime % 1000 / 10, driver / 1000,
                     driver % 1000 / 10);
}

}  // namespace cg::kernels::cuda
