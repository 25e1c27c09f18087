// The im2col + GEMM convolution (kernels/cpu_conv/im2col.h) against the plain reference
// (kernels/cpu/conv2d.h), forward and both backward passes, float32 and float64, over MiniResNet's
// layer shapes and odd ones; plus thread-count determinism.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <random>

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu_conv/im2col.h"
#include "support/random_data.h"
#include "support/tolerance.h"

namespace cg::kernels::cpu {
namespace {

using test::random_vector;

// The plain reference (kernels/cpu/conv2d.h) in double on the same values: all four results, an
// independent check of each im2col kernel.
template <typename T>
void reference(const Conv2dShape& s, const std::vector<T>& x, const std::vector<T>& w, const T* b,
               const std::vector<T>& dy, std::vector<T>& y, std::vector<T>& dx, std::vector<T>& dw,
               std::vector<T>& db) {
  auto to_double = [](const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); };
  const std::vector<double> xd = to_double(x), wd = to_double(w), dyd = to_double(dy);
  const std::vector<double> bd = b ? std::vector<double>(b, b + s.c_out) : std::vector<double>();
  std::vector<double> ry(dy.size()), rdx(x.size()), rdw(w.size()), rdb(size_t(s.c_out));
  conv2d_forward<double>(s, xd.data(), wd.data(), b ? bd.data() : nullptr, ry.data());
  conv2d_backward_data<double>(s, dyd.data(), wd.data(), rdx.data());
  conv2d_backward_filter<double>(s, xd.data(), dyd.data(), rdw.data(), rdb.data());
  auto to_t = [](const std::vector<double>& v) { return std::vector<T>(v.begin(), v.end()); };
  y = to_t(ry);
  dx = to_t(rdx);
  dw = to_t(rdw);
  db = to_t(rdb);
}

struct Case {
  const char* name;
  Conv2dShape s;
  bool bias;
};

// MiniResNet's conv shapes at small batch: first its real layers (CIFAR 32/16/8 and widths
// 64/128/256), then narrower ones at the Fashion-MNIST sizes 28/14/7, then odd ones.
const Case kCases[] = {
    {"stem_cifar", {2, 3, 32, 32, 64, 3, 3, 1, 1}, false},
    {"layer1_cifar", {2, 64, 32, 32, 64, 3, 3, 1, 1}, false},
    {"layer2_first_cifar", {2, 64, 32, 32, 128, 3, 3, 2, 1}, false},
    {"layer2_down_cifar", {2, 64, 32, 32, 128, 1, 1, 2, 0}, false},
    {"layer2_cifar", {2, 128, 16, 16, 128, 3, 3, 1, 1}, false},
    {"layer3_first_cifar", {2, 128, 16, 16, 256, 3, 3, 2, 1}, false},
    {"layer3_down_cifar", {2, 128, 16, 16, 256, 1, 1, 2, 0}, false},
    {"layer3_cifar", {2, 256, 8, 8, 256, 3, 3, 1, 1}, false},
    {"stem_fmnist", {2, 1, 28, 28, 16, 3, 3, 1, 1}, false},
    {"layer1_fmnist", {2, 16, 28, 28, 16, 3, 3, 1, 1}, false},
    {"layer2_first_fmnist", {2, 16, 28, 28, 32, 3, 3, 2, 1}, false},
    {"layer2_down_fmnist", {2, 16, 28, 28, 32, 1, 1, 2, 0}, false},
    {"layer3_first_fmnist", {2, 32, 14, 14, 64, 3, 3, 2, 1}, false},
    {"layer3_fmnist", {3, 64, 7, 7, 64, 3, 3, 1, 1}, false},
    // 8x8 outputs: 8 images per GEMM chunk, so 11 images make a full and a partial chunk, and
    // backward-filter sums two partial gradients.
    {"chunked_8x8", {11, 8, 8, 8, 16, 3, 3, 1, 1}, true},
    {"pointwise_bias", {3, 5, 6, 7, 4, 1, 1, 1, 0}, true},
    {"pointwise_one_image", {1, 7, 5, 5, 3, 1, 1, 1, 0}, false},
    {"non_square_cout3", {2, 3, 9, 5, 3, 3, 3, 1, 1}, true},
    {"single_channel", {2, 1, 6, 6, 1, 3, 3, 1, 1}, false},
    {"kernel5_pad2", {1, 2, 8, 8, 3, 5, 5, 1, 2}, true},
    {"kernel5_pad0", {2, 3, 9, 7, 2, 5, 5, 1, 0}, false},
    {"stride3_pad0", {2, 1, 10, 11, 2, 3, 3, 3, 0}, false},
    {"stride3_pad2", {1, 2, 11, 10, 3, 3, 3, 3, 2}, true},
    {"kernel_bigger_than_pad", {1, 1, 4, 4, 1, 3, 3, 2, 2}, true},
};

template <typename T>
void check_case(const Case& c) {
  const Conv2dShape& s = c.s;
  const size_t xn = size_t(s.n * s.c_in * s.h * s.w), wn = size_t(s.c_out * s.c_in * s.kh * s.kw);
  const size_t yn = size_t(s.n * s.c_out * s.out_h() * s.out_w());
  auto x = random_vector<T>(xn, 1), w = random_vector<T>(wn, 2), b = random_vector<T>(size_t(s.c_out), 3);
  auto dy = random_vector<T>(yn, 4);
  std::vector<T> ry, rdx, rdw, rdb;
  reference(s, x, w, c.bias ? b.data() : nullptr, dy, ry, rdx, rdw, rdb);
  const test::Tolerance tol = test::tolerance_for<T>();
  const test::Tolerance sum_tol{tol.atol * 10, tol.rtol * 10};  // long sums: more rounding

  auto y = test::poisoned<T>(yn);
  im2col_conv2d_forward<T>(s, x.data(), w.data(), c.bias ? b.data() : nullptr, y.data());
  EXPECT_TRUE(test::all_close(y, ry, sum_tol)) << c.name << " forward";
  auto dx = test::poisoned<T>(xn);
  im2col_conv2d_backward_data<T>(s, dy.data(), w.data(), dx.data());
  EXPECT_TRUE(test::all_close(dx, rdx, sum_tol)) << c.name << " backward data";
  auto dw = test::poisoned<T>(wn), db = test::poisoned<T>(size_t(s.c_out));
  im2col_conv2d_backward_filter<T>(s, x.data(), dy.data(), dw.data(), c.bias ? db.data() : nullptr);
  EXPECT_TRUE(test::all_close(dw, rdw, sum_tol)) << c.name << " backward filter";
  if (c.bias) {
    EXPECT_TRUE(test::all_close(db, rdb, sum_tol)) << c.name << " bias gradient";
  }
}

TEST(Im2colConv, MatchesTheReferenceFloat) {
  for (const Case& c : kCases) check_case<float>(c);
}
TEST(Im2colConv, MatchesTheReferenceDouble) {
  for (const Case& c : kCases) check_case<double>(c);
}

// Results must not depend on the thread count (resume is bit-exact only then).
TEST(Im2colConv, BitIdenticalForOneAndTwoThreads) {
  const Conv2dShape s{32, 16, 14, 14, 32, 3, 3, 1, 1};
  const size_t xn = size_t(s.n * s.c_in * s.h * s.w), wn = size_t(s.c_out * s.c_in * 9);
  const size_t yn = size_t(s.n * s.c_out * s.out_h() * s.out_w());
  auto x = random_vector<float>(xn, 5), w = random_vector<float>(wn, 6), dy = random_vector<float>(yn, 7);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    std::vector<float> y(yn), dx(xn), dw(wn);
    im2col_conv2d_forward<float>(s, x.data(), w.data(), nullptr, y.data());
    im2col_conv2d_backward_data<float>(s, dy.data(), w.data(), dx.data());
    im2col_conv2d_backward_filter<float>(s, x.data(), dy.data(), dw.data(), nullptr);
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), dw.begin(), dw.end());
    return y;
  };
  const auto one = run(1), two = run(2);
  omp_set_num_threads(2);
  EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float)));
}

}  // namespace
}  // namespace cg::kernels::cpu
