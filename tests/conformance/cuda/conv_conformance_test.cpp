// Every GPU convolution registered in this build against the float64 reference over the family's
// table (conformance/conv_cases.h), in every dtype and layout it supports. A build with no GPU implementation
// registered (CPU-only) has one case that skips saying so. Skips without a GPU.
#include <gtest/gtest.h>

#include "conformance/conv_cases.h"
#include "support/need_gpu.h"

namespace cg::test {
namespace {

using ConvParam = Param<impl::ConvImpl, ConvRow>;
class GpuConvConformance : public ::testing::TestWithParam<ConvParam> {};

TEST_P(GpuConvConformance, MatchesTheFloat64Reference) {
  NEED_GPU();
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_conv_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, GpuConvConformance, ::testing::ValuesIn(conv_params(DeviceType::cuda)),
                         ParamName());

}  // namespace
}  // namespace cg::test
