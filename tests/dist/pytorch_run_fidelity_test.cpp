// A whole data-parallel training run against PyTorch's float64, measured in units of PyTorch
// float32's own error (issue 41): cudagrad promises runs as close to a float64 reference as
// PyTorch float32's. tests/golden/make_run_reference.py trains the CPU config's narrow MiniResNet
// for a few SGD steps as two DDP ranks, simulated in one process, in float64 and in float32 with
// two summation orders (NCHW, channels-last), from one initialization and on one set of batches.
// Here two ranks (threads, real Gloo collectives) train the same run through cudagrad's DDP,
// SyncBatchNorm and the trainer's own step (train/step.h: loss divided over the accumulation
// group, no_sync, the optimizer step and zeroing), once per CPU convolution algorithm. Per tensor
// of rank 0's final state dict, d(a) = ||a - f64|| / ||f64||; PyTorch's spread is
// s = max(d(f32), d(f32cl)). Each tensor's ratio is pooled over kSeeds runs (different
// initializations and batches): sum of d(cudagrad) / sum of s. It must stay <= 2 on every tensor
// for the default algorithm and for im2col (Winograd is reported, not held to it: 21x on one
// tensor with SyncBatchNorm).
// Why pooled over seeds: after the first step a tensor's distance is mostly decided by whether
// rounding pushed some ReLU input across zero, a draw whose odds grow with the kernels' error; one
// seed's worst ratio swung between 0.4 and 2.0 for the same kernels (im2col and Winograd alike),
// so one run cannot rank them, several summed can. Measured, pooled worst ratio (accumulation /
// sync_bn): auto 0.58 / 0.69, im2col 0.44 / 0.38, Winograd 1.37 / 5.91; with Winograd planted back
// into auto (issue 41's old default), sync_bn fails at 5.98.
// Cases: accumulation (2 micro-batches per step per rank under no_sync; rank 0's BatchNorm
// statistics, broadcast before every forward) and sync_bn (SyncBatchNorm, 1 micro-batch).
// Why the sanity check looks at the median tensor: ReLU inputs that rounding moves across zero
// change a BatchNorm bias's gradient (a sum over 10^4 values that nearly cancel) by about 1e-3 of
// itself, so the BN biases end 1e-3 to 5e-2 from float64 in PyTorch float32 too, while the median
// tensor stays near 1e-5. A run that computes something else (loss not divided over the
// accumulation group, gradients summed instead of averaged, SyncBatchNorm's backward not summed
// over the ranks: each measured) moves the median to 1e-3 and the worst ratio to thousands.
// Needs /usr/bin/python3 with torch; skips saying so otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "dist/ddp.h"
#include "dist/sync_batch_norm.h"
#include "engine/stream.h"
#include "nn/miniresnet.h"
#include "nn/optimizer.h"
#include "support/golden_file.h"
#include "support/need_tool.h"
#include "support/paths.h"
#include "support/rank_threads.h"
#include "train/step.h"

namespace cg::dist {
namespace {

using ops::CpuConvAlgorithm;
using test::golden_meta;
using test::golden_meta_flag;
using test::golden_tensor;
using StateValues = std::map<std::string, std::vector<double>>;  // tensor name -> elements

constexpr double kMaxRatio = 2.0;  // d(cudagrad) / PyTorch float32's spread, pooled, worst tensor
const std::vector<int> kSeeds{0, 1, 2};
// The median tensor's d(cudagrad) (PyTorch float32's: 1e-5 to 3e-5; Winograd's 7e-5; the planted
// bugs of the header 1.2e-3 to 2.8e-3).
constexpr double kMaxMedianDistance = 3e-4;
// auto runs the direct kernel on every 3x3 layer and im2col on the rest, so direct by name adds
// little beside them.
const std::vector<CpuConvAlgorithm> kAlgorithms{CpuConvAlgorithm::automatic, CpuConvAlgorithm::im2col,
                                                CpuConvAlgorithm::winograd};

safetensors::File make_reference(const std::string& run_case, int seed) {
  auto dir = test::make_temp_dir("run_fidelity");
  const std::string path = (dir / (run_case + ".safetensors")).string();
  const std::string cmd = "/usr/bin/python3 " + (test::source_dir() / "tests/golden/make_run_reference.py").string() +
                          " --case " + run_case + " --seed " + std::to_string(seed) + " " + path;
  if (std::system(cmd.c_str()) != 0) throw Error("failed: " + cmd);
  return safetensors::load(path);
}

std::vector<double> values(const Tensor& t) { return t.to(DType::f64).to_vector<double>(); }

// The file's micro-batch that starts at image `first`, as the trainer's batch source gives it.
data::DeviceBatch micro_batch(const std::vector<float>& images, const std::vector<int64_t>& labels,
                              const Shape& image_shape, int64_t first, int64_t count) {
  const int64_t per_image = image_shape[1] * image_shape[2] * image_shape[3];
  std::vector<float> x(images.begin() + first * per_image, images.begin() + (first + count) * per_image);
  std::vector<int64_t> y(labels.begin() + first, labels.begin() + first + count);
  return {Tensor::from_vector(x, {count, image_shape[1], image_shape[2], image_shape[3]}),
          Tensor::from_vector(y, {count}), count};
}

// Trains the file's run with two (world) ranks and returns rank 0's final state dict.
StateValues train_cudagrad(const safetensors::File& f, CpuConvAlgorithm algorithm) {
  nn::MiniResNetOptions o;
  o.in_channels = int64_t(golden_meta(f, "in_channels"));
  o.num_classes = int64_t(golden_meta(f, "num_classes"));
  o.widths = test::golden_meta_list(f, "widths");
  o.blocks = test::golden_meta_list(f, "blocks");
  const SgdOptions sgd{float(golden_meta(f, "lr")), float(golden_meta(f, "momentum")),
                       float(golden_meta(f, "weight_decay")), float(golden_meta(f, "dampening")),
                       golden_meta_flag(f, "nesterov")};
  const double lr = golden_meta(f, "lr");  // constant
  const int world = int(golden_meta(f, "world")), steps = int(golden_meta(f, "steps"));
  const int64_t batch = int64_t(golden_meta(f, "batch")), micro_batches = int64_t(golden_meta(f, "micro_batches"));
  train::TrainConfig c;
  c.train.grad_accum_steps = micro_batches;
  c.kernels.cpu_conv = algorithm;  // the step's forward runs in the config's execution context
  const Tensor input = golden_tensor(f, "input");
  const std::vector<float> images = input.to(DType::f32).to_vector<float>();
  const std::vector<int64_t> labels = golden_tensor(f, "labels").to_vector<int64_t>();

  StateValues rank0;
  test::run_rank_threads(world, [&](int rank, ProcessGroup& group) {
    Generator gen(uint64_t(rank + 1));  // rank 0's weights come from the file, the others' from DDP
    nn::MiniResNet model(o, gen);
    if (rank == 0) {
      std::map<std::string, Tensor> init;
      for (auto& [name, t] : model.state_dict()) init[name] = golden_tensor(f, "init." + name);
      model.load_state_dict(init);
    }
    DistributedDataParallel ddp(model, group, DdpOptions{});
    std::unique_ptr<SyncBatchNorm> sync_bn;
    if (golden_meta_flag(f, "sync_batchnorm")) sync_bn = std::make_unique<SyncBatchNorm>(model, ddp.comm());
    nn::SGD optimizer(model.named_parameters(), sgd);
    train::TrainStep step(c, model, optimizer, &ddp, current_stream(Device::cpu()));
    for (int s = 0; s < steps; ++s)
      for (int64_t m = 0; m < micro_batches; ++m) {
        const int64_t first = ((s * world + rank) * micro_batches + m) * batch;
        step.run_micro_step(micro_batch(images, labels, input.shape(), first, batch), {.lr = lr});
      }
    if (rank == 0)
      for (auto& [name, t] : model.state_dict())
        if (name.find("num_batches_tracked") == std::string::npos) rank0[name] = values(t);
  });
  return rank0;
}

// ||a - ref|| / ||ref||, in double.
double distance(const std::vector<double>& a, const std::vector<double>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (a[i] - ref[i]) * (a[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(diff) / std::sqrt(norm);
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + ptrdiff_t(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Distances from float64 per tensor, in the state dict's order: PyTorch's two float32 runs and
// their maximum (the spread), and each algorithm's run.
struct Distances {
  std::vector<std::string> names;
  std::vector<double> f32, f32cl, spread;
  std::vector<std::vector<double>> cudagrad;  // [algorithm][tensor]
};

Distances measure(const safetensors::File& f, const std::vector<StateValues>& runs) {
  Distances d;
  d.cudagrad.resize(runs.size());
  for (const auto& [name, unused] : runs.front()) {
    const std::vector<double> f64 = values(golden_tensor(f, "f64." + name));
    d.names.push_back(name);
    d.f32.push_back(distance(values(golden_tensor(f, "f32." + name)), f64));
    d.f32cl.push_back(distance(values(golden_tensor(f, "f32cl." + name)), f64));
    d.spread.push_back(std::max(d.f32.back(), d.f32cl.back()));
    for (size_t a = 0; a < runs.size(); ++a) d.cudagrad[a].push_back(distance(runs[a].at(name), f64));
  }
  return d;
}

void print_table(const Distances& d) {
  std::printf("%-34s %9s %9s", "tensor", "d(f32)", "d(f32cl)");
  for (CpuConvAlgorithm a : kAlgorithms) std::printf(" %11s %5s", (std::string(enum_name(a)) + " d").c_str(), "ratio");
  std::printf("\n");
  for (size_t t = 0; t < d.names.size(); ++t) {
    std::printf("%-34s %9.2e %9.2e", d.names[t].c_str(), d.f32[t], d.f32cl[t]);
    for (const auto& column : d.cudagrad) std::printf(" %11.2e %5.2f", column[t], column[t] / d.spread[t]);
    std::printf("%s\n", d.spread[t] > 0 ? "" : "  (no ratio: PyTorch float32 equals float64 here)");
  }
}

struct Worst {
  double ratio = 0;
  std::string tensor;
};

Worst worst_ratio(const Distances& d, const std::vector<double>& column) {
  Worst w;
  for (size_t t = 0; t < d.names.size(); ++t)
    if (d.spread[t] > 0 && column[t] / d.spread[t] > w.ratio) w = {column[t] / d.spread[t], d.names[t]};
  return w;
}

// Element-wise sum of b into a (the same tensors in the same order): distances pooled over seeds.
void pool(Distances& a, const Distances& b) {
  if (a.names.empty()) {
    a = b;
    return;
  }
  ASSERT_EQ(a.names, b.names);
  for (size_t t = 0; t < a.names.size(); ++t) {
    a.f32[t] += b.f32[t], a.f32cl[t] += b.f32cl[t], a.spread[t] += b.spread[t];
    for (size_t k = 0; k < a.cudagrad.size(); ++k) a.cudagrad[k][t] += b.cudagrad[k][t];
  }
}

// One seed's run: every algorithm trained, its distances printed and returned. The median
// tensor's distance must be small for every algorithm: the same computation as PyTorch's.
Distances measure_seed(const std::string& run_case, int seed) {
  const safetensors::File f = make_reference(run_case, seed);
  EXPECT_EQ(test::golden_meta_text(f, "case"), run_case);
  std::vector<StateValues> runs;
  for (CpuConvAlgorithm a : kAlgorithms) runs.push_back(train_cudagrad(f, a));
  if (::testing::Test::HasFailure()) return {};
  const Distances d = measure(f, runs);
  std::printf("case %s, seed %d: rank 0's final state, distance from PyTorch float64 and ratio to PyTorch float32's\n",
              run_case.c_str(), seed);
  print_table(d);
  std::printf("%s seed %d: PyTorch float32 spread: median %.2e, largest %.2e\n", run_case.c_str(), seed,
              median(d.spread), *std::max_element(d.spread.begin(), d.spread.end()));
  for (size_t a = 0; a < kAlgorithms.size(); ++a) {
    const std::string algorithm(enum_name(kAlgorithms[a]));
    const Worst w = worst_ratio(d, d.cudagrad[a]);
    const double typical = median(d.cudagrad[a]);
    std::printf("%s seed %d %s: worst ratio %.2f (%s), median d %.2e, largest d %.2e\n", run_case.c_str(), seed,
                algorithm.c_str(), w.ratio, w.tensor.c_str(), typical,
                *std::max_element(d.cudagrad[a].begin(), d.cudagrad[a].end()));
    EXPECT_LT(typical, kMaxMedianDistance) << algorithm << ", seed " << seed << ": not the run PyTorch made";
  }
  return d;
}

void check_run(const std::string& run_case) {
  NEED_TOOL(test::missing_python_module("torch", "Debian's python3-torch"));
  Distances pooled;
  for (int seed : kSeeds) {
    pool(pooled, measure_seed(run_case, seed));
    ASSERT_FALSE(::testing::Test::HasFailure());
  }
  for (size_t a = 0; a < kAlgorithms.size(); ++a) {
    const std::string algorithm(enum_name(kAlgorithms[a]));
    const Worst w = worst_ratio(pooled, pooled.cudagrad[a]);
    std::printf("%s %s, pooled over %zu seeds: worst ratio %.2f (%s)\n", run_case.c_str(), algorithm.c_str(),
                kSeeds.size(), w.ratio, w.tensor.c_str());
    if (kAlgorithms[a] != CpuConvAlgorithm::winograd) {
      EXPECT_LE(w.ratio, kMaxRatio) << algorithm << ": on " << w.tensor;
    }
  }
}

TEST(PyTorchRunFidelity, GradientAccumulation) { check_run("accumulation"); }
TEST(PyTorchRunFidelity, SyncBatchNorm) { check_run("sync_bn"); }

}  // namespace
}  // namespace cg::dist
