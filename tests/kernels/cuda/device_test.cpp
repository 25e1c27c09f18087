// The CUDA device query on a machine with a GPU; elsewhere it must report zero devices cleanly
// (CPU-only runs depend on that) and the GPU part skips, saying why.
#include <gtest/gtest.h>

#include "kernels/cuda/device_info.h"
#include "support/need_gpu.h"

namespace cg::kernels::cuda {
namespace {

TEST(CudaDevice, QueryNeverFailsAndDescribesTheGpu) {
  const int n = device_count();
  ASSERT_GE(n, 0);
  EXPECT_FALSE(describe_device(0).empty());
  NEED_GPU();
  const std::string d = describe_device(0);
  EXPECT_NE(d.find("sm_"), std::string::npos) << d;
  EXPECT_NE(d.find("GiB"), std::string::npos) << d;
}

}  // namespace
}  // namespace cg::kernels::cuda
