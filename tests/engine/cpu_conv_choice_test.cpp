// kernels.cpu_conv through ops::conv2d: winograd runs Winograd F(4x4, 3x3) on float32 3x3 stride-1
// layers of 32+ channels or of channels in groups of 16 (close to im2col, but not bit-identical to
// it); auto never does (not as exact as PyTorch float32, issue 41). winograd2 runs F(2x2, 3x3) on
// every 3x3 stride-1 layer. auto runs, phase by phase, the fastest kernel as exact as PyTorch
// there (kernels/cpu_conv/auto_rule.h): F(2x2)'s backward-filter on stride-1 layers of 16+
// channels; its forward and backward-data from 32 channels; direct's or im2col's elsewhere; direct
// runs on every 3x3 and 1x1 layer of stride 1 or 2; im2col
// runs everywhere else, and everywhere under im2col (im2col + GEMM).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "engine/conv/conv.h"
#include "engine/ops.h"
#include "engine/random.h"

namespace cg {
namespace {

struct Result {
  std::vector<float> y, dx, dw;
};

// One forward and backward of conv2d(x, w) (no bias) with a fixed upstream gradient.
Result run(ops::CpuConvAlgorithm algorithm, const std::vector<int64_t>& x_shape, const std::vector<int64_t>& w_shape,
           int64_t stride) {
  Generator gen(7);
  Tensor x = Tensor::empty(x_shape), w = Tensor::empty(w_shape);
  normal_(x, gen, 0.0, 1.0);
  normal_(w, gen, 0.0, 0.1);
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  ops::ExecutionScope with_algorithm({.kernels = {.cpu_conv = algorithm}});
  Tensor y = ops::conv2d(x, w, Tensor(), {.stride = stride, .padding = 1});
  Tensor dy = Tensor::empty(y.shape());
  normal_(dy, gen, 0.0, 1.0);
  y.backward(dy);
  return {y.to_vector<float>(), x.grad().to_vector<float>(), w.grad().to_vector<float>()};
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// max |a - b| / max |b|
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, double(std::abs(a[i] - b[i])));
    scale = std::max(scale, double(std::abs(b[i])));
  }
  return diff / scale;
}

// auto gave exactly what `chosen` gives, in all three results; and `chosen`, another algorithm
// than im2col (its output differs, so the choice took effect), stays within its error.
void expect_auto_ran(const Result& automatic, const Result& chosen, const Result& im2col, const std::string& what) {
  EXPECT_TRUE(bit_identical(automatic.y, chosen.y)) << what;
  EXPECT_TRUE(bit_identical(automatic.dx, chosen.dx)) << what;
  EXPECT_TRUE(bit_identical(automatic.dw, chosen.dw)) << what;
  EXPECT_FALSE(bit_identical(chosen.dw, im2col.dw)) << what;
  EXPECT_LT(relative_difference(chosen.y, im2col.y), 1e-5) << what;
  EXPECT_LT(relative_difference(chosen.dx, im2col.dx), 1e-5) << what;
  EXPECT_LT(relative_difference(chosen.dw, im2col.dw), 1e-5) << what;
}

// auto's three results, each the bits of the algorithm named for it (whose results differ from
// the others', so each equality names who ran the phase).
void expect_auto_phases(const Result& automatic, const Result& y_by, const Result& dx_by, const Result& dw_by,
                        const std::string& what) {
  EXPECT_TRUE(bit_identical(automatic.y, y_by.y)) << what << " forward";
  EXPECT_TRUE(bit_identical(automatic.dx, dx_by.dx)) << what << " backward-data";
  EXPECT_TRUE(bit_identical(automatic.dw, dw_by.dw)) << what << " backward-filter";
}

// 32+ channels, and (with its 16-plane transforms) channels in groups of 16: winograd by name runs
// Winograd F(4x4); auto runs F(2x2)'s backward-filter there, and the direct kernel's forward and
// backward-data (F(2x2)'s at 32 channels in an AVX-512 build).
TEST(CpuConvChoice, WinogradRunsWideAnd16ChannelGroup3x3StrideOneLayers) {
  for (const auto& [xs, ws] : {std::pair{std::vector<int64_t>{2, 32, 8, 8}, std::vector<int64_t>{32, 32, 3, 3}},
                               std::pair{std::vector<int64_t>{3, 16, 10, 10}, std::vector<int64_t>{16, 16, 3, 3}}}) {
    const std::string what = std::to_string(xs[1]) + " channels";
    const Result automatic = run(ops::CpuConvAlgorithm::automatic, xs, ws, 1);
    const Result winograd = run(ops::CpuConvAlgorithm::winograd, xs, ws, 1);
    const Result winograd2 = run(ops::CpuConvAlgorithm::winograd2, xs, ws, 1);
    const Result direct = run(ops::CpuConvAlgorithm::direct, xs, ws, 1);
    const Result im2col = run(ops::CpuConvAlgorithm::im2col, xs, ws, 1);
    EXPECT_FALSE(bit_identical(winograd2.dw, direct.dw)) << what;
    const Result& forward_and_data = xs[1] >= 32 ? winograd2 : direct;
    expect_auto_phases(automatic, forward_and_data, forward_and_data, winograd2, what);
    EXPECT_FALSE(bit_identical(winograd.y, direct.y));
    EXPECT_FALSE(bit_identical(winograd.dw, im2col.dw));
    EXPECT_LT(relative_difference(winograd.y, im2col.y), 1e-5);
  }
}

// winograd2 by name: F(2x2) in all three phases of every 3x3 stride-1 layer, the stem's one channel
// included; im2col for the rest.
TEST(CpuConvChoice, Winograd2ByNameRunsEvery3x3StrideOneLayer) {
  for (const int64_t c : {int64_t(1), int64_t(8), int64_t(48)}) {
    const std::vector<int64_t> xs{2, c, 9, 9}, ws{16, c, 3, 3};
    const std::string what = std::to_string(c) + " channels in";
    const Result winograd2 = run(ops::CpuConvAlgorithm::winograd2, xs, ws, 1);
    const Result im2col = run(ops::CpuConvAlgorithm::im2col, xs, ws, 1);
    EXPECT_FALSE(bit_identical(winograd2.y, im2col.y)) << what;
    EXPECT_FALSE(bit_identical(winograd2.dw, im2col.dw)) << what;
    EXPECT_LT(relative_difference(winograd2.y, im2col.y), 1e-5) << what;
    EXPECT_LT(relative_difference(winograd2.dx, im2col.dx), 1e-5) << what;
    EXPECT_LT(relative_difference(winograd2.dw, im2col.dw), 1e-5) << what;
  }
  const std::vector<int64_t> xs{2, 16, 12, 12}, ws{16, 16, 3, 3};
  const Result strided = run(ops::CpuConvAlgorithm::winograd2, xs, ws, 2);
  const Result strided_im2col = run(ops::CpuConvAlgorithm::im2col, xs, ws, 2);
  EXPECT_TRUE(bit_identical(strided.y, strided_im2col.y));
  EXPECT_TRUE(bit_identical(strided.dw, strided_im2col.dw));
}

TEST(CpuConvChoice, Im2colRunsTheRest) {
  // Too few channels (not a group of 16), and a strided layer: Winograd does not apply, every
  // choice is im2col.
  for (const auto& [xs, ws, stride] : {std::tuple{std::vector<int64_t>{2, 8, 8, 8}, std::vector<int64_t>{8, 8, 3, 3}, 1},
                                       std::tuple{std::vector<int64_t>{2, 32, 8, 8}, std::vector<int64_t>{32, 32, 3, 3}, 2}}) {
    const Result im2col = run(ops::CpuConvAlgorithm::im2col, xs, ws, stride);
    const Result winograd = run(ops::CpuConvAlgorithm::winograd, xs, ws, stride);
    EXPECT_TRUE(bit_identical(winograd.y, im2col.y)) << xs[1] << " channels, stride " << stride;
    EXPECT_TRUE(bit_identical(winograd.dx, im2col.dx));
    EXPECT_TRUE(bit_identical(winograd.dw, im2col.dw));
  }
}

TEST(CpuConvChoice, DirectRunsFewChannel3x3Layers) {
  const std::vector<int64_t> xs{3, 8, 10, 10}, ws{24, 8, 3, 3};
  const Result automatic = run(ops::CpuConvAlgorithm::automatic, xs, ws, 1);
  const Result direct = run(ops::CpuConvAlgorithm::direct, xs, ws, 1);
  const Result im2col = run(ops::CpuConvAlgorithm::im2col, xs, ws, 1);
  expect_auto_ran(automatic, direct, im2col, "8 -> 24 channels");  // its filter gradient sums in 16 lanes
}

TEST(CpuConvChoice, AutoRunsDirectOnFewChannelStrideTwoLayers) {
  // 16 -> 32 channels, stride 2: the direct kernel in all three phases.
  const std::vector<int64_t> xs{2, 16, 12, 12}, ws{32, 16, 3, 3};
  const Result automatic = run(ops::CpuConvAlgorithm::automatic, xs, ws, 2);
  const Result direct = run(ops::CpuConvAlgorithm::direct, xs, ws, 2);
  const Result im2col = run(ops::CpuConvAlgorithm::im2col, xs, ws, 2);
  expect_auto_ran(automatic, direct, im2col, "16 -> 32 channels, stride 2");
  EXPECT_FALSE(bit_identical(direct.dx, im2col.dx));
}

// Wider stride-2 layers under auto: direct's forward, and each backward phase from whichever
// kernel measured faster for it (direct_phases_auto): 32 and 64 channels in keep direct's
// backward-data and take im2col's backward-filter; 128 take both from im2col. By name, direct
// runs all three itself.
TEST(CpuConvChoice, AutoSplitsWideStrideTwoLayersByPhase) {
  for (const auto& [c_in, data_direct] : {std::pair{int64_t(32), true}, std::pair{int64_t(128), false}}) {
    const std::vector<int64_t> xs{2, c_in, 12, 12}, ws{16, c_in, 3, 3};
    const std::string what = std::to_string(c_in) + " channels in, stride 2";
    const Result automatic = run(ops::CpuConvAlgorithm::automatic, xs, ws, 2);
    const Result direct = run(ops::CpuConvAlgorithm::direct, xs, ws, 2);
    const Result im2col = run(ops::CpuConvAlgorithm::im2col, xs, ws, 2);
    // The kernels give different bits in each backward phase, so each equality below names who
    // ran it. (Their forwards agree to the bit on these shapes: the rule test shows auto's pick.)
    EXPECT_FALSE(bit_identical(direct.dx, im2col.dx)) << what;
    EXPECT_FALSE(bit_identical(direct.dw, im2col.dw)) << what;
    EXPECT_TRUE(bit_identical(automatic.y, direct.y)) << what;
    EXPECT_TRUE(bit_identical(automatic.dx, data_direct ? direct.dx : im2col.dx)) << what;
    EXPECT_TRUE(bit_identical(automatic.dw, im2col.dw)) << what;
    EXPECT_LT(relative_difference(automatic.dx, im2col.dx), 1e-5) << what;
  }
}

// Winograd's layers under auto: never F(4x4) (not as exact as PyTorch float32; issue 41); F(2x2)'s
// three phases from 32 channels. By name, F(4x4) still runs them.
TEST(CpuConvChoice, AutoLeavesWinogradOutAndDirectRunsItsLayers) {
  for (const int64_t channels : {32, 128}) {
    const std::vector<int64_t> xs{2, channels, 14, 14}, ws{channels, channels, 3, 3};
    const std::string what = std::to_string(channels) + " channels, stride 1";
    const Result automatic = run(ops::CpuConvAlgorithm::automatic, xs, ws, 1);
    const Result winograd = run(ops::CpuConvAlgorithm::winograd, xs, ws, 1);
    const Result winograd2 = run(ops::CpuConvAlgorithm::winograd2, xs, ws, 1);
    const Result direct = run(ops::CpuConvAlgorithm::direct, xs, ws, 1);
    const Result im2col = run(ops::CpuConvAlgorithm::im2col, xs, ws, 1);
    EXPECT_FALSE(bit_identical(winograd.y, direct.y)) << what;
    EXPECT_FALSE(bit_identical(winograd.dx, direct.dx)) << what;
    EXPECT_FALSE(bit_identical(winograd2.y, direct.y)) << what;
    EXPECT_FALSE(bit_identical(winograd2.dx, direct.dx)) << what;
    EXPECT_FALSE(bit_identical(winograd2.dw, direct.dw)) << what;
    EXPECT_FALSE(bit_identical(winograd2.dw, im2col.dw)) << what;
    expect_auto_phases(automatic, winograd2, winograd2, winograd2, what);
    EXPECT_LT(relative_difference(winograd.y, im2col.y), 1e-4) << what;  // 1.0e-5 at 128 channels
    EXPECT_LT(relative_difference(automatic.y, im2col.y), 1e-5) << what;
    EXPECT_LT(relative_difference(automatic.dw, im2col.dw), 1e-5) << what;
  }
}

TEST(CpuConvChoice, DirectByNameRunsWideLayersToo) {
  // 128 channels at 14x14: auto hands its backward-filter to im2col, direct by name keeps it.
  const std::vector<int64_t> xs{2, 128, 14, 14}, ws{128, 128, 3, 3};
  const Result direct = run(ops::CpuConvAlgorithm::direct, xs, ws, 1);
  const Result im2col = run(ops::CpuConvAlgorithm::im2col, xs, ws, 1);
  EXPECT_FALSE(bit_identical(direct.dw, im2col.dw));
  EXPECT_LT(relative_difference(direct.dw, im2col.dw), 1e-5);
  // A stride-3 layer stays on im2col under direct.
  const Result strided_direct = run(ops::CpuConvAlgorithm::direct, xs, ws, 3);
  const Result strided_im2col = run(ops::CpuConvAlgorithm::im2col, xs, ws, 3);
  EXPECT_TRUE(bit_identical(strided_direct.y, strided_im2col.y));
  EXPECT_TRUE(bit_identical(strided_direct.dw, strided_im2col.dw));
}

// The auto rule, layer by layer of the narrow network (1 -> 16 -> 32 -> 64 channels on 28x28
// images) and a few beside it: the forward's kernel, of those as exact as PyTorch, whichever
// measured fastest for the shape (bench/NOTES.md); never F(4x4), F(2x2) from 128 channels (from
// 32 in an AVX-512 build).
TEST(CpuConvChoice, AutoRuleTakesTheMeasuredFastestPerShape) {
  using A = ops::CpuConvAlgorithm;
  const auto layer = [](int64_t c_in, int64_t c_out, int64_t hw, int64_t k, int64_t stride) {
    return kernels::Conv2dShape{8, c_in, hw, hw, c_out, k, k, stride, k == 3 ? 1 : 0};
  };
  EXPECT_EQ(impl::cpu_conv_auto(layer(1, 16, 28, 3, 1), DType::f32), A::direct);     // the stem
  EXPECT_EQ(impl::cpu_conv_auto(layer(16, 16, 28, 3, 1), DType::f32), A::direct);    // channels in groups of 16
  EXPECT_EQ(impl::cpu_conv_auto(layer(16, 32, 28, 3, 2), DType::f32), A::direct);    // stride 2, few channels in
  EXPECT_EQ(impl::cpu_conv_auto(layer(16, 32, 28, 1, 2), DType::f32), A::im2col);    // the 1x1 shortcut
  EXPECT_EQ(impl::cpu_conv_auto(layer(32, 32, 14, 3, 1), DType::f32), A::winograd2);  // 32+ channels
  EXPECT_EQ(impl::cpu_conv_auto(layer(64, 64, 28, 3, 1), DType::f32), A::winograd2);
  EXPECT_EQ(impl::cpu_conv_auto(layer(128, 128, 14, 3, 1), DType::f32), A::winograd2);
  EXPECT_EQ(impl::cpu_conv_auto(layer(256, 256, 7, 3, 1), DType::f32), A::winograd2);
  EXPECT_EQ(impl::cpu_conv_auto(layer(128, 128, 14, 3, 2), DType::f32), A::direct);  // stride 2: no Winograd
  EXPECT_EQ(impl::cpu_conv_auto(layer(32, 64, 14, 3, 2), DType::f32), A::direct);    // stride 2: direct's forward
  EXPECT_EQ(impl::cpu_conv_auto(layer(128, 256, 14, 3, 2), DType::f32), A::direct);  // (backward: by phase)
  EXPECT_EQ(impl::cpu_conv_auto(layer(8, 24, 10, 3, 1), DType::f32), A::direct);     // few channels, no group of 16
  EXPECT_EQ(impl::cpu_conv_auto(layer(32, 32, 14, 3, 1), DType::f64), A::im2col);    // float64: im2col only
}

}  // namespace
}  // namespace cg
