// Every CPU global average pooling implementation in the registry against the float64 reference over the
// family's table (conformance/pool_cases.h), in every dtype it supports.
#include <gtest/gtest.h>

#include "conformance/pool_cases.h"

namespace cg::test {
namespace {

class CpuPoolConformance : public ::testing::TestWithParam<PoolParam> {};

TEST_P(CpuPoolConformance, MatchesTheFloat64Reference) {
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_pool_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, CpuPoolConformance, ::testing::ValuesIn(pool_params(DeviceType::cpu)),
                         ParamName());

}  // namespace
}  // namespace cg::test
