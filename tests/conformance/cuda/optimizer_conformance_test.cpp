// Every GPU optimizer-update implementation in the registry against the float64 reference over the
// family's table (conformance/optimizer_cases.h). Skips without a GPU.
#include <gtest/gtest.h>

#include "conformance/optimizer_cases.h"
#include "support/need_gpu.h"

namespace cg::test {
namespace {

class GpuOptimizerConformance : public ::testing::TestWithParam<OptimizerParam> {};

TEST_P(GpuOptimizerConformance, MatchesTheFloat64Reference) {
  NEED_GPU();
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_optimizer_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, GpuOptimizerConformance, ::testing::ValuesIn(optimizer_params(DeviceType::cuda)),
                         ParamName());

}  // namespace
}  // namespace cg::test
