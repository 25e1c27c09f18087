// The packed GEMM against the triple loop: sizes that do and do not fill whole register tiles,
// depths beyond one packing pass, transposed operands, overwrite and accumulate, float and double;
// and the same product from a left operand packed once (gemm_packed_lhs), bit for bit. Every
// element's order of sums, bit for bit: chains of 32 fused multiply-adds, each chain's sum added
// to C in turn, in whole tiles and at the ragged edges alike.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cpu_conv/gemm.h"
#include "support/random_data.h"
#include "support/tolerance.h"

namespace cg::kernels::cpu {
namespace {

using test::random_vector;

struct Size {
  int64_t m, n, k;
};
// 1x1x1; smaller than a tile; exact tiles; ragged edges; depth over several packing passes; last
// column panels one and two vectors wide (the narrower micro-kernels); up to two column panels,
// where gemm reads a row-major or column-major A in place (Winograd's products: whole and partial
// row blocks, one to three vectors wide, the deepest single pass, and just past each limit).
const Size kSizes[] = {{1, 1, 1},      {3, 5, 7},       {8, 48, 16},   {16, 96, 64},  {13, 50, 9},
                       {64, 130, 577}, {97, 33, 1000}, {200, 70, 30}, {5, 300, 2},   {16, 64, 20},
                       {24, 80, 33},   {147, 16, 16},  {99, 32, 32},  {60, 48, 384}, {21, 40, 385},
                       {37, 64, 64},   {40, 96, 8},    {40, 97, 8}};

template <typename T>
void check(const Size& z, bool transpose_a, bool transpose_b, GemmMode mode) {
  const auto a = random_vector<T>(size_t(z.m * z.k), 1), b = random_vector<T>(size_t(z.k * z.n), 2);
  const auto c0 = random_vector<T>(size_t(z.m * z.n), 3);
  // A stored as [m][k] or, transposed, as [k][m]; likewise B as [k][n] or [n][k].
  auto at = [&](int64_t i, int64_t p) { return transpose_a ? a[size_t(p * z.m + i)] : a[size_t(i * z.k + p)]; };
  auto bt = [&](int64_t p, int64_t j) { return transpose_b ? b[size_t(j * z.k + p)] : b[size_t(p * z.n + j)]; };
  std::vector<T> ref(size_t(z.m * z.n));
  for (int64_t i = 0; i < z.m; ++i)
    for (int64_t j = 0; j < z.n; ++j) {
      double acc = mode == GemmMode::accumulate ? double(c0[size_t(i * z.n + j)]) : 0.0;
      for (int64_t p = 0; p < z.k; ++p) acc += double(at(i, p)) * double(bt(p, j));
      ref[size_t(i * z.n + j)] = T(acc);
    }
  auto c = mode == GemmMode::accumulate ? c0 : test::poisoned<T>(size_t(z.m * z.n));
  const MatrixView<T> av = transpose_a ? transposed(a.data(), z.m) : row_major(a.data(), z.k);
  const MatrixView<T> bv = transpose_b ? transposed(b.data(), z.k) : row_major(b.data(), z.n);
  gemm<T>(z.m, z.n, z.k, av, bv, c.data(), z.n, mode);
  std::vector<T> packed(size_t(packed_lhs_size<T>(z.m, z.k)));
  pack_lhs<T>(z.m, z.k, av, packed.data());
  auto c_packed = mode == GemmMode::accumulate ? c0 : test::poisoned<T>(size_t(z.m * z.n));
  gemm_packed_lhs<T>(z.m, z.n, z.k, packed.data(), bv, c_packed.data(), z.n, mode);
  EXPECT_EQ(c_packed, c) << "A packed once: " << z.m << "x" << z.n << "x" << z.k << " transpose_a " << transpose_a;
  const test::Tolerance tol = test::tolerance_for<T>();
  EXPECT_TRUE(test::all_close(c, ref, {tol.atol * 10, tol.rtol * 10}))
      << z.m << "x" << z.n << "x" << z.k << " transpose_a " << transpose_a << " transpose_b "
      << transpose_b << " accumulate " << (mode == GemmMode::accumulate);
}

template <typename T>
void check_all() {
  for (const Size& z : kSizes)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (GemmMode mode : {GemmMode::overwrite, GemmMode::accumulate}) check<T>(z, ta, tb, mode);
}

TEST(GemmKernel, MatchesTripleLoopFloat) { check_all<float>(); }

// C = ((C0 + s1) + s2) + ..., s_i the sum of the products of depths [32(i-1), 32i) from zero (C0
// = 0 when overwriting: then C = (s1 + s2) + ...). Each product is added fused (one rounding) where
// the compiler contracts the micro-kernel's multiply-add, as -O2 does, or rounded first, as the
// sanitizers' -O1 build leaves it; the order is the same either way, and one of the two models
// must match every element. Long chains cost exactness: one chain through 256 channels left
// Winograd F(2x2)'s backward-data 2.3x PyTorch's error (winograd2_test.cpp).
std::vector<float> chains_of_32(const Size& z, const std::vector<float>& a, const std::vector<float>& b,
                                const std::vector<float>& c0, GemmMode mode, bool fused) {
  std::vector<float> want(size_t(z.m * z.n));
  for (int64_t i = 0; i < z.m; ++i)
    for (int64_t j = 0; j < z.n; ++j) {
      float c = mode == GemmMode::accumulate ? c0[size_t(i * z.n + j)] : 0.f;
      for (int64_t p0 = 0; p0 < z.k; p0 += 32) {
        float chain = 0.f;
        for (int64_t p = p0; p < std::min(z.k, p0 + 32); ++p) {
          const float x = a[size_t(i * z.k + p)], y = b[size_t(p * z.n + j)];
          if (fused) {
            chain = std::fma(x, y, chain);
          } else {
            volatile float product = x * y;  // rounded before the addition
            chain = chain + product;
          }
        }
        c = mode == GemmMode::overwrite && p0 == 0 ? chain : c + chain;
      }
      want[size_t(i * z.n + j)] = c;
    }
  return want;
}

TEST(GemmKernel, EveryElementSumsItsDepthInChainsOf32) {
  for (const Size& z : kSizes)
    for (GemmMode mode : {GemmMode::overwrite, GemmMode::accumulate}) {
      const auto a = random_vector<float>(size_t(z.m * z.k), 1), b = random_vector<float>(size_t(z.k * z.n), 2);
      const auto c0 = random_vector<float>(size_t(z.m * z.n), 3);
      auto c = mode == GemmMode::accumulate ? c0 : test::poisoned<float>(size_t(z.m * z.n));
      gemm<float>(z.m, z.n, z.k, row_major(a.data(), z.k), row_major(b.data(), z.n), c.data(), z.n, mode);
      EXPECT_TRUE(c == chains_of_32(z, a, b, c0, mode, true) || c == chains_of_32(z, a, b, c0, mode, false))
          << z.m << "x" << z.n << "x" << z.k << " accumulate " << (mode == GemmMode::accumulate);
    }
}

TEST(GemmKernel, MatchesTripleLoopDouble) { check_all<double>(); }

// packed_lhs_offset names where pack_lhs put every element, for sizes with ragged row panels and
// depths past one packing pass (385: a block of 384, then one of 1); and the promise Winograd's
// filter transform writes by: a panel's rows of depths d and d + 1 (d even) are 2 x MR contiguous
// floats.
TEST(GemmKernel, PackedLhsOffsetNamesWherePackLhsPutEachElement) {
  const int mr = packed_lhs_rows<float>();
  for (const Size& z : {Size{13, 1, 385}, Size{8, 1, 2}, Size{97, 1, 1000}, Size{5, 1, 3}}) {
    const auto a = random_vector<float>(size_t(z.m * z.k), 1);
    std::vector<float> packed(size_t(packed_lhs_size<float>(z.m, z.k)));
    pack_lhs<float>(z.m, z.k, row_major(a.data(), z.k), packed.data());
    for (int64_t r = 0; r < z.m; ++r)
      for (int64_t d = 0; d < z.k; ++d)
        ASSERT_EQ(packed[size_t(packed_lhs_offset<float>(z.m, z.k, r, d))], a[size_t(r * z.k + d)])
            << z.m << "x" << z.k << " row " << r << " depth " << d;
    for (int64_t r0 = 0; r0 < z.m; r0 += mr)
      for (int64_t d = 0; d + 1 < z.k; d += 2)
        ASSERT_EQ(packed_lhs_offset<float>(z.m, z.k, r0, d + 1), packed_lhs_offset<float>(z.m, z.k, r0, d) + mr)
            << z.m << "x" << z.k << " panel " << r0 << " depth " << d;
  }
}

TEST(GemmKernel, ZeroDepthWritesZerosOrLeavesC) {
  std::vector<float> c = test::poisoned<float>(6);
  gemm<float>(2, 3, 0, row_major<float>(nullptr, 0), row_major<float>(nullptr, 3), c.data(), 3,
              GemmMode::overwrite);
  EXPECT_EQ(c, std::vector<float>(6, 0.f));
  std::vector<float> d{1, 2, 3, 4, 5, 6};
  gemm<float>(2, 3, 0, row_major<float>(nullptr, 0), row_major<float>(nullptr, 3), d.data(), 3,
              GemmMode::accumulate);
  EXPECT_EQ(d, (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

// A C with a leading dimension wider than n: columns past n must stay untouched.
TEST(GemmKernel, RespectsLeadingDimensionOfC) {
  const int64_t m = 9, n = 20, k = 5, ldc = 27;
  const auto a = random_vector<float>(size_t(m * k), 4), b = random_vector<float>(size_t(k * n), 5);
  std::vector<float> c(size_t(m * ldc), 7.f);
  gemm<float>(m, n, k, row_major(a.data(), k), row_major(b.data(), n), c.data(), ldc, GemmMode::overwrite);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += double(a[size_t(i * k + p)]) * double(b[size_t(p * n + j)]);
      EXPECT_NEAR(c[size_t(i * ldc + j)], acc, 1e-4);
    }
    for (int64_t j = n; j < ldc; ++j) EXPECT_EQ(c[size_t(i * ldc + j)], 7.f);
  }
}

}  // namespace
}  // namespace cg::kernels::cpu
