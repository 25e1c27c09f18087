// The CPU's loss scaling (the loss-scaling ops on CPU tensors; a device switch, so the device is the
// implementation) against the float64 reference over the family's table (conformance/loss_scale_cases.h),
// in every dtype it runs.
#include <gtest/gtest.h>

#include "conformance/loss_scale_cases.h"

namespace cg::test {
namespace {

class CpuLossScaleConformance : public ::testing::TestWithParam<LossScaleParam> {};

TEST_P(CpuLossScaleConformance, MatchesTheFloat64Reference) {
  expect_loss_scale_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Devices, CpuLossScaleConformance, ::testing::ValuesIn(loss_scale_params(DeviceType::cpu)),
                         ParamName());

}  // namespace
}  // namespace cg::test
