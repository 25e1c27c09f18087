// The GPU's elementwise ops (the elementwise ops on CUDA tensors; a device switch, so the device is the
// implementation) against the float64 reference over the family's table (conformance/elementwise_cases.h),
// in every dtype it runs. Skips without a GPU.
#include <gtest/gtest.h>

#include "conformance/elementwise_cases.h"
#include "support/need_gpu.h"

namespace cg::test {
namespace {

class GpuElementwiseConformance : public ::testing::TestWithParam<ElementwiseParam> {};

TEST_P(GpuElementwiseConformance, MatchesTheFloat64Reference) {
  NEED_GPU();
  expect_elementwise_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Devices, GpuElementwiseConformance, ::testing::ValuesIn(elementwise_params(DeviceType::cuda)),
                         ParamName());

}  // namespace
}  // namespace cg::test
