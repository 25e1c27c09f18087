// Batch norm (hand-written and cuDNN), pooling, cross-entropy and the cuBLAS linear layer against
// the CPU reference, in f32, f16 and bf16 where the kernel takes them, over MiniResNet's shapes
// and odd ones; outputs poisoned first.
#include <fmt/format.h>

#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/loss.h"
#include "kernels/cpu/pool.h"
#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/cudnn.h"
#include "kernels/cuda/head.h"
#include "kernels/cuda/linear.h"
#include "support/cuda_kernel_test.h"

namespace cg::kernels {
namespace {

using cpu::Activation;
using cpu::BatchNormShape;
using test::DeviceBuffer;

const BatchNormShape kBnShapes[] = {{8, 64, 32 * 32}, {8, 128, 16 * 16}, {8, 256, 8 * 8}, {8, 64, 28 * 28},
                                    {3, 5, 7},       {1, 13, 2}};
const DType kTypes[] = {DType::f32, DType::f16, DType::bf16};

TEST(CudaBatchNorm, TrainEvalAndBackwardMatchTheCpuForBothImplementations) {
  NEED_GPU();
  uint64_t seed = 1;
  for (bool cudnn : {false, true})
    for (DType t : kTypes)
      for (const BatchNormShape& s : kBnShapes)
        for (Activation act : {Activation::none, Activation::relu}) {
          const std::string where = fmt::format("{} {} n{} c{} hw{} relu {}", cudnn ? "cudnn" : "native",
                                                dtype_name(t), s.n, s.c, s.hw, act == Activation::relu);
          const size_t n = size_t(s.n * s.c * s.hw), c = size_t(s.c);
          const auto x = test::random_rounded(n, seed++, t, 2.f), dy = test::random_rounded(n, seed++, t);
          const auto g = test::random_vector<float>(c, seed++), b = test::random_vector<float>(c, seed++);
          std::vector<float> rm = test::random_vector<float>(c, seed++), rv(c, 1.5f);
          // CPU reference, training then eval with the updated running statistics.
          std::vector<float> y(n), mean(c), invstd(c), dx(n), dg(c), db(c), rm_c = rm, rv_c = rv, ye(n);
          cpu::batchnorm_forward_train<float>(s, x.data(), g.data(), b.data(), 1e-5f, 0.1f, rm_c.data(), rv_c.data(),
                                              y.data(), mean.data(), invstd.data(), act);
          cpu::batchnorm_backward_train<float>(s, dy.data(), x.data(), g.data(), mean.data(), invstd.data(), dx.data(),
                                               dg.data(), db.data(), act == Activation::relu ? y.data() : nullptr);
          cpu::batchnorm_forward_eval<float>(s, x.data(), g.data(), b.data(), rm_c.data(), rv_c.data(), 1e-5f,
                                             ye.data(), act);
          // GPU
          DeviceBuffer gx(x, t), gdy(dy, t), gg(g, DType::f32), gb(b, DType::f32), grm(rm, DType::f32),
              grv(rv, DType::f32);
          DeviceBuffer gy(n, t), gmean(c, DType::f32), ginv(c, DType::f32), gdx(n, t), gdg(c, DType::f32),
              gdb(c, DType::f32), gye(n, t);
          for (DeviceBuffer* o : {&gy, &gmean, &ginv, &gdx, &gdg, &gdb, &gye}) o->poison();
          std::vector<void*> scratch;
          auto ws = [&](size_t bytes) {
            scratch.push_back(cuda::device_malloc(bytes, 0));
            return scratch.back();
          };
          const void* relu_y = act == Activation::relu ? gy.get() : nullptr;
          if (cudnn) {
            cuda::batchnorm_cudnn_forward_train(s, t, gx.get(), gg.get<float>(), gb.get<float>(), 1e-5f, 0.1f,
                                                grm.get<float>(), grv.get<float>(), gy.get(), gmean.get<float>(),
                                                ginv.get<float>(), act, nullptr);
            cuda::batchnorm_cudnn_backward_train(s, t, gdy.get(), gx.get(), gg.get<float>(), gmean.get<float>(),
                                                 ginv.get<float>(), 1e-5f, gdx.get(), gdg.get<float>(),
                                                 gdb.get<float>(), relu_y, ws, nullptr);
            cuda::batchnorm_cudnn_forward_eval(s, t, gx.get(), gg.get<float>(), gb.get<float>(), grm.get<float>(),
                                               grv.get<float>(), 1e-5f, gye.get(), act, nullptr);
          } else {
            cuda::batchnorm_forward_train(s, t, gx.get(), gg.get<float>(), gb.get<float>(), 1e-5f, 0.1f,
                                          grm.get<float>(), grv.get<float>(), gy.get(), gmean.get<float>(),
                                          ginv.get<float>(), act, nullptr);
            cuda::batchnorm_backward_train(s, t, gdy.get(), gx.get(), gg.get<float>(), gmean.get<float>(),
                                           ginv.get<float>(), gdx.get(), gdg.get<float>(), gdb.get<float>(), relu_y,
                                           nullptr);
            cuda::batchnorm_forward_eval(s, t, gx.get(), gg.get<float>(), gb.get<float>(), grm.get<float>(),
                                         grv.get<float>(), 1e-5f, gye.get(), act, nullptr);
          }
          const test::Tolerance tol = test::tolerance_of(t), f32 = test::tolerance_for<float>();
          const double m = double(s.n * s.hw);
          EXPECT_TRUE(test::all_close(gy.download(), y, tol)) << where << ": y";
          EXPECT_TRUE(test::all_close(gmean.download(), mean, f32)) << where << ": saved mean";
          EXPECT_TRUE(test::all_close(ginv.download(), invstd, {1e-4, 1e-3})) << where << ": saved invstd";
          EXPECT_TRUE(test::all_close(grm.download(), rm_c, f32)) << where << ": running_mean";
          EXPECT_TRUE(test::all_close(grv.download(), rv_c, {1e-4, 1e-3})) << where << ": running_var";
          EXPECT_TRUE(test::all_close(gdx.download(), dx, tol)) << where << ": dx";
          EXPECT_TRUE(test::all_close(gdg.download(), dg, test::for_sum(f32, m))) << where << ": dgamma";
          EXPECT_TRUE(test::all_close(gdb.download(), db, test::for_sum(f32, m))) << where << ": dbeta";
          EXPECT_TRUE(test::all_close(gye.download(), ye, tol)) << where << ": eval y";
          for (void* p : scratch) cuda::device_free(p, 0);
        }
}

TEST(CudaBatchNorm, EvalBackwardMatchesTheCpu) {
  NEED_GPU();
  const BatchNormShape s{4, 16, 25};
  const size_t n = size_t(s.n * s.c * s.hw), c = size_t(s.c);
  const auto x = test::random_vector<float>(n, 1), dy = test::random_vector<float>(n, 2);
  const auto g = test::random_vector<float>(c, 3), rm = test::random_vector<float>(c, 4);
  const std::vector<float> rv(c, 0.7f);
  std::vector<float> dx(n), dg(c), db(c);
  cpu::batchnorm_backward_eval<float>(s, dy.data(), x.data(), g.data(), rm.data(), rv.data(), 1e-5f, dx.data(),
                                      dg.data(), db.data(), nullptr);
  DeviceBuffer gx(x, DType::f32), gdy(dy, DType::f32), gg(g, DType::f32), grm(rm, DType::f32), grv(rv, DType::f32);
  DeviceBuffer gdx(n, DType::f32), gdg(c, DType::f32), gdb(c, DType::f32);
  for (DeviceBuffer* o : {&gdx, &gdg, &gdb}) o->poison();
  cuda::batchnorm_backward_eval(s, DType::f32, gdy.get(), gx.get(), gg.get<float>(), grm.get<float>(),
                                grv.get<float>(), 1e-5f, gdx.get(), gdg.get<float>(), gdb.get<float>(), nullptr, nullptr);
  EXPECT_TRUE(test::all_close(gdx.download(), dx));
  EXPECT_TRUE(test::all_close(gdg.download(), dg, {1e-3, 1e-4}));
  EXPECT_TRUE(test::all_close(gdb.download(), db, {1e-3, 1e-4}));
}

TEST(CudaHead, PoolingMatchesTheCpu) {
  NEED_GPU();
  for (DType t : kTypes)
    for (auto [nc, hw] : {std::pair<int64_t, int64_t>{8 * 256, 64}, {3 * 5, 7}, {1, 1}}) {
      const auto x = test::random_rounded(size_t(nc * hw), 5, t), dy = test::random_rounded(size_t(nc), 6, t);
      std::vector<float> y(static_cast<size_t>(nc)), dx(static_cast<size_t>(nc * hw));
      cpu::global_avg_pool_forward<float>(nc, hw, x.data(), y.data());
      cpu::global_avg_pool_backward<float>(nc, hw, dy.data(), dx.data());
      DeviceBuffer gx(x, t), gdy(dy, t), gy(size_t(nc), t), gdx(size_t(nc * hw), t);
      gy.poison();
      gdx.poison();
      cuda::global_avg_pool_forward(nc, hw, t, gx.get(), gy.get(), nullptr);
      cuda::global_avg_pool_backward(nc, hw, t, gdy.get(), gdx.get(), nullptr);
      EXPECT_TRUE(test::all_close(gy.download(), y, test::tolerance_of(t))) << dtype_name(t) << " nc " << nc;
      EXPECT_TRUE(test::all_close(gdx.download(), dx, test::tolerance_of(t))) << dtype_name(t) << " nc " << nc;
    }
}

TEST(CudaHead, CrossEntropyMatchesTheCpu) {
  NEED_GPU();
  for (auto [n, classes] : {std::pair<int64_t, int64_t>{256, 10}, {1, 3}, {513, 10}}) {
    auto logits = test::random_vector<float>(size_t(n * classes), 7);
    for (float& v : logits) v *= 4.f;
    std::vector<int64_t> labels(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) labels[size_t(i)] = (i * 7) % classes;
    std::vector<float> probs(logits.size()), dlogits(logits.size());
    float loss = 0;
    const int64_t hits = cpu::cross_entropy_forward<float>(n, classes, logits.data(), labels.data(), &loss, probs.data());
    cpu::cross_entropy_backward<float>(n, classes, 0.5f, probs.data(), labels.data(), dlogits.data());
    DeviceBuffer gl(logits, DType::f32), gp(logits.size(), DType::f32), gd(logits.size(), DType::f32),
        gloss(1, DType::f32), gdloss(std::vector<float>{0.5f}, DType::f32);
    DeviceBuffer glab(labels.size(), DType::i64), gcorrect(1, DType::i64);
    cuda::copy_host_to_device(glab.get(), labels.data(), labels.size() * 8, nullptr);
    gp.poison();
    gd.poison();
    cuda::cross_entropy_forward(n, classes, gl.get<float>(), glab.get<int64_t>(), gloss.get<float>(), gp.get<float>(),
                                gcorrect.get<int64_t>(), nullptr);
    cuda::cross_entropy_backward(n, classes, gdloss.get<float>(), gp.get<float>(), glab.get<int64_t>(),
                                 gd.get<float>(), nullptr);
    int64_t got_hits = -1;
    cuda::copy_device_to_host(&got_hits, gcorrect.get(), 8, nullptr);
    cuda::synchronize_stream(nullptr);
    EXPECT_EQ(got_hits, hits) << "n " << n;
    EXPECT_TRUE(test::all_close(gloss.download(), {loss})) << "n " << n;
    EXPECT_TRUE(test::all_close(gp.download(), probs)) << "n " << n;
    EXPECT_TRUE(test::all_close(gd.download(), dlogits)) << "n " << n;
  }
}

TEST(CudaLinear, CublasMatchesTheCpu) {
  NEED_GPU();
  for (DType t : kTypes)
    for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{256, 256, 10}, {7, 13, 5}, {1, 64, 1}}) {
      const auto x = test::random_rounded(size_t(m * k), 8, t), w = test::random_rounded(size_t(n * k), 9, t, 0.1f);
      const auto b = test::random_rounded(size_t(n), 10, t), dy = test::random_rounded(size_t(m * n), 11, t);
      std::vector<float> y(static_cast<size_t>(m * n)), dx(static_cast<size_t>(m * k)), dw(static_cast<size_t>(n * k)),
          db(static_cast<size_t>(n));
      cpu::linear_forward<float>(m, k, n, x.data(), w.data(), b.data(), y.data());
      cpu::linear_backward<float>(m, k, n, dy.data(), x.data(), w.data(), dx.data(), dw.data(), db.data());
      DeviceBuffer gx(x, t), gw(w, t), gb(b, t), gdy(dy, t);
      DeviceBuffer gy(y.size(), t), gdx(dx.size(), t), gdw(dw.size(), t), gdb(db.size(), t);
      for (DeviceBuffer* o : {&gy, &gdx, &gdw, &gdb}) o->poison();
      cuda::linear_forward(m, k, n, t, gx.get(), gw.get(), gb.get(), gy.get(), nullptr);
      cuda::linear_backward(m, k, n, t, gdy.get(), gx.get(), gw.get(), gdx.get(), gdw.get(), gdb.get(), nullptr);
      const test::Tolerance tol = test::tolerance_of(t);
      const std::string where = fmt::format("{} m{} k{} n{}", dtype_name(t), m, k, n);
      EXPECT_TRUE(test::all_close(gy.download(), y, test::for_sum(tol, double(k)))) << where << ": y";
      EXPECT_TRUE(test::all_close(gdx.download(), dx, test::for_sum(tol, double(n)))) << where << ": dx";
      EXPECT_TRUE(test::all_close(gdw.download(), dw, test::for_sum(tol, double(m)))) << where << ": dw";
      EXPECT_TRUE(test::all_close(gdb.download(), db, test::for_sum(tol, double(m)))) << where << ": db";
    }
}

}  // namespace
}  // namespace cg::kernels
