// SyncBatchNorm's CPU phases (batch_norm_local_moments & co.): a batch cut into replicas whose
// moments and gradient sums are added gives what the fused kernels give on the whole batch
// (float64: to 1e-10; the phases and the fused kernels sum in different orders), with and without
// the residual + ReLU, NCHW and channels-last shapes; and every phase is bit-identical for 1 and
// 3 threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <random>
#include <vector>

#include "kernels/cpu/batch_norm.h"
#include "support/tolerance.h"

namespace cg::kernels::cpu {
namespace {

std::vector<double> randn(size_t n, uint64_t seed, double mean = 0, double sd = 1) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> d(mean, sd);
  std::vector<double> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

struct Outputs {
  std::vector<double> y, dx, d_residual, dgamma, dbeta, rm, rv;
};

// Images [first, first + n) of a batch of shape s (NCHW order, or channels-last rows when hw = 1).
std::vector<double> rows(const BatchNormShape& s, const std::vector<double>& v, int64_t first, int64_t n) {
  const size_t per = size_t(s.c * s.hw);
  return {v.begin() + std::ptrdiff_t(size_t(first) * per), v.begin() + std::ptrdiff_t(size_t(first + n) * per)};
}

struct Batch {
  BatchNormShape s;
  std::vector<double> x, residual, dy, gamma, beta;
  bool fused;  // relu(bn(x) + residual)
};

Batch make_batch(const BatchNormShape& s, bool fused) {
  const size_t size = size_t(s.n * s.c * s.hw), c = size_t(s.c);
  return {s, randn(size, 1, 5.0, 2.0), randn(size, 2), randn(size, 3), randn(c, 4, 1.0, 0.2), randn(c, 5), fused};
}

Outputs fused_whole(const Batch& b) {
  const size_t size = b.x.size(), c = size_t(b.s.c);
  Outputs o{std::vector<double>(size), std::vector<double>(size), std::vector<double>(size), std::vector<double>(c),
            std::vector<double>(c), std::vector<double>(c, 0.0), std::vector<double>(c, 1.0)};
  std::vector<double> mean(c), invstd(c);
  const Activation act = b.fused ? Activation::relu : Activation::none;
  batch_norm_forward_train<double>(b.s, b.x.data(), b.gamma.data(), b.beta.data(), 1e-5, 0.1, o.rm.data(), o.rv.data(),
                                  o.y.data(), mean.data(), invstd.data(), act, b.fused ? b.residual.data() : nullptr);
  batch_norm_backward_train<double>(b.s, b.dy.data(), b.x.data(), b.gamma.data(), mean.data(), invstd.data(),
                                   o.dx.data(), o.dgamma.data(), o.dbeta.data(), b.fused ? o.y.data() : nullptr,
                                   b.fused ? o.d_residual.data() : nullptr);
  return o;
}

// The batch cut into replicas of `sizes` images; their vectors added as the collective would.
Outputs phases_over_replicas(const Batch& b, const std::vector<int64_t>& sizes) {
  const size_t c = size_t(b.s.c);
  const int64_t per_image = b.s.c * b.s.hw;
  std::vector<double> moments(2 * c + 1, 0.0);
  std::vector<BatchNormShape> shapes;
  int64_t first = 0;
  for (int64_t n : sizes) {
    BatchNormShape s = b.s;
    s.n = n;
    shapes.push_back(s);
    std::vector<double> local(2 * c + 1);
    batch_norm_local_moments<double>(s, rows(b.s, b.x, first, n).data(), local.data());
    for (size_t i = 0; i < local.size(); ++i) moments[i] += local[i];
    first += n;
  }
  Outputs o;
  std::vector<double> sums(2 * c, 0.0);
  std::vector<std::vector<double>> ys, means, invstds;
  o.dgamma.assign(c, 0.0);
  o.dbeta.assign(c, 0.0);
  const Activation act = b.fused ? Activation::relu : Activation::none;
  first = 0;
  for (const BatchNormShape& s : shapes) {  // forward, then this replica's gradient sums
    std::vector<double> rm(c, 0.0), rv(c, 1.0), y(size_t(s.n * per_image)), mean(c), invstd(c);
    const auto x = rows(b.s, b.x, first, s.n), r = rows(b.s, b.residual, first, s.n);
    batch_norm_forward_with_moments<double>(s, x.data(), b.gamma.data(), b.beta.data(), 1e-5, 0.1, moments.data(),
                                           rm.data(), rv.data(), y.data(), mean.data(), invstd.data(), act,
                                           b.fused ? r.data() : nullptr);
    std::vector<double> dgamma(c), dbeta(c), local(2 * c), dx(y.size()), dres(y.size());
    batch_norm_local_grad_sums<double>(s, rows(b.s, b.dy, first, s.n).data(), x.data(), mean.data(), invstd.data(),
                                      dgamma.data(), dbeta.data(), local.data(), dx.data(),
                                      b.fused ? y.data() : nullptr, b.fused ? dres.data() : nullptr);
    for (size_t i = 0; i < 2 * c; ++i) sums[i] += local[i];
    for (size_t i = 0; i < c; ++i) o.dgamma[i] += dgamma[i], o.dbeta[i] += dbeta[i];
    o.rm = rm;
    o.rv = rv;
    ys.push_back(y);
    means.push_back(mean);
    invstds.push_back(invstd);
    o.y.insert(o.y.end(), y.begin(), y.end());
    o.d_residual.insert(o.d_residual.end(), dres.begin(), dres.end());
    o.dx.insert(o.dx.end(), dx.begin(), dx.end());  // the masked gradient, when fused
    first += s.n;
  }
  first = 0;
  for (size_t r = 0; r < shapes.size(); ++r) {  // dx from the summed sums
    const BatchNormShape& s = shapes[r];
    const size_t at = size_t(first * per_image), count = size_t(s.n * per_image);
    std::vector<double> dx(o.dx.begin() + std::ptrdiff_t(at), o.dx.begin() + std::ptrdiff_t(at + count));
    const std::vector<double> dres(o.d_residual.begin() + std::ptrdiff_t(at),
                                   o.d_residual.begin() + std::ptrdiff_t(at + count));
    batch_norm_backward_with_sums<double>(s, rows(b.s, b.dy, first, s.n).data(), rows(b.s, b.x, first, s.n).data(),
                                         b.gamma.data(), means[r].data(), invstds[r].data(), sums.data(),
                                         moments[2 * c], dx.data(), b.fused ? ys[r].data() : nullptr,
                                         b.fused ? dres.data() : nullptr);
    std::copy(dx.begin(), dx.end(), o.dx.begin() + std::ptrdiff_t(at));
    first += s.n;
  }
  if (!b.fused) o.d_residual.assign(o.d_residual.size(), 0.0);
  return o;
}

void expect_close(const Outputs& got, const Outputs& want) {
  const test::Tolerance tol{1e-10, 1e-10};
  EXPECT_TRUE(test::all_close(got.y, want.y, tol)) << "y";
  EXPECT_TRUE(test::all_close(got.dx, want.dx, tol)) << "dx";
  EXPECT_TRUE(test::all_close(got.d_residual, want.d_residual, tol)) << "d_residual";
  EXPECT_TRUE(test::all_close(got.dgamma, want.dgamma, tol)) << "dgamma";
  EXPECT_TRUE(test::all_close(got.dbeta, want.dbeta, tol)) << "dbeta";
  EXPECT_TRUE(test::all_close(got.rm, want.rm, tol)) << "running_mean";
  EXPECT_TRUE(test::all_close(got.rv, want.rv, tol)) << "running_var";
}

TEST(BatchNormSyncPhases, ReplicasSummedEqualTheWholeBatch) {
  // NCHW with H*W not a multiple of the 16 lanes, and a channels-last layer ({N*H*W, C, 1}: a
  // replica's rows are whole images of 4 x 4 positions).
  for (const BatchNormShape s : {BatchNormShape{9, 5, 37}, BatchNormShape{9 * 16, 8, 1}})
    for (bool fused : {false, true}) {
      SCOPED_TRACE(testing::Message() << "shape " << s.n << "x" << s.c << "x" << s.hw << (fused ? " fused" : ""));
      const Batch b = make_batch(s, fused);
      const int64_t unit = s.hw == 1 ? 16 : 1;  // rows per image
      expect_close(phases_over_replicas(b, {s.n}), fused_whole(b));
      expect_close(phases_over_replicas(b, {2 * unit, 3 * unit, 4 * unit}), fused_whole(b));
      expect_close(phases_over_replicas(b, {1 * unit, 8 * unit}), fused_whole(b));
    }
}

TEST(BatchNormSyncPhases, BitIdenticalForOneAndThreeThreads) {
  const Batch b = make_batch({6, 7, 100}, true);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    return phases_over_replicas(b, {2, 4});
  };
  const Outputs one = run(1), three = run(3);
  omp_set_num_threads(2);
  EXPECT_EQ(one.y, three.y);
  EXPECT_EQ(one.dx, three.dx);
  EXPECT_EQ(one.dgamma, three.dgamma);
  EXPECT_EQ(one.rv, three.rv);
}

}  // namespace
}  // namespace cg::kernels::cpu
