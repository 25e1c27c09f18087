// The CPU's cross-entropy (ops::cross_entropy on CPU tensors; a device switch, so the device is the
// implementation) against the float64 reference over the family's table (conformance/loss_cases.h),
// in every dtype it runs.
#include <gtest/gtest.h>

#include "conformance/loss_cases.h"

namespace cg::test {
namespace {

class CpuLossConformance : public ::testing::TestWithParam<LossParam> {};

TEST_P(CpuLossConformance, MatchesTheFloat64Reference) {
  expect_loss_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Devices, CpuLossConformance, ::testing::ValuesIn(loss_params(DeviceType::cpu)),
                         ParamName());

}  // namespace
}  // namespace cg::test
