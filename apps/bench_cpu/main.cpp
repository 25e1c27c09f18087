// cudagrad-bench-cpu: CPU training throughput of MiniResNet on random data, the number that
// bench/cpu_compare.sh puts next to PyTorch's. Same recipe as bench/pytorch/train_throughput.py:
// fp32, SGD (momentum 0.9, weight decay 1e-4, lr 0.01), cross-entropy, fixed random batch.
// Prints a line per phase and, last, one JSON line.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <thread>

#include "apps/cli/cli.h"
#include "engine/ops.h"
#include "nn/miniresnet.h"
#include "nn/optimizer.h"

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}
// CPU time of the whole process (all threads): on a loaded machine, steadier than wall time.
double process_cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

// The command line's settings.
struct Options {
  int64_t batch = 64, steps = 20, warmup = 3, image_size = 32, in_channels = 3;
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int64_t> widths{64, 128, 256};
  std::string cpu_conv = "auto";
};

void add_options(CLI::App& app, Options& o) {
  app.add_option("--batch-size", o.batch, "images per step")->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "timed steps")->check(CLI::PositiveNumber);
  app.add_option("--warmup", o.warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--threads", o.threads, "OpenMP threads")->check(CLI::PositiveNumber);
  app.add_option("--widths", o.widths, "stage widths, e.g. 64,128,256")->delimiter(',');
  app.add_option("--in-channels", o.in_channels, "image channels")->check(CLI::PositiveNumber);
  app.add_option("--image-size", o.image_size, "image side")->check(CLI::PositiveNumber);
  app.add_option("--cpu-conv", o.cpu_conv, "CPU convolution, as kernels.cpu_conv: auto, im2col, winograd, winograd2 or direct")
      ->check(CLI::IsMember({"auto", "im2col", "winograd", "winograd2", "direct"}));
}

cg::ops::CpuConvAlgorithm cpu_conv_of(const std::string& name) {
  using cg::ops::CpuConvAlgorithm;
  return name == "im2col"      ? CpuConvAlgorithm::im2col
         : name == "winograd"  ? CpuConvAlgorithm::winograd
         : name == "winograd2" ? CpuConvAlgorithm::winograd2
         : name == "direct"    ? CpuConvAlgorithm::direct
                               : CpuConvAlgorithm::automatic;
}

// What the timed steps measured.
struct Timing {
  double ips;              // images per second of wall time
  double median;           // the median step, ms
  double cpu_ms_per_step;  // CPU time per step, all threads
};

// Trains `model` on the fixed batch (x, labels) for o.warmup untimed steps, then o.steps timed ones.
Timing time_training(const Options& o, cg::nn::MiniResNet& model, cg::nn::SGD& sgd, float lr, const cg::Tensor& x,
                     const cg::Tensor& labels) {
  std::vector<double> step_ms;
  Clock::time_point start;
  double cpu_start = 0;
  for (int64_t s = 0; s < o.warmup + o.steps; ++s) {
    if (s == o.warmup) start = Clock::now(), cpu_start = process_cpu_ms();
    const auto t0 = Clock::now();
    cg::Tensor loss = cg::ops::cross_entropy(model(x), labels);
    loss.backward();
    sgd.step(lr);
    sgd.zero_grad();
    if (s >= o.warmup) step_ms.push_back(ms_since(t0));
  }
  const double total_s = ms_since(start) / 1000.0;
  const double cpu_ms_per_step = (process_cpu_ms() - cpu_start) / double(o.steps);
  std::sort(step_ms.begin(), step_ms.end());
  return {double(o.batch * o.steps) / total_s, step_ms[step_ms.size() / 2], cpu_ms_per_step};
}

// Builds the model, the optimizer and the random batch, times the steps and prints the results.
void run(const Options& o) {
  omp_set_num_threads(o.threads);
  cg::Generator gen(0);
  // Every op below runs with --cpu-conv's algorithm.
  cg::ops::ExecutionScope with_cpu_conv({.kernels = {.cpu_conv = cpu_conv_of(o.cpu_conv)}});
  cg::nn::MiniResNetOptions mo;
  mo.in_channels = o.in_channels;
  mo.widths = o.widths;
  mo.blocks.assign(o.widths.size(), 2);
  cg::nn::MiniResNet model(mo, gen);
  int64_t parameters = 0;  // bench/cpu_compare.sh checks that PyTorch built the same network
  for (auto& [name, t] : model.named_parameters()) parameters += t.numel();
  cg::SgdOptions h;
  h.lr = 0.01f;
  h.momentum = 0.9f;
  h.weight_decay = 1e-4f;
  cg::nn::SGD sgd(model.named_parameters(), h);

  cg::Tensor x = cg::Tensor::empty({o.batch, o.in_channels, o.image_size, o.image_size});
  cg::normal_(x, gen, 0.0, 1.0);
  std::vector<int64_t> label_values(static_cast<size_t>(o.batch));
  for (int64_t i = 0; i < o.batch; ++i) label_values[size_t(i)] = (i * 7) % mo.num_classes;
  cg::Tensor labels = cg::Tensor::from_vector(label_values, {o.batch});

  const Timing t = time_training(o, model, sgd, h.lr, x, labels);
  std::printf("cudagrad: MiniResNet widths %s, batch %lld, %dx%dx%d, %d threads, cpu_conv %s: %.1f images/s "
              "(median step %.1f ms; %.1f ms of CPU time per step, all threads)\n",
              cg::shape_str(o.widths).c_str(), (long long)o.batch, int(o.in_channels), int(o.image_size),
              int(o.image_size), o.threads, o.cpu_conv.c_str(), t.ips, t.median, t.cpu_ms_per_step);
  nlohmann::json j{{"engine", "cudagrad"}, {"threads", o.threads}, {"batch", o.batch},
                   {"images_per_s", t.ips}, {"median_step_ms", t.median}, {"cpu_conv", o.cpu_conv},
                   {"cpu_ms_per_step", t.cpu_ms_per_step}, {"parameters", parameters}};
  std::printf("%s\n", j.dump().c_str());
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CPU training throughput of MiniResNet on synthetic data (fp32 SGD),\n"
               "the figure bench/cpu_compare.sh puts next to PyTorch's."};
  cg::cli::exit_one_on_uncaught_out_of_memory("cudagrad-bench-cpu");
  cg::cli::configure(app, "cudagrad-bench-cpu");
  Options o;
  add_options(app, o);
  if (const int rc = cg::cli::parse(app, argc, argv); rc >= 0) return rc;

  try {
    run(o);
    return 0;
  } catch (const std::exception& e) {
    const std::string what = cg::cli::error_text(e);
    std::fprintf(stderr, "error: %s\n", what.c_str());
    return 1;
  }
}
