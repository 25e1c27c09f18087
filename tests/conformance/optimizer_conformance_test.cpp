// Every CPU optimizer-update implementation in the registry against the float64 reference over the
// family's table (conformance/optimizer_cases.h).
#include <gtest/gtest.h>

#include "conformance/optimizer_cases.h"

namespace cg::test {
namespace {

class CpuOptimizerConformance : public ::testing::TestWithParam<OptimizerParam> {};

TEST_P(CpuOptimizerConformance, MatchesTheFloat64Reference) {
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_optimizer_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, CpuOptimizerConformance, ::testing::ValuesIn(optimizer_params(DeviceType::cpu)),
                         ParamName());

}  // namespace
}  // namespace cg::test
