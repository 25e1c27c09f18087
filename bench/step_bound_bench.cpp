// The machine's limit for one MiniResNet training step (issue 28, item 3): the bound model of
// bench/step_bound.h evaluated with the machine's peaks, a Markdown table of every pass (FLOPs,
// bytes, the least time, which limit sets it), and measured times set against it -- cudagrad's
// convolutions per layer and phase (timed here, each through the kernel the engine's registry
// picks for it), and whole steps given on the command line (--step LABEL=MS: cudagrad-bench-cpu's
// and PyTorch's; bench/step_bound.sh runs them). Percentages are bound / measured: 100% would be
// the machine's limit.
// CPU peaks are measured unless given, each the best of bursts spread across the run: compute =
// one core's FMA peak (bench_util.h, process CPU time) times --threads, memory = STREAM copy
// bandwidth on --threads threads. --device gpu counts
// every convolution directly (cuDNN's choice is not known here), channels-last activations (the
// stem's layout change) of --value-bytes (2: fp16) and takes the peaks from the command line; it
// times nothing.
#include <fmt/format.h>
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <map>

#include "bench/bench_util.h"
#include "bench/step_bound.h"
#include "engine/conv/conv.h"
#include "engine/random.h"

namespace {

using namespace cg::bench;
using namespace cg::bench::bound;

struct Options {
  std::string net = "full", device = "cpu", bars_path;
  std::vector<int64_t> widths;
  int64_t batch = 64;
  int threads = 2, runs = 5;
  double peak_gflops = 0, gemm_gflops = 0, bandwidth_gbs = 0, value_bytes = 4;
  std::vector<std::string> steps;  // LABEL=MS
};

// The problem the engine's convolution op would give the registry for this layer (fp32 NCHW CPU,
// the default kernels.*).
cg::impl::ConvProblem cpu_problem(const ConvLayer& c) {
  return {c.shape, cg::Device::cpu(), cg::DType::f32, cg::ops::Layout::nchw, cg::ops::KernelPolicy{}, c.name};
}

std::shared_ptr<const cg::impl::ConvImpl> picked(const ConvLayer& c) { return cg::impl::pick_conv(cpu_problem(c)); }

std::string cpu_algorithm(const ConvLayer& c) { return cg::impl::conv_registry().name_of(picked(c).get()); }

// Median wall-clock microseconds of each phase of one layer, through the picked kernel.
std::map<ConvPhase, double> time_conv(const ConvLayer& c, int runs) {
  const Conv2dShape& s = c.shape;
  cg::Generator gen(1);
  cg::Tensor x = cg::Tensor::empty({s.n, s.c_in, s.h, s.w}), w = cg::Tensor::empty({s.c_out, s.c_in, s.kh, s.kw});
  cg::normal_(x, gen, 0.0, 1.0);
  cg::normal_(w, gen, 0.0, 0.1);
  const auto impl = picked(c);
  const cg::impl::ConvProblem p = cpu_problem(c);
  cg::impl::ConvForwardArgs first{.x = x, .w = w};
  impl->forward(p, first);
  const cg::Tensor dy = first.y;
  const auto backward = [&](bool need_dx, bool need_w) {
    cg::impl::ConvBackwardArgs a{.dy = dy, .saved = first.saved, .need_dx = need_dx, .need_w = need_w};
    impl->backward(p, a);
  };
  const auto med = median_ms(1, runs,
                             {[&] {
                                cg::impl::ConvForwardArgs a{.x = x, .w = w};
                                impl->forward(p, a);
                              },
                              [&] { backward(true, false); }, [&] { backward(false, true); }});
  return {{ConvPhase::forward, med[0] * 1e3}, {ConvPhase::backward_data, med[1] * 1e3},
          {ConvPhase::backward_filter, med[2] * 1e3}};
}

// The peaks, sampled in bursts across the run (one before the timings, one before each layer's):
// on this shared host a neighbour halves the copy bandwidth for a minute or more at a time, and
// takes a tenth or more off the FMA peak (bench/NOTES.md, "The bound's two modes"), so one burst
// can catch the low mode. The best burst is what the machine can do, and the bound uses it.
struct PeakSamples {
  double fma_gflops = 0, lowest_fma = 1e30;  // one core's
  Bandwidth best, lowest{1e30, 1e30};
  int count = 0;
  void sample(bool fma, bool memory) {
    if (fma) {
      const double g = fma_peak_gflops();
      fma_gflops = std::max(fma_gflops, g), lowest_fma = std::min(lowest_fma, g);
    }
    if (memory) {
      const Bandwidth b = stream_bandwidth(10);
      best = {std::max(best.copy_gbs, b.copy_gbs), std::max(best.triad_gbs, b.triad_gbs)};
      lowest = {std::min(lowest.copy_gbs, b.copy_gbs), std::min(lowest.triad_gbs, b.triad_gbs)};
    }
    ++count;
  }
};

// The CPU peaks not given on the command line, from the samples taken.
Peaks cpu_peaks(const Options& o, const PeakSamples& m) {
  Peaks k{o.peak_gflops, o.bandwidth_gbs};
  if (k.gflops <= 0) {
    k.gflops = m.fma_gflops * o.threads;
    fmt::print("FMA peak (measured, best of {} bursts across the run): {:.1f} GFLOP/s a core (lowest burst {:.1f}) x {} "
               "threads = {:.1f} GFLOP/s\n", m.count, m.fma_gflops, m.lowest_fma, o.threads, k.gflops);
  }
  if (k.gbs <= 0) {
    k.gbs = m.best.copy_gbs;
    fmt::print("memory bandwidth (measured, {} threads, 128 MiB arrays, best of {} bursts across the run): copy {:.1f} "
               "GB/s (lowest burst {:.1f}), triad {:.1f} GB/s (lowest {:.1f}); the bound uses the best copy\n",
               o.threads, m.count, m.best.copy_gbs, m.lowest.copy_gbs, m.best.triad_gbs, m.lowest.triad_gbs);
  }
  return k;
}

std::string percent(double bound, double measured) {
  return measured > 0 ? fmt::format("{:.0f}%", 100.0 * bound / measured) : "";
}

// The table, one row per pass; measured[i] is pass i's cudagrad time (0: not measured).
void print_table(const std::vector<Pass>& passes, const Peaks& k, const std::vector<double>& measured) {
  fmt::print("| layer | phase | kernel | GFLOP direct | GFLOP as run | MB | compute us | memory us | bound us | "
             "limit | cudagrad us | % of bound |\n");
  fmt::print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |\n");
  for (size_t i = 0; i < passes.size(); ++i) {
    const Pass& p = passes[i];
    const double c = compute_us(p, k), m = memory_us(p, k);
    fmt::print("| {} | {} | {} | {:.4f} | {:.4f} | {:.2f} | {:.1f} | {:.1f} | {:.1f} | {} | {} | {} |\n", p.layer,
               p.phase, p.algorithm, p.direct_flops * 1e-9, p.flops * 1e-9, p.bytes * 1e-6, c, m, std::max(c, m),
               c >= m ? "compute" : "memory", measured[i] > 0 ? fmt::format("{:.0f}", measured[i]) : "",
               percent(std::max(c, m), measured[i]));
  }
}

// Sums over the passes that satisfy `keep`: bound us, measured us.
template <class Keep>
std::pair<double, double> sums(const std::vector<Pass>& passes, const Peaks& k, const std::vector<double>& measured,
                               const Keep& keep) {
  double bound = 0, time = 0;
  for (size_t i = 0; i < passes.size(); ++i)
    if (keep(passes[i])) bound += bound_us(passes[i], k), time += measured[i];
  return {bound, time};
}

// Bars for scripts/plot_bars.py: each convolution layer's three phases together, the
// convolutions in all, and each whole step given.
std::vector<std::string> summary(const Options& o, const std::vector<Pass>& passes, const Peaks& k,
                                 const std::vector<double>& measured) {
  std::vector<std::string> bars;
  const bool timed = o.device == "cpu" && o.runs > 0;
  if (timed)
    for (const ConvLayer& c : conv_layers({o.widths, {2, 2, 2}, 1, 28, o.batch, 10})) {
      const auto [b, t] = sums(passes, k, measured, [&](const Pass& p) { return p.conv_index >= 0 && p.layer == c.name; });
      bars.push_back(fmt::format("{}={:.1f}", c.name, 100.0 * b / t));
    }
  const auto [step_bound, unused] = sums(passes, k, measured, [](const Pass&) { return true; });
  const auto [conv_bound, conv_time] = sums(passes, k, measured, [](const Pass& p) { return p.conv_index >= 0; });
  const auto [mem_bound, unused2] = sums(passes, k, measured, [&](const Pass& p) { return memory_us(p, k) > compute_us(p, k); });
  fmt::print("\nstep bound: {:.2f} ms ({:.2f} ms of it in memory-limited passes; convolutions {:.2f} ms)\n",
             step_bound * 1e-3, mem_bound * 1e-3, conv_bound * 1e-3);
  double direct = 0;
  for (const Pass& p : passes) direct += direct_bound_us(p, k);
  fmt::print("step bound with every convolution counted directly (no Winograd): {:.2f} ms\n", direct * 1e-3);
  if (o.gemm_gflops > 0) {
    const Peaks gemm{o.gemm_gflops * o.threads, k.gbs};
    const auto [b, unused3] = sums(passes, gemm, measured, [](const Pass&) { return true; });
    fmt::print("step bound at the GEMM's best ({:.1f} GFLOP/s a core x {}): {:.2f} ms\n", o.gemm_gflops, o.threads,
               b * 1e-3);
  }
  if (timed) {
    fmt::print("cudagrad convolutions (timed here, median of {} runs): {:.2f} ms, {} of their bound\n", o.runs,
               conv_time * 1e-3, percent(conv_bound, conv_time));
    bars.push_back(fmt::format("cudagrad convs={:.1f}", 100.0 * conv_bound / conv_time));
  }
  for (const std::string& s : o.steps) {
    const size_t eq = s.rfind('=');
    const double ms = std::stod(s.substr(eq + 1));
    fmt::print("{} whole step: {:.2f} ms, {} of the step bound\n", s.substr(0, eq), ms, percent(step_bound, ms * 1e3));
    // cudagrad's step less its convolutions (timed apart, so only roughly): batch norm, the
    // elementwise passes, the head and the optimizer, against their bound.
    if (timed && s.substr(0, eq) == "cudagrad" && ms * 1e3 <= conv_time)
      fmt::print("cudagrad outside the convolutions: not known (the convolutions, timed apart, took longer than "
                 "the step: a noisy machine)\n");
    else if (timed && s.substr(0, eq) == "cudagrad")
      fmt::print("cudagrad outside the convolutions (step - convolutions): {:.2f} ms, {} of their bound {:.2f} ms\n",
                 ms - conv_time * 1e-3, percent(step_bound - conv_bound, ms * 1e3 - conv_time),
                 (step_bound - conv_bound) * 1e-3);
    bars.push_back(fmt::format("{} step={:.1f}", s.substr(0, eq), 100.0 * step_bound / (ms * 1e3)));
  }
  return bars;
}

int run(const Options& o) {
  const bool cpu = o.device == "cpu";
  const Network net{o.widths, {2, 2, 2}, 1, 28, o.batch, 10, !cpu};  // the GPU config is channels-last
  omp_set_num_threads(o.threads);
  PeakSamples peaks;
  const bool sample_fma = cpu && o.peak_gflops <= 0, sample_memory = cpu && o.bandwidth_gbs <= 0;
  if (sample_fma || sample_memory) peaks.sample(sample_fma, sample_memory);
  const std::vector<ConvLayer> convs = conv_layers(net);
  const auto passes = step_passes(net, o.value_bytes, [&](int, const ConvLayer& c) {
    return cpu ? cpu_algorithm(c) : std::string("direct count");
  });
  std::vector<double> measured(passes.size(), 0.0);
  if (cpu && o.runs > 0) {
    timing_clock = CLOCK_MONOTONIC;  // elapsed: the phases run on all threads
    for (size_t i = 0; i < convs.size(); ++i) {
      if (sample_fma || sample_memory) peaks.sample(sample_fma, sample_memory);
      const auto t = time_conv(convs[i], o.runs);
      for (size_t j = 0; j < passes.size(); ++j)
        if (passes[j].conv_index == int(i)) measured[j] = t.at(passes[j].conv_phase);
    }
  }
  const Peaks k = cpu ? cpu_peaks(o, peaks) : Peaks{o.peak_gflops, o.bandwidth_gbs};
  fmt::print("MiniResNet widths {}, blocks 2/2/2, 1x28x28, batch {}, {} values of {} bytes; peaks: {:.1f} GFLOP/s, "
             "{:.1f} GB/s\n\n", fmt::join(o.widths, "/"), o.batch, o.device, o.value_bytes, k.gflops, k.gbs);
  print_table(passes, k, measured);
  const std::vector<std::string> bars = summary(o, passes, k, measured);
  if (!o.bars_path.empty()) {
    std::ofstream out(o.bars_path);
    for (const std::string& b : bars) out << b << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The least time a MiniResNet training step can take on this machine (FLOPs and bytes of every\n"
               "pass against the measured peaks), and measured times as a share of it."};
  Options o;
  app.add_option("--net", o.net, "full (widths 64,128,256) or narrow (16,32,64, scripts/train.sh's)")
      ->check(CLI::IsMember({"full", "narrow"}));
  app.add_option("--widths", o.widths, "stage widths instead of the preset's")->delimiter(',');
  app.add_option("--batch-size", o.batch, "images per step")->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "threads: the compute peak is this many cores'")->check(CLI::PositiveNumber);
  app.add_option("--runs", o.runs, "timed runs per convolution phase (0: time nothing)")->check(CLI::NonNegativeNumber);
  app.add_option("--device", o.device, "cpu, or gpu (peaks from the command line, direct counts, no timing)")
      ->check(CLI::IsMember({"cpu", "gpu"}));
  app.add_option("--peak-gflops", o.peak_gflops, "compute peak of the whole device (default: measured, CPU)");
  app.add_option("--gemm-gflops", o.gemm_gflops, "the GEMM's best GFLOP/s a core (cpu_gemm_bench): a second bound");
  app.add_option("--bandwidth-gbs", o.bandwidth_gbs, "memory bandwidth (default: measured copy, CPU)");
  app.add_option("--value-bytes", o.value_bytes, "bytes an activation value (4 fp32, 2 fp16)");
  app.add_option("--step", o.steps, "a whole step measured elsewhere, LABEL=MS (repeatable)");
  app.add_option("--bars", o.bars_path, "write LABEL=PERCENT lines for scripts/plot_bars.py here");
  CLI11_PARSE(app, argc, argv);
  if (o.widths.empty()) o.widths = o.net == "full" ? std::vector<int64_t>{64, 128, 256} : std::vector<int64_t>{16, 32, 64};
  if (o.device == "gpu" && (o.peak_gflops <= 0 || o.bandwidth_gbs <= 0)) {
    std::fprintf(stderr, "--device gpu needs --peak-gflops and --bandwidth-gbs\n");
    return 2;
  }
  return run(o);
}
