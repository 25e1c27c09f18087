#include "train/trainer.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>

#include <unistd.h>

#include "engine/device_allocator.h"
#include "train/builders.h"
#include "train/checkpoint_files.h"
#include "train/checkpoint_writer.h"
#include "train/evaluation.h"
#include "train/resume_point.h"
#include "util/atomic_file.h"
#include "util/log.h"
#include "util/trace.h"

namespace cg::train {
namespace fs = std::filesystem;
namespace {

std::atomic<int> g_stop_signal{0};
// True while training steps run: only there does a stop wait for the step's end and a checkpoint.
std::atomic<bool> g_stop_at_step_end{false};
// Taken during static initialization, before main: the start of "time to accuracy".
const Clock::time_point process_start = Clock::now();

// SIGINT/SIGTERM. During training steps the first one is noted, and every rank stops at the end
// of the same step and checkpoints there. Anywhere else (start-up, rendezvous, data loading,
// evaluation, the checkpoint write itself) there is no step to finish, and waiting for one could
// take until dist.timeout_s: the process exits at once, as it does on a second signal. Nothing is
// half-written by that: checkpoints and config.yaml are replaced atomically, metrics lines are
// flushed whole.
extern "C" void on_stop_signal(int sig) {
  if (g_stop_at_step_end.load() && g_stop_signal.load() == 0) {
    g_stop_signal = sig;
    return;
  }
  static const char message[] = "cudagrad-train: interrupted, exiting now (no step to finish here)\n";
  ssize_t ignored = write(STDERR_FILENO, message, sizeof(message) - 1);  // async-signal-safe
  (void)ignored;
  _exit(130);
}

// Marks the training steps of an epoch: a signal inside waits for the step's end.
struct StopAtStepEnd {
  StopAtStepEnd() { g_stop_at_step_end = true; }
  ~StopAtStepEnd() { g_stop_at_step_end = false; }
};

const char* optimizer_name(const TrainConfig& c) { return enum_name(c.optim.name); }

void make_directory(const fs::path& dir, const char* key) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw Error(fmt::format("{}: cannot create the folder {}: {}", key, dir.string(),
                            ec ? ec.message() : std::string("a file of that name is in the way")));
}

}  // namespace

void install_stop_signal_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

TrainResult train(const TrainConfig& config, const std::string& config_yaml) {
  trace::set_enabled(config.profile.enabled);
  DistContext dist(config.dist.timeout_s);
  dist.check_same_config(config_yaml);
  // First, which checkpoint (if any) every rank resumes from; then the data (a damaged data set is
  // refused before anything is loaded or trained); then every part, once, with the checkpoint loaded.
  const std::string resume_from = decide_resume(config, dist);
  TrainingData data(config, dist.rank(), dist.world_size());
  TrainingParts parts(config, dist, resume_from);
  return Trainer(config, config_yaml, dist, data, parts).run();
}

Trainer::Trainer(const TrainConfig& config, std::string config_yaml, DistContext& dist, TrainingData& data,
                 TrainingParts& parts)
    : c_(config),
      config_yaml_(std::move(config_yaml)),
      dist_(dist),
      data_(data),
      model_(parts.model()),
      optimizer_(parts.optimizer()),
      step_(parts.step()),
      ddp_(parts.ddp()),
      generator_(parts.generator()),
      device_(parts.device()),
      compute_(parts.compute()),
      resumed_from_(parts.resumed_from()),
      out_dir_(c_.output.dir),
      ckpt_dir_(checkpoint_dir(c_)) {
  pos_ = parts.resumed().value_or(nn::TrainingProgress{});
  pos_.optimizer = optimizer_name(c_);
  pos_.config_yaml = config_yaml_;
  if (log::is_main_process()) {  // after the data: a config the data refuses leaves no output folder behind
    // Both folders now, so that a path that cannot be one fails before any work, naming its key.
    make_directory(out_dir_, "output.dir");
    make_directory(ckpt_dir_, c_.checkpoint.dir.empty() ? "output.dir" : "checkpoint.dir");
    write_file_atomically((out_dir_ / "config.yaml").string(), config_yaml_);
  }
  schedule_.emplace(make_schedule(c_, data_.batches_per_epoch()));
  const int64_t steps = optimizer_steps_per_epoch(c_, data_.batches_per_epoch()) * c_.train.epochs;
  total_steps_ = c_.train.max_steps > 0 ? std::min(steps, c_.train.max_steps) : steps;
}

Trainer::~Trainer() = default;

TrainResult Trainer::run() {
  start();
  stop_ = pos_.step >= total_steps_;
  while (!stop_ && pos_.epoch < c_.train.epochs) run_epoch();
  return finish();
}

// The metrics file (appended to after a resume), the batches from where the resumed run stopped.
void Trainer::start() {
  if (log::is_main_process())
    metrics_ = MetricsWriter((out_dir_ / "metrics.jsonl").string(),
                             resumed_from_.empty() ? MetricsWriter::Mode::truncate : MetricsWriter::Mode::append);
  // So that the file itself shows where each run (each generation under cudagrad-launch) took
  // over: without it a run that ignored its checkpoint would look like one that resumed.
  if (!resumed_from_.empty())
    metrics_.write({{"kind", "resume"}, {"from", resumed_from_}, {"epoch", pos_.epoch + 1},
                    {"batch", pos_.batch_in_epoch}, {"step", pos_.step}});
  batches_ = data_.batch_source(device_, compute_);
  model_.train();
}

void Trainer::run_epoch() {
  batches_->start_epoch(pos_.epoch, pos_.batch_in_epoch);
  ProgressBar bar(fmt::format("epoch {}/{}", pos_.epoch + 1, c_.train.epochs), data_.batches_per_epoch(),
                  {.draw = log::is_main_process() && ProgressBar::stdout_is_terminal()});
  window_ = WindowStats();
  window_start_ = Clock::now();
  {
    StopAtStepEnd graceful;
    while (auto batch = batches_->next())
      if (step(*batch, bar)) break;
  }
  bar.finish();
  log_memory();
  const bool epoch_done = pos_.batch_in_epoch >= data_.batches_per_epoch();
  if (epoch_done) {
    ++pos_.epoch;
    pos_.batch_in_epoch = 0;
  }
  if (result_.interrupted) return;
  if (epoch_done || stop_) evaluate(epoch_done);
  if (epoch_done && c_.checkpoint.save_every > 0 && pos_.epoch % c_.checkpoint.save_every == 0 && !stop_ &&
      pos_.epoch < c_.train.epochs)
    checkpoint(fmt::format("epoch_{}", pos_.epoch));
}

// One micro-batch; when it ends its accumulation group (the step says), the log line and the
// checks for stopping. Returns whether to stop.
bool Trainer::step(const data::DeviceBatch& batch, ProgressBar& bar) {
  const int64_t batches = data_.batches_per_epoch();
  const double lr = schedule_->lr_at(pos_.step);
  const MicroStepOutputs out =
      step_.run_micro_step(batch, {.lr = lr, .close_group = pos_.batch_in_epoch + 1 == batches});
  window_.add(out.loss, out.hits, batch.size);
  ++pos_.batch_in_epoch;
  if (!out.optimizer_stepped) return false;
  ++pos_.step;
  const std::string loss_text = std::isnan(last_loss_) ? "loss -" : fmt::format("loss {:.4f}", last_loss_);
  bar.update(pos_.batch_in_epoch, fmt::format("{} lr {:.4g}", loss_text, lr));
  if (pos_.step % c_.train.log_interval == 0 || pos_.batch_in_epoch == batches) log_window(lr, !bar.enabled());
  if (pos_.step >= total_steps_) stop_ = true;
  if (dist_.any_rank(g_stop_signal.load() != 0)) {  // every rank stops at the same step
    result_.interrupted = stop_ = true;
    log::warn("stop requested (signal {}): checkpointing at step {} and stopping", g_stop_signal.load(), pos_.step);
  }
  return stop_;
}

// Summed over all ranks: one metrics.jsonl line, and a log line when no progress bar shows it.
void Trainer::log_window(double lr, bool to_log) {
  const WindowSums w = window_.flush(pos_.step);
  std::vector<double> sums{w.loss_sum, w.correct, w.images};
  dist_.all_reduce_sum(sums);
  const double ips = sums[2] / std::max(seconds_since(window_start_), 1e-9);
  const double mean_loss = sums[0] / sums[2], accuracy = sums[1] / sums[2];
  last_loss_ = mean_loss;
  nlohmann::json rec{{"kind", "train"}, {"epoch", pos_.epoch + 1}, {"step", pos_.step}, {"loss", mean_loss},
                     {"accuracy", accuracy}, {"lr", lr}, {"images_per_s", ips}};
  if (nn::GradScaler* scaler = step_.scaler())
    rec["loss_scale"] = scaler->scale();
  metrics_.write(rec);
  if (to_log)
    log::info("epoch {} step {} loss {:.4f} acc {:.4f} lr {:.4g} {:.1f} img/s", pos_.epoch + 1, pos_.step, mean_loss,
              accuracy, lr, ips);
  window_start_ = Clock::now();
}

void Trainer::log_memory() {
  const Device device = device_;
  const AllocatorStats m = allocator_for(device).stats();
  log::info("{} memory: {:.1f} MiB in use, peak {:.1f} MiB, {} {} calls so far", device.str(),
            double(m.in_use_bytes) / (1 << 20), double(m.peak_in_use_bytes) / (1 << 20), m.backend_allocations,
            device.is_cuda() ? "cudaMalloc" : "aligned_alloc");
  if (!device.is_cuda()) return;
  const StepGraph* graph = step_.graph();
  if (graph && graph->captured())
    log::info("CUDA graph of the step: {} replays, its pool reserves {:.1f} MiB, {} cudaMalloc calls during its "
              "capture",
              graph->replays(), double(graph->pool_stats().reserved_bytes) / (1 << 20),
              graph->backend_allocations_in_capture());
}

// epoch_done: after a whole epoch (else training stopped mid-epoch, which the epoch number says).
void Trainer::evaluate(bool epoch_done) {
  if (ddp_) ddp_->reducer().wait_for_parameters();  // a sharded step's all-gathers
  const EvalResult ev = train::evaluate(model_, data_.test_set(), c_, dist_, device_);
  result_.test_accuracy = ev.accuracy;
  result_.test_loss = ev.loss;
  const int64_t epoch = epoch_done ? pos_.epoch : pos_.epoch + 1;
  metrics_.write({{"kind", "eval"}, {"epoch", epoch}, {"step", pos_.step}, {"loss", ev.loss},
                  {"accuracy", ev.accuracy}, {"lr", schedule_->lr_at(std::max<int64_t>(pos_.step - 1, 0))},
                  {"images_per_s", ev.images_per_s}, {"images", ev.images}});
  const std::string when = epoch_done ? fmt::format("after epoch {}", epoch)
                                      : fmt::format("at step {} (epoch {} stopped part-way)", pos_.step, epoch);
  log::info("eval {}: test loss {:.4f}, accuracy {:.2f}% of {} images", when, ev.loss, 100.0 * ev.accuracy,
            ev.images);
  if (c_.train.target_accuracy > 0 && ev.accuracy >= c_.train.target_accuracy) {
    // Time to accuracy counts from process start: data loading and start-up included.
    const double seconds = seconds_since(process_start);
    metrics_.write({{"kind", "event"}, {"event", "target_reached"}, {"target", c_.train.target_accuracy},
                    {"accuracy", ev.accuracy}, {"epoch", pos_.epoch}, {"step", pos_.step},
                    {"seconds_since_start", seconds}});
    log::info("reached test accuracy {:.2f}% (target {:.2f}%) after {:.1f} s; stopping", 100.0 * ev.accuracy,
              100.0 * c_.train.target_accuracy, seconds);
    stop_ = true;
  }
}

void Trainer::checkpoint(const std::string& stem) {
  pos_.rng_state = generator_.state();
  if (nn::GradScaler* scaler = step_.scaler()) {
    pos_.loss_scale = scaler->scale();
    pos_.loss_scale_growth_tracker = scaler->growth_tracker();
  }
  result_.checkpoint = write_checkpoint(dist_, ddp_ ? &ddp_->reducer() : nullptr, model_, optimizer_, pos_, ckpt_dir_,
                                        stem, c_.checkpoint.format);
}

// What this rank holds between steps: the figure each dist.sharding strategy changes.
void Trainer::log_held_state() {
  dist::Reducer::Resident held;
  if (ddp_) {
    held = ddp_->reducer().resident_bytes();
  } else {  // one process: the optimizer frees the gradients after each step
    for (const auto& [name, p] : model_.named_parameters()) held.parameters += int64_t(p.nbytes());
    held.optimizer_state = optimizer_.state_bytes();
  }
  log::info("dist.sharding={}: this rank holds {} bytes of parameters, {} of gradients, {} of optimizer state",
            ddp_ ? enum_name(ddp_->sharding()) : "no_shard (one process)", held.parameters, held.gradients,
            held.optimizer_state);
}

// The replicas are compared (after bringing every rank's BatchNorm statistics to rank 0's), the
// last checkpoint is written, and the timeline when profiling.
TrainResult Trainer::finish() {
  log_held_state();
  if (ddp_) {
    ddp_->reducer().wait_for_parameters();
    ddp_->sync_buffers();
    dist_.check_replicas_equal(state_fingerprint(ddp_->reducer().replicated_state(model_)),
                               ddp_->reducer().replicated_what());
  }
  checkpoint("last");
  result_.steps = pos_.step;
  if (c_.profile.enabled) {
    const int rank = dist_.rank();
    const std::string path = (out_dir_ / fmt::format("trace_rank{}.json", rank)).string();
    trace::write_chrome_trace(path, rank);
    log::info("timeline: {} (open in https://ui.perfetto.dev)", path);
  }
  return result_;
}

}  // namespace cg::train
