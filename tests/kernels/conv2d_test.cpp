// The plain convolution reference (kernels/cpu/conv2d.h), which every other convolution is tested
// against, checked on its own: outputs worked out by hand (padding, orientation, stride, channels
// and bias), each backward pass tied to the forward by the adjoint identities on odd shapes, and
// thread-count determinism. The GPU kernels and the fast CPU kernels (kernels/cpu_conv) are then
// checked against it, in their own tests and in the conformance suites.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/conv2d.h"
#include "support/conv_kernels.h"
#include "support/random_data.h"

namespace cg::kernels::cpu {
namespace {

using Values = std::vector<double>;

Values iota_values(size_t n) {
  Values v(n);
  std::iota(v.begin(), v.end(), 1.0);
  return v;
}

Values forward(const Conv2dShape& s, const Values& x, const Values& w, const double* bias = nullptr) {
  Values y(size_t(s.n * s.c_out * s.out_h() * s.out_w()));
  conv2d_forward<double>(s, x.data(), w.data(), bias, y.data());
  return y;
}

// A 3x3 window of ones over 1..9 with padding 1: each output is the sum of its neighbourhood,
// the image's edge cutting it short.
TEST(Conv2dReference, PaddedWindowSumsWorkedByHand) {
  const Conv2dShape s{1, 1, 3, 3, 1, 3, 3, 1, 1};
  EXPECT_EQ(forward(s, iota_values(9), Values(9, 1.0)), (Values{12, 21, 16, 27, 45, 33, 24, 39, 28}));
}

// Cross-correlation, as PyTorch's: the filter's top-left tap reads the input up and to the left,
// so a filter that is 1 there shifts the image down and right (the kernel is not flipped).
TEST(Conv2dReference, TopLeftTapShiftsTheImageDownAndRight) {
  const Conv2dShape s{1, 1, 3, 3, 1, 3, 3, 1, 1};
  Values w(9, 0.0);
  w[0] = 1;
  EXPECT_EQ(forward(s, iota_values(9), w), (Values{0, 0, 0, 0, 1, 2, 0, 4, 5}));
}

// Stride 2, padding 1 over 1..16 (4x4): two windows a side, rows and columns {-1..1} and {1..3}.
TEST(Conv2dReference, StridedWindowsWorkedByHand) {
  const Conv2dShape s{1, 1, 4, 4, 1, 3, 3, 2, 1};
  EXPECT_EQ(forward(s, iota_values(16), Values(9, 1.0)), (Values{14, 30, 57, 99}));
  // dy all ones: each input gets one per window covering it (rows 0..3 are covered 1, 2, 1, 1 times).
  Values dx(16);
  const Values dy(4, 1.0), w(9, 1.0);
  conv2d_backward_data<double>(s, dy.data(), w.data(), dx.data());
  EXPECT_EQ(dx, (Values{1, 2, 1, 1, 2, 4, 2, 2, 1, 2, 1, 1, 1, 2, 1, 1}));
}

// 1x1 filters mix channels: y[o] = sum_c w[o][c] x[c] + b[o]; db sums dy per output channel, and dw
// is the window sum of x under dy (here the forward's own answer: ones over 1..9, padding 1).
TEST(Conv2dReference, ChannelsBiasAndFilterGradientWorkedByHand) {
  const Conv2dShape mix{1, 2, 1, 2, 2, 1, 1, 1, 0};
  const Values x{1, 2, 3, 4}, w{1, 10, -1, 0.5}, b{100, 200};
  EXPECT_EQ(forward(mix, x, w, b.data()), (Values{131, 142, 200.5, 200}));
  const Conv2dShape s{1, 1, 3, 3, 1, 3, 3, 1, 1};
  const Values x9 = iota_values(9), dy(9, 1.0);
  Values dw(9), db(1);
  conv2d_backward_filter<double>(s, x9.data(), dy.data(), dw.data(), db.data());
  EXPECT_EQ(dw, (Values{12, 21, 16, 27, 45, 33, 24, 39, 28}));
  EXPECT_EQ(db, (Values{9}));
}

double dot(const Values& a, const Values& b) { return std::inner_product(a.begin(), a.end(), b.begin(), 0.0); }

// <conv(x, w), dy> = <x, backward_data(dy, w)> = <w, backward_filter(x, dy)>: the backward passes
// are the forward's adjoints, on shapes with every awkward part (stride 2 and 3, padding wider
// than needed, non-square kernels and images, one image).
TEST(Conv2dReference, BackwardPassesAreTheForwardsAdjoints) {
  for (const Conv2dShape& s : {Conv2dShape{2, 3, 7, 6, 4, 3, 3, 1, 1}, Conv2dShape{1, 2, 9, 8, 3, 3, 3, 2, 1},
                               Conv2dShape{2, 2, 10, 11, 2, 3, 5, 3, 2}, Conv2dShape{3, 5, 6, 5, 3, 1, 1, 2, 0},
                               Conv2dShape{1, 1, 4, 4, 1, 3, 3, 2, 2}}) {
    const size_t xn = size_t(s.n * s.c_in * s.h * s.w), wn = size_t(s.c_out * s.c_in * s.kh * s.kw);
    const Values x = test::random_vector<double>(xn, 1), w = test::random_vector<double>(wn, 2);
    const Values dy = test::random_vector<double>(size_t(s.n * s.c_out * s.out_h() * s.out_w()), 3);
    Values dx(xn), dw(wn);
    conv2d_backward_data<double>(s, dy.data(), w.data(), dx.data());
    conv2d_backward_filter<double>(s, x.data(), dy.data(), dw.data(), nullptr);
    const double y_dy = dot(forward(s, x, w), dy);
    EXPECT_NEAR(dot(x, dx), y_dy, 1e-12 * (1 + std::abs(y_dy))) << "backward-data, stride " << s.stride;
    EXPECT_NEAR(dot(w, dw), y_dy, 1e-12 * (1 + std::abs(y_dy))) << "backward-filter, stride " << s.stride;
  }
}

TEST(Conv2dReference, BitIdenticalForOneTwoAndThreeThreads) {
  const test::ConvKernels reference{conv2d_forward<float>, conv2d_backward_data<float>, conv2d_backward_filter<float>};
  test::expect_bit_identical_across_threads(reference, {5, 6, 9, 7, 8, 3, 3, 1, 1});
  test::expect_bit_identical_across_threads(reference, {5, 6, 9, 7, 8, 3, 3, 2, 1});
}

}  // namespace
}  // namespace cg::kernels::cpu
