// Every GPU elementwise implementation in the registry against the float64 reference over the
// family's table (conformance/elementwise_cases.h), in every dtype it supports. An implementation this build
// lacks refuses every row: its one case skips with the registry's reason. Skips without a GPU.
#include <gtest/gtest.h>

#include "conformance/elementwise_cases.h"
#include "support/need_gpu.h"

namespace cg::test {
namespace {

class GpuElementwiseConformance : public ::testing::TestWithParam<ElementwiseParam> {};

TEST_P(GpuElementwiseConformance, MatchesTheFloat64Reference) {
  NEED_GPU();
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_elementwise_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, GpuElementwiseConformance, ::testing::ValuesIn(elementwise_params(DeviceType::cuda)),
                         ParamName());

}  // namespace
}  // namespace cg::test
