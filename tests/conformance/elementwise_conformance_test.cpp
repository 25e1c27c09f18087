// The CPU's elementwise ops (the elementwise ops on CPU tensors; a device switch, so the device is the
// implementation) against the float64 reference over the family's table (conformance/elementwise_cases.h),
// in every dtype it runs.
#include <gtest/gtest.h>

#include "conformance/elementwise_cases.h"

namespace cg::test {
namespace {

class CpuElementwiseConformance : public ::testing::TestWithParam<ElementwiseParam> {};

TEST_P(CpuElementwiseConformance, MatchesTheFloat64Reference) {
  expect_elementwise_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Devices, CpuElementwiseConformance, ::testing::ValuesIn(elementwise_params(DeviceType::cpu)),
                         ParamName());

}  // namespace
}  // namespace cg::test
