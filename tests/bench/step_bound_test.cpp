// The bound model's counts (bench/step_bound.h) against values worked out by hand for two layers
// of the full MiniResNet at batch 64 on 1x28x28 images: the stem and a 64-channel 3x3 layer.
#include "bench/step_bound.h"

#include <gtest/gtest.h>

namespace cg::bench::bound {
namespace {

const Conv2dShape kStem{64, 1, 28, 28, 64, 3, 3, 1, 1};    // conv1: 1 -> 64 @ 28x28
const Conv2dShape kLayer1{64, 64, 28, 28, 64, 3, 3, 1, 1};  // layer1.*: 64 -> 64 @ 28x28

TEST(StepBound, DirectCountIsTwoFlopsPerTapPerOutput) {
  EXPECT_EQ(direct_conv_flops(kStem), 2.0 * 64 * 64 * 1 * 9 * 784);  // 57,802,752
  EXPECT_EQ(direct_conv_flops(kLayer1), 3'699'376'128.0);            // 2 * 64 * 64 * 64 * 9 * 784
  EXPECT_EQ(direct_conv_flops({64, 64, 28, 28, 128, 1, 1, 2, 0}), 2.0 * 64 * 128 * 64 * 196);  // a 1x1 stride-2 downsample
}

// 28x28 outputs are 7 x 7 tiles of 4x4: the 36 element GEMMs do exactly a quarter of the direct count.
TEST(StepBound, WinogradForwardOfA64ChannelLayer) {
  const WinogradFlops f = winograd_flops(kLayer1, ConvPhase::forward);
  EXPECT_EQ(f.gemm, 924'844'032.0);  // 2 * 36 * 64 * 64 * (64 images * 49 tiles)
  EXPECT_EQ(f.gemm * 4, direct_conv_flops(kLayer1));
  // Input, 16 planes at a time: 4096 planes x 49 tiles x 12 passes x 28 = 67,436,544; output:
  // 64 x 49 tiles x 64 channels x (13 x 10 + 16) = 29,302,784; filters: 4096 x 17 x 9 = 626,688.
  EXPECT_EQ(f.transforms, 67'436'544.0 + 29'302'784.0 + 626'688.0);
}

// Backward-filter: the output gradient's A transform (11 x 10 a tile) and G^T's adjoint instead.
TEST(StepBound, WinogradBackwardFilterOfA64ChannelLayer) {
  const WinogradFlops f = winograd_flops(kLayer1, ConvPhase::backward_filter);
  EXPECT_EQ(f.gemm, 924'844'032.0);
  EXPECT_EQ(f.transforms, 67'436'544.0 + 64.0 * 49 * 64 * 110 + 4096.0 * 153);
}

// Channels not in groups of 16 go plane by plane, neighbouring tiles sharing the vertical pass:
// 8 planes x 28 x (7 tile rows x 4 x 8 + 49 x 6) = 116,032.
TEST(StepBound, WinogradInputTransformPlaneByPlane) {
  const Conv2dShape s{1, 8, 28, 28, 32, 3, 3, 1, 1};
  EXPECT_EQ(winograd_flops(s, ConvPhase::forward).transforms, 116'032.0 + 49.0 * 32 * 146 + 256.0 * 153);
}

// A 14x14 output needs 4 x 4 tiles of 4x4 (16x16, the last row and column of tiles half used).
TEST(StepBound, WinogradPaysForPartTilesOn14x14) {
  const Conv2dShape s{64, 128, 14, 14, 128, 3, 3, 1, 1};
  EXPECT_EQ(winograd_flops(s, ConvPhase::forward).gemm, 2.0 * 36 * 128 * 128 * 64 * 16);
}

TEST(StepBound, FullNetworkHasFifteenConvolutionsAndItsParameters) {
  const std::vector<ConvLayer> layers = conv_layers(Network{});
  ASSERT_EQ(layers.size(), 15u);
  EXPECT_EQ(layers[0].name, "conv1");
  EXPECT_EQ(layers[6].name, "layer2.0.downsample.0");
  EXPECT_EQ(layers.back().shape.out_h(), 7);
  // 2,776,522 parameters (configs/fashion_mnist.yaml) = the update's values.
  const auto passes = step_passes(Network{}, 4, [](int, const ConvLayer&) { return std::string("direct"); });
  EXPECT_EQ(passes.back().phase, "zero grad");
  EXPECT_EQ(passes.back().bytes, 4.0 * 2'776'522);
}

// configs/fashion_mnist_cpu.yaml's narrow network: 174,970 parameters.
TEST(StepBound, NarrowNetworkParameters) {
  const Network narrow{{16, 32, 64}, {2, 2, 2}, 1, 28, 64, 10};
  EXPECT_EQ(parameter_count(narrow, conv_layers(narrow)), 174'970.0);
}

TEST(StepBound, BoundIsTheSlowerOfComputeAndMemory) {
  Pass p;
  p.flops = 2e9;
  p.bytes = 1e9;
  EXPECT_DOUBLE_EQ(bound_us(p, {1000, 100}), 1e4);  // memory: 1 GB at 100 GB/s = 10 ms
  EXPECT_DOUBLE_EQ(bound_us(p, {100, 1000}), 2e4);  // compute: 2 GFLOP at 100 GFLOP/s = 20 ms
  p.direct_flops = 8e9;                              // a Winograd pass: 4x the FLOPs counted directly
  EXPECT_DOUBLE_EQ(direct_bound_us(p, {100, 1000}), 8e4);
}

}  // namespace
}  // namespace cg::bench::bound
