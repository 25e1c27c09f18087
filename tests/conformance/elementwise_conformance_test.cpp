// Every CPU elementwise implementation in the registry against the float64 reference over the
// family's table (conformance/elementwise_cases.h), in every dtype it supports.
#include <gtest/gtest.h>

#include "conformance/elementwise_cases.h"

namespace cg::test {
namespace {

class CpuElementwiseConformance : public ::testing::TestWithParam<ElementwiseParam> {};

TEST_P(CpuElementwiseConformance, MatchesTheFloat64Reference) {
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_elementwise_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, CpuElementwiseConformance, ::testing::ValuesIn(elementwise_params(DeviceType::cpu)),
                         ParamName());

}  // namespace
}  // namespace cg::test
