// SyncBatchNorm with real processes: W ranks (separate processes of this test binary, joined by
// Gloo) each run BatchNorm2d with model.sync_batchnorm's hook on their slice of one union batch,
// two training steps in a row; their outputs, input gradients, summed weight gradients and
// running statistics must equal one float64 computation of plain batch norm over the union
// batch (PyTorch's BatchNorm2d/SyncBatchNorm formulas written out here in double), also when the
// ranks hold different batch sizes. Tolerance: |got - ref| <= 2e-4 + 2e-4 |ref| (float32 against
// float64, channels of up to 320 values). Without the collective each rank normalizes with its
// own statistics and every case fails by orders of magnitude more.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "dist/gradient_comm.h"
#include "dist/process_group.h"
#include "dist/sync_batch_norm.h"
#include "dist/tcp_store.h"
#include "nn/layers.h"
#include "support/free_port.h"
#include "support/paths.h"
#include "support/processes.h"

namespace cg::dist {
namespace {

constexpr int64_t kChannels = 3, kH = 4, kW = 5, kHw = kH * kW;
constexpr int kSteps = 2;
constexpr double kEps = 1e-5, kMomentum = 0.1;

struct Case {
  std::vector<int64_t> sizes;  // images per rank
  bool add_relu = false;       // relu(bn(x) + residual), the end of every BasicBlock
  bool channels_last = false;
  // Added to every x: activations far from zero against their spread (mean 1e4, std about 1) are
  // where a variance taken as E[x^2] - mean^2 in float32 loses every digit (issue 38); the float64
  // moments the hook sums keep them.
  bool far_from_zero = false;
};

std::string describe(const Case& c) {
  std::string s;
  for (int64_t n : c.sizes) s += (s.empty() ? "" : "_") + std::to_string(n);
  return s + (c.add_relu ? "_add_relu" : "_plain") + (c.channels_last ? "_nhwc" : "_nchw") +
         (c.far_from_zero ? "_far_from_zero" : "");
}
void PrintTo(const Case& c, std::ostream* os) { *os << describe(c); }

// Deterministic values of the union batch: element (step, image, channel, position) of tensor
// `which` (0 = x, 1 = residual, 2 = the gradient reaching y). x has a channel-dependent offset
// larger than its spread, as activations often do.
double value(int which, int step, int64_t image, int64_t c, int64_t p, bool far_from_zero = false) {
  const double u = std::sin(0.7 * double(image * 131 + c * 17 + p * 3 + step * 1009 + which * 7919) + 0.3 * which);
  if (which == 0) return (far_from_zero ? 1e4 : 0.0) + 3.0 * double(c) - 2.0 + 1.5 * u + 0.2 * double(step);
  return u;
}

// Position of (image, channel, p) in a contiguous batch of `n` images.
int64_t at(const Case& k, int64_t image, int64_t c, int64_t p) {
  return k.channels_last ? (image * kHw + p) * kChannels + c : (image * kChannels + c) * kHw + p;
}

Tensor make_batch(const Case& k, int which, int step, int64_t first, int64_t n) {
  Tensor t = k.channels_last ? Tensor::empty({n, kH, kW, kChannels}) : Tensor::empty({n, kChannels, kH, kW});
  float* d = t.data<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < kChannels; ++c)
      for (int64_t p = 0; p < kHw; ++p) d[at(k, i, c, p)] = float(value(which, step, first + i, c, p, k.far_from_zero));
  return t;
}

// What a rank writes per step, in this order: y, dx, d_residual (add_relu only), dgamma, dbeta,
// running_mean, running_var.
void append(std::vector<float>& out, const Tensor& t) {
  const auto v = t.to_vector<float>();
  out.insert(out.end(), v.begin(), v.end());
}

// ---------------------------------------------------------------------------------------------
// The rank side: this binary started again with CG_SYNCBN_RANK set (see run_case).

int run_rank(const Case& k, int rank, int port, const std::string& out_path, bool sync) {
  const int world = int(k.sizes.size());
  TcpStoreOptions so;
  so.port = port;
  so.is_server = rank == 0;
  so.timeout = std::chrono::seconds(30);
  TcpStore store(so);
  ProcessGroupOptions po;
  po.timeout = std::chrono::seconds(30);
  ProcessGroup group(store, rank, world, "127.0.0.1", po);
  auto comm = make_host_gloo_comm(group);

  ops::ExecutionScope in_layout({.layout = k.channels_last ? ops::Layout::nhwc : ops::Layout::nchw});
  nn::BatchNorm2d bn(kChannels, kEps, kMomentum);
  for (auto& [name, p] : bn.named_parameters()) {  // weight 1 + 0.25 c, bias 0.1 - 0.2 c
    float* d = p.data<float>();
    for (int64_t c = 0; c < kChannels; ++c) d[c] = name == "weight" ? 1.f + 0.25f * float(c) : 0.1f - 0.2f * float(c);
  }
  std::unique_ptr<SyncBatchNorm> attached;
  if (sync) attached = std::make_unique<SyncBatchNorm>(bn, *comm);

  const int64_t first = std::accumulate(k.sizes.begin(), k.sizes.begin() + rank, int64_t(0));
  const int64_t n = k.sizes[size_t(rank)];
  std::vector<float> out;
  for (int step = 0; step < kSteps; ++step) {
    Tensor x = make_batch(k, 0, step, first, n), residual = make_batch(k, 1, step, first, n);
    x.set_requires_grad(true);
    residual.set_requires_grad(true);
    Tensor y = k.add_relu ? bn.forward_add_relu(x, residual) : bn.forward(x);
    y.backward(make_batch(k, 2, step, first, n));
    append(out, y);
    append(out, x.grad());
    if (k.add_relu) append(out, residual.grad());
    for (auto& [name, p] : bn.named_parameters()) append(out, p.grad());
    bn.zero_grad();
    for (auto& [name, b] : bn.named_buffers())
      if (name != "num_batches_tracked") append(out, b);
  }
  std::ofstream f(out_path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(out.data()), std::streamsize(out.size() * sizeof(float)));
  group.barrier();  // rank 0's store stays up until everyone is done
  return f ? 0 : 1;
}

Case case_from_env() {
  Case k;
  std::stringstream sizes(std::getenv("CG_SYNCBN_SIZES"));
  for (std::string n; std::getline(sizes, n, ',');) k.sizes.push_back(std::stoll(n));
  k.add_relu = std::string(std::getenv("CG_SYNCBN_MODE")).find("add_relu") != std::string::npos;
  k.channels_last = std::string(std::getenv("CG_SYNCBN_MODE")).find("nhwc") != std::string::npos;
  k.far_from_zero = std::string(std::getenv("CG_SYNCBN_MODE")).find("far_from_zero") != std::string::npos;
  return k;
}

// Before gtest's main: a process started as a rank runs it and exits.
const int rank_exit = [] {
  const char* rank = std::getenv("CG_SYNCBN_RANK");
  if (!rank) return 0;
  try {
    std::exit(run_rank(case_from_env(), std::atoi(rank), std::atoi(std::getenv("CG_SYNCBN_PORT")),
                       std::getenv("CG_SYNCBN_OUT"), std::string(std::getenv("CG_SYNCBN_SYNC")) == "1"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %s: %s\n", rank, e.what());
    std::exit(1);
  }
}();

// ---------------------------------------------------------------------------------------------
// The float64 reference over the union batch, step by step.

struct Reference {
  std::vector<double> y, dx, d_residual;  // union batch, the batch's layout
  std::vector<double> dgamma, dbeta, running_mean, running_var;
};

std::vector<Reference> reference(const Case& k) {
  const int64_t n = std::accumulate(k.sizes.begin(), k.sizes.end(), int64_t(0)), m = n * kHw;
  const int64_t total = n * kChannels * kHw;
  std::vector<double> rm(kChannels, 0.0), rv(kChannels, 1.0);
  std::vector<Reference> steps;
  for (int step = 0; step < kSteps; ++step) {
    Reference r;
    r.y.assign(size_t(total), 0);
    r.dx.assign(size_t(total), 0);
    r.d_residual.assign(size_t(total), 0);
    for (int64_t c = 0; c < kChannels; ++c) {
      const double gamma = 1.0 + 0.25 * double(c), beta = 0.1 - 0.2 * double(c);
      double mean = 0, var = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t p = 0; p < kHw; ++p) mean += double(float(value(0, step, i, c, p, k.far_from_zero)));
      mean /= double(m);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t p = 0; p < kHw; ++p) var += std::pow(double(float(value(0, step, i, c, p, k.far_from_zero))) - mean, 2);
      var /= double(m);  // biased: what normalization uses
      const double invstd = 1.0 / std::sqrt(var + kEps);
      double sum_g = 0, sum_g_xhat = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t p = 0; p < kHw; ++p) {
          const double xhat = (double(float(value(0, step, i, c, p, k.far_from_zero))) - mean) * invstd;
          double y = gamma * xhat + beta, g = double(float(value(2, step, i, c, p)));
          if (k.add_relu) {
            y += double(float(value(1, step, i, c, p)));
            g = y > 0 ? g : 0.0;
            y = std::max(y, 0.0);
          }
          r.y[size_t(at(k, i, c, p))] = y;
          r.d_residual[size_t(at(k, i, c, p))] = g;
          sum_g += g;
          sum_g_xhat += g * xhat;
        }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t p = 0; p < kHw; ++p) {
          const double xhat = (double(float(value(0, step, i, c, p, k.far_from_zero))) - mean) * invstd;
          const size_t e = size_t(at(k, i, c, p));
          r.dx[e] = gamma * invstd * (r.d_residual[e] - sum_g / double(m) - xhat * sum_g_xhat / double(m));
        }
      r.dgamma.push_back(sum_g_xhat);
      r.dbeta.push_back(sum_g);
      rm[size_t(c)] = (1 - kMomentum) * rm[size_t(c)] + kMomentum * mean;
      rv[size_t(c)] = (1 - kMomentum) * rv[size_t(c)] + kMomentum * var * double(m) / double(m - 1);
    }
    r.running_mean = rm;
    r.running_var = rv;
    steps.push_back(std::move(r));
  }
  return steps;
}

// ---------------------------------------------------------------------------------------------
// The test side.

// Starts one process per rank; returns each rank's floats (empty when a rank failed).
std::vector<std::vector<float>> run_case(const Case& k, bool sync, std::string& logs) {
  const auto dir = test::make_temp_dir("sync_bn");
  const int world = int(k.sizes.size()), port = test::free_port();
  std::string sizes;
  for (int64_t n : k.sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(n);
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    const std::string env = "env OMP_NUM_THREADS=1 CG_SYNCBN_RANK=" + std::to_string(r) + " CG_SYNCBN_PORT=" +
                            std::to_string(port) + " CG_SYNCBN_SIZES=" + sizes + " CG_SYNCBN_MODE=" + describe(k) +
                            " CG_SYNCBN_SYNC=" + (sync ? "1" : "0") + " CG_SYNCBN_OUT=" +
                            (dir / ("rank" + std::to_string(r) + ".bin")).string() + " ";
    pids.push_back(test::start(env + "/proc/" + std::to_string(getpid()) + "/exe",
                               dir / ("log" + std::to_string(r) + ".txt")));
  }
  std::vector<std::vector<float>> results(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) {
    const int rc = test::wait_for(pids[size_t(r)], std::chrono::seconds(120));
    logs += "rank " + std::to_string(r) + " exit " + std::to_string(rc) + ": " +
            test::read_text(dir / ("log" + std::to_string(r) + ".txt")) + "\n";
    if (rc != 0) continue;
    std::ifstream f(dir / ("rank" + std::to_string(r) + ".bin"), std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    results[size_t(r)].resize(bytes.size() / sizeof(float));
    std::memcpy(results[size_t(r)].data(), bytes.data(), bytes.size());
  }
  return results;
}

// Reads `count` floats from a rank's stream.
struct Reader {
  const std::vector<float>& v;
  size_t pos = 0;
  std::vector<float> take(int64_t count) {
    if (pos + size_t(count) > v.size()) throw std::runtime_error("rank output is too short");
    std::vector<float> out(v.begin() + std::ptrdiff_t(pos), v.begin() + std::ptrdiff_t(pos + size_t(count)));
    pos += size_t(count);
    return out;
  }
};

// |got - ref| allowed: 2e-4 + 2e-4 |ref|. Far from zero, float32 itself does worse: the mean of
// values near 1e4 is held to within half an ulp there (4.9e-4), and x - mean, so xhat, y and dx,
// inherit that error times invstd and gamma (about 7e-4 measured), and dgamma sums it over the
// channel (2e-2 of 50). 2e-3 + 1e-3 |ref| covers that, and is still thousands of times smaller
// than what a variance taken as E[x^2] - mean^2 in float32 gets wrong there.
struct Tolerance {
  double absolute = 2e-4, relative = 2e-4;
};
Tolerance tolerance_of(const Case& k) { return k.far_from_zero ? Tolerance{2e-3, 1e-3} : Tolerance{}; }

// The worst |got - ref| beyond the tolerance, as a message; "" when everything is within it.
std::string compare(const std::string& what, const std::vector<float>& got, const double* ref, Tolerance tol) {
  double worst = 0;
  size_t where = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double excess =
        std::abs(double(got[i]) - ref[i]) - (tol.absolute + tol.relative * std::abs(ref[i]));
    if (excess > worst) worst = excess, where = i;
  }
  if (worst <= 0) return "";
  return what + "[" + std::to_string(where) + "]: got " + std::to_string(got[where]) + ", float64 reference " +
         std::to_string(ref[where]) + "\n";
}

// Every check of one case; returns the failures (empty when the ranks match the reference).
std::string check(const Case& k, const std::vector<std::vector<float>>& results) {
  const Tolerance tol = tolerance_of(k);
  auto compare = [tol](const std::string& what, const std::vector<float>& got, const double* ref) {
    return dist::compare(what, got, ref, tol);
  };
  const auto ref = reference(k);
  std::vector<Reader> readers;
  for (const auto& r : results) readers.push_back(Reader{r});
  std::string failures;
  for (int step = 0; step < kSteps; ++step) {
    const std::string at_step = " step " + std::to_string(step);
    std::vector<double> dgamma(kChannels, 0), dbeta(kChannels, 0);
    std::vector<float> running_of_rank0;
    int64_t first = 0;
    for (size_t r = 0; r < readers.size(); ++r) {
      const int64_t elements = k.sizes[r] * kChannels * kHw, offset = first * kChannels * kHw;
      const std::string rank = " rank " + std::to_string(r) + at_step;
      failures += compare("y" + rank, readers[r].take(elements), ref[size_t(step)].y.data() + offset);
      failures += compare("dx" + rank, readers[r].take(elements), ref[size_t(step)].dx.data() + offset);
      if (k.add_relu)
        failures += compare("d_residual" + rank, readers[r].take(elements), ref[size_t(step)].d_residual.data() + offset);
      // Each rank's weight gradients are its own share; DDP averages them like any gradient.
      const auto g = readers[r].take(kChannels), b = readers[r].take(kChannels);
      for (int64_t c = 0; c < kChannels; ++c) dgamma[size_t(c)] += g[size_t(c)], dbeta[size_t(c)] += b[size_t(c)];
      std::vector<float> running = readers[r].take(kChannels), var = readers[r].take(kChannels);
      running.insert(running.end(), var.begin(), var.end());
      failures += compare("running_mean" + rank, {running.begin(), running.begin() + kChannels},
                          ref[size_t(step)].running_mean.data());
      failures += compare("running_var" + rank, {running.begin() + kChannels, running.end()},
                          ref[size_t(step)].running_var.data());
      if (r == 0) running_of_rank0 = running;
      else if (running != running_of_rank0) failures += "running statistics differ between rank 0 and" + rank + "\n";
      first += k.sizes[r];
    }
    std::vector<float> sum_g(dgamma.begin(), dgamma.end()), sum_b(dbeta.begin(), dbeta.end());
    failures += compare("dgamma summed over ranks" + at_step, sum_g, ref[size_t(step)].dgamma.data());
    failures += compare("dbeta summed over ranks" + at_step, sum_b, ref[size_t(step)].dbeta.data());
  }
  return failures;
}

class SyncBatchNormRanks : public ::testing::TestWithParam<Case> {};

TEST_P(SyncBatchNormRanks, MatchOneProcessOnTheUnionBatchInFloat64) {
  const Case k = GetParam();
  std::string logs;
  const auto results = run_case(k, /*sync=*/true, logs);
  for (const auto& r : results) ASSERT_FALSE(r.empty()) << logs;
  const std::string failures = check(k, results);
  EXPECT_EQ(failures, "") << logs;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SyncBatchNormRanks,
    ::testing::Values(Case{{4, 4}, false, false}, Case{{3, 5}, false, false}, Case{{3, 5}, true, false},
                      Case{{4, 4, 4}, true, false}, Case{{2, 3, 4}, false, false}, Case{{2, 3, 4}, true, true},
                      Case{{1, 6}, true, true}, Case{{3, 5}, true, false, true}, Case{{2, 3, 4}, false, true, true}),
    [](const ::testing::TestParamInfo<Case>& info) { return describe(info.param); });

// The same ranks without the hook normalize with their own batches: the comparison must see it
// (this is what the test above would report if the collective did nothing).
TEST(SyncBatchNorm, RanksWithoutTheCollectiveDoNotMatchTheUnionBatch) {
  const Case k{{3, 5}, true, false};
  std::string logs;
  const auto results = run_case(k, /*sync=*/false, logs);
  for (const auto& r : results) ASSERT_FALSE(r.empty()) << logs;
  EXPECT_NE(check(k, results), "");
}

}  // namespace
}  // namespace cg::dist
