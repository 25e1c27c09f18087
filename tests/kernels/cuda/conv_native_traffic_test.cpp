// Issue 37 item 5: the hand-written convolution's backward-data at stride 2 issues only the
// products that are not zero. A 3x3 filter at stride 2 reaches each input pixel through 2.25 taps
// on average, not 9; the kernel splits dx into the stride's four phases, each a GEMM over its own
// taps. Counted on the emulated GPU (cg_emu/traffic.h: 2 M N K per warp-wide WMMA mma_sync), the
// tensor-core work issued is held to the useful products (the forward's 2 N OH OW C_out C_in KH KW)
// plus what rounding to 128x64x32 tiles adds: a kernel that ran every tap would issue 4x.
// Deterministic counts, no timing. Emulated build with the access hooks only; skips elsewhere.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/conv_native.h"
#include "support/cuda_kernel_test.h"
#include "support/traffic_counts.h"


namespace cg::kernels {
namespace {

using test::DeviceBuffer;

// n, c_in, h, w, c_out, kh, kw, stride, pad: MiniResNet's stride-2 layers at batch 8 (Fashion-MNIST
// and CIFAR sizes), and its stride-1 3x3, which must stay at one launch.
const Conv2dShape kShapes[] = {{8, 64, 28, 28, 128, 3, 3, 2, 1},
                               {8, 128, 16, 16, 256, 3, 3, 2, 1},
                               {8, 64, 32, 32, 128, 1, 1, 2, 0},
                               {8, 64, 16, 16, 64, 3, 3, 1, 1}};

// Tile rounding: rows to 128, columns to 64, depth to 32 per phase; at these sizes under 25% in all.
constexpr double kMostIssuedPerUseful = 1.25;

class ConvNativeWork : public ::testing::TestWithParam<Conv2dShape> {
 protected:
  void SetUp() override { NEED_TRAFFIC_COUNTS(); }
};

TEST_P(ConvNativeWork, BackwardDataIssuesOnlyTheTapsThatReachEachPixel) {
#if CUDAGRAD_TRAFFIC_COUNTS
  const Conv2dShape& s = GetParam();
  const DType t = DType::f16;
  DeviceBuffer dy(test::random_rounded(size_t(s.n * s.c_out * s.out_h() * s.out_w()), 1, t), t);
  DeviceBuffer w(test::random_rounded(size_t(s.c_out * s.c_in * s.kh * s.kw), 2, t, 0.2f), t);
  DeviceBuffer dx(size_t(s.n * s.c_in * s.h * s.w), t);
  cg_emu::start_traffic_recording();
  cuda::conv2d_native_backward_data(s, t, dy.get(), w.get(), dx.get(), nullptr);
  const std::vector<cg_emu::LaunchTraffic> launches = cg_emu::stop_traffic_recording();
  uint64_t issued = 0;
  for (const cg_emu::LaunchTraffic& l : launches) issued += l.mma_flops;
  const double useful = 2.0 * double(s.n * s.out_h() * s.out_w()) * double(s.c_out * s.c_in * s.kh * s.kw);
  const std::string name = fmt::format("n{} c{} {}x{} -> {} k{} s{}", s.n, s.c_in, s.h, s.w, s.c_out, s.kh, s.stride);
  std::printf("%s: %zu launches, %.3f GFLOP issued for %.3f useful (%.2fx)\n", name.c_str(), launches.size(),
              double(issued) / 1e9, useful / 1e9, double(issued) / useful);
  ASSERT_GT(issued, 0u) << name << ": no WMMA counted";
  EXPECT_LE(double(issued), kMostIssuedPerUseful * useful) << name;
  // One launch per phase of the stride, at most.
  EXPECT_LE(launches.size(), size_t(s.stride * s.stride)) << name;
#endif
}

INSTANTIATE_TEST_SUITE_P(Layers, ConvNativeWork, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const Conv2dShape& s = info.param;
  return fmt::format("c{}_{}x{}_k{}_s{}", s.c_in, s.h, s.w, s.kh, s.stride);
});

}  // namespace
}  // namespace cg::kernels
