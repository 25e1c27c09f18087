// Every GPU loss-scaling implementation in the registry against the float64 reference over the
// family's table (conformance/loss_scale_cases.h). Skips without a GPU.
#include <gtest/gtest.h>

#include "conformance/loss_scale_cases.h"
#include "support/need_gpu.h"

namespace cg::test {
namespace {

class GpuLossScaleConformance : public ::testing::TestWithParam<LossScaleParam> {};

TEST_P(GpuLossScaleConformance, MatchesTheFloat64Reference) {
  NEED_GPU();
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_loss_scale_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, GpuLossScaleConformance, ::testing::ValuesIn(loss_scale_params(DeviceType::cuda)),
                         ParamName());

}  // namespace
}  // namespace cg::test
