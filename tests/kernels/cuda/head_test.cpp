// The classifier head on the GPU against the CPU reference: global average pooling in f32, f16
// and bf16, cross-entropy in f32 (loss and hit count in device memory, dloss a device scalar), and
// the cuBLAS linear layer between them; MiniResNet's head shapes (small batch) and odd ones;
// outputs poisoned first.
#include <fmt/format.h>

#include "kernels/cpu/linear.h"
#include "kernels/cpu/loss.h"
#include "kernels/cpu/pool.h"
#include "kernels/cuda/head.h"
#include "kernels/cuda/linear.h"
#include "support/cuda_kernel_test.h"
#include "support/gpu_params.h"

namespace cg::kernels {
namespace {

using test::DeviceBuffer;

const DType kTypes[] = {DType::f32, DType::f16, DType::bf16};

// One case per dtype (CudaHeadDtypes.PoolingMatchesTheCpu/float16); the messages name the shape.
class CudaHeadDtypes : public ::testing::TestWithParam<DType> {};

TEST_P(CudaHeadDtypes, PoolingMatchesTheCpu) {
  NEED_GPU();
  const DType t = GetParam();
  // (N * C, H * W): MiniResNet's last stage at batch 4 for 32x32 and 28x28 inputs, then odd sizes
  // (rows longer than a warp, 5x7 images with 3 channels, single elements).
  const std::pair<int64_t, int64_t> shapes[] = {{4 * 256, 8 * 8}, {4 * 256, 7 * 7}, {2 * 13, 33}, {3 * 5, 5 * 7},
                                                {1, 1},           {7, 100}};
  uint64_t seed = 1 + 1000 * uint64_t(t);
  for (auto [nc, hw] : shapes) {
    const std::string where = fmt::format("{} nc {} hw {}", dtype_name(t), nc, hw);
    const auto x = test::random_rounded(size_t(nc * hw), seed++, t), dy = test::random_rounded(size_t(nc), seed++, t);
    std::vector<float> y(static_cast<size_t>(nc)), dx(static_cast<size_t>(nc * hw));
    cpu::global_avg_pool_forward<float>(nc, hw, x.data(), y.data());
    cpu::global_avg_pool_backward<float>(nc, hw, dy.data(), dx.data());
    DeviceBuffer gx(x, t), gdy(dy, t), gy(size_t(nc), t), gdx(size_t(nc * hw), t);
    gy.poison();
    gdx.poison();
    cuda::global_avg_pool_forward(nc, hw, t, gx.get(), gy.get(), nullptr);
    cuda::global_avg_pool_backward(nc, hw, t, gdy.get(), gdx.get(), nullptr);
    EXPECT_TRUE(test::all_close(gy.download(), y, test::tolerance_of(t))) << where << ": y";
    EXPECT_TRUE(test::all_close(gdx.download(), dx, test::tolerance_of(t))) << where << ": dx";
  }
}

TEST(CudaHead, CrossEntropyMatchesTheCpu) {
  NEED_GPU();
  // (batch, classes): MiniResNet's head at batch 256, a batch over the block's 256 threads, odd ones.
  const std::pair<int64_t, int64_t> shapes[] = {{256, 10}, {513, 10}, {1, 3}, {7, 13}};
  uint64_t seed = 100;
  for (auto [n, classes] : shapes) {
    const std::string where = fmt::format("n {} classes {}", n, classes);
    auto logits = test::random_vector<float>(size_t(n * classes), seed++);
    for (float& v : logits) v *= 4.f;
    std::vector<int64_t> labels(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) labels[size_t(i)] = (i * 7) % classes;
    std::vector<float> probs(logits.size()), dlogits(logits.size());
    float loss = 0;
    const int64_t hits =
        cpu::cross_entropy_forward<float>(n, classes, logits.data(), labels.data(), &loss, probs.data());
    cpu::cross_entropy_backward<float>(n, classes, 0.5f, probs.data(), labels.data(), dlogits.data());
    DeviceBuffer gl(logits, DType::f32), gp(logits.size(), DType::f32), gd(logits.size(), DType::f32),
        gloss(1, DType::f32), gdloss(std::vector<float>{0.5f}, DType::f32);
    DeviceBuffer glab(labels.size(), DType::i64), gcorrect(1, DType::i64);
    cuda::copy_host_to_device(glab.get(), labels.data(), labels.size() * 8, nullptr);
    for (DeviceBuffer* o : {&gp, &gd, &gloss}) o->poison();
    cuda::cross_entropy_forward(n, classes, gl.get<float>(), glab.get<int64_t>(), gloss.get<float>(), gp.get<float>(),
                                gcorrect.get<int64_t>(), nullptr);
    cuda::cross_entropy_backward(n, classes, gdloss.get<float>(), gp.get<float>(), glab.get<int64_t>(),
                                 gd.get<float>(), nullptr);
    int64_t got_hits = -1;
    cuda::copy_device_to_host(&got_hits, gcorrect.get(), 8, nullptr);
    cuda::synchronize_stream(nullptr);
    EXPECT_EQ(got_hits, hits) << where;
    EXPECT_TRUE(test::all_close(gloss.download(), {loss})) << where << ": loss";
    EXPECT_TRUE(test::all_close(gp.download(), probs)) << where << ": probs";
    EXPECT_TRUE(test::all_close(gd.download(), dlogits)) << where << ": dlogits";
  }
}

// One implementation of kernels/cuda/linear.h (cuBLAS or native) against the CPU reference.
using LinearForward = decltype(&cuda::linear_native_forward);
using LinearBackward = decltype(&cuda::linear_native_backward);
// `workspace` is handed to every call.
void expect_linear_matches_cpu(DType t, LinearForward forward, LinearBackward backward,
                               const cuda::WorkspaceFn& workspace = {}) {
  // (batch, in, out): MiniResNet's fc at batch 256 and odd sizes.
  const std::tuple<int64_t, int64_t, int64_t> shapes[] = {{256, 256, 10}, {7, 13, 5}, {1, 64, 1}};
  uint64_t seed = 200 + 1000 * uint64_t(t);
  for (auto [m, k, n] : shapes) {
    const auto x = test::random_rounded(size_t(m * k), seed++, t);
    const auto w = test::random_rounded(size_t(n * k), seed++, t, 0.1f);
    const auto b = test::random_rounded(size_t(n), seed++, t), dy = test::random_rounded(size_t(m * n), seed++, t);
    std::vector<float> y(static_cast<size_t>(m * n)), dx(static_cast<size_t>(m * k)), dw(static_cast<size_t>(n * k)),
        db(static_cast<size_t>(n));
    cpu::linear_forward<float>(m, k, n, x.data(), w.data(), b.data(), y.data());
    cpu::linear_backward<float>(m, k, n, dy.data(), x.data(), w.data(), dx.data(), dw.data(), db.data());
    DeviceBuffer gx(x, t), gw(w, t), gb(b, t), gdy(dy, t);
    DeviceBuffer gy(y.size(), t), gdx(dx.size(), t), gdw(dw.size(), t), gdb(db.size(), t);
    for (DeviceBuffer* o : {&gy, &gdx, &gdw, &gdb}) o->poison();
    forward(m, k, n, t, gx.get(), gw.get(), gb.get(), gy.get(), nullptr, workspace);
    backward(m, k, n, t, gdy.get(), gx.get(), gw.get(), gdx.get(), gdw.get(), gdb.get(), nullptr, workspace);
    const test::Tolerance tol = test::tolerance_of(t);
    const std::string where = fmt::format("{} m{} k{} n{}", dtype_name(t), m, k, n);
    EXPECT_TRUE(test::all_close(gy.download(), y, test::for_sum(tol, double(k)))) << where << ": y";
    EXPECT_TRUE(test::all_close(gdx.download(), dx, test::for_sum(tol, double(n)))) << where << ": dx";
    EXPECT_TRUE(test::all_close(gdw.download(), dw, test::for_sum(tol, double(m)))) << where << ": dw";
    EXPECT_TRUE(test::all_close(gdb.download(), db, test::for_sum(tol, double(m)))) << where << ": db";
  }
}

TEST_P(CudaHeadDtypes, CublasLinearMatchesTheCpu) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("cuBLAS");
  if constexpr (kernels::kCudaLibraries)  // cuBLAS's calls exist only where it is linked
    expect_linear_matches_cpu(GetParam(), cuda::linear_cublas_forward, cuda::linear_cublas_backward);
}

// cuBLAS works in the caller's memory (a CUDA graph's pool when captured), asked on every call:
// cublasSetStream resets the workspace, so one set once would be lost.
TEST_P(CudaHeadDtypes, CublasLinearTakesItsWorkspaceFromTheCaller) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("cuBLAS");
  DeviceBuffer scratch(cuda::kCublasWorkspaceBytes, DType::u8);
  int asked = 0;
  if constexpr (kernels::kCudaLibraries) {
    expect_linear_matches_cpu(GetParam(), cuda::linear_cublas_forward, cuda::linear_cublas_backward,
                              [&](size_t bytes) {
                                ++asked;
                                EXPECT_EQ(bytes, cuda::kCublasWorkspaceBytes);
                                return scratch.get();
                              });
  }
  EXPECT_EQ(asked, 6) << "forward and backward of three shapes";
}

TEST_P(CudaHeadDtypes, NativeLinearMatchesTheCpu) {
  NEED_GPU();
  expect_linear_matches_cpu(GetParam(), cuda::linear_native_forward, cuda::linear_native_backward);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaHeadDtypes, ::testing::ValuesIn(kTypes), test::dtype_case_name);

}  // namespace
}  // namespace cg::kernels
