// Every CPU batch norm registered against the float64 reference over the family's table
// (conformance/batch_norm_cases.h), in every dtype and layout it supports; and the reference's
// gradients against central differences of its forward.
#include <gtest/gtest.h>

#include "conformance/batch_norm_run.h"
#include "conformance/gradient_check.h"

namespace cg::test {
namespace {

class CpuBatchNormConformance : public ::testing::TestWithParam<BatchNormParam> {};

TEST_P(CpuBatchNormConformance, MatchesTheFloat64Reference) {
  if (!GetParam().refused.empty()) GTEST_SKIP() << GetParam().implementation.name << " " << GetParam().refused;
  expect_batch_norm_conforms(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Registered, CpuBatchNormConformance, ::testing::ValuesIn(batch_norm_params(DeviceType::cpu)),
                         ParamName());

// The reference itself: dx, dgamma, dbeta (and d_residual) of every row, in both modes.
TEST(BatchNormReference, GradientsMatchCentralDifferences) {
  for (const BatchNormRow& r : batch_norm_rows()) {
    if (r.n * r.c * r.h * r.w > 400) continue;
    SCOPED_TRACE(r.name);
    const BatchNormValues v = batch_norm_values(r, DType::f64);
    const BatchNormResults g = batch_norm_reference(r, v);
    const auto forward = [&](const Inputs& in) {
      BatchNormValues u = v;
      u.x = in[0], u.gamma = in[1], u.beta = in[2], u.residual = in[3];
      return batch_norm_reference_forward(r, u);
    };
    expect_finite_differences_match(forward, {v.x, v.gamma, v.beta, v.residual}, v.dy,
                                    {g.dx, g.dgamma, g.dbeta, g.d_residual},
                                    r.residual ? std::vector<std::string>{"dx", "dgamma", "dbeta", "d_residual"}
                                               : std::vector<std::string>{"dx", "dgamma", "dbeta"});
  }
}

}  // namespace
}  // namespace cg::test
