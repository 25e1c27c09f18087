// cudagrad-bench --config FILE [key=value ...] [--warmup N] [--steps N]: training throughput of
// the configured MiniResNet step (the trainer's own TrainStep, train/step.h: autocast, loss
// scaling, DDP or the modeled communication backend), on a fixed set of random batches resident on the device, so
// that the data pipeline is not what is measured. Reports images/s from the median step, the
// median of each phase (forward, backward, exposed communication, optimizer) and the peak device
// memory; a table for people and, last, one JSON line for scripts (scripts/gpu_compare.sh).
// On a GPU the phases are timed with CUDA events read after the last step: no step waits for
// the host. On the CPU, with the wall clock. --cuda-graph runs the step as the trainer does with
// train.cuda_graph=true (train/step_graph.h): captured once during the warm-up, then
// replayed, each step's time including the copy of its batch into the graph's inputs and of the
// learning rate; total time only. Every measured micro-batch is a whole optimizer step.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/bench/step_clock.h"
#include "apps/cli/cli.h"
#include "train/parts.h"
#include "engine/device_allocator.h"
#include "engine/random.h"
#include "engine/runtime.h"
#include "util/check.h"
#include "util/log.h"

namespace cg::apps {
using namespace cg::train;
namespace {

struct Options {
  std::string config_path;
  std::vector<std::string> overrides;
  int64_t warmup = 30, steps = 100;
  bool cuda_graph = false;  // capture the step once, replay it (GPU only)
};

// CLI11 with the shared convention (apps/cli): returns -1 to go on, else the exit code.
int parse(int argc, char** argv, Options& o) {
  CLI::App app{"Measures MiniResNet training throughput on random batches resident on the device.\n"
               "Config keys are overridden as key=value, as for cudagrad-train."};
  cli::configure(app, "cudagrad-bench");
  app.add_option("--config", o.config_path, "YAML config file (keys not in it keep their defaults)");
  app.add_option("--warmup", o.warmup, "untimed steps first")->check(cg::cli::at_least(0));
  app.add_option("--steps", o.steps, "timed steps")->check(cg::cli::at_least(1));
  app.add_flag("--cuda-graph", o.cuda_graph, "capture the step once as a CUDA graph during the warm-up, then replay it");
  app.add_option("overrides", o.overrides, "config overrides, key=value");
  app.footer("Config keys:\n" + train_config_help());
  if (const int rc = cli::parse(app, argc, argv); rc >= 0) return rc;
  // The warm-up holds the graphed step's eager steps and its capture, so no measured step captures.
  if (o.cuda_graph && o.warmup <= StepGraph::kEagerSteps)
    return cli::usage_error(app, fmt::format("--cuda-graph needs --warmup {} or more", StepGraph::kEagerSteps + 1));
  return -1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// A few distinct random batches, cycled: real-looking inputs, no loader in the measurement.
std::vector<data::DeviceBatch> random_batches(const TrainConfig& c, Generator& gen, Device device) {
  const int64_t side = c.data.image_size > 0 ? c.data.image_size : 32, n = c.data.batch_size;
  std::vector<data::DeviceBatch> batches;
  for (int i = 0; i < 4; ++i) {
    Tensor images = Tensor::empty({n, c.model.in_channels, side, side});
    normal_(images, gen, 0.0, 1.0);
    std::vector<int64_t> labels(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) labels[size_t(j)] = (j * 7 + i) % c.model.num_classes;
    batches.push_back({images.to(device), Tensor::from_vector(labels, {n}).to(device), n});
  }
  return batches;
}

// Milliseconds of every measured step: in total and, for eager steps, per phase.
struct StepTimes {
  std::vector<double> total, fwd, bwd, comm, opt;
  double span_ms = 0;     // first mark to last, gaps between steps included
  size_t peak_bytes = 0;  // device memory in use at the peak of the measured steps (a graph's pool too)
};

// The trainer's step exactly as it runs it, each micro-batch a whole optimizer step, the ends of
// its phases marked on the clock (a replayed step is one phase: nothing inside one launch can be
// told apart).
StepTimes measure(TrainingParts& parts, const std::vector<data::DeviceBatch>& batches, const Options& o, double lr) {
  TrainStep& step = parts.step();
  const MicroStep whole_step{.lr = lr, .close_group = true};
  for (int64_t s = 0; s < o.warmup; ++s) step.run_micro_step(batches[size_t(s) % batches.size()], whole_step);
  const StepGraph* graph = step.graph();
  CG_CHECK(!graph || graph->captured(), "--cuda-graph: the warm-up did not capture the step");
  const Stream& compute = parts.compute();
  compute.synchronize();
  allocator_for(parts.device()).reset_peak();
  StepClock clock(parts.device(), compute);
  step.on_phase_end([&] { clock.mark(); });
  for (int64_t s = 0; s < o.steps; ++s) {
    clock.mark();
    step.run_micro_step(batches[size_t(s) % batches.size()], whole_step);
  }
  step.on_phase_end(nullptr);
  compute.synchronize();
  StepTimes t;
  for (const auto& p : clock.intervals_ms(graph ? 2 : 5)) {  // per step: its start, then 1 or 4 phases
    t.total.push_back(0);
    for (const double ms : p) t.total.back() += ms;
    if (graph) continue;
    t.fwd.push_back(p[0]);
    t.bwd.push_back(p[1]);
    t.comm.push_back(p[2]);
    t.opt.push_back(p[3]);
  }
  t.span_ms = clock.span_ms();
  t.peak_bytes = allocator_for(parts.device()).stats().peak_in_use_bytes;
  // A replayed step allocates nothing: its activations live in the graph's private pool, whose
  // free blocks stay reserved for the replays. Count them, or the graphed row would show only
  // the parameters and optimizer state (54 MiB against the eager step's 628 on the H100).
  if (graph) {
    const PoolStats pool = graph->pool_stats();
    t.peak_bytes += pool.reserved_bytes - pool.in_use_bytes;
  }
  return t;
}

// A table for people and, last, one JSON line for scripts (rank 0 only).
void report(const TrainConfig& c, const Options& o, DistContext& dist, TrainingParts& parts, const StepTimes& t) {
  if (!log::is_main_process()) return;
  const Device device = parts.device();
  const int world = dist.world_size();
  dist::DistributedDataParallel* ddp = parts.ddp();
  const size_t bytes_per_step = ddp ? ddp->reducer().bytes_per_step() : 0;
  const int64_t n = c.data.batch_size;
  const double step_ms = median(t.total), ips = double(n * world) / (step_ms / 1000.0);
  // With the modeled backend: what the all-reduces of one step would take if nothing overlapped.
  const double comm_total_ms = ddp ? ddp->reducer().modeled_ms_per_step(ddp->comm()) : 0.0;
  const std::string device_name = device.is_cuda() ? runtime::describe_device(device.index) : std::string("cpu");
  std::printf("| cudagrad | %s | batch %lld x %d rank(s) | amp %s |\n", device_name.c_str(), (long long)n, world,
              c.amp.enabled ? enum_name(c.amp.dtype) : "off");
  std::printf("| images/s | step ms | forward | backward | exposed comm | optimizer | peak MiB |\n");
  std::printf("| %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f |\n", ips, step_ms, median(t.fwd), median(t.bwd),
              median(t.comm), median(t.opt), double(t.peak_bytes) / (1 << 20));
  if (ddp)
    std::printf("all-reduced per step: %.2f MB (%s)\n", double(bytes_per_step) / 1e6,
                c.dist.grad_compression == dist::GradCompression::none ? "float32"
                                                                        : enum_name(c.dist.grad_compression));
  if (comm_total_ms > 0)
    std::printf("modeled all-reduce time per step %.2f ms; exposed %.2f ms = %.0f%%\n", comm_total_ms, median(t.comm),
                100.0 * median(t.comm) / comm_total_ms);
  nlohmann::json j{{"bench", "cudagrad"}, {"device", device_name},
                   {"cuda", device.is_cuda() ? runtime::cuda_versions() : ""},
                   {"cudnn", device.is_cuda() ? runtime::cudnn_version() : 0},
                   {"batch", n}, {"world_size", world}, {"amp", c.amp.enabled},
                   {"images_per_s", ips}, {"step_ms_median", step_ms},
                   {"images_per_s_wall", double(n * world * o.steps) / (t.span_ms / 1000.0)},
                   {"forward_ms", median(t.fwd)}, {"backward_ms", median(t.bwd)}, {"comm_exposed_ms", median(t.comm)},
                   {"optimizer_ms", median(t.opt)}, {"peak_mem_bytes", t.peak_bytes}, {"steps", o.steps},
                   {"comm", ddp ? ddp->comm().name() : "none"}, {"comm_modeled_total_ms", comm_total_ms},
                   {"comm_bytes_per_step", bytes_per_step},
                   {"grad_compression", enum_name(c.dist.grad_compression)},
                   {"cuda_graph", parts.step().graph() != nullptr}};
  std::printf("%s\n", j.dump().c_str());
}

int run(const Options& o) {
  // --cuda-graph is the override train.cuda_graph=true, applied last (it wins over the file and
  // earlier overrides) and before validation, so the trainer's rules for a captured step
  // (check_cuda_graph: no grad_accum_steps > 1, no zero_sharding, ...) refuse what cannot be
  // captured, naming the key, before any device is touched.
  std::vector<std::string> overrides = o.overrides;
  if (o.cuda_graph) overrides.push_back("train.cuda_graph=true");
  TrainConfig c = load_train_config(o.config_path, overrides);
  // train.cuda_graph=true in the config graphs the step as the flag does, and needs the same warm-up;
  // auto (the default) captures only where the warm-up leaves room for it, so no timed step holds the capture.
  if (c.train.cuda_graph == CudaGraphMode::on && o.warmup <= StepGraph::kEagerSteps)
    throw UsageError(fmt::format("train.cuda_graph=true (or --cuda-graph) needs --warmup {} or more",
                                 StepGraph::kEagerSteps + 1));
  if (c.train.cuda_graph == CudaGraphMode::automatic && o.warmup <= StepGraph::kEagerSteps) {
    log::info("cudagrad-bench: the step runs eagerly (train.cuda_graph=auto needs --warmup {} or more to capture)",
              StepGraph::kEagerSteps + 1);
    c.train.cuda_graph = CudaGraphMode::off;
  }
  // Accepted (configs are shared with the trainer) but not read: say so rather than look like
  // a measurement of that data.
  if (!c.data.path.empty())
    log::warn("cudagrad-bench times the step on random batches: data.path ({}) is not read", c.data.path);
  DistContext dist(c.dist.timeout_s);
  TrainingParts parts(c, dist);  // the trainer's own parts: device, model, optimizer, DDP, the step
  const std::vector<data::DeviceBatch> batches = random_batches(c, parts.generator(), parts.device());
  report(c, o, dist, parts, measure(parts, batches, o, c.optim.lr));
  return 0;
}

}  // namespace
}  // namespace cg::apps

int main(int argc, char** argv) {
  cg::cli::exit_one_on_uncaught_out_of_memory("cudagrad-bench");
  cg::apps::Options options;
  if (const int rc = cg::apps::parse(argc, argv, options); rc >= 0) return rc;
  try {
    return cg::apps::run(options);
  } catch (const cg::UsageError& e) {
    std::fprintf(stderr, "cudagrad-bench: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    const std::string what = cg::cli::error_text(e);
    std::fprintf(stderr, "cudagrad-bench: error: %s\n", what.c_str());
    return 1;
  }
}
