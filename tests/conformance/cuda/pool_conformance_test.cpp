// Every GPU global average pooling implementation in the registry against the float64 reference over the
// family's table (conformance/pool_cases.h), in every dtype it supports. An implementation this build
// lacks refuses every row: its one case skips with the registry's reason. Skips without a GPU.
#include <gtest/gtest.h>

#include "conformance/pool_cases.h"
#include "support/need_gpu.h"

namespace cg::test {
namespace {

class GpuPoolConformance : public ::testing::TestWithParam<PoolParam> {};

TEST_P(GpuPoolConformance, MatchesTheFloat64Reference) {
  NEED_GPU();
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_pool_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, GpuPoolConformance, ::testing::ValuesIn(pool_params(DeviceType::cuda)),
                         ParamName());

}  // namespace
}  // namespace cg::test
