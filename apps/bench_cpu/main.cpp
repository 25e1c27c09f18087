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
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CPU training throughput of MiniResNet on synthetic data (fp32 SGD),\n"
               "the figure bench/cpu_compare.sh puts next to PyTorch's."};
  cg::cli::exit_one_on_uncaught_out_of_memory("cudagrad-bench-cpu");
  cg::cli::configure(app, "cudagrad-bench-cpu");
  int64_t batch = 64, steps = 20, warmup = 3, image_size = 32, in_channels = 3;
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int64_t> widths{64, 128, 256};
  std::string cpu_conv = "auto";
  app.add_option("--batch-size", batch, "images per step")->check(CLI::PositiveNumber);
  app.add_option("--steps", steps, "timed steps")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--threads", threads, "OpenMP threads")->check(CLI::PositiveNumber);
  app.add_option("--widths", widths, "stage widths, e.g. 64,128,256")->delimiter(',');
  app.add_option("--in-channels", in_channels, "image channels")->check(CLI::PositiveNumber);
  app.add_option("--image-size", image_size, "image side")->check(CLI::PositiveNumber);
  app.add_option("--cpu-conv", cpu_conv, "CPU convolution, as kernels.cpu_conv: auto, im2col, winograd or direct")
      ->check(CLI::IsMember({"auto", "im2col", "winograd", "direct"}));
  if (const int rc = cg::cli::parse(app, argc, argv); rc >= 0) return rc;

  try {
    omp_set_num_threads(threads);
    cg::ops::set_cpu_conv(cpu_conv == "im2col"     ? cg::ops::CpuConv::im2col
                          : cpu_conv == "winograd" ? cg::ops::CpuConv::winograd
                          : cpu_conv == "direct"   ? cg::ops::CpuConv::direct
                                                   : cg::ops::CpuConv::automatic);
    cg::Generator gen(0);
    cg::nn::MiniResNetOptions mo;
    mo.in_channels = in_channels;
    mo.widths = widths;
    mo.blocks.assign(widths.size(), 2);
    cg::nn::MiniResNet model(mo, gen);
    int64_t parameters = 0;  // bench/cpu_compare.sh checks that PyTorch built the same network
    for (auto& [name, t] : model.named_parameters()) parameters += t.numel();
    cg::nn::SgdOptions h;
    h.lr = 0.01f;
    h.momentum = 0.9f;
    h.weight_decay = 1e-4f;
    cg::nn::SGD sgd(model.named_parameters(), h);

    cg::Tensor x = cg::Tensor::empty({batch, in_channels, image_size, image_size});
    cg::normal_(x, gen, 0.0, 1.0);
    std::vector<int64_t> label_values(static_cast<size_t>(batch));
    for (int64_t i = 0; i < batch; ++i) label_values[size_t(i)] = (i * 7) % mo.num_classes;
    cg::Tensor labels = cg::Tensor::from_vector(label_values, {batch});

    std::vector<double> step_ms;
    Clock::time_point start;
    double cpu_start = 0;
    for (int64_t s = 0; s < warmup + steps; ++s) {
      if (s == warmup) start = Clock::now(), cpu_start = process_cpu_ms();
      const auto t0 = Clock::now();
      cg::Tensor loss = cg::ops::cross_entropy(model(x), labels);
      loss.backward();
      sgd.step(h.lr);
      sgd.zero_grad();
      if (s >= warmup) step_ms.push_back(ms_since(t0));
    }
    const double total_s = ms_since(start) / 1000.0;
    const double cpu_ms_per_step = (process_cpu_ms() - cpu_start) / double(steps);
    std::sort(step_ms.begin(), step_ms.end());
    const double median = step_ms[step_ms.size() / 2];
    const double ips = double(batch * steps) / total_s;
    std::printf("cudagrad: MiniResNet widths %s, batch %lld, %dx%dx%d, %d threads, cpu_conv %s: %.1f images/s "
                "(median step %.1f ms; %.1f ms of CPU time per step, all threads)\n",
                cg::shape_str(widths).c_str(), (long long)batch, int(in_channels), int(image_size),
                int(image_size), threads, cpu_conv.c_str(), ips, median, cpu_ms_per_step);
    nlohmann::json j{{"engine", "cudagrad"}, {"threads", threads}, {"batch", batch},
                     {"images_per_s", ips}, {"median_step_ms", median}, {"cpu_conv", cpu_conv},
                     {"cpu_ms_per_step", cpu_ms_per_step}, {"parameters", parameters}};
    std::printf("%s\n", j.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    const std::string what = cg::cli::error_text(e);
    std::fprintf(stderr, "error: %s\n", what.c_str());
    return 1;
  }
}
