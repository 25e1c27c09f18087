// Elementwise kernels against their one-line definitions, over sizes that cover one and several
// parallel chunks, for float and double, including in-place use (y == x).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "kernels/cpu/cast.h"
#include "kernels/cpu/elementwise.h"
#include "support/tolerance.h"

namespace cg::kernels::cpu {
namespace {

template <typename T>
std::vector<T> randn(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) x = T(d(gen));
  return v;
}

// Elementwise results are exact (one rounding at most, the same as the reference's), so they
// compare bit for bit.
template <typename T>
void check_all(int64_t n) {
  const size_t z = size_t(n);
  const auto a = randn<T>(z, 1), b = randn<T>(z, 2);
  auto relu = test::poisoned<T>(z), relu_grad = test::poisoned<T>(z), sum = test::poisoned<T>(z),
       sum_relu = test::poisoned<T>(z), scaled = test::poisoned<T>(z), filled = test::poisoned<T>(z);
  relu_forward<T>(n, a.data(), relu.data());
  relu_backward<T>(n, b.data(), relu.data(), relu_grad.data());
  add<T>(n, a.data(), b.data(), sum.data());
  add_relu<T>(n, a.data(), b.data(), sum_relu.data());
  scale<T>(n, T(-2.5), a.data(), scaled.data());
  fill<T>(n, T(0.25), filled.data());
  std::vector<T> acc(a);
  accumulate<T>(n, b.data(), acc.data());
  for (size_t i = 0; i < z; ++i) {
    ASSERT_EQ(relu[i], std::max(a[i], T(0))) << i;
    ASSERT_EQ(relu_grad[i], a[i] > 0 ? b[i] : T(0)) << i;
    ASSERT_EQ(sum[i], a[i] + b[i]) << i;
    ASSERT_EQ(sum_relu[i], std::max(a[i] + b[i], T(0))) << i;
    ASSERT_EQ(scaled[i], T(-2.5) * a[i]) << i;
    ASSERT_EQ(filled[i], T(0.25)) << i;
    ASSERT_EQ(acc[i], a[i] + b[i]) << i;
  }
}

TEST(ElementwiseKernel, MatchDefinitionsFloat) {
  for (int64_t n : {1, 17, 100000}) check_all<float>(n);
}
TEST(ElementwiseKernel, MatchDefinitionsDouble) {
  for (int64_t n : {1, 17, 100000}) check_all<double>(n);
}

TEST(ElementwiseKernel, InPlaceUseIsAllowed) {
  const int64_t n = 70000;
  const auto a = randn<float>(size_t(n), 3), b = randn<float>(size_t(n), 4);
  std::vector<float> y(a);
  relu_forward<float>(n, y.data(), y.data());
  std::vector<float> g(b);
  relu_backward<float>(n, g.data(), y.data(), g.data());
  std::vector<float> s(a);
  add_relu<float>(n, s.data(), b.data(), s.data());
  std::vector<float> t(a);
  scale<float>(n, 3.f, t.data(), t.data());
  for (size_t i = 0; i < size_t(n); ++i) {
    ASSERT_EQ(y[i], std::max(a[i], 0.f));
    ASSERT_EQ(g[i], a[i] > 0 ? b[i] : 0.f);
    ASSERT_EQ(s[i], std::max(a[i] + b[i], 0.f));
    ASSERT_EQ(t[i], 3.f * a[i]);
  }
}

TEST(ElementwiseKernel, ZeroLengthTouchesNothing) {
  std::vector<float> y{5.f};
  fill<float>(0, 1.f, y.data());
  relu_forward<float>(0, y.data(), y.data());
  EXPECT_EQ(y[0], 5.f);
}

// Floating to integer truncates toward zero, saturates at the type's limits and sends NaN to 0
// (kernels/float_to_int.h), on the CPU as on the GPU. Without the rule C++'s conversion is
// undefined out of range: on x86 -3.f became 253 as a uint8, where the GPU gave 0.
TEST(CastKernel, FloatToIntegerTruncatesAndSaturates) {
  const float nan = std::nanf("");
  const std::vector<float> x{-3.f, -0.5f, 0.f, 2.7f, 255.9f, 256.f, 300.f, 1e20f, -1e20f, nan};
  const int64_t n = int64_t(x.size());
  std::vector<uint8_t> u8(x.size());
  cast(n, DType::f32, x.data(), DType::u8, u8.data());
  EXPECT_EQ(u8, (std::vector<uint8_t>{0, 0, 0, 2, 255, 255, 255, 255, 0, 0}));
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max(), kMin32 = std::numeric_limits<int32_t>::min();
  std::vector<int32_t> i32(x.size());
  cast(n, DType::f32, x.data(), DType::i32, i32.data());
  EXPECT_EQ(i32, (std::vector<int32_t>{-3, 0, 0, 2, 255, 256, 300, kMax32, kMin32, 0}));
  std::vector<int64_t> i64(x.size());
  cast(n, DType::f32, x.data(), DType::i64, i64.data());
  EXPECT_EQ(i64, (std::vector<int64_t>{-3, 0, 0, 2, 255, 256, 300, std::numeric_limits<int64_t>::max(),
                                       std::numeric_limits<int64_t>::min(), 0}));
  // The edges themselves, in double, which holds them exactly.
  const std::vector<double> edges{2147483647.5, 2147483648.0, -2147483648.9, -2147483649.0};
  std::vector<int32_t> e32(edges.size());
  cast(int64_t(edges.size()), DType::f64, edges.data(), DType::i32, e32.data());
  EXPECT_EQ(e32, (std::vector<int32_t>{kMax32, kMax32, kMin32, kMin32}));
}

}  // namespace
}  // namespace cg::kernels::cpu
