// The training loop behind cudagrad-train: over the TrainingParts (train/parts.h: device, model,
// optimizer, the checkpoint resumed from, DDP, the step) and the TrainingData (train/training_data.h), it iterates
// epochs and batches, hands each batch to the step (train/step.h, which accumulates, communicates
// and steps the optimizer, eagerly or from a CUDA graph), evaluates after every epoch
// (train/evaluation.h), logs metrics.jsonl, checkpoints atomically and resumes bit-exactly. What
// the seed article's train.py does, natively. Each phase is a function of its own (setup in the
// constructor, resume, epoch, step, evaluate, checkpoint, finish), so run() reads as the whole loop.
#pragma once
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "data/device_feeder.h"
#include "nn/checkpoint.h"
#include "nn/lr_schedule.h"
#include "train/metrics.h"
#include "train/parts.h"
#include "train/train_config.h"
#include "train/training_data.h"
#include "train/window_stats.h"
#include "util/progress.h"

namespace cg::train {

struct TrainResult {
  double test_accuracy = 0;  // of the last evaluation
  double test_loss = 0;
  int64_t steps = 0;          // optimizer steps taken in total
  std::string checkpoint;     // the last checkpoint written
  bool interrupted = false;   // stopped early by SIGINT/SIGTERM (a checkpoint was written)
};

class Trainer {
 public:
  // Over `data` and `parts`, built for `config` among the ranks of `dist` (train() shows the
  // order): writes `config_yaml` (the resolved config, also saved in checkpoints) to output.dir.
  Trainer(const TrainConfig& config, std::string config_yaml, DistContext& dist, TrainingData& data,
          TrainingParts& parts);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains as configured. Throws cg::Error on bad data, checkpoints or I/O.
  TrainResult run();

 private:
  void start();
  void run_epoch();
  bool step(const data::DeviceBatch& batch, ProgressBar& bar);  // true: stop
  void log_window(double lr, bool to_log);
  void log_memory();
  void log_held_state();
  void evaluate(bool epoch_done);
  void checkpoint(const std::string& stem);  // "last", "epoch_3": the format adds the rest
  TrainResult finish();

  const TrainConfig c_;
  const std::string config_yaml_;
  DistContext& dist_;
  TrainingData& data_;
  // The parts the loop drives (train/parts.h), all there from the start.
  nn::MiniResNet& model_;
  nn::Optimizer& optimizer_;
  TrainStep& step_;
  dist::DistributedDataParallel* const ddp_;  // null with one process
  Generator& generator_;
  const Device device_;
  const Stream& compute_;
  const std::string resumed_from_;  // "" on a fresh start
  std::filesystem::path out_dir_, ckpt_dir_;
  std::unique_ptr<data::BatchSource> batches_;
  int64_t total_steps_ = 0;
  std::optional<nn::LrSchedule> schedule_;
  nn::TrainingProgress pos_;
  MetricsWriter metrics_;
  // The epoch in progress: the metrics window since the last log line.
  WindowStats window_;
  Clock::time_point window_start_;
  // The mean loss of the last log window, for the progress bar (NaN before the first: the loss
  // stays on the device between log lines, so there is nothing to show yet).
  double last_loss_ = std::numeric_limits<double>::quiet_NaN();
  bool stop_ = false;
  TrainResult result_;
};

// Joins the other ranks and checks they run the same config, decides which checkpoint to resume
// from, builds the TrainingParts, then Trainer(...).run().
TrainResult train(const TrainConfig& config, const std::string& config_yaml);

// Installs SIGINT/SIGTERM handlers. During training steps the first signal asks the loop to stop
// after the current step (on every rank, the same step), write a checkpoint and return with
// `interrupted` set (a preempted job resumes from it). Anywhere else, or on a second signal, the
// process exits at once with code 130: nothing there is worth waiting up to dist.timeout_s for.
void install_stop_signal_handlers();

}  // namespace cg::train
