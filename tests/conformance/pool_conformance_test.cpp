// The CPU's global average pooling (ops::global_avg_pool on CPU tensors; a device switch, so the device is the
// implementation) against the float64 reference over the family's table (conformance/pool_cases.h),
// in every dtype and layout it runs.
#include <gtest/gtest.h>

#include "conformance/pool_cases.h"

namespace cg::test {
namespace {

class CpuPoolConformance : public ::testing::TestWithParam<PoolParam> {};

TEST_P(CpuPoolConformance, MatchesTheFloat64Reference) {
  expect_pool_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Devices, CpuPoolConformance, ::testing::ValuesIn(pool_params(DeviceType::cpu)),
                         ParamName());

}  // namespace
}  // namespace cg::test
