// The CPU's optimizer updates (the optimizer updates on CPU tensors; a device switch, so the device is the
// implementation) against the float64 reference over the family's table (conformance/optimizer_cases.h),
// in every dtype it runs.
#include <gtest/gtest.h>

#include "conformance/optimizer_cases.h"

namespace cg::test {
namespace {

class CpuOptimizerConformance : public ::testing::TestWithParam<OptimizerParam> {};

TEST_P(CpuOptimizerConformance, MatchesTheFloat64Reference) {
  expect_optimizer_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Devices, CpuOptimizerConformance, ::testing::ValuesIn(optimizer_params(DeviceType::cpu)),
                         ParamName());

}  // namespace
}  // namespace cg::test
