// Every CPU loss-scaling implementation in the registry against the float64 reference over the
// family's table (conformance/loss_scale_cases.h).
#include <gtest/gtest.h>

#include "conformance/loss_scale_cases.h"

namespace cg::test {
namespace {

class CpuLossScaleConformance : public ::testing::TestWithParam<LossScaleParam> {};

TEST_P(CpuLossScaleConformance, MatchesTheFloat64Reference) {
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_loss_scale_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, CpuLossScaleConformance, ::testing::ValuesIn(loss_scale_params(DeviceType::cpu)),
                         ParamName());

}  // namespace
}  // namespace cg::test
