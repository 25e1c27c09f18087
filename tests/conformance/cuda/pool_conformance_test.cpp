// The GPU's global average pooling (ops::global_avg_pool on CUDA tensors; a device switch, so the device is the
// implementation) against the float64 reference over the family's table (conformance/pool_cases.h),
// in every dtype and layout it runs. Skips without a GPU.
#include <gtest/gtest.h>

#include "conformance/pool_cases.h"
#include "support/need_gpu.h"

namespace cg::test {
namespace {

class GpuPoolConformance : public ::testing::TestWithParam<PoolParam> {};

TEST_P(GpuPoolConformance, MatchesTheFloat64Reference) {
  NEED_GPU();
  expect_pool_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Devices, GpuPoolConformance, ::testing::ValuesIn(pool_params(DeviceType::cuda)),
                         ParamName());

}  // namespace
}  // namespace cg::test
