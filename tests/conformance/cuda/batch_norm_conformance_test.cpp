// Every GPU batch norm registered in this build against the float64 reference over the family's
// table (conformance/batch_norm_cases.h), in every dtype and layout it supports. A build with no GPU implementation
// registered (CPU-only) has one case that skips saying so. Skips without a GPU.
#include <gtest/gtest.h>

#include "conformance/batch_norm_run.h"
#include "support/need_gpu.h"

namespace cg::test {
namespace {

class GpuBatchNormConformance : public ::testing::TestWithParam<BatchNormParam> {};

TEST_P(GpuBatchNormConformance, MatchesTheFloat64Reference) {
  NEED_GPU();
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_batch_norm_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, GpuBatchNormConformance, ::testing::ValuesIn(batch_norm_params(DeviceType::cuda)),
                         ParamName());

}  // namespace
}  // namespace cg::test
