// Every CPU cross-entropy implementation in the registry against the float64 reference over the
// family's table (conformance/loss_cases.h), in every dtype it supports.
#include <gtest/gtest.h>

#include "conformance/loss_cases.h"

namespace cg::test {
namespace {

class CpuLossConformance : public ::testing::TestWithParam<LossParam> {};

TEST_P(CpuLossConformance, MatchesTheFloat64Reference) {
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_loss_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, CpuLossConformance, ::testing::ValuesIn(loss_params(DeviceType::cpu)),
                         ParamName());

}  // namespace
}  // namespace cg::test
