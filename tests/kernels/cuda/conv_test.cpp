// Convolution kernels against the CPU reference, and the hand-written ones against cuDNN, for
// every MiniResNet layer shape and some odd ones, in f32, f16 and bf16; forward, backward-data and
// backward-filter (with bias); outputs poisoned first; plus backward-filter determinism.
#include <fmt/format.h>

#include <vector>

#include "kernels/cpu/conv2d.h"
#include "kernels/cuda/conv_native.h"
#include "kernels/cuda/cudnn.h"
#include "support/cuda_kernel_test.h"
#include "support/device_workspace.h"
#include "support/gpu_params.h"

namespace cg::kernels {
namespace {

using kernels::Conv2dShape;
using test::DeviceBuffer;

// The layers' batch: 4 on a GPU, 2 on the emulated one, where these shapes were the emulated
// suite's longest kernel tests (every tile still spans images, every edge is still reached).
constexpr int64_t kBatch = test::kEmulatedGpu ? 2 : 4;

// n, c_in, h, w, c_out, kh, kw, stride, pad
const Conv2dShape kShapes[] = {
    {kBatch, 1, 28, 28, 64, 3, 3, 1, 1},    // Fashion-MNIST stem
    {kBatch, 3, 32, 32, 64, 3, 3, 1, 1},    // CIFAR stem
    {kBatch, 64, 32, 32, 64, 3, 3, 1, 1},   // stage 1
    {kBatch, 64, 32, 32, 128, 3, 3, 2, 1},  // stage 2, first conv
    {kBatch, 64, 32, 32, 128, 1, 1, 2, 0},  // stage 2 downsample
    {kBatch, 128, 16, 16, 128, 3, 3, 1, 1},
    {kBatch, 128, 16, 16, 256, 3, 3, 2, 1},  // stage 3, first conv
    {kBatch, 128, 16, 16, 256, 1, 1, 2, 0},
    {2, 256, 8, 8, 256, 3, 3, 1, 1},
    {1, 3, 5, 7, 13, 3, 3, 1, 1},  // odd sizes
    {3, 13, 9, 6, 5, 3, 3, 2, 1},
    {2, 5, 7, 7, 3, 5, 5, 3, 2},
};

struct Results {
  std::vector<float> y, dx, dw, db;
};

// Runs all three directions with the chosen implementation (cuDNN's algorithms found by `search`).
Results run_gpu(bool cudnn, const Conv2dShape& s, DType t, const std::vector<float>& x, const std::vector<float>& w,
                const std::vector<float>& b, const std::vector<float>& dy,
                cuda::AlgoSearch search = cuda::AlgoSearch::timed) {
  const size_t ny = size_t(s.n * s.c_out * s.out_h() * s.out_w());
  DeviceBuffer gx(x, t), gw(w, t), gb(b, t), gdy(dy, t);
  DeviceBuffer gy(ny, t), gdx(x.size(), t), gdw(w.size(), t), gdb(b.size(), t);
  for (DeviceBuffer* out : {&gy, &gdx, &gdw, &gdb}) out->poison();
  std::vector<void*> scratch;
  auto ws = [&](size_t bytes) {
    scratch.push_back(cuda::device_malloc(bytes, 0));
    return scratch.back();
  };
  if (cudnn) {
    if constexpr (kernels::kCudaLibraries) {  // cuDNN's calls exist only where it is linked
      cuda::conv2d_cudnn_forward(s, t, gx.get(), gw.get(), gb.get(), gy.get(), ws, nullptr, Layout::nchw, search);
      cuda::conv2d_cudnn_backward_data(s, t, gdy.get(), gw.get(), gdx.get(), ws, nullptr, Layout::nchw, search);
      cuda::conv2d_cudnn_backward_filter(s, t, gx.get(), gdy.get(), gdw.get(), gdb.get(), ws, nullptr, Layout::nchw,
                                         search);
    } else {
      ADD_FAILURE() << "cuDNN is not linked in this build (NEED_CUDA_LIBRARY skips before this)";
    }
  } else {
    cuda::conv2d_native_forward(s, t, gx.get(), gw.get(), gb.get(), gy.get(), nullptr);
    cuda::conv2d_native_backward_data(s, t, gdy.get(), gw.get(), gdx.get(), nullptr);
    cuda::conv2d_native_backward_filter(s, t, gx.get(), gdy.get(), gdw.get(), gdb.get(), test::device_workspace(),
                                        nullptr);
  }
  Results r{gy.download(), gdx.download(), gdw.download(), gdb.download()};
  for (void* p : scratch) cuda::device_free(p, 0);
  return r;
}

Results run_cpu(const Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
                const std::vector<float>& b, const std::vector<float>& dy) {
  Results r;
  r.y.resize(size_t(s.n * s.c_out * s.out_h() * s.out_w()));
  r.dx.resize(x.size());
  r.dw.resize(w.size());
  r.db.resize(b.size());
  cpu::conv2d_forward<float>(s, x.data(), w.data(), b.data(), r.y.data());
  cpu::conv2d_backward_data<float>(s, dy.data(), w.data(), r.dx.data());
  cpu::conv2d_backward_filter<float>(s, x.data(), dy.data(), r.dw.data(), r.db.data());
  return r;
}

void expect_close(const Results& got, const Results& ref, const Conv2dShape& s, DType t, const char* what) {
  const test::Tolerance tol = test::tolerance_of(t);
  const double k_fwd = double(s.c_in * s.kh * s.kw), k_data = double(s.c_out * s.kh * s.kw);
  const double k_filter = double(s.n * s.out_h() * s.out_w());
  const std::string where = fmt::format("{} {} n{} c{} {}x{} -> {} k{} s{} p{}", what, dtype_name(t), s.n, s.c_in, s.h,
                                        s.w, s.c_out, s.kh, s.stride, s.pad);
  EXPECT_TRUE(test::all_close(got.y, ref.y, test::for_sum(tol, k_fwd))) << where << ": forward";
  EXPECT_TRUE(test::all_close(got.dx, ref.dx, test::for_sum(tol, k_data))) << where << ": backward-data";
  EXPECT_TRUE(test::all_close(got.dw, ref.dw, test::for_sum(tol, k_filter))) << where << ": backward-filter";
  EXPECT_TRUE(test::all_close(got.db, ref.db, test::for_sum(tol, k_filter))) << where << ": bias gradient";
}

// One case per dtype (CudaConvDtypes.NativeMatchesTheCpu/float16); the messages name the shape.
class CudaConvDtypes : public ::testing::TestWithParam<DType> {};

// Calls check(shape, cpu reference, x, w, b, dy) for every shape, with data rounded to the dtype.
template <typename Check>
void for_each_case(DType t, Check check) {
  uint64_t seed = 1 + 1000 * uint64_t(t);
  for (const Conv2dShape& s : kShapes) {
    const auto x = test::random_rounded(size_t(s.n * s.c_in * s.h * s.w), seed++, t);
    const auto w = test::random_rounded(size_t(s.c_out * s.c_in * s.kh * s.kw), seed++, t, 0.2f);
    const auto b = test::random_rounded(size_t(s.c_out), seed++, t);
    const auto dy = test::random_rounded(size_t(s.n * s.c_out * s.out_h() * s.out_w()), seed++, t);
    check(s, run_cpu(s, x, w, b, dy), x, w, b, dy);
  }
}

TEST_P(CudaConvDtypes, NativeMatchesTheCpu) {
  NEED_GPU();
  const DType t = GetParam();
  for_each_case(t, [&](const Conv2dShape& s, const Results& ref, auto& x, auto& w, auto& b, auto& dy) {
    expect_close(run_gpu(false, s, t, x, w, b, dy), ref, s, t, "native");
  });
}

TEST_P(CudaConvDtypes, CudnnMatchesTheCpuAndNative) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("cuDNN");
  const DType t = GetParam();
  for_each_case(t, [&](const Conv2dShape& s, const Results& ref, auto& x, auto& w, auto& b, auto& dy) {
    const Results native = run_gpu(false, s, t, x, w, b, dy), cudnn = run_gpu(true, s, t, x, w, b, dy);
    expect_close(cudnn, ref, s, t, "cudnn");
    expect_close(native, cudnn, s, t, "native vs cudnn");
  });
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaConvDtypes, ::testing::ValuesIn(test::kGpuFloatTypes), test::dtype_case_name);

TEST(CudaConv, CudnnHeuristicAndTimedSearchAgree) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("cuDNN");
  const Conv2dShape s = kShapes[3];
  const auto x = test::random_rounded(size_t(s.n * s.c_in * s.h * s.w), 91, DType::f16);
  const auto w = test::random_rounded(size_t(s.c_out * s.c_in * s.kh * s.kw), 92, DType::f16, 0.2f);
  const auto b = test::random_rounded(size_t(s.c_out), 93, DType::f16);
  const auto dy = test::random_rounded(size_t(s.n * s.c_out * s.out_h() * s.out_w()), 94, DType::f16);
  const Results heuristic = run_gpu(true, s, DType::f16, x, w, b, dy, cuda::AlgoSearch::heuristic);
  const Results timed = run_gpu(true, s, DType::f16, x, w, b, dy, cuda::AlgoSearch::timed);
  expect_close(heuristic, timed, s, DType::f16, "heuristic vs timed");
}

TEST(CudaConv, NativeBackwardFilterIsDeterministic) {
  NEED_GPU();
  const Conv2dShape s = kShapes[2];
  const auto x = test::random_rounded(size_t(s.n * s.c_in * s.h * s.w), 95, DType::f32);
  const auto w = test::random_rounded(size_t(s.c_out * s.c_in * s.kh * s.kw), 96, DType::f32);
  const auto b = test::random_rounded(size_t(s.c_out), 97, DType::f32);
  const auto dy = test::random_rounded(size_t(s.n * s.c_out * s.out_h() * s.out_w()), 98, DType::f32);
  const Results a = run_gpu(false, s, DType::f32, x, w, b, dy), c = run_gpu(false, s, DType::f32, x, w, b, dy);
  EXPECT_EQ(a.dw, c.dw);
  EXPECT_EQ(a.db, c.db);
}

}  // namespace
}  // namespace cg::kernels
