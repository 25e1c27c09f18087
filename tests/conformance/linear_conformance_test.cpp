// Every CPU linear implementation registered in this build against the float64 reference over the
// family's table (conformance/linear_cases.h), in every dtype it supports.
#include <gtest/gtest.h>

#include "conformance/linear_cases.h"

namespace cg::test {
namespace {

class CpuLinearConformance : public ::testing::TestWithParam<LinearParam> {};

TEST_P(CpuLinearConformance, MatchesTheFloat64Reference) {
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_linear_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, CpuLinearConformance, ::testing::ValuesIn(linear_params(DeviceType::cpu)),
                         ParamName());

}  // namespace
}  // namespace cg::test
