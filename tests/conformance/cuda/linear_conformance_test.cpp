// Every GPU linear implementation registered in this build against the float64 reference over the family's
// table (conformance/linear_cases.h), in every dtype it supports. A build with no GPU implementation
// registered (CPU-only) has one case that skips saying so. Skips without a GPU.
#include <gtest/gtest.h>

#include "conformance/linear_cases.h"
#include "support/need_gpu.h"

namespace cg::test {
namespace {

class GpuLinearConformance : public ::testing::TestWithParam<LinearParam> {};

TEST_P(GpuLinearConformance, MatchesTheFloat64Reference) {
  NEED_GPU();
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_linear_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, GpuLinearConformance, ::testing::ValuesIn(linear_params(DeviceType::cuda)),
                         ParamName());

}  // namespace
}  // namespace cg::test
