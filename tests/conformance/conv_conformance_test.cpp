// Every CPU convolution registered (each CPU algorithm under the kernels.cpu_conv value that
// selects it, placed in the problem's policy) against the float64 reference, over the family's
// table (conformance/conv_cases.h), in every dtype and layout it supports; and the reference's
// gradients against central differences of its forward.
#include <gtest/gtest.h>

#include "conformance/conv_cases.h"
#include "conformance/gradient_check.h"

namespace cg::test {
namespace {

using ConvParam = Param<impl::ConvImpl, ConvRow>;
class CpuConvConformance : public ::testing::TestWithParam<ConvParam> {};

TEST_P(CpuConvConformance, MatchesTheFloat64Reference) {
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_conv_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, CpuConvConformance, ::testing::ValuesIn(conv_params(DeviceType::cpu)),
                         ParamName());

// The reference itself, on the rows small enough for central differences.
TEST(ConvReference, GradientsMatchCentralDifferences) {
  for (const ConvRow& r : conv_rows()) {
    if (r.s.c_in * r.s.h * r.s.w * r.s.n > 400) continue;
    SCOPED_TRACE(r.name);
    const ConvValues v = conv_values(r, DType::f64);
    const ConvResults g = conv_reference(r, v);
    const auto forward = [&](const Inputs& in) {
      return conv_reference_forward(r.s, in[0], in[1], r.bias ? in[2] : std::vector<double>());
    };
    expect_finite_differences_match(forward, {v.x, v.w, v.b}, v.dy, {g.dx, g.dw, g.db},
                                    r.bias ? std::vector<std::string>{"dx", "dw", "db"}
                                           : std::vector<std::string>{"dx", "dw"});
  }
}

}  // namespace
}  // namespace cg::test
