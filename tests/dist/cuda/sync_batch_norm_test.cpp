// SyncBatchNorm on the GPU (the native kernels cut around the sum, the float64 vectors on the
// device): over single-rank NCCL (the real NCCL path: communication stream, events, watchdog) a
// layer gives what plain batch norm gives; two ranks sharing the GPU through staged Gloo (threads
// here) with unequal batches give plain batch norm's results on the union batch. Float32, NCHW
// and channels-last, with and without the fused residual + ReLU. Skips without a GPU.
#include <gtest/gtest.h>

#include "dist/gradient_comm.h"
#include "dist/sync_batch_norm.h"
#include "nn/layers.h"
#include "support/need_gpu.h"
#include "support/one_rank_store.h"
#include "support/random_data.h"
#include "support/rank_threads.h"
#include "support/tolerance.h"

namespace cg::dist {
namespace {

const Device kGpu = Device::cuda(0);
constexpr int64_t kC = 8, kH = 6, kW = 5;

struct Mode {
  bool add_relu, channels_last;
};
void PrintTo(const Mode& m, std::ostream* os) {
  *os << (m.add_relu ? "add_relu" : "plain") << (m.channels_last ? " nhwc" : " nchw");
}

Tensor batch(const Mode& m, int64_t n, uint64_t seed, double offset) {
  const Shape shape = m.channels_last ? Shape{n, kH, kW, kC} : Shape{n, kC, kH, kW};
  std::vector<float> v = test::random_vector<float>(size_t(n * kC * kH * kW), seed);
  for (float& x : v) x = float(offset + 2.0 * x);
  return Tensor::from_vector(v, shape);
}

// One layer's step on rows [first, first + n) of the union batch: y, dx, d_residual, dgamma,
// dbeta, running_mean, running_var, on `device`, synchronized through `comm` when given.
std::vector<std::vector<float>> step(const Mode& m, int64_t total, int64_t first, int64_t n, Device device,
                                     GradientComm* comm) {
  ops::ExecutionScope in_layout({.layout = m.channels_last ? ops::Layout::nhwc : ops::Layout::nchw});
  nn::BatchNorm2d bn(kC);
  bn.to(device);
  std::unique_ptr<SyncBatchNorm> sync;
  if (comm) sync = std::make_unique<SyncBatchNorm>(bn, *comm);
  auto rows = [&](const Tensor& all) {  // images are contiguous in either layout
    Shape shape = all.shape();
    shape[0] = n;
    return all.view_at(first * kC * kH * kW, shape).clone().to(device);
  };
  Tensor x = rows(batch(m, total, 1, 3.0)), r = rows(batch(m, total, 2, 0.0)), dy = rows(batch(m, total, 3, 0.0));
  x.set_requires_grad(true);
  r.set_requires_grad(true);
  Tensor y = m.add_relu ? bn.forward_add_relu(x, r) : bn.forward(x);
  y.backward(dy);
  std::vector<std::vector<float>> out{y.to_vector<float>(), x.grad().to_vector<float>(),
                                      m.add_relu ? r.grad().to_vector<float>() : std::vector<float>{}};
  for (auto& [name, p] : bn.named_parameters()) out.push_back(p.grad().to_vector<float>());
  for (auto& [name, b] : bn.named_buffers())
    if (name != "num_batches_tracked") out.push_back(b.to_vector<float>());
  return out;
}

class CudaSyncBatchNorm : public ::testing::TestWithParam<Mode> {};

TEST_P(CudaSyncBatchNorm, SingleRankNcclEqualsPlainBatchNorm) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("NCCL");
  TcpStore store = test::one_rank_store();
  auto comm = make_nccl_comm(store, 0, 1, kGpu, 60.0);
  const auto want = step(GetParam(), 7, 0, 7, kGpu, nullptr);
  const auto got = step(GetParam(), 7, 0, 7, kGpu, comm.get());
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(test::all_close(got[i], want[i])) << "output " << i;
}

TEST_P(CudaSyncBatchNorm, TwoRanksWithUnequalBatchesThroughStagedGlooEqualTheUnionBatch) {
  NEED_GPU();
  const Mode m = GetParam();
  const std::vector<int64_t> sizes{3, 5};
  const auto want = step(m, 8, 0, 8, kGpu, nullptr);
  std::vector<std::vector<std::vector<float>>> got(2);
  test::run_rank_threads(2, [&](int r, ProcessGroup& group) {
    auto comm = make_staged_gloo_comm(group, kGpu);
    got[size_t(r)] = step(m, 8, r == 0 ? 0 : sizes[0], sizes[size_t(r)], kGpu, comm.get());
  });
  if (::testing::Test::HasFailure()) return;
  const size_t per_image = size_t(kC * kH * kW);
  for (size_t out = 0; out < 3; ++out) {  // y, dx, d_residual: the ranks' rows of the union's
    if (want[out].empty()) continue;
    std::vector<float> joined = got[0][out];
    joined.insert(joined.end(), got[1][out].begin(), got[1][out].end());
    ASSERT_EQ(joined.size(), 8 * per_image);
    EXPECT_TRUE(test::all_close(joined, want[out])) << "output " << out;
  }
  for (size_t out = 3; out < 5; ++out) {  // dgamma, dbeta: each rank's share, summed
    std::vector<float> sum = got[0][out];
    for (size_t c = 0; c < sum.size(); ++c) sum[c] += got[1][out][c];
    EXPECT_TRUE(test::all_close(sum, want[out])) << "output " << out;
  }
  for (size_t out = 5; out < 7; ++out) {  // running statistics: identical on both, the union's
    EXPECT_EQ(got[0][out], got[1][out]) << "output " << out;
    EXPECT_TRUE(test::all_close(got[0][out], want[out])) << "output " << out;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, CudaSyncBatchNorm,
                         ::testing::Values(Mode{false, false}, Mode{true, false}, Mode{false, true}, Mode{true, true}),
                         [](const ::testing::TestParamInfo<Mode>& i) {
                           return std::string(i.param.add_relu ? "AddRelu" : "Plain") +
                                  (i.param.channels_last ? "Nhwc" : "Nchw");
                         });

}  // namespace
}  // namespace cg::dist
