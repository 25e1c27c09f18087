// Kernel-level tests of the CUDA batch-norm, pooling, cross-entropy and optimizer kernels against
// the CPU reference, on fresh random inputs over MiniResNet's shapes and odd ones, outputs
// poisoned before each run, one tolerance table. Skips without a GPU.
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/loss.h"
#include "kernels/cpu/pool.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/layers.h"
#include "support/tolerance.h"

namespace cg::kernels {
namespace {

#define NEED_GPU() \
  if (cuda::device_count() == 0) GTEST_SKIP() << "needs a CUDA GPU; none is visible here"

std::vector<float> randn(size_t n, uint64_t seed, float mean = 0.f, float sd = 1.f) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(mean, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// A device copy of a host vector, freed on scope exit; back() reads it to the host.
template <typename T>
struct DeviceVec {
  std::vector<T> host;
  T* ptr = nullptr;
  explicit DeviceVec(std::vector<T> h) : host(std::move(h)) {
    ptr = static_cast<T*>(cuda::device_malloc(host.size() * sizeof(T) + 1, 0));
    cuda::copy_host_to_device(ptr, host.data(), host.size() * sizeof(T), nullptr);
  }
  std::vector<T> back() const {
    std::vector<T> out(host.size());
    cuda::copy_device_to_host(out.data(), ptr, out.size() * sizeof(T), nullptr);
    cuda::synchronize_stream(nullptr);
    return out;
  }
  ~DeviceVec() { cuda::device_free(ptr, 0); }
};

const test::Tolerance kReduction{1e-4, 1e-4};  // float sums in another order than the CPU's

TEST(CudaBatchNorm, TrainForwardBackwardAndEvalMatchTheCpu) {
  NEED_GPU();
  for (cpu::BatchNormShape s : {cpu::BatchNormShape{8, 16, 32 * 32}, {8, 64, 8 * 8}, {3, 5, 7}}) {
    for (cpu::Activation act : {cpu::Activation::none, cpu::Activation::relu}) {
      const size_t n = size_t(s.n * s.c * s.hw), c = size_t(s.c);
      auto x = randn(n, 1, 0.5f, 2.f), dy = randn(n, 2), g = randn(c, 3), b = randn(c, 4);
      std::vector<float> rm = randn(c, 5), rv(c, 1.5f);
      // CPU reference
      std::vector<float> y(n), mean(c), invstd(c), dx(n), dg(c), db(c), rm_c = rm, rv_c = rv;
      cpu::batchnorm_forward_train<float>(s, x.data(), g.data(), b.data(), 1e-5f, 0.1f, rm_c.data(), rv_c.data(),
                                          y.data(), mean.data(), invstd.data(), act);
      cpu::batchnorm_backward_train<float>(s, dy.data(), x.data(), g.data(), mean.data(), invstd.data(), dx.data(),
                                           dg.data(), db.data(), act == cpu::Activation::relu ? y.data() : nullptr);
      // GPU, outputs poisoned
      DeviceVec<float> dx_(x), ddy(dy), dgm(g), dbt(b), drm(rm), drv(rv);
      DeviceVec<float> dyo(test::poisoned<float>(n)), dmean(test::poisoned<float>(c)), dinv(test::poisoned<float>(c));
      DeviceVec<float> ddx(test::poisoned<float>(n)), ddg(test::poisoned<float>(c)), ddb(test::poisoned<float>(c));
      cuda::batchnorm_forward_train(s, dx_.ptr, dgm.ptr, dbt.ptr, 1e-5f, 0.1f, drm.ptr, drv.ptr, dyo.ptr, dmean.ptr,
                                    dinv.ptr, act, nullptr);
      cuda::batchnorm_backward_train(s, ddy.ptr, dx_.ptr, dgm.ptr, dmean.ptr, dinv.ptr, ddx.ptr, ddg.ptr, ddb.ptr,
                                     act == cpu::Activation::relu ? dyo.ptr : nullptr, nullptr);
      EXPECT_TRUE(test::all_close(dyo.back(), y, kReduction)) << "forward, C=" << s.c;
      EXPECT_TRUE(test::all_close(drm.back(), rm_c, kReduction)) << "running_mean";
      EXPECT_TRUE(test::all_close(drv.back(), rv_c, kReduction)) << "running_var";
      EXPECT_TRUE(test::all_close(ddx.back(), dx, {1e-3, 1e-3})) << "dx";
      EXPECT_TRUE(test::all_close(ddg.back(), dg, {1e-3, 1e-3})) << "dgamma";
      EXPECT_TRUE(test::all_close(ddb.back(), db, {1e-3, 1e-3})) << "dbeta";
      // eval
      std::vector<float> ye(n);
      cpu::batchnorm_forward_eval<float>(s, x.data(), g.data(), b.data(), rm.data(), rv.data(), 1e-5f, ye.data(), act);
      DeviceVec<float> drm0(rm), drv0(rv), dye(test::poisoned<float>(n));
      cuda::batchnorm_forward_eval(s, dx_.ptr, dgm.ptr, dbt.ptr, drm0.ptr, drv0.ptr, 1e-5f, dye.ptr, act, nullptr);
      EXPECT_TRUE(test::all_close(dye.back(), ye, kReduction)) << "eval";
    }
  }
}

TEST(CudaPoolAndLoss, MatchTheCpu) {
  NEED_GPU();
  const int64_t nc = 64 * 256, hw = 64;
  auto x = randn(size_t(nc * hw), 6), dyp = randn(size_t(nc), 7);
  std::vector<float> y(static_cast<size_t>(nc)), dx(static_cast<size_t>(nc * hw));
  cpu::global_avg_pool_forward<float>(nc, hw, x.data(), y.data());
  cpu::global_avg_pool_backward<float>(nc, hw, dyp.data(), dx.data());
  DeviceVec<float> dxin(x), ddy(dyp), dy_(test::poisoned<float>(size_t(nc))), ddx(test::poisoned<float>(size_t(nc * hw)));
  cuda::global_avg_pool_forward(nc, hw, dxin.ptr, dy_.ptr, nullptr);
  cuda::global_avg_pool_backward(nc, hw, ddy.ptr, ddx.ptr, nullptr);
  EXPECT_TRUE(test::all_close(dy_.back(), y, kReduction));
  EXPECT_TRUE(test::all_close(ddx.back(), dx));

  const int64_t n = 257, classes = 10;
  auto logits = randn(size_t(n * classes), 8, 0.f, 5.f);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[size_t(i)] = (i * 7) % classes;
  float loss = 0;
  std::vector<float> probs(size_t(n * classes)), dl(size_t(n * classes));
  const int64_t hits = cpu::cross_entropy_forward<float>(n, classes, logits.data(), labels.data(), &loss, probs.data());
  cpu::cross_entropy_backward<float>(n, classes, 1.f, probs.data(), labels.data(), dl.data());
  DeviceVec<float> dlog(logits), dprobs(test::poisoned<float>(probs.size())), dloss(std::vector<float>{NAN});
  DeviceVec<float> done(std::vector<float>{1.f}), ddl(test::poisoned<float>(dl.size()));
  DeviceVec<int64_t> dlab(labels), dhits(std::vector<int64_t>{-1});
  cuda::cross_entropy_forward(n, classes, dlog.ptr, dlab.ptr, dloss.ptr, dprobs.ptr, dhits.ptr, nullptr);
  cuda::cross_entropy_backward(n, classes, done.ptr, dprobs.ptr, dlab.ptr, ddl.ptr, nullptr);
  EXPECT_NEAR(dloss.back()[0], loss, 1e-5 * std::abs(loss));
  EXPECT_EQ(dhits.back()[0], hits);
  EXPECT_TRUE(test::all_close(dprobs.back(), probs));
  EXPECT_TRUE(test::all_close(ddl.back(), dl));
}

TEST(CudaOptimizers, SgdAndAdamWMatchTheCpu) {
  NEED_GPU();
  const int64_t n = 100003;
  auto p0 = randn(size_t(n), 9), g = randn(size_t(n), 10);
  for (bool nesterov : {false, true}) {
    cpu::SgdParams h{0.1f, 0.9f, 1e-4f, 0.f, nesterov};
    std::vector<float> p = p0, buf(static_cast<size_t>(n));
    DeviceVec<float> dp(p0), dg(g), dbuf(test::poisoned<float>(size_t(n)));
    for (int step = 0; step < 3; ++step) {
      cpu::sgd_update(n, h, step == 0, p.data(), g.data(), buf.data());
      cuda::sgd_update(n, h, step == 0, dp.ptr, dg.ptr, dbuf.ptr, nullptr);
    }
    EXPECT_TRUE(test::all_close(dp.back(), p, {1e-6, 1e-6})) << "nesterov " << nesterov;
  }
  cpu::AdamWParams h;
  std::vector<float> p = p0, m(size_t(n), 0.f), v(size_t(n), 0.f);
  DeviceVec<float> dp(p0), dg(g), dm(m), dv(v);
  for (int step = 1; step <= 3; ++step) {
    cpu::adamw_update(n, h, step, p.data(), g.data(), m.data(), v.data());
    cuda::adamw_update(n, h, step, dp.ptr, dg.ptr, dm.ptr, dv.ptr, nullptr);
  }
  EXPECT_TRUE(test::all_close(dp.back(), p, {1e-6, 1e-5}));
}

}  // namespace
}  // namespace cg::kernels
