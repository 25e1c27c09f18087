// The GPU's optimizer updates (the optimizer updates on CUDA tensors; a device switch, so the device is the
// implementation) against the float64 reference over the family's table (conformance/optimizer_cases.h),
// in every dtype it runs. Skips without a GPU.
#include <gtest/gtest.h>

#include "conformance/optimizer_cases.h"
#include "support/need_gpu.h"

namespace cg::test {
namespace {

class GpuOptimizerConformance : public ::testing::TestWithParam<OptimizerParam> {};

TEST_P(GpuOptimizerConformance, MatchesTheFloat64Reference) {
  NEED_GPU();
  expect_optimizer_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Devices, GpuOptimizerConformance, ::testing::ValuesIn(optimizer_params(DeviceType::cuda)),
                         ParamName());

}  // namespace
}  // namespace cg::test
