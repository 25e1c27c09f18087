// The Winograd F(4x4, 3x3) and F(2x2, 3x3) convolutions against the plain reference in float64
// (kernels/cpu/conv2d.h), as the GPU kernels are checked: forward, backward-data and backward-filter over
// MiniResNet's 3x3 stride-1 layers and odd sizes, plus thread-count determinism. F(2x2)'s bound
// against PyTorch float32's own error is in winograd2_test.cpp.
// Winograd is NOT bit-identical to the direct convolution. Its error is bounded here relative to
// the size of the sums involved: for every output element, |got - ref| <= kWinogradTolerance *
// scale, where scale is the largest |term| sum of that result (sum of |x||w| over the window for
// forward, and likewise for the backward passes), taken as the result tensor's maximum. Measured
// (2026-11-24, the cases below): float32 im2col's forward 0.6-1.7e-7 of that scale, Winograd
// F(4x4, 3x3) up to 2.7e-6 in every pass (10-20x im2col's); kWinogradTolerance = 1e-5 leaves
// 3.7x headroom, and ToleranceCatchesASmallError shows it still fails a filter off by 1e-3.
// F(2x2, 3x3), measured on the same cases (2026-11-29): up to 1.8e-7 of the scale in every pass,
// like im2col's forward (0.7-1.7e-7); kWinograd2Tolerance = 1e-6 leaves 5.7x headroom and still
// fails a filter off by 1e-4.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu_conv/im2col.h"
#include "kernels/cpu_conv/winograd.h"
#include "kernels/cpu_conv/winograd_transforms.h"
#include "support/conv_kernels.h"
#include "support/random_data.h"

namespace cg::kernels::cpu {
namespace {

using test::random_vector;

constexpr double kWinogradTolerance = 1e-5, kWinograd2Tolerance = 1e-6;

// Each tile size's kernels and bound, and the size of the error ToleranceCatchesASmallError plants.
struct Variant {
  const char* name;
  test::ConvKernels kernels;
  double tolerance, planted;
};
const Variant kVariants[] = {
    {"F(4x4, 3x3)", {winograd_conv2d_forward, winograd_conv2d_backward_data, winograd_conv2d_backward_filter},
     kWinogradTolerance, 1e-3},
    {"F(2x2, 3x3)", {winograd2_conv2d_forward, winograd2_conv2d_backward_data, winograd2_conv2d_backward_filter},
     kWinograd2Tolerance, 1e-4},
};

struct Case {
  const char* name;
  Conv2dShape s;
  bool bias;
};

const Case kCases[] = {
    {"stem_cifar", {2, 3, 32, 32, 64, 3, 3, 1, 1}, false},
    {"layer1_cifar", {2, 64, 32, 32, 64, 3, 3, 1, 1}, true},
    {"layer2_cifar", {2, 128, 16, 16, 128, 3, 3, 1, 1}, false},
    {"layer3_cifar", {13, 256, 8, 8, 256, 3, 3, 1, 1}, false},  // two chunks: backward-filter by element
    {"stem_fmnist", {2, 1, 28, 28, 16, 3, 3, 1, 1}, false},
    {"layer1_fmnist", {2, 16, 28, 28, 16, 3, 3, 1, 1}, false},
    {"layer2_fmnist", {2, 32, 14, 14, 32, 3, 3, 1, 1}, true},
    {"layer3_fmnist", {3, 64, 7, 7, 64, 3, 3, 1, 1}, false},
    // 4 tiles per image: 12 images per chunk, so 70 make five full chunks and a partial one,
    // and backward-filter adds six chunks' products.
    {"two_chunks", {70, 8, 8, 8, 12, 3, 3, 1, 1}, true},
    {"non_square_odd", {2, 3, 9, 5, 5, 3, 3, 1, 1}, true},
    {"pad0", {2, 4, 11, 10, 3, 3, 3, 1, 0}, false},
    {"pad2", {1, 2, 6, 7, 3, 3, 3, 1, 2}, true},
    {"tiny_plane", {3, 5, 3, 2, 7, 3, 3, 1, 1}, false},
    {"single_channel", {2, 1, 6, 6, 1, 3, 3, 1, 1}, false},
    // Small planes (up to 16 tiles) in whole groups of 16 channels take the 16-plane input
    // transform (channels innermost); 17 or 20 channels stay one plane at a time.
    {"small_plane_20ch", {2, 20, 7, 7, 18, 3, 3, 1, 1}, true},
    {"small_plane_16ch_pad0", {2, 16, 11, 10, 16, 3, 3, 1, 0}, false},
    {"small_plane_17ch_pad2", {2, 17, 6, 7, 16, 3, 3, 1, 2}, false},
    {"small_plane_32ch_pad2", {2, 32, 6, 7, 16, 3, 3, 1, 2}, true},
};

using test::absolute;
using test::max_of;
using test::nan_filled;
using test::relative_error;
using test::to_double;

TEST(WinogradConv, SupportsOnly3x3StrideOne) {
  EXPECT_TRUE(winograd_supports({1, 1, 8, 8, 1, 3, 3, 1, 1}));
  EXPECT_TRUE(winograd_supports({1, 1, 8, 8, 1, 3, 3, 1, 0}));
  EXPECT_FALSE(winograd_supports({1, 1, 8, 8, 1, 3, 3, 2, 1}));
  EXPECT_FALSE(winograd_supports({1, 1, 8, 8, 1, 1, 1, 1, 0}));
  EXPECT_FALSE(winograd_supports({1, 1, 8, 8, 1, 5, 5, 1, 2}));
  EXPECT_FALSE(winograd_supports({1, 1, 8, 8, 1, 3, 3, 1, 3}));
}

TEST(WinogradConv, MatchesTheReferenceWithinTolerance) {
  const test::ConvKernels im2col{im2col_conv2d_forward<float>, im2col_conv2d_backward_data<float>,
                                 im2col_conv2d_backward_filter<float>};
  for (const Case& c : kCases) {
    ASSERT_TRUE(winograd_supports(c.s)) << c.name;
    const test::ConvReference reference(c.s, c.bias);
    // For the record: float32 im2col's forward error on the same scale.
    const double e_im2col = test::errors_against(reference, im2col, c.name).forward;
    for (const Variant& v : kVariants) {
      const test::ConvErrors e = test::errors_against(reference, v.kernels, c.name);
      EXPECT_LE(e.forward, v.tolerance) << v.name << " " << c.name << " forward";
      EXPECT_LE(e.backward_data, v.tolerance) << v.name << " " << c.name << " backward data";
      EXPECT_LE(e.backward_filter, v.tolerance) << v.name << " " << c.name << " backward filter";
      fprintf(stderr, "%s %-22s error / scale: forward %.2e (im2col %.2e), backward-data %.2e, backward-filter %.2e\n",
              v.name, c.name, e.forward, e_im2col, e.backward_data, e.backward_filter);
    }
  }
}

// The tolerance is not so loose that a wrong transform passes: a filter with one element changed
// by 1e-3 (F(4x4)) or 1e-4 (F(2x2)) of its scale fails it.
TEST(WinogradConv, ToleranceCatchesASmallError) {
  const Conv2dShape s{2, 16, 12, 12, 8, 3, 3, 1, 1};
  const size_t xn = size_t(s.n * s.c_in * s.h * s.w), wn = size_t(s.c_out * s.c_in * 9);
  const size_t yn = size_t(s.n * s.c_out * s.out_h() * s.out_w());
  const auto x = random_vector<float>(xn, 21);
  const auto w = random_vector<float>(wn, 22);
  std::vector<double> ry(yn), sy(yn);
  const auto xd = to_double(x), wd = to_double(w), ax = absolute(xd), aw = absolute(wd);
  conv2d_forward<double>(s, xd.data(), wd.data(), nullptr, ry.data());
  conv2d_forward<double>(s, ax.data(), aw.data(), nullptr, sy.data());
  for (const Variant& v : kVariants) {
    auto wrong = w;
    wrong[5] += float(v.planted * max_of(sy));
    std::vector<float> y(yn);
    v.kernels.forward(s, x.data(), wrong.data(), nullptr, y.data());
    EXPECT_GT(relative_error(y, ry, max_of(sy)), v.tolerance) << v.name;
  }
}

// A 16-plane transform against its one-plane form, bit for bit (the same passes in the same
// order; both files are compiled without contraction), with the lanes together (channels
// innermost) and gaps between tiles and elements that nothing may write. one_plane(plane, out,
// rows) writes element e of tile t at out[e * tiles + t]; sixteen(planes, out, e_stride,
// tile_stride) all 16 planes at once.
template <int T, class OnePlane, class Sixteen>
void expect_sixteen_planes_equal_one_at_a_time(int64_t h, int64_t w, int64_t th, int64_t tw, OnePlane one_plane,
                                               Sixteen sixteen, const std::string& what) {
  using namespace winograd;
  constexpr int kElements = Tile<T>::kElements;
  const int64_t tiles = th * tw;
  ASSERT_LE(tiles * T * T, kLanesMaxPixels) << what;
  const auto planes = random_vector<float>(size_t(kLanes * h * w), 11);
  std::vector<float> scratch(size_t(T * tw + T + 15 + 48 * (tw + 1) + 16));
  const RowScratch rows{scratch.data(), (T * tw + T + 15) / 16 * 16};
  const int64_t tile_stride = kLanes + 2, e_stride = tiles * tile_stride + 5;
  std::vector<float> one(size_t(kElements * e_stride), -7.f), lanes = one, by_plane(size_t(kElements * tiles));
  for (int j = 0; j < kLanes; ++j) {
    one_plane(planes.data() + j * h * w, by_plane.data(), rows);
    for (int e = 0; e < kElements; ++e)
      for (int64_t t = 0; t < tiles; ++t) one[size_t(e * e_stride + t * tile_stride + j)] = by_plane[size_t(e * tiles + t)];
  }
  sixteen(planes.data(), lanes.data(), e_stride, tile_stride);
  EXPECT_EQ(0, std::memcmp(one.data(), lanes.data(), one.size() * sizeof(float))) << what;
}

// The input transform, for every plane size it takes (outputs up to kLanesMaxPixels, paddings 0 to 2).
template <int T>
void expect_input_transforms_equal() {
  using namespace winograd;
  struct Plane { int64_t h, w, pad; };
  for (const Plane pl : {Plane{7, 7, 1}, Plane{8, 8, 1}, Plane{14, 14, 1}, Plane{16, 16, 1}, Plane{11, 10, 0},
                         Plane{6, 7, 2}, Plane{3, 2, 1}, Plane{5, 9, 2}, Plane{28, 28, 1}}) {
    const int64_t th = tiles_along(pl.h + 2 * pl.pad - 2, T), tw = tiles_along(pl.w + 2 * pl.pad - 2, T);
    const int64_t tiles = th * tw;
    expect_sixteen_planes_equal_one_at_a_time<T>(
        pl.h, pl.w, th, tw,
        [&](const float* plane, float* out, RowScratch rows) {
          input_transform<T>(plane, pl.h, pl.w, pl.pad, th, tw, out, tiles, rows);
        },
        [&](const float* planes, float* out, int64_t e_stride, int64_t tile_stride) {
          input_transform_lanes<T>(planes, pl.h * pl.w, pl.h, pl.w, pl.pad, th, tw, out, e_stride, tile_stride,
                                   nullptr);
        },
        "F(" + std::to_string(T) + ") input " + std::to_string(pl.h) + "x" + std::to_string(pl.w) + " pad " +
            std::to_string(pl.pad));
  }
}
TEST(WinogradTransforms, SixteenPlanesAtOnceEqualOneAtATime) {
  expect_input_transforms_equal<4>();
  expect_input_transforms_equal<2>();
}

// The output-gradient transform of backward-filter, for gradient planes of up to kLanesMaxPixels.
template <int T>
void expect_gradient_transforms_equal() {
  using namespace winograd;
  struct Plane { int64_t h, w; };
  for (const Plane pl : {Plane{7, 7}, Plane{8, 8}, Plane{14, 14}, Plane{16, 16}, Plane{13, 6}, Plane{3, 2},
                         Plane{5, 9}, Plane{1, 1}, Plane{28, 28}}) {
    const int64_t th = tiles_along(pl.h, T), tw = tiles_along(pl.w, T), tiles = th * tw;
    expect_sixteen_planes_equal_one_at_a_time<T>(
        pl.h, pl.w, th, tw,
        [&](const float* plane, float* out, RowScratch rows) {
          grad_output_transform<T>(plane, pl.h, pl.w, th, tw, out, tiles, rows);
        },
        [&](const float* planes, float* out, int64_t e_stride, int64_t tile_stride) {
          grad_output_transform_lanes<T>(planes, pl.h * pl.w, pl.h, pl.w, th, tw, out, e_stride, tile_stride,
                                         nullptr);
        },
        "F(" + std::to_string(T) + ") gradient " + std::to_string(pl.h) + "x" + std::to_string(pl.w));
  }
}
TEST(WinogradTransforms, SixteenGradientPlanesAtOnceEqualOneAtATime) {
  expect_gradient_transforms_equal<4>();
  expect_gradient_transforms_equal<2>();
}

TEST(WinogradConv, BitIdenticalForOneTwoAndThreeThreads) {
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(v.name);
    test::expect_bit_identical_across_threads(v.kernels, {70, 16, 8, 8, 24, 3, 3, 1, 1});   // planes one at a time
    test::expect_bit_identical_across_threads(v.kernels, {37, 16, 14, 14, 32, 3, 3, 1, 1});  // 16 planes at a time
    test::expect_bit_identical_across_threads(v.kernels, {26, 256, 7, 7, 256, 3, 3, 1, 1});  // filter by element
    // Odd channel counts: the packed filters' last depth has no pair and the last panel has padding
    // rows (written from several threads, a store past them can land before or after the
    // neighbour's own write, so only the one-thread run shows it).
    test::expect_bit_identical_across_threads(v.kernels, {3, 5, 9, 6, 7, 3, 3, 1, 1});
  }
}

}  // namespace
}  // namespace cg::kernels::cpu
