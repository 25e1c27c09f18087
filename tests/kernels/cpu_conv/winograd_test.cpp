// The Winograd F(4x4, 3x3) convolution against the plain reference in float64
// (kernels/cpu/conv2d.h), as the GPU kernels are checked: forward, backward-data and backward-filter over
// MiniResNet's 3x3 stride-1 layers and odd sizes, plus thread-count determinism.
// Winograd is NOT bit-identical to the direct convolution. Its error is bounded here relative to
// the size of the sums involved: for every output element, |got - ref| <= kWinogradTolerance *
// scale, where scale is the largest |term| sum of that result (sum of |x||w| over the window for
// forward, and likewise for the backward passes), taken as the result tensor's maximum. Measured
// (2026-11-24, the cases below): float32 im2col's forward 0.6-1.7e-7 of that scale, Winograd
// F(4x4, 3x3) up to 2.7e-6 in every pass (10-20x im2col's); kWinogradTolerance = 1e-5 leaves
// 3.7x headroom, and ToleranceCatchesASmallError shows it still fails a filter off by 1e-3.
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

constexpr double kWinogradTolerance = 1e-5;

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
  const test::ConvKernels winograd{winograd_conv2d_forward, winograd_conv2d_backward_data,
                                   winograd_conv2d_backward_filter};
  const test::ConvKernels im2col{im2col_conv2d_forward<float>, im2col_conv2d_backward_data<float>,
                                 im2col_conv2d_backward_filter<float>};
  for (const Case& c : kCases) {
    ASSERT_TRUE(winograd_supports(c.s)) << c.name;
    const test::ConvErrors e = test::errors_against_reference(winograd, c.s, c.bias, c.name);
    EXPECT_LE(e.forward, kWinogradTolerance) << c.name << " forward";
    EXPECT_LE(e.backward_data, kWinogradTolerance) << c.name << " backward data";
    EXPECT_LE(e.backward_filter, kWinogradTolerance) << c.name << " backward filter";
    // For the record: float32 im2col's forward error on the same scale.
    const double e_im2col = test::errors_against_reference(im2col, c.s, c.bias, c.name).forward;
    fprintf(stderr, "%-16s error / scale: forward %.2e (im2col %.2e), backward-data %.2e, backward-filter %.2e\n",
            c.name, e.forward, e_im2col, e.backward_data, e.backward_filter);
  }
}

// The tolerance is not so loose that a wrong transform passes: a filter with one element changed
// by 1e-3 of its scale fails it.
TEST(WinogradConv, ToleranceCatchesASmallError) {
  const Conv2dShape s{2, 16, 12, 12, 8, 3, 3, 1, 1};
  const size_t xn = size_t(s.n * s.c_in * s.h * s.w), wn = size_t(s.c_out * s.c_in * 9);
  const size_t yn = size_t(s.n * s.c_out * s.out_h() * s.out_w());
  const auto x = random_vector<float>(xn, 21);
  auto w = random_vector<float>(wn, 22);
  std::vector<double> ry(yn), sy(yn);
  const auto xd = to_double(x), wd = to_double(w), ax = absolute(xd), aw = absolute(wd);
  conv2d_forward<double>(s, xd.data(), wd.data(), nullptr, ry.data());
  conv2d_forward<double>(s, ax.data(), aw.data(), nullptr, sy.data());
  w[5] += 1e-3f * float(max_of(sy));
  std::vector<float> y(yn);
  winograd_conv2d_forward(s, x.data(), w.data(), nullptr, y.data());
  EXPECT_GT(relative_error(y, ry, max_of(sy)), kWinogradTolerance);
}

// A 16-plane transform against its one-plane form, bit for bit (the same passes in the same
// order; both files are compiled without contraction), with the lanes together (channels
// innermost) and gaps between tiles and elements that nothing may write. one_plane(plane, out,
// rows) writes element e of tile t at out[e * tiles + t]; sixteen(planes, out, e_stride,
// tile_stride) all 16 planes at once.
template <class OnePlane, class Sixteen>
void expect_sixteen_planes_equal_one_at_a_time(int64_t h, int64_t w, int64_t th, int64_t tw, OnePlane one_plane,
                                               Sixteen sixteen, const std::string& what) {
  using namespace winograd;
  const int64_t tiles = th * tw;
  ASSERT_LE(tiles, kLanesMaxTiles) << what;
  const auto planes = random_vector<float>(size_t(kLanes * h * w), 11);
  std::vector<float> scratch(size_t(4 * tw + 4 + 15 + 48 * (tw + 1) + 16));
  const RowScratch rows{scratch.data(), (4 * tw + 4 + 15) / 16 * 16};
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

// The input transform, for every plane size it takes (up to kLanesMaxTiles tiles, paddings 0 to 2).
TEST(WinogradTransforms, SixteenPlanesAtOnceEqualOneAtATime) {
  using namespace winograd;
  struct Plane { int64_t h, w, pad; };
  for (const Plane pl : {Plane{7, 7, 1}, Plane{8, 8, 1}, Plane{14, 14, 1}, Plane{16, 16, 1}, Plane{11, 10, 0},
                         Plane{6, 7, 2}, Plane{3, 2, 1}, Plane{5, 9, 2}}) {
    const int64_t th = tiles_along(pl.h + 2 * pl.pad - 2), tw = tiles_along(pl.w + 2 * pl.pad - 2), tiles = th * tw;
    expect_sixteen_planes_equal_one_at_a_time(
        pl.h, pl.w, th, tw,
        [&](const float* plane, float* out, RowScratch rows) {
          input_transform(plane, pl.h, pl.w, pl.pad, th, tw, out, tiles, rows);
        },
        [&](const float* planes, float* out, int64_t e_stride, int64_t tile_stride) {
          input_transform_lanes(planes, pl.h * pl.w, pl.h, pl.w, pl.pad, th, tw, out, e_stride, tile_stride, nullptr);
        },
        "input " + std::to_string(pl.h) + "x" + std::to_string(pl.w) + " pad " + std::to_string(pl.pad));
  }
}

// The output-gradient transform of backward-filter, for gradient planes of up to kLanesMaxTiles tiles.
TEST(WinogradTransforms, SixteenGradientPlanesAtOnceEqualOneAtATime) {
  using namespace winograd;
  struct Plane { int64_t h, w; };
  for (const Plane pl : {Plane{7, 7}, Plane{8, 8}, Plane{14, 14}, Plane{16, 16}, Plane{13, 6}, Plane{3, 2},
                         Plane{5, 9}, Plane{1, 1}}) {
    const int64_t th = tiles_along(pl.h), tw = tiles_along(pl.w), tiles = th * tw;
    expect_sixteen_planes_equal_one_at_a_time(
        pl.h, pl.w, th, tw,
        [&](const float* plane, float* out, RowScratch rows) {
          grad_output_transform(plane, pl.h, pl.w, th, tw, out, tiles, rows);
        },
        [&](const float* planes, float* out, int64_t e_stride, int64_t tile_stride) {
          grad_output_transform_lanes(planes, pl.h * pl.w, pl.h, pl.w, th, tw, out, e_stride, tile_stride, nullptr);
        },
        "gradient " + std::to_string(pl.h) + "x" + std::to_string(pl.w));
  }
}

TEST(WinogradConv, BitIdenticalForOneTwoAndThreeThreads) {
  const test::ConvKernels winograd{winograd_conv2d_forward, winograd_conv2d_backward_data,
                                   winograd_conv2d_backward_filter};
  test::expect_bit_identical_across_threads(winograd, {70, 16, 8, 8, 24, 3, 3, 1, 1});   // planes one at a time
  test::expect_bit_identical_across_threads(winograd, {37, 16, 14, 14, 32, 3, 3, 1, 1});  // 16 planes at a time
  test::expect_bit_identical_across_threads(winograd, {26, 256, 7, 7, 256, 3, 3, 1, 1});  // backward-filter by element
  // Odd channel counts: the packed filters' last depth has no pair and the last panel has padding
  // rows (written from several threads, a store past them can land before or after the
  // neighbour's own write, so only the one-thread run shows it).
  test::expect_bit_identical_across_threads(winograd, {3, 5, 9, 6, 7, 3, 3, 1, 1});
}

}  // namespace
}  // namespace cg::kernels::cpu
