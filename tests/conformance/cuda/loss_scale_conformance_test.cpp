// The GPU's loss scaling (the loss-scaling ops on CUDA tensors; a device switch, so the device is the
// implementation) against the float64 reference over the family's table (conformance/loss_scale_cases.h),
// in every dtype it runs. Skips without a GPU.
#include <gtest/gtest.h>

#include "conformance/loss_scale_cases.h"
#include "support/need_gpu.h"

namespace cg::test {
namespace {

class GpuLossScaleConformance : public ::testing::TestWithParam<LossScaleParam> {};

TEST_P(GpuLossScaleConformance, MatchesTheFloat64Reference) {
  NEED_GPU();
  expect_loss_scale_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Devices, GpuLossScaleConformance, ::testing::ValuesIn(loss_scale_params(DeviceType::cuda)),
                         ParamName());

}  // namespace
}  // namespace cg::test
