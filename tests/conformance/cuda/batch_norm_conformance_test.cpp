// Every GPU batch norm in the registry against the float64 reference over the family's table
// (conformance/batch_norm_cases.h), in every dtype and layout it supports. An implementation this
// build lacks (cuDNN on the emulated GPU) refuses every row: its one case skips with the
// registry's reason. Skips without a GPU.
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
