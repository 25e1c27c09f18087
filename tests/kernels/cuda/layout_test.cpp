// Channels-last on the GPU, kernel by kernel, against the CPU: the batched transpose (every dtype
// pair, exact), channels-last global average pooling, and cuDNN's NHWC convolution (KRSC filter)
// against the NCHW CPU reference for MiniResNet's layer shapes and odd ones, forward,
// backward-data and backward-filter with bias, in f32, f16 and bf16; outputs poisoned first.
#include <fmt/format.h>

#include <vector>

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/layout.h"
#include "kernels/cpu/pool.h"
#include "kernels/cuda/cudnn.h"
#include "kernels/cuda/head.h"
#include "kernels/cuda/layout.h"
#include "support/cuda_kernel_test.h"
#include "support/gpu_params.h"

namespace cg::kernels {
namespace {

using kernels::Conv2dShape;
using test::DeviceBuffer;

const DType kTypes[] = {DType::f32, DType::f16, DType::bf16};

// Host transposes of a [a, b, c, d] array: to [a, c, d, b] (channels last) and back.
std::vector<float> to_last(const std::vector<float>& v, int64_t a, int64_t b, int64_t cd) {
  std::vector<float> out(v.size());
  cpu::batched_transpose<float>(a, b, cd, v.data(), out.data());
  return out;
}
std::vector<float> to_first(const std::vector<float>& v, int64_t a, int64_t b, int64_t cd) {
  std::vector<float> out(v.size());
  cpu::batched_transpose<float>(a, cd, b, v.data(), out.data());
  return out;
}

// One case per dtype pair (CudaLayoutPairs.TransposeMatchesTheCpu/float16_to_float32).
class CudaLayoutPairs : public ::testing::TestWithParam<std::tuple<DType, DType>> {};

TEST_P(CudaLayoutPairs, TransposeMatchesTheCpu) {
  NEED_GPU();
  const auto [from, to] = GetParam();
  struct Dims {
    int64_t batches, rows, cols;
  };
  // A Fashion-MNIST stem input (one channel: the copy path), a 3x3 filter of 64 channels both
  // ways, an activation, and sizes that cut the 32x32 tiles.
  const Dims dims[] = {{4, 1, 784}, {64, 64, 9}, {64, 9, 64}, {4, 128, 256}, {3, 33, 65}, {2, 70, 1}, {1, 5, 3}};
  uint64_t seed = 1 + 1000 * uint64_t(from) + 100 * uint64_t(to);
  for (const Dims& d : dims) {
    const size_t n = size_t(d.batches * d.rows * d.cols);
    const auto src = test::random_rounded(n, seed++, from);
    // Rounding to `to` after the move is what a fused conversion must give, bit for bit.
    const auto ref = test::rounded(to_first(src, d.batches, d.cols, d.rows), to);
    DeviceBuffer gsrc(src, from), gdst(n, to);
    gdst.poison();
    cuda::batched_transpose(d.batches, d.rows, d.cols, from, gsrc.get(), to, gdst.get(), nullptr);
    EXPECT_EQ(gdst.download(), ref) << fmt::format("{} -> {} {}x{}x{}", dtype_name(from), dtype_name(to),
                                                   d.batches, d.rows, d.cols);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaLayoutPairs,
                         ::testing::Combine(::testing::ValuesIn(kTypes), ::testing::ValuesIn(kTypes)),
                         test::dtype_pair_case_name);

// One case per dtype (CudaLayoutDtypes.ChannelsLastPoolingMatchesTheCpu/bfloat16).
class CudaLayoutDtypes : public ::testing::TestWithParam<DType> {};

TEST_P(CudaLayoutDtypes, ChannelsLastPoolingMatchesTheCpu) {
  NEED_GPU();
  const DType t = GetParam();
  struct Case {
    int64_t n, hw, c;
  };
  // MiniResNet's last stage at 32x32 and 28x28 inputs, then odd sizes.
  const Case cases[] = {{4, 64, 256}, {4, 49, 256}, {2, 33, 13}, {3, 35, 5}, {1, 1, 1}, {7, 100, 3}};
  uint64_t seed = 50 + 100 * uint64_t(t);
  for (const Case& k : cases) {
    const std::string where = fmt::format("{} n {} hw {} c {}", dtype_name(t), k.n, k.hw, k.c);
    const size_t size = size_t(k.n * k.hw * k.c), rows = size_t(k.n * k.c);
    const auto x = test::random_rounded(size, seed++, t), dy = test::random_rounded(rows, seed++, t);
    std::vector<float> y(rows), dx(size);
    cpu::global_avg_pool_nhwc_forward<float>(k.n, k.hw, k.c, x.data(), y.data());
    cpu::global_avg_pool_nhwc_backward<float>(k.n, k.hw, k.c, dy.data(), dx.data());
    DeviceBuffer gx(x, t), gdy(dy, t), gy(rows, t), gdx(size, t);
    gy.poison();
    gdx.poison();
    cuda::global_avg_pool_nhwc_forward(k.n, k.hw, k.c, t, gx.get(), gy.get(), nullptr);
    cuda::global_avg_pool_nhwc_backward(k.n, k.hw, k.c, t, gdy.get(), gdx.get(), nullptr);
    EXPECT_TRUE(test::all_close(gy.download(), y, test::tolerance_of(t))) << where << ": y";
    EXPECT_TRUE(test::all_close(gdx.download(), dx, test::tolerance_of(t))) << where << ": dx";
  }
}

// n, c_in, h, w, c_out, kh, kw, stride, pad
const Conv2dShape kShapes[] = {
    {4, 1, 28, 28, 64, 3, 3, 1, 1},     // Fashion-MNIST stem
    {4, 3, 32, 32, 64, 3, 3, 1, 1},     // CIFAR stem
    {4, 64, 32, 32, 64, 3, 3, 1, 1},    // stage 1
    {4, 64, 32, 32, 128, 3, 3, 2, 1},   // stage 2, first conv
    {4, 64, 32, 32, 128, 1, 1, 2, 0},   // stage 2 downsample
    {4, 128, 16, 16, 256, 3, 3, 2, 1},  // stage 3, first conv
    {2, 256, 8, 8, 256, 3, 3, 1, 1},
    {1, 3, 5, 7, 13, 3, 3, 1, 1},  // odd sizes
    {3, 13, 9, 6, 5, 3, 3, 2, 1},
};

TEST_P(CudaLayoutDtypes, CudnnNhwcConvolutionMatchesTheNchwCpuReference) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("cuDNN");
  const DType t = GetParam();
  uint64_t seed = 100 + 1000 * uint64_t(t);
  for (const Conv2dShape& s : kShapes) {
    const int64_t hw = s.h * s.w, out_hw = s.out_h() * s.out_w(), taps = s.kh * s.kw;
    const auto x = test::random_rounded(size_t(s.n * s.c_in * hw), seed++, t);
    const auto w = test::random_rounded(size_t(s.c_out * s.c_in * taps), seed++, t, 0.2f);
    const auto b = test::random_rounded(size_t(s.c_out), seed++, t);
    const auto dy = test::random_rounded(size_t(s.n * s.c_out * out_hw), seed++, t);
    std::vector<float> y(dy.size()), dx(x.size()), dw(w.size()), db(b.size());
    cpu::conv2d_forward<float>(s, x.data(), w.data(), b.data(), y.data());
    cpu::conv2d_backward_data<float>(s, dy.data(), w.data(), dx.data());
    cpu::conv2d_backward_filter<float>(s, x.data(), dy.data(), dw.data(), db.data());

    DeviceBuffer gx(to_last(x, s.n, s.c_in, hw), t), gw(to_last(w, s.c_out, s.c_in, taps), t), gb(b, t);
    DeviceBuffer gdy(to_last(dy, s.n, s.c_out, out_hw), t);
    DeviceBuffer gy(y.size(), t), gdx(dx.size(), t), gdw(dw.size(), t), gdb(db.size(), t);
    for (DeviceBuffer* out : {&gy, &gdx, &gdw, &gdb}) out->poison();
    std::vector<void*> scratch;
    auto ws = [&](size_t bytes) {
      scratch.push_back(cuda::device_malloc(bytes, 0));
      return scratch.back();
    };
    const auto nhwc = Layout::nhwc;
    if constexpr (kernels::kCudaLibraries) {  // cuDNN's calls exist only where it is linked
      cuda::conv2d_cudnn_forward(s, t, gx.get(), gw.get(), gb.get(), gy.get(), ws, nullptr, nhwc);
      cuda::conv2d_cudnn_backward_data(s, t, gdy.get(), gw.get(), gdx.get(), ws, nullptr, nhwc);
      cuda::conv2d_cudnn_backward_filter(s, t, gx.get(), gdy.get(), gdw.get(), gdb.get(), ws, nullptr, nhwc);
    } else {
      ADD_FAILURE() << "cuDNN is not linked in this build (NEED_CUDA_LIBRARY skips before this)";
    }
    const auto got_y = to_first(gy.download(), s.n, s.c_out, out_hw);
    const auto got_dx = to_first(gdx.download(), s.n, s.c_in, hw);
    const auto got_dw = to_first(gdw.download(), s.c_out, s.c_in, taps);
    const auto got_db = gdb.download();
    for (void* p : scratch) cuda::device_free(p, 0);

    const test::Tolerance tol = test::tolerance_of(t);
    const std::string where = fmt::format("{} n{} c{} {}x{} -> {} k{} s{} p{}", dtype_name(t), s.n, s.c_in, s.h,
                                          s.w, s.c_out, s.kh, s.stride, s.pad);
    EXPECT_TRUE(test::all_close(got_y, y, test::for_sum(tol, double(s.c_in * taps)))) << where << ": forward";
    EXPECT_TRUE(test::all_close(got_dx, dx, test::for_sum(tol, double(s.c_out * taps)))) << where << ": data";
    EXPECT_TRUE(test::all_close(got_dw, dw, test::for_sum(tol, double(s.n * out_hw)))) << where << ": filter";
    EXPECT_TRUE(test::all_close(got_db, db, test::for_sum(tol, double(s.n * out_hw)))) << where << ": bias";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaLayoutDtypes, ::testing::ValuesIn(kTypes), test::dtype_case_name);

}  // namespace
}  // namespace cg::kernels
