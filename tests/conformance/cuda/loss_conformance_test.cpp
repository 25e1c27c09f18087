// The GPU's cross-entropy (ops::cross_entropy on CUDA tensors; a device switch, so the device is the
// implementation) against the float64 reference over the family's table (conformance/loss_cases.h),
// in every dtype it runs. Skips without a GPU.
#include <gtest/gtest.h>

#include "conformance/loss_cases.h"
#include "support/need_gpu.h"

namespace cg::test {
namespace {

class GpuLossConformance : public ::testing::TestWithParam<LossParam> {};

TEST_P(GpuLossConformance, MatchesTheFloat64Reference) {
  NEED_GPU();
  expect_loss_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Devices, GpuLossConformance, ::testing::ValuesIn(loss_params(DeviceType::cuda)),
                         ParamName());

}  // namespace
}  // namespace cg::test
